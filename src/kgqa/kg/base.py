"""The knowledge-graph seam: the data types every backend speaks, the `KGCore` protocol (the primitives a backend must
implement) and the `KnowledgeGraph` protocol (the primitives plus the derived operations of :mod:`kgqa.kg.derived`,
which a backend inherits from :class:`~kgqa.kg.derived.DerivedOps` and may override with a native version).

Identifiers are plain strings. An entity id is whatever the schema calls an entity (``m.0abc`` in Freebase, ``Q42`` in
Wikidata, a label in MetaQA). A literal is written in its N-Triples form, so an id that starts with a double quote is a
literal: ``"1967"``, ``"1967"^^<http://www.w3.org/2001/XMLSchema#gYear>``, ``"Paris"@fr``. Relations are the schema's
compact names (``film.film.directed_by``, ``wdt:P57``, ``directed_by``).

A chain is data: a tuple of hops, each a relation and a direction. Every intermediate entity of a chain is a variable:
backends never name, rank or prune intermediate entities, they only cap how many they carry (and say so).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from kgqa.errors import KGError
from kgqa.kg.schema import Schema

#: Default cap on how many answers a chain returns (CoR's SPARQL LIMIT).
DEFAULT_CHAIN_LIMIT = 1000
#: Cap on the entities carried from one hop to the next; a chain that passes it is reported as truncated.
DEFAULT_MAX_FRONTIER = 100_000
#: Cap on the number of paths returned when bindings are requested.
DEFAULT_MAX_PATHS = 1000
#: Defaults of a bounded BFS subgraph: levels, edges kept per expanded node, triples in all.
DEFAULT_SUBGRAPH_DEPTH = 2
DEFAULT_MAX_PER_NODE = 100
DEFAULT_MAX_TRIPLES = 10_000


class Direction(enum.StrEnum):
    """Which way an edge is followed from the entity at hand: ``out`` (entity is the subject) or ``in`` (the object)."""

    OUT = "out"
    IN = "in"

    def flip(self) -> Direction:
        return Direction.IN if self is Direction.OUT else Direction.OUT

    @classmethod
    def parse(cls, value: str | Direction) -> Direction:
        if isinstance(value, Direction):
            return value
        text = str(value).strip().lower()
        aliases = {"out": cls.OUT, "outgoing": cls.OUT, "forward": cls.OUT, "in": cls.IN, "incoming": cls.IN,
                   "backward": cls.IN, "reverse": cls.IN}
        if text not in aliases:
            raise KGError(f"direction {value!r} is not one of 'out' or 'in'")
        return aliases[text]


@dataclass(frozen=True, slots=True)
class Hop:
    """One step of a chain: follow ``relation`` out of (``OUT``) or into (``IN``) the current entities."""

    relation: str
    direction: Direction = Direction.OUT

    def __str__(self) -> str:
        return self.relation if self.direction is Direction.OUT else "^" + self.relation

    def reversed(self) -> Hop:
        return Hop(self.relation, self.direction.flip())


Chain = tuple[Hop, ...]


def parse_chain(text: str | Sequence[str | Hop | tuple[str, str]]) -> Chain:
    """Parse ``"r1,^r2"`` (``^`` marks an incoming edge) or a sequence of hops into a chain.

    >>> [str(h) for h in parse_chain("directed_by,^written_by")]
    ['directed_by', '^written_by']
    """
    items: Sequence[str | Hop | tuple[str, str]]
    if isinstance(text, str):
        items = [part for part in (p.strip() for p in text.split(",")) if part]
        if not items and text.strip():
            raise KGError(f"chain {text!r} has no relations")
    else:
        items = text
    hops: list[Hop] = []
    for item in items:
        if isinstance(item, Hop):
            hops.append(item)
        elif isinstance(item, tuple):
            hops.append(Hop(item[0], Direction.parse(item[1])))
        else:
            token = item.strip()
            if token.startswith("^"):
                hops.append(Hop(token[1:].strip(), Direction.IN))
            else:
                hops.append(Hop(token, Direction.OUT))
        if not hops[-1].relation:
            raise KGError(f"chain {text!r} has an empty relation at position {len(hops)}")
        if "^" in hops[-1].relation:  # "a ^b" is two hops missing their comma, not a relation named "a ^b"
            raise KGError(f"chain {text!r}: relation {hops[-1].relation!r} at position {len(hops)} has a '^' inside "
                          "it; write hops comma-separated, '^' only in front of a backward hop ('a,^b')")
    return tuple(hops)


def format_chain(chain: Chain) -> str:
    """The inverse of :func:`parse_chain`."""
    return ",".join(str(h) for h in chain)


# ---------------------------------------------------------------------------------------------------------------------
# Literals in N-Triples form


_LITERAL_RE = re.compile(r'^"(?P<lex>(?:[^"\\]|\\.)*)"(?:@(?P<lang>[A-Za-z]+(?:-[A-Za-z0-9]+)*)|\^\^<(?P<dt>[^<>"\s]+)>)?$',
                         re.DOTALL)
_SUFFIX_RE = re.compile(r'(?:@[A-Za-z]+(?:-[A-Za-z0-9]+)*|\^\^<[^<>"\s]+>)$')
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_UNESCAPES = {"\\": "\\", '"': '"', "n": "\n", "r": "\r", "t": "\t", "'": "'", "b": "\b", "f": "\f"}


def is_literal(node: str) -> bool:
    """True for a literal id (N-Triples form, starting with a double quote)."""
    return node.startswith('"')


def make_literal(value: str, *, datatype: str | None = None, lang: str | None = None) -> str:
    """Write a literal id: the lexical value escaped, with an optional datatype IRI or language tag."""
    body = '"' + "".join(_ESCAPES.get(ch, ch) for ch in value) + '"'
    if lang:
        return f"{body}@{lang}"
    if datatype:
        return f"{body}^^<{datatype}>"
    return body


@dataclass(frozen=True, slots=True)
class LiteralParts:
    value: str
    datatype: str | None = None
    lang: str | None = None


def parse_literal(node: str) -> LiteralParts:
    """Split a literal id into its unescaped value, datatype and language."""
    match = _LITERAL_RE.match(node)
    if not match:
        raise KGError(f"{node!r} is not a literal in N-Triples form")
    lex = re.sub(r"\\(.)", lambda m: _UNESCAPES.get(m.group(1), m.group(1)), match.group("lex"))
    return LiteralParts(lex, match.group("dt"), match.group("lang"))


def literal_value(node: str) -> str:
    """The lexical value of a literal id (for display and for matching answers)."""
    if "\\" not in node and node.startswith('"'):  # no escapes: the value is what lies between the quotes
        end = node.find('"', 1)
        if end > 0 and (end == len(node) - 1 or _SUFFIX_RE.match(node, end + 1)):
            return node[1:end]
    return parse_literal(node).value  # validates, and raises on anything malformed


# ---------------------------------------------------------------------------------------------------------------------
# Results


@dataclass(slots=True)
class ChainResult:
    """What a chain reached.

    ``entities`` are distinct, in a stable order (first reached first). ``paths`` (only when bindings were requested) are
    tuples ``(topic, e1, ..., en)``, one node per position of the chain. ``truncated`` says a cap (frontier, limit or
    paths) cut the result, so callers can tell "no answer" from "too many to carry".
    """

    entities: list[str]
    paths: list[tuple[str, ...]] | None = None
    truncated: bool = False


Triple = tuple[str, str, str]


@dataclass(slots=True)
class Subgraph:
    """What a bounded BFS around seed entities reached (:meth:`KnowledgeGraph.subgraph`).

    ``triples`` are ``(head, relation, tail)``, distinct, in the order the search met them (level by level; within a
    level node by node; within a node its outgoing edges then its incoming ones, relations sorted). ``nodes`` are the
    seeds that are in the KG, then every other node of a triple in the order it was first reached. ``truncated`` says a
    cap (edges per node, or triples in all) left edges out; the depth bound is not a cut.
    """

    triples: list[Triple]
    nodes: list[str]
    truncated: bool = False


@dataclass(frozen=True, slots=True)
class EntityMatch:
    """An entity found by label search, with a score in [0, 1] (1 for an exact label)."""

    id: str
    name: str
    score: float


@dataclass(slots=True)
class KGStats:
    backend: str
    schema: str
    triples: int | None = None
    entities: int | None = None
    relations: int | None = None
    literals: int | None = None
    names: int | None = None
    extra: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ConstraintChain:
    """CCoR's constraint chain: it starts at ``source`` (position of the main chain: 0 the topic, ``len(main)`` the
    candidates themselves, anything between an intermediate variable) and follows ``chain`` to a value.

    With ``target`` set, a candidate of the main chain survives only if some path to it passes an entity at ``source``
    from which ``chain`` reaches ``target``. A literal target matches on its lexical value (datatype and language are
    ignored, because KGs disagree on them: ``"1967"`` and ``"1967"^^xsd:gYear`` are the same year to a user).
    """

    source: int
    chain: Chain
    target: str | None = None


# ---------------------------------------------------------------------------------------------------------------------
# The protocol


@runtime_checkable
class KGCore(Protocol):
    """The primitives every backend implements; everything else a method may ask has a generic implementation in terms
    of these (:class:`~kgqa.kg.derived.DerivedOps`)."""

    @property
    def schema(self) -> Schema: ...

    def relations(self, entity: str, direction: Direction | str = Direction.OUT) -> list[str]:
        """Distinct relations incident to ``entity`` in ``direction``, sorted, without the schema's noise relations."""
        ...

    def neighbors(self, entity: str, relation: str, direction: Direction | str = Direction.OUT,
                  limit: int = 100) -> list[str]:
        """Entities (or literals) one ``relation`` away from ``entity`` in ``direction``, distinct, at most ``limit``.
        A relation outside the KG's vocabulary raises KGError (an endpoint: once its vocabulary is known)."""
        ...

    def names(self, ids: Sequence[str]) -> dict[str, str | None]:
        """Display names in one batch; ``None`` for a nameless node (a CVT); a literal's name is its value."""
        ...

    def search(self, label: str, *, fuzzy: bool = False, limit: int = 10) -> list[EntityMatch]:
        """Entities whose name is ``label`` (normalised: case, accents, punctuation), or close to it with ``fuzzy``."""
        ...

    def has_entity(self, entity: str) -> bool:
        """Whether ``entity`` is a node of this KG."""
        ...

    def has_relation(self, relation: str) -> bool:
        """Whether ``relation`` is in this KG's vocabulary (or, for an endpoint, valid in its schema's grammar)."""
        ...

    def vocabulary(self) -> list[str]:
        """All relations of the KG, noise relations included, sorted."""
        ...

    def stats(self) -> KGStats: ...

    def close(self) -> None: ...


