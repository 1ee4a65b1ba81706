"""Relation search and the words a model sees for relations, chains and the entities a chain reaches.

Written once for every relation-centric method: CoR/CCoR here, and later methods that extend chains.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kgqa.kg.base import Chain, Direction, Hop, KnowledgeGraph, is_literal
from kgqa.kg.schema import relation_words


def search_relations(kg: KnowledgeGraph, topics: Sequence[str], chain: Chain, *, both_directions: bool = True,
                     walk_back: bool = False) -> list[Hop]:
    """Hops that can extend ``chain`` (relation search in relation space: no entity is named or pruned).

    The hop that walks straight back along the chain's last edge is left out unless ``walk_back``: read as a set it
    returns to the previous position, but from a many-valued position it also reaches the siblings (the other films of
    a film's actors, MetaQA's "share actors with"), which a chain judged on what it reaches can use.
    """
    hops = [Hop(r, Direction.OUT) for r in kg.chain_relations(topics, chain, Direction.OUT)]
    if both_directions:
        hops += [Hop(r, Direction.IN) for r in kg.chain_relations(topics, chain, Direction.IN)]
    if chain and not walk_back:
        back = chain[-1].reversed()
        hops = [h for h in hops if h != back]
    return hops


def verbalize_relation(hop: Hop) -> str:
    """Plain words for a hop, for embedding scorers: ``film.film.directed_by`` -> ``film film directed by``, marked
    when followed backwards (the words are :func:`kgqa.kg.schema.relation_words`)."""
    words = relation_words(hop.relation)
    return words if hop.direction is Direction.OUT else f"{words} (reverse)"


def describe_hop(hop: Hop) -> str:
    """How a model sees a hop: the relation, marked when it is followed backwards."""
    return hop.relation if hop.direction is Direction.OUT else f"{hop.relation} (incoming)"


def describe_chain(topic_names: Sequence[str], chain: Chain) -> str:
    """``[Christopher Nolan] -> film.director.film -> film.film.starring (incoming)``; the empty chain is the topics."""
    start = "[" + ", ".join(topic_names) + "]"
    return " -> ".join([start, *(describe_hop(h) for h in chain)])


@dataclass(slots=True)
class Reached:
    """A bounded view of what a chain reaches: how many, and some names (nameless mediator nodes are counted)."""

    count: int
    samples: list[str]
    nameless: int
    truncated: bool
    #: Every entity the chain reaches is one it started from (it walked back, e.g. through a mediator node).
    only_start: bool = False
    #: Every entity reached (up to the limit), for a caller that records them (CCoR's judge audits).
    entities: list[str] = field(default_factory=list)

    def describe(self) -> str:
        if self.count == 0:
            return "no entities"
        parts = [f"{self.count}{'+' if self.truncated else ''} entities"]
        if self.samples:
            parts.append("e.g. " + "; ".join(self.samples))
        if self.nameless:
            parts.append(f"{self.nameless} of the sampled are nameless mediator (CVT) nodes")
        return ", ".join(parts)


def reached_view(kg: KnowledgeGraph, topics: Sequence[str], chain: Chain, *, samples: int = 5,
                 limit: int = 1000) -> Reached:
    """Execute ``chain`` and summarise the end entities for a judge (the end, never the intermediate positions)."""
    result = kg.run_chain(topics, chain, limit=limit)
    head = result.entities[: max(samples * 4, samples)]
    names = kg.names(head)
    shown = [names[e] or "" for e in head if names.get(e)]
    nameless = sum(1 for e in head if not names.get(e) and not is_literal(e))
    only_start = bool(result.entities) and not result.truncated and set(result.entities) <= set(topics)
    return Reached(len(result.entities), shown[:samples], nameless, result.truncated, only_start,
                   list(result.entities))
