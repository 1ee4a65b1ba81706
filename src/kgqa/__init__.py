"""kgqa: question answering over knowledge graphs with LLM agents whose answers are grounded in KG facts."""

__version__ = "0.1.0"