@runtime_checkable
class KnowledgeGraph(KGCore, Protocol):
    """What every method may ask of a KG: the primitives of :class:`KGCore` and the derived operations below, which
    :class:`~kgqa.kg.derived.DerivedOps` implements generically. Embedded store and SPARQL endpoints answer alike for
    the same data."""

    def run_chain(self, topics: Sequence[str], chain: Chain, *, bindings: bool = False,
                  limit: int = DEFAULT_CHAIN_LIMIT, max_paths: int = DEFAULT_MAX_PATHS) -> ChainResult:
        """Follow ``chain`` from ``topics``; every intermediate entity is a variable."""
        ...

    def chain_relations(self, topics: Sequence[str], chain: Chain,
                        direction: Direction | str = Direction.OUT) -> list[str]:
        """Relations leaving (``OUT``) or entering (``IN``) the entities that ``chain`` reaches, without naming them."""
        ...

    def constraint_values(self, topics: Sequence[str], main: Chain, constraint: ConstraintChain,
                          limit: int = DEFAULT_CHAIN_LIMIT) -> ChainResult:
        """What the constraint chain recalls from the main chain's entities at ``constraint.source`` (only entities on a
        complete main path count). CCoR picks its constraint target from these."""
        ...

    def filter_by_constraint(self, topics: Sequence[str], main: Chain, constraint: ConstraintChain,
                             limit: int = DEFAULT_CHAIN_LIMIT) -> ChainResult:
        """Candidates of ``main`` that satisfy ``constraint`` (whose ``target`` must be set): the two chains run jointly."""
        ...

    def neighbors_many(self, entities: Sequence[str], relation: str, direction: Direction | str = Direction.OUT,
                       limit_per_entity: int = 100) -> dict[str, list[str]]:
        """:meth:`neighbors` of many entities at once: every distinct entity asked for is a key (in the order given),
        with at most ``limit_per_entity`` neighbours."""
        ...

    def subgraph(self, seeds: Sequence[str], *, depth: int = DEFAULT_SUBGRAPH_DEPTH,
                 max_per_node: int = DEFAULT_MAX_PER_NODE, max_triples: int = DEFAULT_MAX_TRIPLES,
                 relations: Collection[str] | None = None) -> Subgraph:
        """A bounded breadth-first subgraph around ``seeds`` (see :meth:`kgqa.kg.derived.DerivedOps.subgraph`)."""
        ...

    def statement_counts(self, triples: Sequence[Triple]) -> list[int]:
        """How many times the source asserted each of ``triples`` (read from this KG): 1 for most; more where an import
        merged records, as MetaQA's remakes of one title become one entity. A store that keeps no counts (an RDF
        endpoint holds a set) answers 1 for each."""
        ...
