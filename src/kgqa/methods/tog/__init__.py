"""ToG (Think-on-Graph), the beam-search baseline."""

from kgqa.methods.tog.method import ToG, ToGConfig

__all__ = ["ToG", "ToGConfig"]
