"""IO prompting: the LLM answers from its own knowledge, with no KG and no reasoning (see method.py)."""

from kgqa.methods.io.method import IOPrompting

__all__ = ["IOPrompting"]
