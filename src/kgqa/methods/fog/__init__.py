"""FoG: Foresight-over-Graph (see method.py for the mechanism and where kgqa differs)."""

from kgqa.methods.fog.method import FoG, FoGConfig

__all__ = ["FoG", "FoGConfig"]
