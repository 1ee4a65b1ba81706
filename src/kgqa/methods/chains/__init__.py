"""chains: CCoR's relation chains steered by the foresight scorer, each hop verified (see method.py)."""

from kgqa.methods.chains.method import Chains, ChainsConfig

__all__ = ["Chains", "ChainsConfig"]
