"""Reading what an endpoint sends back: result terms into kgqa ids, predicates into the relations a KG shows, and a
result kgqa cannot read into a :class:`KGError` that names the endpoint."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kgqa.errors import KGError, KGQAError
from kgqa.kg.base import make_literal
from kgqa.kg.schema import Schema
from kgqa.kg.sparql.guard import RDF_LANGSTRING, XSD, XSD_STRING

__all__ = ["ResultReader", "guard_result_reading"]


class ResultReader:
    """Result terms (SPARQL 1.1 JSON bindings) read with ``schema``'s IRI mapping; ``name_iris`` are the predicates
    that name entities."""

    def __init__(self, schema: Schema, name_iris: Sequence[str]) -> None:
        self.schema = schema
        self.name_iris = frozenset(name_iris)

    def node_id(self, term: dict[str, str]) -> str:
        """The kgqa id of a bound term: an entity id, ``_:`` and a blank node's label, or a literal in N-Triples form."""
        kind = term.get("type")
        value = term.get("value", "")
        if kind == "uri":
            return self.schema.entity_id(value)
        if kind == "bnode":
            return "_:" + value
        lang = term.get("xml:lang")
        datatype = term.get("datatype")
        if lang or datatype in (XSD_STRING, RDF_LANGSTRING):
            datatype = None
        if datatype == XSD + "boolean" and value in ("1", "0"):
            value = "true" if value == "1" else "false"  # Virtuoso writes booleans as 1/0
        return make_literal(value, datatype=datatype, lang=lang)

    def relation(self, term: dict[str, str]) -> str | None:
        """The relation id of a predicate term; None for what is no relation to follow: a term that is not an IRI, a
        name predicate (names are served by ``names()``) or a noise relation."""
        if term.get("type") != "uri":
            return None
        iri = term.get("value", "")
        relation = self.schema.relation_id(iri)
        return None if iri in self.name_iris or self.schema.is_noise_relation(relation) else relation


def _reading_results(method: Callable[..., Any]) -> Callable[..., Any]:
    """Turn an error raised while reading an endpoint's results (a variable left unbound, a count that is not a number)
    into a :class:`KGError` that names the endpoint: the endpoint answered, but not as SPARQL 1.1 results should."""

    @functools.wraps(method)
    def reading(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            if isinstance(exc, KGQAError):
                raise
            raise KGError(f"SPARQL endpoint {self.endpoint} sent results kgqa cannot read ({type(exc).__name__}: "
                          f"{str(exc)[:200]}); is it a SPARQL 1.1 endpoint answering in JSON?") from exc

    return reading


def guard_result_reading(cls: type, methods: Iterable[str]) -> None:
    """Wrap each of ``cls``'s ``methods`` (which read results and have an ``endpoint``) in :func:`_reading_results`."""
    for name in methods:
        setattr(cls, name, _reading_results(getattr(cls, name)))
