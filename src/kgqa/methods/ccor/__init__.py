"""CCoR and CoR: compositional chain-of-relations (see method.py for the mechanism and where kgqa differs)."""

from kgqa.methods.ccor.method import CCoR, CCoRConfig

__all__ = ["CCoR", "CCoRConfig"]
