"""Alias labels of the embedded store: the other names an entity goes by, searched like its name.

A KG keeps an entity's other names as triples with a literal object: Freebase ``common.topic.alias``, SKOS
``skos:altLabel`` (Wikidata's aliases, most thesauri), schema.org ``alternateName``. Those relations stay what they
are (Freebase's is noise, hidden from methods); the builder also writes each alias into the label table beside the
entity's name, so exact and fuzzy label search (entity linking, ``kgqa kg search``) find "Oscar" as they find
"Academy Awards". A search hit is the entity with its display name: an alias never replaces a name.

Kept: an alias of a named entity (a nameless mediator is no linking target), in no language or in the schema's
language (``en``, ``en-GB``), with no datatype but a string's. The store's metadata counts them (``alias_labels``).
"""

from __future__ import annotations

import array
from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kgqa.errors import KGError
from kgqa.kg.base import parse_literal
from kgqa.kg.embedded.arrays import _POOL
from kgqa.kg.schema import FREEBASE_NS

SKOS_ALT_LABEL = "http://www.w3.org/2004/02/skos/core#altLabel"
_XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"

#: Relations whose literal objects are aliases of their subject (as relation ids: a Freebase relation as its short
#: name and its IRI, any other as its IRI, which is how a generic or Wikidata schema keeps an IRI outside its base).
ALIAS_RELATIONS: frozenset[str] = frozenset({
    "common.topic.alias",
    FREEBASE_NS + "common.topic.alias",
    SKOS_ALT_LABEL,
    "skos:altLabel",
    "http://schema.org/alternateName",
    "https://schema.org/alternateName",
})


def is_alias_relation(relation: str) -> bool:
    """Whether ``relation``'s literal objects are aliases (:data:`ALIAS_RELATIONS`)."""
    return relation in ALIAS_RELATIONS


def _usable(literal: str, language: str) -> str | None:
    """The alias text of a literal id, or None for a literal that is not a usable alias (another language, a typed
    value such as a date, an empty string, a malformed literal)."""
    try:
        parts = parse_literal(literal)
    except KGError:
        return None
    if parts.datatype not in (None, _XSD_STRING):
        return None
    if parts.lang and language:
        lang, want = parts.lang.lower(), language.lower()
        if lang != want and not lang.startswith(want + "-"):
            return None
    text = parts.value.strip()
    return text or None


def alias_labels(relation_codes: Mapping[str, int], heads: array.array, relations: array.array,
                 tails: array.array, rank: np.ndarray, nodes: pa.Array, language: str) -> tuple[np.ndarray, list[str]]:
    """The (final node id, alias text) pairs of an import, from its provisional columns.

    ``relation_codes`` maps each relation to its provisional code, ``heads`` / ``relations`` / ``tails`` are the
    builder's int32 code columns, ``rank`` maps a provisional node code to its final node id and ``nodes`` holds the
    final ids' strings. Called before the columns are consumed by the edge tables."""
    codes = [code for relation, code in relation_codes.items() if is_alias_relation(relation)]
    if not codes or not len(relations):
        return np.empty(0, dtype=np.int64), []
    rel_column = np.frombuffer(relations, dtype=np.int32)
    rows = np.flatnonzero(np.isin(rel_column, np.asarray(codes, dtype=np.int32)))
    if not len(rows):
        return np.empty(0, dtype=np.int64), []
    subjects = rank[np.frombuffer(heads, dtype=np.int32)[rows]]
    objects = rank[np.frombuffer(tails, dtype=np.int32)[rows]]
    literals = pc.take(nodes, pa.array(objects), memory_pool=_POOL).to_pylist()
    kept_nodes: list[int] = []
    texts: list[str] = []
    for subject, literal in zip(subjects.tolist(), literals, strict=True):
        if not literal.startswith('"'):
            continue  # an alias relation pointing at an entity is a fact, not a label
        text = _usable(literal, language)
        if text is not None:
            kept_nodes.append(subject)
            texts.append(text)
    return np.asarray(kept_nodes, dtype=np.int64), texts


def with_aliases(keys: pa.Array, label_nodes: np.ndarray, alias_nodes: np.ndarray, alias_keys: list[str],
                 labelled: np.ndarray) -> tuple[pa.Array, np.ndarray, int]:
    """The label table's rows (normalised ``keys`` and their ``label_nodes``, sorted by node) with the aliases of
    labelled (named) nodes added, each (key, node) pair once: an alias equal to its entity's name adds nothing.
    Returns the keys, the nodes and how many alias rows were added."""
    if not len(alias_nodes):
        return keys, label_nodes, 0
    at = np.minimum(np.searchsorted(label_nodes, alias_nodes), max(len(label_nodes) - 1, 0))
    has_own = (label_nodes[at] == alias_nodes) if len(label_nodes) else np.zeros(len(alias_nodes), dtype=bool)
    own = pc.take(keys, pa.array(at), memory_pool=_POOL).to_pylist() if len(label_nodes) else [None] * len(at)
    seen: set[tuple[str, int]] = set()
    extra_keys: list[str] = []
    extra_nodes: list[int] = []
    for node, key, name_key, named in zip(alias_nodes.tolist(), alias_keys, own, has_own.tolist(), strict=True):
        if not key or not labelled[node] or (named and key == name_key) or (key, node) in seen:
            continue
        seen.add((key, node))
        extra_keys.append(key)
        extra_nodes.append(node)
    if not extra_keys:
        return keys, label_nodes, 0
    merged = pa.concat_arrays([keys, pa.array(extra_keys, type=keys.type)], memory_pool=_POOL)
    return merged, np.concatenate([label_nodes, np.asarray(extra_nodes, dtype=label_nodes.dtype)]), len(extra_keys)
