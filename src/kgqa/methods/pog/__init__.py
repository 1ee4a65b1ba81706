"""PoG (Plan-on-Graph), the self-correcting planning baseline."""

from kgqa.methods.pog.method import PoG, PoGConfig

__all__ = ["PoG", "PoGConfig"]
