"""The SPARQL backend: the KG protocol over any SPARQL 1.1 endpoint (Virtuoso, Oxigraph, QLever, ...).

Modules: :mod:`~kgqa.kg.sparql.backend` (:class:`SparqlKG`: the queries each operation asks),
:mod:`~kgqa.kg.sparql.compiler` (query text: ids checked into terms, chains compiled to one query, indexed VALUES),
:mod:`~kgqa.kg.sparql.subgraph` (the edges of one subgraph level), :mod:`~kgqa.kg.sparql.results` (result terms read
back into ids; unreadable results as KGError), :mod:`~kgqa.kg.sparql.endpoint` (HTTP: sending, retrying, parsing, each
server's error signals) and :mod:`~kgqa.kg.sparql.guard` (what may reach a query: the read-only guard and the escaping of
strings and literals).
"""

from __future__ import annotations

from kgqa.kg.sparql.backend import SparqlKG
from kgqa.kg.sparql.guard import ensure_read_only, sparql_string

__all__ = ["SparqlKG", "ensure_read_only", "sparql_string"]
