"""The scorer-based relation pruning and stopping of ``chains`` (kgqa.methods.chains.steering) on hand-built graphs.

An :class:`ExpandedGraph` is built edge by edge with known propagated scores, so every number the rules read is known.
"""

from __future__ import annotations

import pytest

from kgqa.core import Trace
from kgqa.kg.base import Direction, Hop, parse_chain
from kgqa.methods.chains.steering import ChainSteering, ForesightPruner
from kgqa.steps.foresight.graph import ExpandedGraph


def graph_of(edges: list[tuple[str, int, str, str, int, float, bool]]) -> ExpandedGraph:
    """Edges as (near entity, near depth, relation, far entity, far depth, score, backward)."""
    graph = ExpandedGraph(seeds=["A"], orientation="layered")
    graph.node("A", 0)
    for near_e, near_d, rel, far_e, far_d, score, back in edges:
        near, far = graph.node(near_e, near_d), graph.node(far_e, far_d)
        graph.triples.append((far_e, rel, near_e) if back else (near_e, rel, far_e))
        graph.near.append(near)
        graph.far.append(far)
        graph.backward.append(back)
        graph.edge_layer.append(far_d)
        graph.initial.append(score)
    graph.scores = list(graph.initial)
    return graph


# A -r1-> B (0.9) -r3-> D (0.95); A -r2-> C (0.6), C has nothing beyond; A -weak-> W (0.01)
TWO_HOP = graph_of([("A", 0, "r1", "B", 1, 0.9, False), ("A", 0, "r2", "C", 1, 0.6, False),
                    ("A", 0, "weak", "W", 1, 0.01, False), ("B", 1, "r3", "D", 2, 0.95, False)])


def test_hop_scores_read_the_best_triple_a_relation_opens_and_zero_for_one_never_kept() -> None:
    steering = ChainSteering(TWO_HOP)
    hops = [Hop("r1"), Hop("r2"), Hop("r1", Direction.IN), Hop("unseen")]
    assert steering.hop_scores((), hops) == [0.9, 0.6, 0.0, 0.0]


def test_the_pruner_ranks_by_what_lies_beyond_and_drops_what_the_scorer_never_kept() -> None:
    steering = ChainSteering(TWO_HOP)
    # Directly r1 (0.9) beats r2 (0.6) anyway; make r2 look better one hop deep and r1 better two hops deep.
    graph = graph_of([("A", 0, "r1", "B", 1, 0.6, False), ("A", 0, "r2", "C", 1, 0.9, False),
                      ("B", 1, "r3", "D", 2, 0.99, False), ("C", 1, "r4", "E", 2, 0.95, False),
                      ("E", 2, "r5", "F", 3, 0.99, False)])
    steering = ChainSteering(graph)
    trace = Trace()
    candidates = [Hop("r1"), Hop("r2"), Hop("weak")]
    shallow = ForesightPruner(steering, top_k=3, min_score=0.02, max_depth=1).prune("q", ["A"], (), candidates)
    deep = ForesightPruner(steering, top_k=3, min_score=0.02, max_depth=2, step="t.prune").prune(
        "q", ["A"], (), candidates, trace=trace)
    assert [s.hop.relation for s in shallow.value] == ["r2", "r1"]  # 'weak' opens no kept triple: never followed
    # two hops deep, r1 -> r3 ends (nothing beyond D) while r2 -> r4 still leads on to F: r1's reading wins
    assert [s.hop.relation for s in deep.value] == ["r1", "r2"]
    (event,) = [e for e in trace if e["step"] == "t.prune"]
    assert event["scorer"] == "foresight" and event["candidates"] == 3 and event["scored_above"] == 2


def test_top_k_and_min_score() -> None:
    steering = ChainSteering(TWO_HOP)
    kept = ForesightPruner(steering, top_k=1, min_score=0.02).prune("q", ["A"], (), [Hop("r2"), Hop("r1")]).value
    assert [s.hop.relation for s in kept] == ["r1"]
    assert ForesightPruner(steering, top_k=3, min_score=0.95).prune("q", ["A"], (), [Hop("r1"), Hop("r2")]).value == []


