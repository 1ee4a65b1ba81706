"""Entity-level walks over the KG, the shared ground of the beam-search baselines (ToG, PoG): paths of triples from a
topic entity, the neighbours one hop opens (seeded sampling where a method samples), triples in words for a prompt,
and the link from the names an LLM answers with back to the KG nodes it was shown.

Unlike :mod:`kgqa.steps.relations` (relation space: entities are never named), these steps name the entities they
reach; nameless mediator (CVT) nodes stay in the walk as ``[mediator m.x]`` so a path through one still reads as one.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from kgqa.core import AnswerItem
from kgqa.kg.base import Direction, Hop, KnowledgeGraph, is_literal

Triple = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class WalkPath:
    """A walk from a start entity: the nodes visited in order and the triples between them (KG orientation: head,
    relation, tail, whatever direction the walk took)."""

    nodes: tuple[str, ...]
    triples: tuple[Triple, ...] = ()
    hops: tuple[Hop, ...] = ()

    @classmethod
    def start(cls, entity: str) -> WalkPath:
        return cls((entity,))

    @property
    def end(self) -> str:
        return self.nodes[-1]

    def extend(self, hop: Hop, entity: str) -> WalkPath:
        return WalkPath((*self.nodes, entity), (*self.triples, oriented_triple(self.end, hop, entity)), (*self.hops, hop))

    def back_hop(self) -> Hop | None:
        """The hop that walks straight back along the last edge (a method leaves it out of the next search)."""
        return self.hops[-1].reversed() if self.hops else None


def oriented_triple(entity: str, hop: Hop, other: str) -> Triple:
    """The KG triple behind one step of a walk: ``(entity, r, other)`` forwards, ``(other, r, entity)`` backwards."""
    return (entity, hop.relation, other) if hop.direction is Direction.OUT else (other, hop.relation, entity)


#: When a walk may step straight back along the edge it came by (to the siblings of where it came from): ``auto``
#: unless the KG names its relations' reverses (:attr:`kgqa.kg.schema.Schema.names_reverses`), ``always``, ``never``.
WalkBack = Literal["auto", "always", "never"]


def walk_back_field(default: WalkBack = "auto") -> Any:
    """The ``walk_back`` setting of a method's config (one description for every method that walks)."""
    return Field(default=default, description="a walk may step back along the edge it came by (to the siblings): auto "
                 "unless the KG names its relations' reverses (Freebase, the reference code's behaviour), always, never "
                 "(kgqa.steps.walks.walks_back)")


def walks_back(kg: KnowledgeGraph, policy: WalkBack) -> bool:
    """Whether a walk on ``kg`` under ``policy`` may step back along the edge it came by.

    The reference code of ToG, PoG and CoR drops the relation a walk came by; on Freebase, which names the reverse of
    its relations, the walk still reaches the siblings (the other films of a film's director) by the reverse. On a KG
    that names no reverses (MetaQA's KB) dropping it leaves no way there, so ``auto`` keeps the step back on such a KG
    (never to the node just left: walks skip the nodes they visited) and drops it on Freebase, as the code does.
    """
    if policy == "auto":
        schema = getattr(kg, "schema", None)  # a KG object without one reads as a generic KG
        return not getattr(schema, "names_reverses", False)
    return policy == "always"


def back_hop_to_skip(kg: KnowledgeGraph, path: WalkPath, policy: WalkBack) -> Hop | None:
    """The hop ``entity_hops`` should leave out at the end of ``path`` under ``policy`` (None: none)."""
    return None if walks_back(kg, policy) else path.back_hop()


def entity_hops(kg: KnowledgeGraph, entity: str, *, exclude: Hop | None = None) -> list[Hop]:
    """The hops leaving ``entity`` in both directions (noise relations left out by the KG), minus ``exclude``."""
    hops = [Hop(r, Direction.OUT) for r in kg.relations(entity, Direction.OUT)]
    hops += [Hop(r, Direction.IN) for r in kg.relations(entity, Direction.IN)]
    return [h for h in hops if h != exclude]


