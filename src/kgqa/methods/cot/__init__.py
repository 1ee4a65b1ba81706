"""Chain-of-thought prompting: the LLM reasons step by step from its own knowledge, with no KG (see method.py)."""

from kgqa.methods.cot.method import CoTPrompting

__all__ = ["CoTPrompting"]
