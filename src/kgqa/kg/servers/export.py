"""N-Triples out of a KG: :func:`export_ntriples` writes an embedded store with its schema's IRI mapping, so that the same
data can be loaded into any SPARQL server."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from kgqa.errors import ConfigError, KGError
from kgqa.kg.base import is_literal, make_literal, parse_literal
from kgqa.kg.schema import Schema

__all__ = ["export_ntriples", "literal_to_ntriples"]


class _Exportable(Protocol):
    @property
    def schema(self) -> Schema: ...

    def iter_triples(self) -> Iterable[tuple[str, str, str]]: ...

    def iter_names(self) -> Iterable[tuple[str, str]]: ...


_NT_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r"}


def literal_to_ntriples(node: str) -> str:
    """Re-serialise a literal id so any N-Triples parser (Virtuoso included) reads it: only ``\\``, ``"``, LF, CR
    escaped, everything else as UTF-8."""
    parts = parse_literal(node)
    body = '"' + "".join(_NT_ESCAPES.get(ch, ch) for ch in parts.value) + '"'
    if parts.lang:
        return f"{body}@{parts.lang}"
    if parts.datatype:
        return f"{body}^^<{parts.datatype}>"
    return body


def export_ntriples(kg: _Exportable, path: str | os.PathLike[str]) -> int:
    """Write ``kg`` (an EmbeddedKG) as N-Triples through its schema's IRI mapping; names go out as the schema's first
    name predicate tagged ``@en``. Returns the number of lines written."""
    schema = kg.schema
    if not schema.name_predicates:
        raise ConfigError(f"schema {schema.name!r} has no name predicate to export names with")
    name_iri = schema.name_predicates[0]
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with out.open("w", encoding="utf-8", newline="\n") as fh:
        for head, relation, tail in kg.iter_triples():
            if is_literal(head):
                raise KGError(f"cannot export triple ({head!r}, {relation!r}, {tail!r}): a literal subject")
            obj = literal_to_ntriples(tail) if is_literal(tail) else f"<{schema.entity_iri(tail)}>"
            fh.write(f"<{schema.entity_iri(head)}> <{schema.relation_iri(relation)}> {obj} .\n")
            count += 1
        for entity, name in kg.iter_names():
            if is_literal(entity):
                continue  # a literal's name is its value; nothing to store
            fh.write(f"<{schema.entity_iri(entity)}> <{name_iri}> {literal_to_ntriples(make_literal(name, lang='en'))}"
                     " .\n")
            count += 1
    return count
