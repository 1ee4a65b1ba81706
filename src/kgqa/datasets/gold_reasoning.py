"""A question's gold reasoning on a KG (:class:`~kgqa.core.GoldReasoning`): what the harness knows of how the question
is answered, for the oracle reasoner and for loss attribution. Never shown to a method.

The gold chain (:func:`kgqa.datasets.gold_chains.gold_chain`) is walked on the KG from its topic
(:func:`~kgqa.datasets.gold_chains.gold_chain_topic`; the question's topics when the source names none), layer by
layer, never re-entering a topic; the nodes on walks that end at a gold answer are the gold path, by depth. A hop the
KG also holds as another relation (Freebase's declared reverses: ``film.director.film`` is ``film.film.directed_by``
walked backwards) gives the same walk by other relations: those chains are gold too (:func:`equivalent_hops`; the
dataset's chain first, at most :data:`MAX_CHAINS`).
Constraints come from :func:`~kgqa.datasets.gold_chains.gold_constraints`, and for the demo questions from their
``constraint`` (``{"source", "chain", "target"}``). Names are normalised as prompts show nodes: a named node by its
name, a literal by its value (and its N-Triples form), a nameless mediator by its id.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

from kgqa.core import GoldReasoning, Question
from kgqa.datasets.gold_chains import answer_keys, gold_chain, gold_chain_topic, gold_constraints
from kgqa.errors import KGQAError
from kgqa.kg.base import Chain, Direction, Hop, KnowledgeGraph, is_literal, literal_value, parse_chain
from kgqa.normalize import normalize_label

__all__ = ["equivalent_hops", "gold_reasoning"]

#: Neighbours read per (node, relation) while walking a gold chain (MetaQA's widest 3-hop chains stay far below).
WALK_LIMIT = 20_000
#: Nodes of a layer whose relations are compared when looking for a hop's equivalents, and the most gold chains kept.
EQUIVALENCE_SAMPLE = 3
MAX_CHAINS = 16

GoldHop = tuple[str, bool]
GoldConstraint = tuple[int, tuple[GoldHop, ...], str | None]


def gold_reasoning(question: Question, kg: KnowledgeGraph | None) -> GoldReasoning:
    """The question's gold reasoning on ``kg`` (chains, constraints, answers and their names; the gold path when
    there is a KG and a chain). A question whose dataset gives no chain still has its answers."""
    answers = answer_keys(question)
    answer_names = set(_surface_forms(answers))
    for gold in question.answers:
        answer_names.update(normalize_label(a) for a in (gold.name, *gold.aliases) if a)
    chain = gold_chain(question)
    constraints = _constraints(question)
    chains: list[tuple[GoldHop, ...]] = [] if not chain else [_gold_hops(chain)]
    layers: tuple[frozenset[str], ...] = ()
    path_names: set[str] = set()
    constraint_names: set[str] = set()
    if kg is not None and chain:
        start = gold_chain_topic(question)
        topics = [start] if start else list(question.topic_ids)
        try:
            layers = _gold_layers(kg, topics, chain, set(answers))
        except KGQAError:  # a KG that cannot walk the chain gives the oracle no path, not a failed question
            layers = ()
        if layers:
            chains = _equivalent_chains(kg, layers, chain)
            constraints = _equivalent_constraints(kg, layers, constraints)
        nodes = [n for layer in layers for n in layer]
        path_names = set(_surface_forms(dict.fromkeys(nodes), kg))
        answer_names.update(_surface_forms(dict.fromkeys(a for a in answers if a in set(nodes)), kg))
    values = [c[2] for c in constraints if c[2] is not None]
    constraint_names = set(_surface_forms(values, kg))
    return GoldReasoning(chains=tuple(chains), constraints=tuple(constraints), answers=frozenset(answers),
                         answer_names=frozenset(n for n in answer_names if n), path_nodes=layers,
                         path_names=frozenset(n for n in path_names if n),
                         constraint_names=frozenset(n for n in constraint_names if n))


def _gold_hops(chain: Sequence[Hop]) -> tuple[GoldHop, ...]:
    return tuple((hop.relation, hop.direction is Direction.IN) for hop in chain)


def _constraints(question: Question) -> list[GoldConstraint]:
    """The question's gold constraints: its dataset's (WebQSP, CWQ), else the demo questions' own."""
    found: list[GoldConstraint] = [(c.position, ((c.relation, c.direction is Direction.IN),), c.value)
                                   for c in gold_constraints(question)]
    demo = question.metadata.get("constraint")
    if not found and isinstance(demo, dict) and isinstance(demo.get("chain"), str):
        try:
            hops = _gold_hops(parse_chain(demo["chain"]))
        except KGQAError:
            return found
        target = demo.get("target")
        found.append((int(demo.get("source") or 0), hops, str(target) if target is not None else None))
    return found


