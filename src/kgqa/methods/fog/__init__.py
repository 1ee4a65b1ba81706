"""FoG: Foresight-over-Graph (see method.py for the mechanism and where kgqa differs).

Importing the package registers the method and the demo KG's scorer artifact (:mod:`kgqa.methods.fog.demo`)."""

from kgqa.methods.fog import demo  # noqa: F401  (registers the fog-demo-scorer artifact)
from kgqa.methods.fog.method import FoG, FoGConfig

__all__ = ["FoG", "FoGConfig"]
