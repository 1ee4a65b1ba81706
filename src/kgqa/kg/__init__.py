"""The knowledge-graph layer: one protocol, an embedded store (default), SPARQL endpoints, schemas and loaders.

``open_kg(spec)`` is the registry every command and method goes through:

* ``"demo"``: the demo KG shipped with kgqa (built into the cache directory on first use);
* a directory: an embedded store written by ``kgqa kg import``;
* ``http://...`` / ``https://...`` (or ``sparql:URL``): a SPARQL 1.1 endpoint;
* ``embedded:DIR``: an embedded store, explicitly;
* ``NAME:REST``: any backend registered in :data:`KG_BACKENDS` under ``NAME`` (built in: ``demo``, ``embedded``,
  ``sparql``, ``endpoint``: the server of a directory made by ``kgqa kg endpoint start``), which opens the KG from
  ``REST``. A package adds one with ``KG_BACKENDS.add(name, opener)`` or the entry-point group ``kgqa.kg_backends``;
  an opener is called as ``opener(rest, schema=..., **options)``.

Module map: :mod:`~kgqa.kg.base` (types, the ``KGCore`` primitives and the ``KnowledgeGraph`` protocol),
:mod:`~kgqa.kg.derived` (the derived operations, generic over the primitives), :mod:`~kgqa.kg.schema` (id grammars,
noise, IRIs), :mod:`~kgqa.kg.embedded` (the embedded store), :mod:`~kgqa.kg.sparql` (SPARQL endpoints),
:mod:`~kgqa.kg.loaders` (KG files into the store), :mod:`~kgqa.kg.servers` (local Oxigraph / Virtuoso for tests and
benchmarks), :mod:`~kgqa.kg.demo` and :mod:`~kgqa.kg.label_index`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kgqa.errors import ConfigError
from kgqa.kg.base import (
    Chain,
    ChainResult,
    ConstraintChain,
    Direction,
    EntityMatch,
    Hop,
    KGCore,
    KGStats,
    KnowledgeGraph,
    Subgraph,
    format_chain,
    parse_chain,
)
from kgqa.kg.derived import DerivedOps
from kgqa.kg.schema import Schema, get_schema
from kgqa.registry import Registry

__all__ = [
    "KG_BACKENDS", "Chain", "ChainResult", "ConstraintChain", "DerivedOps", "Direction", "EntityMatch", "Hop", "KGCore",
    "KGStats", "KnowledgeGraph", "Schema", "Subgraph", "format_chain", "get_schema", "open_kg", "parse_chain",
]

#: An opener makes a KG from the rest of a spec (after ``NAME:``), a schema (or None) and backend options.
KGOpener = Callable[..., KnowledgeGraph]

#: Every KG backend by name: ``open_kg("NAME:REST")`` calls ``KG_BACKENDS.get(NAME)(REST, schema=..., **options)``.
KG_BACKENDS: Registry[KGOpener] = Registry("kg backend", group="kg_backends", noun="KG backend")

_NAME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9_.+-]*):(.*)$", re.DOTALL)


def _open_demo(rest: str, schema: str | Schema | None = None, **options: Any) -> KnowledgeGraph:
    if rest.strip():
        raise ConfigError(f"the demo KG takes no argument, got 'demo:{rest}'")
    from kgqa.kg.demo import open_demo_kg

    return open_demo_kg()


def _open_sparql(rest: str, schema: str | Schema | None = None, **options: Any) -> KnowledgeGraph:
    from kgqa.kg.sparql import SparqlKG

    return SparqlKG(rest.strip(), schema=schema or "freebase", **options)


def _open_embedded(rest: str, schema: str | Schema | None = None, **options: Any) -> KnowledgeGraph:
    # The store knows its own schema; backend options meant for endpoints (timeouts) do not apply to it.
    path = Path(rest.strip()).expanduser()
    if not path.is_dir():
        raise ConfigError(f"embedded KG {rest!r} is not a directory; build one with `kgqa kg import`")
    from kgqa.kg.embedded import EmbeddedKG

    return EmbeddedKG.open(path)


def _open_endpoint(rest: str, schema: str | Schema | None = None, **options: Any) -> KnowledgeGraph:
    # A private server started by `kgqa kg endpoint start --dir DIR`, found again from DIR.
    from kgqa.kg.endpoint import open_endpoint_kg

    return open_endpoint_kg(rest, schema=schema, **options)


KG_BACKENDS.add("demo", _open_demo)
KG_BACKENDS.add("sparql", _open_sparql)
KG_BACKENDS.add("embedded", _open_embedded)
KG_BACKENDS.add("endpoint", _open_endpoint)


def open_kg(spec: str, schema: str | Schema | None = None, **options: Any) -> KnowledgeGraph:
    """Open a KG named by a spec string (see the module docstring)."""
    text = spec.strip()
    bad = next((ch for ch in text if ord(ch) < 32 or ord(ch) == 127), None)
    if bad is not None:
        raise ConfigError(f"KG {spec[:120]!r} contains a control character ({bad!r}); a KG is 'demo', a directory or "
                          "an http(s) URL")
    if not text:
        raise ConfigError("the KG spec is empty; give 'demo', an embedded KG directory or an http(s) SPARQL URL")
    if text == "demo":
        return KG_BACKENDS.get("demo")("", schema=schema, **options)
    if text.startswith(("http://", "https://")):
        return KG_BACKENDS.get("sparql")(text, schema=schema, **options)
    named = _NAME_RE.match(text)
    if named and named.group(1) in KG_BACKENDS:
        return KG_BACKENDS.get(named.group(1))(named.group(2), schema=schema, **options)
    path = Path(text).expanduser()
    try:
        is_dir = path.is_dir()
    except OSError:  # a name longer than the file system allows is no directory of ours
        is_dir = False
    if is_dir:
        return KG_BACKENDS.get("embedded")(text, schema=schema, **options)
    if named and not named.group(2).startswith("//"):
        KG_BACKENDS.get(named.group(1))  # an unknown backend name: a ConfigError that lists the known ones
    raise ConfigError(f"KG {spec[:200]!r} is neither 'demo', an embedded KG directory, nor an http(s) SPARQL endpoint URL "
                      f"(nor NAME:ARGUMENT for a KG backend: {', '.join(KG_BACKENDS.names())})")
