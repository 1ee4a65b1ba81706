"""The knowledge-graph layer: one protocol, an embedded store (default), SPARQL endpoints, schemas and loaders.

``open_kg(spec)`` is the registry every command and method goes through:

* ``"demo"``: the demo KG shipped with kgqa (built into the cache directory on first use);
* a directory: an embedded store written by ``kgqa kg import``;
* ``http://...`` / ``https://...`` (or ``sparql:URL``): a SPARQL 1.1 endpoint;
* ``embedded:DIR``: an embedded store, explicitly.
"""

from __future__ import annotations

from pathlib import Path

from kgqa.errors import ConfigError
from kgqa.kg.base import (
    Chain,
    ChainResult,
    ConstraintChain,
    Direction,
    EntityMatch,
    Hop,
    KGStats,
    KnowledgeGraph,
    format_chain,
    parse_chain,
)
from kgqa.kg.schema import Schema, get_schema

__all__ = [
    "Chain", "ChainResult", "ConstraintChain", "Direction", "EntityMatch", "Hop", "KGStats", "KnowledgeGraph", "Schema",
    "format_chain", "get_schema", "open_kg", "parse_chain",
]


def open_kg(spec: str, schema: str | Schema | None = None, **options: object) -> KnowledgeGraph:
    """Open a KG named by a spec string (see the module docstring)."""
    text = spec.strip()
    if text == "demo":
        from kgqa.kg.demo import open_demo_kg

        return open_demo_kg()
    if text.startswith("sparql:"):
        text = text[len("sparql:"):]
    if text.startswith(("http://", "https://")):
        from kgqa.kg.sparql import SparqlKG

        return SparqlKG(text, schema=schema or "freebase", **options)  # type: ignore[arg-type]
    if text.startswith("embedded:"):
        text = text[len("embedded:"):]
    path = Path(text).expanduser()
    if path.is_dir():
        from kgqa.kg.embedded import EmbeddedKG

        return EmbeddedKG.open(path)
    raise ConfigError(f"KG {spec!r} is neither 'demo', an embedded KG directory, nor an http(s) SPARQL endpoint URL")