def hop_neighbours(kg: KnowledgeGraph, entity: str, hop: Hop, *, limit: int, visited: Iterable[str] = ()) -> list[str]:
    """The nodes ``hop`` reaches from ``entity`` (at most ``limit``, KG order), without the nodes already visited."""
    seen = set(visited)
    return [n for n in kg.neighbors(entity, hop.relation, hop.direction, limit=limit) if n not in seen]


def seeded_sample(items: Sequence[str], k: int, rng: random.Random) -> list[str]:
    """``k`` of ``items`` drawn by ``rng`` (in the items' order, so a seed gives one answer), all of them when fewer."""
    if len(items) <= k:
        return list(items)
    picked = set(rng.sample(range(len(items)), k))
    return [item for i, item in enumerate(items) if i in picked]


def node_label(node: str, names: dict[str, str | None]) -> str:
    """How a prompt shows a node: its name, a literal's value, or ``[mediator <id>]`` for a nameless CVT."""
    name = names.get(node)
    if name:
        return name
    return node if is_literal(node) else f"[mediator {node}]"


def verbalize_triples(kg: KnowledgeGraph, triples: Sequence[Triple]) -> list[str]:
    """``(Christopher Nolan, film.director.film, Inception)`` per triple, names fetched in one batch."""
    nodes = list(dict.fromkeys(n for h, _, t in triples for n in (h, t)))
    names = kg.names(nodes)
    return [f"({node_label(h, names)}, {r}, {node_label(t, names)})" for h, r, t in triples]


def shown_triples(kg: KnowledgeGraph, paths: Sequence[WalkPath], limit: int) -> tuple[list[str], list[str]]:
    """The distinct triples of ``paths`` in words (the newest last, at most ``limit``), and every node they mention:
    what a reasoning prompt shows and what its answers may be linked to."""
    triples = list(dict.fromkeys(t for p in paths for t in p.triples))[-limit:]
    return verbalize_triples(kg, triples), [n for h, _, t in triples for n in (h, t)]


def link_answers(kg: KnowledgeGraph, answers: Sequence[str], nodes: Iterable[str]) -> list[AnswerItem]:
    """Answer items for the names an LLM answered with: a name that equals (normalised) the name of a node it was
    shown gets that node's id; any other name stays a bare name (``id`` None), never matched to an unseen node."""
    from kgqa.normalize import normalize_label

    shown = list(dict.fromkeys(nodes))
    names = kg.names(shown)
    by_label: dict[str, str] = {}
    for node in shown:
        label = normalize_label(node_label(node, names))
        by_label.setdefault(label, node)
    items: list[AnswerItem] = []
    seen: set[str] = set()
    for answer in answers:
        key = normalize_label(answer)
        if not key or key in seen:
            continue
        seen.add(key)
        node = by_label.get(key)
        if node is None:
            items.append(AnswerItem(id=None, name=answer))
        else:
            items.append(AnswerItem(id=None if is_literal(node) else node, name=names.get(node) or answer))
    return items


def linked_nodes(items: Sequence[AnswerItem], nodes: Iterable[str], kg: KnowledgeGraph) -> set[str]:
    """The shown nodes the answer items stand for (ids, and literals by value)."""
    from kgqa.normalize import normalize_label

    ids = {a.id for a in items if a.id}
    values = {normalize_label(a.name) for a in items if a.id is None}
    shown = list(dict.fromkeys(nodes))
    names = kg.names(shown)
    return {n for n in shown if n in ids or (is_literal(n) and normalize_label(names.get(n) or n) in values)}


def path_evidence(paths: Sequence[WalkPath], ends: set[str], *, max_paths: int = 20) -> list[list[str]]:
    """The triples of the paths that reach one of ``ends`` (anywhere along the walk), at most ``max_paths`` paths."""
    evidence: list[list[str]] = []
    used = 0
    for path in paths:
        if used >= max_paths:
            break
        if not ends.intersection(path.nodes[1:]):
            continue
        used += 1
        cut = max(i for i, n in enumerate(path.nodes) if n in ends)
        for triple in path.triples[:cut]:
            if list(triple) not in evidence:
                evidence.append(list(triple))
    return evidence