def test_a_chain_goes_forward_while_an_extension_reads_better_and_stops_where_none_does() -> None:
    steering = ChainSteering(TWO_HOP)
    first = steering.read(parse_chain("r1"), depth_left=2, floor=0.02)
    assert first.arrival == 0.9 and first.onward == 0.95 and first.reached == 1
    assert first.here == pytest.approx(0.9 * (1 - 0.95))  # B is an intermediate: a relevant triple leads on from it
    assert first.beyond == pytest.approx((0.9 * 0.95) ** 0.5)  # r1 -> r3 ends at D
    assert first.beyond > first.here  # the judge's rule: Forward
    second = steering.read(parse_chain("r1,r3"), depth_left=1, floor=0.02)
    assert second.per_hop == (0.9, 0.95) and second.onward == 0.0
    assert second.here == pytest.approx((0.9 * 0.95) ** 0.5) and second.beyond == 0.0  # Stop
    dead_end = steering.read(parse_chain("r2"), depth_left=2, floor=0.02)
    assert dead_end.here == pytest.approx(0.6) and dead_end.beyond == 0.0  # Stop: nothing leads on from C


def test_a_chain_is_read_at_its_typical_end() -> None:
    # A -genre-> G1, G2, G4 (0.99); G2 is also a film title with a genre of its own (0.97): the genres are still answers
    graph = graph_of([("A", 0, "genre", "G1", 1, 0.99, False), ("A", 0, "genre", "G2", 1, 0.99, False),
                      ("A", 0, "genre", "G4", 1, 0.99, False), ("G2", 1, "genre", "G3", 2, 0.97, False)])
    reading = ChainSteering(graph).read(parse_chain("genre"), depth_left=2, floor=0.02)
    assert reading.onward == 0.97  # the best triple leading on, for the trace
    assert reading.here == pytest.approx(0.99)  # read at the median end, which nothing continues
    assert reading.here > reading.beyond  # Stop at the genres
    # A -actor-> P -^actor-> F1, F2, F3 (0.99); F1 and F2 have a release year (0.98), F3 none kept: years, not films
    graph = graph_of([("A", 0, "actor", "P", 1, 0.99, False), ("P", 1, "actor", "F1", 2, 0.99, True),
                      ("P", 1, "actor", "F2", 2, 0.99, True), ("P", 1, "actor", "F3", 2, 0.99, True),
                      ("F1", 2, "year", "Y1", 3, 0.98, False), ("F2", 2, "year", "Y2", 3, 0.98, False)])
    films = ChainSteering(graph).read(parse_chain("actor,^actor"), depth_left=1, floor=0.02)
    assert films.here == pytest.approx(0.99 * (1 - 0.98)) and films.beyond > films.here  # Forward to the years


def test_walking_back_along_a_relation_reaches_the_siblings() -> None:
    # film F -actor-> P (depth 1); P <-actor- other films F2, F3 (depth 2, backward): MetaQA's "share actors with"
    graph = graph_of([("A", 0, "starred_actors", "P", 1, 0.9, False), ("P", 1, "starred_actors", "F2", 2, 0.8, True),
                      ("P", 1, "starred_actors", "F3", 2, 0.7, True)])
    steering = ChainSteering(graph)
    nodes, per_hop, last = steering.walk(parse_chain("starred_actors,^starred_actors"))
    assert {graph.node_entity[n] for n in nodes} == {"F2", "F3"} and per_hop == [0.9, 0.8] and len(last) == 2
    assert steering.walk(parse_chain("starred_actors,starred_actors"))[0] == []  # forward again matches nothing


def test_end_scores_rank_the_answers_by_their_best_path_along_the_chain() -> None:
    # A -r1-> B (0.9), C (0.5); B -r2-> X (0.8); C -r2-> Y (0.99): X's path is weakest 0.8, last 0.8; Y's 0.5 and 0.99
    graph = graph_of([("A", 0, "r1", "B", 1, 0.9, False), ("A", 0, "r1", "C", 1, 0.5, False),
                      ("B", 1, "r2", "X", 2, 0.8, False), ("C", 1, "r2", "Y", 2, 0.99, False)])
    scores = ChainSteering(graph).end_scores(parse_chain("r1,r2"))
    assert scores == {"X": pytest.approx(0.8), "Y": pytest.approx((0.5 * 0.99) ** 0.5)}
    assert sorted(scores, key=lambda e: -scores[e]) == ["X", "Y"]


def test_the_scorers_best_reading_is_followed_first() -> None:
    steering = ChainSteering(TWO_HOP)
    pattern = parse_chain("r2")  # e.g. FoG's answer pattern disagrees with the per-hop scores
    kept = ForesightPruner(steering, top_k=2, min_score=0.02, max_depth=2, pattern=pattern).prune(
        "q", ["A"], (), [Hop("r1"), Hop("r2")]).value
    assert [s.hop.relation for s in kept] == ["r2", "r1"]