def equivalent_hops(kg: KnowledgeGraph, nodes: Iterable[str], hop: Hop) -> list[Hop]:
    """The other hops that reach, from each of ``nodes``, exactly what ``hop`` reaches (the first
    :data:`EQUIVALENCE_SAMPLE` nodes in id order compared). Equivalent on this walk, which is what a gold chain is
    for: from a single node a coincidence counts too (a film's director who also wrote it), and walks the same.

    Only the relations that link a node to one node ``hop`` reaches are tried (a few listings and neighbour reads per
    node, not one per relation of a Freebase hub)."""
    if not kg.has_relation(hop.relation):  # a constraint the Freebase pieces cannot hold (no literals): none
        return []
    alike: set[Hop] | None = None
    for node in sorted(nodes)[:EQUIVALENCE_SAMPLE]:
        reached = set(kg.neighbors(node, hop.relation, hop.direction, limit=WALK_LIMIT))
        if not reached:
            continue
        probe = min(reached)
        tried = {Hop(r, Direction.OUT) for r in set(kg.relations(node, Direction.OUT)) & set(kg.relations(probe, Direction.IN))}
        tried |= {Hop(r, Direction.IN) for r in set(kg.relations(node, Direction.IN)) & set(kg.relations(probe, Direction.OUT))}
        tried.discard(hop)
        here = {other for other in tried
                if set(kg.neighbors(node, other.relation, other.direction, limit=WALK_LIMIT)) == reached}
        alike = here if alike is None else alike & here
        if not alike:
            return []
    return sorted(alike or (), key=lambda h: (h.relation, h.direction.value))


def _equivalent_chains(kg: KnowledgeGraph, layers: tuple[frozenset[str], ...], chain: Chain) -> list[tuple[GoldHop, ...]]:
    """The gold chain and the chains that walk it by equivalent hops (at most :data:`MAX_CHAINS`, the given first)."""
    options = [[hop, *equivalent_hops(kg, layers[depth], hop)] for depth, hop in enumerate(chain)]
    return [_gold_hops(c) for c in itertools.islice(itertools.product(*options), MAX_CHAINS)]


def _gold_layers(kg: KnowledgeGraph, topics: list[str], chain: Chain, answers: set[str]) -> tuple[frozenset[str], ...]:
    """The nodes on walks of ``chain`` from ``topics`` that end at a gold answer, by depth (0: the topics walked
    from); empty when no walk reaches one."""
    seeds = set(topics)
    frontier = [t for t in topics if kg.has_entity(t)]
    layers: list[dict[str, set[str]]] = []  # per hop: node reached -> the nodes it was reached from
    for hop in chain:
        found = kg.neighbors_many(frontier, hop.relation, hop.direction, limit_per_entity=WALK_LIMIT) if frontier else {}
        reached: dict[str, set[str]] = {}
        for near, others in found.items():
            for far in others:
                if far not in seeds:
                    reached.setdefault(far, set()).add(near)
        layers.append(reached)
        frontier = list(reached)
    alive = set(frontier) & answers
    if not alive:
        return ()
    path: list[frozenset[str]] = [frozenset(alive)]
    for reached in reversed(layers):
        alive = {near for far in alive for near in reached.get(far, ())}
        path.append(frozenset(alive))
    return tuple(reversed(path))


def _equivalent_constraints(kg: KnowledgeGraph, layers: tuple[frozenset[str], ...],
                            constraints: list[GoldConstraint]) -> list[GoldConstraint]:
    """Each constraint, then the same constraint starting by a hop equivalent to its first (on the gold path's nodes
    at its position)."""
    out: list[GoldConstraint] = []
    for position, hops, value in constraints:
        out.append((position, hops, value))
        if hops and position < len(layers):
            first = Hop(hops[0][0], Direction.IN if hops[0][1] else Direction.OUT)
            out += [(position, (*_gold_hops([alt]), *hops[1:]), value)
                    for alt in equivalent_hops(kg, layers[position], first)]
    return out


def _surface_forms(nodes: Iterable[str], kg: KnowledgeGraph | None = None) -> list[str]:
    """How prompts may show ``nodes``, normalised: a name (from the KG when given), a literal's value and N-Triples
    form, a nameless node's id."""
    nodes = list(nodes)
    names = kg.names(nodes) if kg is not None else {}
    out: list[str] = []
    for node in nodes:
        if names.get(node):
            out.append(normalize_label(str(names[node])))
        elif is_literal(node):
            out += [normalize_label(literal_value(node)), normalize_label(node)]
        else:
            out.append(normalize_label(node))
    return out
