"""FoG's graph side (kgqa.steps.foresight): the oriented foresight expansion, hub caps and tau_e, far-to-near feedback
propagation, and the reading of answers from the propagated graph.

Every KG here is a real embedded store built from a handful of triples; the scorer of the expansion tests is a plain
function of the triple (a score per relation), so each test states exactly which triples are relevant. The network tests
use a tiny :class:`ForesightNet` on hand-made z vectors.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
import torch

from kgqa.kg.embedded import EmbeddedKG
from kgqa.steps.answers import presentable
from kgqa.steps.foresight.graph import Caps, ExpandedGraph, expand, rank_answers, simple_paths
from kgqa.steps.foresight.model import ForesightNet, NetSpec
from kgqa.testing import small_kg

Triple = tuple[str, str, str]


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny tensors: one thread is fastest, and spares a busy machine the threads' spin-waits."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def by_relation(scores: Mapping[str, float], default: float = 0.9, seen: list[list[Triple]] | None = None):
    """A score_batch callback: each triple's score is its relation's; the payload is a zero z per triple."""

    def score_batch(triples: list[Triple], layers: np.ndarray, backward: np.ndarray):
        assert len(layers) == len(backward) == len(triples)
        if seen is not None:
            seen.append(list(triples))
        values = np.array([scores.get(t[1], default) for t in triples], dtype=np.float32)
        return values, torch.zeros(len(triples), 4)

    return score_batch


def by_triple(scores: Mapping[Triple, float], default: float = 0.9):
    def score_batch(triples: list[Triple], layers: np.ndarray, backward: np.ndarray):
        return np.array([scores.get(t, default) for t in triples], dtype=np.float32), np.zeros((len(triples), 4))

    return score_batch


def edge_entities(graph: ExpandedGraph) -> list[tuple[str, int, str, int]]:
    """(near entity, near depth, far entity, far depth) per edge."""
    return [(graph.node_entity[n], graph.node_depth[n], graph.node_entity[f], graph.node_depth[f])
            for n, f in zip(graph.near, graph.far, strict=True)]


# ---------------------------------------------------------------------------------------------------------------------
# 1. orientation

# s is the seed; a and c are both one hop from it, joined by a within-layer edge (a, w, c); b is two hops away through a
# and through c; (b, u, a) closes the cycle a -> b -> a; (a, r, s) points back at the seed.
CYCLE = [("s", "p", "a"), ("s", "p", "c"), ("a", "q", "b"), ("b", "q", "c"), ("c", "t", "d"), ("b", "u", "a"),
         ("a", "w", "c"), ("a", "r", "s")]


@pytest.fixture(scope="module")
def cycle_kg(tmp_path_factory: pytest.TempPathFactory) -> EmbeddedKG:
    return small_kg(tmp_path_factory.mktemp("cycle") / "kg", CYCLE)


@pytest.mark.parametrize("orientation", ["layered", "shortest"])
def test_every_kept_edge_goes_from_depth_d_to_d_plus_1_and_never_re_enters_a_seed(cycle_kg: EmbeddedKG,
                                                                                  orientation: str) -> None:
    graph = expand(cycle_kg, ["s"], by_relation({}), hops=3, tau_e=0.1, orientation=orientation)  # type: ignore[arg-type]
    assert len(graph) > 0
    for near, far in zip(graph.near, graph.far, strict=True):
        assert graph.node_depth[far] == graph.node_depth[near] + 1
    assert graph.layers == [graph.node_depth[f] for f in graph.far]
    # the seed is one node at depth 0 and never the far end of an edge, though (a, r, s) leads back to it
    assert [(e, d) for e, d in zip(graph.node_entity, graph.node_depth, strict=True) if e == "s"] == [("s", 0)]
    assert all(graph.node_entity[f] != "s" for f in graph.far)
    # (a, r, s) is crossed once, backward, from the seed out to a; never from a back into the seed
    assert [(graph.backward[i], graph.layers[i]) for i, t in enumerate(graph.triples) if t == ("a", "r", "s")] == \
        [(True, 1)]
    # each edge's subject and object nodes: the walk crosses backward edges from their object to their subject
    heads, tails = graph.head_tail_nodes()
    for (h, _, t), hn, tn in zip(graph.triples, heads, tails, strict=True):
        assert (graph.node_entity[hn], graph.node_entity[tn]) == (h, t)


def test_shortest_orientation_drops_and_counts_edges_not_pointing_away_from_the_seeds(cycle_kg: EmbeddedKG) -> None:
    graph = expand(cycle_kg, ["s"], by_relation({}), hops=3, tau_e=0.1, orientation="shortest")
    depth = dict(zip(graph.node_entity, graph.node_depth, strict=True))
    assert len(graph.node_entity) == len(set(graph.node_entity))  # one node per entity
    assert depth == {"s": 0, "a": 1, "c": 1, "b": 2, "d": 2}
    assert sorted(edge_entities(graph)) == [
        ("a", 1, "b", 2), ("a", 1, "b", 2), ("c", 1, "b", 2), ("c", 1, "d", 2),
        ("s", 0, "a", 1), ("s", 0, "a", 1), ("s", 0, "c", 1)]
    # dropped: (a, w, c) seen from a and from c (within layer 1), and at layer 3 every edge of b and d, which all
    # lead back to layer 1: (b, q, c), (b, u, a), (a, q, b) from b and (c, t, d) from d
    assert graph.cut["not_away_from_seeds"] == 6
    assert ("a", "w", "c") not in graph.triples
    assert max(graph.layers) == 2


def test_layered_orientation_unrolls_an_entity_reached_at_several_depths(cycle_kg: EmbeddedKG) -> None:
    graph = expand(cycle_kg, ["s"], by_relation({}), hops=3, tau_e=0.1, orientation="layered")
    depths: dict[str, set[int]] = {}
    for entity, d in zip(graph.node_entity, graph.node_depth, strict=True):
        depths.setdefault(entity, set()).add(d)
    assert depths == {"s": {0}, "a": {1, 2, 3}, "c": {1, 2, 3}, "b": {2, 3}, "d": {2, 3}}
    assert len(set(zip(graph.node_entity, graph.node_depth, strict=True))) == len(graph.node_entity)
    assert "not_away_from_seeds" not in graph.cut
    def crossings(triple: Triple) -> list[tuple[str, int, str, int]]:
        return sorted(edge for edge, t in zip(edge_entities(graph), graph.triples, strict=True) if t == triple)

    # the cycle edge (b, u, a) is walked a(1) -> b(2), then on from both unrolled nodes: b(2) -> a(3), a(2) -> b(3)
    assert crossings(("b", "u", "a")) == [("a", 1, "b", 2), ("a", 2, "b", 3), ("b", 2, "a", 3)]
    # the within-layer edge (a, w, c) becomes edges between consecutive layers, both ways
    assert crossings(("a", "w", "c")) == [("a", 1, "c", 2), ("a", 2, "c", 3), ("c", 1, "a", 2), ("c", 2, "a", 3)]
    assert len(graph) == 19  # 3 edges at layer 1, 6 at layer 2, 10 at layer 3
    assert [graph.layers.count(d) for d in (1, 2, 3)] == [3, 6, 10]
    assert graph.scored == len(graph)  # every candidate scored 0.9 > tau_e and kept


# ---------------------------------------------------------------------------------------------------------------------
# 2. tau_e, hub caps and skipped triples

def hub_triples() -> list[Triple]:
    out: list[Triple] = [("h", "r", f"m{i}") for i in range(10)]  # the seed's hub relation: 10 neighbours
    out += [(f"m{i}", "s", f"k{i}_{j}") for i in range(10) for j in range(5)]  # 5 per film-like node further out
    out += [("h", "t", "t0"), ("h", "t", "t1"), ("t0", "u", "z")]  # a weak relation, and a node behind it
    return out


@pytest.fixture(scope="module")
def hub_kg(tmp_path_factory: pytest.TempPathFactory) -> EmbeddedKG:
    return small_kg(tmp_path_factory.mktemp("hub") / "kg", hub_triples())


def test_hub_caps_cut_the_neighbours_of_one_relation_and_count_exactly_the_cut(hub_kg: EmbeddedKG) -> None:
    caps = Caps(seed_fanout=4, fanout=3, max_frontier=100)
    graph = expand(hub_kg, ["h"], by_relation({"t": 0.0}), hops=2, tau_e=0.1, caps=caps)
    hop1 = [t for t, d in zip(graph.triples, graph.layers, strict=True) if d == 1 and t[1] == "r"]
    assert len(hop1) == 4  # seed_fanout at the seed
    kept_m = {t[2] for t in hop1}
    hop2 = [t for t, d in zip(graph.triples, graph.layers, strict=True) if d == 2]
    assert {t[0] for t in hop2} == kept_m  # only the kept neighbours are expanded
    for m in kept_m:
        assert sum(1 for t in hop2 if t[0] == m) == 3  # fanout further out
    # cut: 10 - 4 at the seed, then 5 - 3 at each of the 4 kept nodes
    assert graph.cut["fanout_triples"] == 6 + 4 * 2
    # a relation under the cap is not cut: the two t triples were scored (and fell below tau_e)
    assert graph.cut["below_tau_e"] == 2


def test_the_frontier_cap_keeps_the_best_scored_nodes(hub_kg: EmbeddedKG) -> None:
    scores = {("h", "r", f"m{i}"): 0.2 + 0.05 * i for i in range(10)}
    scores |= {t: 0.5 for t in hub_triples() if t[1] == "s"}
    graph = expand(hub_kg, ["h"], by_triple(scores, default=0.0), hops=2, tau_e=0.1, caps=Caps(max_frontier=3))
    # all ten r-neighbours are kept at layer 1, but only the three best-scored are expanded at layer 2
    assert sum(1 for d in graph.layers if d == 1) == 10
    assert graph.cut["frontier_nodes"] == 7
    assert {t[0] for t, d in zip(graph.triples, graph.layers, strict=True) if d == 2} == {"m7", "m8", "m9"}
    assert graph.scored == 12 + 3 * 5  # 10 r + 2 t at layer 1, 5 s at each of the 3 nodes


def test_tau_e_keeps_only_triples_scoring_above_it_and_counts_the_rest(hub_kg: EmbeddedKG) -> None:
    seen: list[list[Triple]] = []
    # t scores exactly tau_e: not kept (strictly above is kept); s falls below it
    graph = expand(hub_kg, ["h"], by_relation({"r": 0.6, "t": 0.25, "s": 0.05}, seen=seen), hops=3, tau_e=0.25)
    assert {t[1] for t in graph.triples} == {"r"}
    assert all(s > 0.25 for s in graph.initial)
    assert graph.scores == graph.initial  # not propagated yet
    assert graph.cut["below_tau_e"] == 2 + 50  # the two t triples, the fifty s triples
    assert graph.scored == sum(len(batch) for batch in seen) == 10 + 2 + 50
    assert "z" not in graph.node_entity  # behind a cut triple: never reached
    assert len(seen) == 2  # nothing kept at layer 2: no third layer to score



def test_seed_floor_keeps_the_best_relation_at_the_seeds_only_when_nothing_passes_there(cycle_kg: EmbeddedKG) -> None:
    low = {"p": 0.01, "r": 0.005, "q": 0.5, "w": 0.001, "t": 0.001, "u": 0.001}
    empty = expand(cycle_kg, ["s"], by_relation(low), hops=3, tau_e=0.02)
    assert len(empty) == 0 and "seed_floor" not in empty.cut
    floored = expand(cycle_kg, ["s"], by_relation(low), hops=3, tau_e=0.02, seed_floor=True)
    first = [t for t, layer in zip(floored.triples, floored.edge_layer, strict=True) if layer == 1]
    assert sorted(first) == [("s", "p", "a"), ("s", "p", "c")]  # the best group (p, out), both its triples
    assert floored.cut["seed_floor"] == 2
    # beyond the seeds tau_e rules as usual: q passes, w/t/u (and the floor's own relation p) do not
    assert {t[1] for t, layer in zip(floored.triples, floored.edge_layer, strict=True) if layer > 1} == {"q"}
    # a seed layer that keeps something is left alone
    kept = expand(cycle_kg, ["s"], by_relation({**low, "p": 0.3}), hops=1, tau_e=0.02, seed_floor=True)
    assert "seed_floor" not in kept.cut and {t[1] for t in kept.triples} == {"p"}
    # with a floor at every layer, a layer that keeps nothing keeps its best group too
    everywhere = expand(cycle_kg, ["s"], by_relation({**low, "q": 0.015}), hops=2, tau_e=0.02, seed_floor=True,
                        floor_every_layer=True)
    second = [t for t, layer in zip(everywhere.triples, everywhere.edge_layer, strict=True) if layer == 2]
    assert {t[1] for t in second} == {"q"} and everywhere.cut["layer_floor"] == len(second) >= 1
    assert "layer_floor" not in floored.cut
    # the graph says which groups a floor kept (a method need not re-check them against the tau_e they failed)
    assert floored.floored == {(1, "p", False)} and not kept.floored
    assert (1, "p", False) in everywhere.floored and {d for d, _, _ in everywhere.floored} == {1, 2}


def test_bridge_ends_keep_their_cut_triples_and_walk_on_to_a_typed_end_but_not_at_the_last_layer(
        cycle_kg: EmbeddedKG) -> None:
    """A typed end (u) two hops behind a relation the scorer cut (q): without a bridge the walk never reaches it."""
    low = {"p": 0.9, "q": 0.01, "u": 0.01, "w": 0.01, "t": 0.01, "r": 0.01}
    typed = {("u", False)}
    plain = expand(cycle_kg, ["s"], by_relation(low), hops=3, tau_e=0.1, typed_ends=typed)
    assert "b" not in plain.node_entity and "bridge_floor" not in plain.cut
    bridged = expand(cycle_kg, ["s"], by_relation(low), hops=3, tau_e=0.1, typed_ends=typed,
                     bridge_ends={("q", False)})
    layers = dict(zip(bridged.triples, bridged.edge_layer, strict=True))
    assert layers[("a", "q", "b")] == 2 and bridged.cut["bridge_floor"] == 1  # kept, and expanded from
    assert layers[("b", "u", "a")] == 3 and bridged.cut["typed_floor"] >= 1  # the typed end it leads to
    assert ("b", "q", "c") not in layers  # a bridge at the last layer leads nowhere: not kept
    # the walk's last layer keeps no bridge
    short = expand(cycle_kg, ["s"], by_relation(low), hops=2, tau_e=0.1, bridge_ends={("q", False)})
    assert "bridge_floor" not in short.cut and ("a", "q", "b") not in short.triples


def test_typed_ends_keep_their_cut_triples_as_last_hops_that_are_not_expanded(hub_kg: EmbeddedKG) -> None:
    scores = {("h", "t", "t0"): 0.01, ("h", "t", "t1"): 0.005}  # t is cut by tau_e; everything else passes
    plain = expand(hub_kg, ["h"], by_triple(scores), hops=2, tau_e=0.1)
    assert not {("h", "t", "t0"), ("h", "t", "t1")} & set(plain.triples) and "typed_floor" not in plain.cut
    typed = expand(hub_kg, ["h"], by_triple(scores), hops=2, tau_e=0.1, typed_ends={("t", False)})
    assert {("h", "t", "t0"), ("h", "t", "t1")} <= set(typed.triples)
    assert plain.cut["below_tau_e"] == 2 and typed.cut["typed_floor"] == 2 and "below_tau_e" not in typed.cut
    assert ("t0", "u", "z") not in typed.triples and "z" not in typed.node_entity  # a typed last hop leads nowhere
    assert len(typed) == len(plain) + 2
    # the limit keeps the best-scored and counts the rest
    limited = expand(hub_kg, ["h"], by_triple(scores), hops=1, tau_e=0.1, typed_ends={("t", False)}, typed_limit=1)
    assert ("h", "t", "t0") in limited.triples and ("h", "t", "t1") not in limited.triples
    assert limited.cut["typed_floor"] == 1 and limited.cut["typed_limit"] == 1
    # a typed group further out: cut at layer 2, kept there as last hops; the wrong direction is not typed
    far = expand(hub_kg, ["h"], by_relation({"s": 0.0}), hops=2, tau_e=0.1, typed_ends={("s", False), ("r", True)})
    assert far.cut["typed_floor"] == 50 and sum(1 for t in far.triples if t[1] == "s") == 50


def test_a_seed_self_loop_is_walked_both_ways_and_only_through_it_is_the_seed_an_answer(tmp_path: Path) -> None:
    kg = small_kg(tmp_path / "kg", [("lemmy", "starred", "lemmy"), ("lemmy", "born_in", "uk"),
                                    ("film", "starred", "lemmy")])
    graph = expand(kg, ["lemmy"], by_relation({}), hops=2, tau_e=0.1)
    loops = [(t, b, layer) for t, b, layer in zip(graph.triples, graph.backward, graph.layers, strict=True)
             if t == ("lemmy", "starred", "lemmy")]
    assert sorted(loops) == [(("lemmy", "starred", "lemmy"), False, 1), (("lemmy", "starred", "lemmy"), True, 1)]
    loop_node = graph.find("lemmy", 1)
    assert loop_node is not None
    # the seed reached again is expanded like any node (its born_in, its film), but never re-enters itself
    onward = {graph.triples[e] for e in range(len(graph)) if graph.near[e] == loop_node}
    assert onward == {("lemmy", "born_in", "uk"), ("film", "starred", "lemmy")}
    assert all(graph.node_entity[n] != "lemmy" for n, d in zip(graph.far, graph.layers, strict=True) if d > 1)
    # FoG's reading (paths may pass an entity twice): "who starred in Lemmy" is the seed, through its loop
    ranked, _ = rank_answers(graph, 0.5, simple=False,
                             pattern_prior=lambda pattern: 1.0 if pattern == (("starred", False),) else 0.01)
    assert [a.entity for a in ranked] == ["lemmy"] and ranked[0].pattern == (("starred", False),)
    assert len(ranked[0].path.edges) == 1
    # simple paths never revisit an entity, the seed included
    assert "lemmy" not in {a.entity for a in rank_answers(graph, 0.5)[0]}
    # the paper's orientation has one node per entity: the loop would point back at the seed, and is dropped
    shortest = expand(kg, ["lemmy"], by_relation({}), hops=2, tau_e=0.1, orientation="shortest")
    assert ("lemmy", "starred", "lemmy") not in shortest.triples and shortest.cut["not_away_from_seeds"] == 2


def test_filter_scores_false_keeps_every_triple_and_skip_is_never_expanded(hub_kg: EmbeddedKG) -> None:
    plain = expand(hub_kg, ["h"], by_relation({"t": 0.0, "s": 0.0, "u": 0.0}), hops=2, tau_e=0.5,
                   filter_scores=False)
    assert sorted(plain.triples) == sorted(hub_triples())
    assert "below_tau_e" not in plain.cut
    assert "z" in plain.node_entity
    skipped = expand(hub_kg, ["h"], by_relation({}), hops=2, tau_e=0.1, skip={("h", "t", "t0"), ("m3", "s", "k3_1")},
                     filter_scores=False)
    assert ("h", "t", "t0") not in skipped.triples and ("m3", "s", "k3_1") not in skipped.triples
    assert "t0" not in skipped.node_entity and "z" not in skipped.node_entity  # t0 is only reachable through it
    assert "k3_1" not in skipped.node_entity
    assert skipped.cut["masked_triples"] == 2
    assert len(skipped) == len(plain) - 3  # the two skipped triples and (t0, u, z) behind one of them


# ---------------------------------------------------------------------------------------------------------------------
# 3-4. far-to-near feedback propagation

def tiny_net(layers: int = 1, seed: int = 0) -> ForesightNet:
    torch.manual_seed(seed)
    net = ForesightNet(NetSpec(input_dim=8, hidden=16, heads=2, self_blocks=1, propagation_layers=layers, dropout=0.0))
    net.eval()
    return net


def test_one_far_to_near_sweep_carries_the_farthest_edge_to_the_seed_and_an_undirected_layer_does_not() -> None:
    net = tiny_net(layers=1)
    # the chain seed(0) <- n1(1) <- n2(2) <- n3(3): edge i runs from node i+1 (far) to node i (near)
    near, far, far_depth = torch.tensor([0, 1, 2]), torch.tensor([1, 2, 3]), torch.tensor([1, 2, 3])
    torch.manual_seed(1)
    z = torch.randn(3, 16)
    z_changed = z.clone()
    z_changed[2] = torch.randn(16)  # only the depth-3 edge
    with torch.no_grad():
        h = net.propagate(z, near, far, far_depth, 4)
        h_changed = net.propagate(z_changed, near, far, far_depth, 4)
        u = net.propagate(z, near, far, far_depth, 4, undirected=True)
        u_changed = net.propagate(z_changed, near, far, far_depth, 4, undirected=True)
    assert h.shape == (4, 16)
    assert not torch.allclose(h[0], h_changed[0], atol=1e-6)  # one sweep: depth 3 -> 2 -> 1 -> 0
    assert not torch.allclose(h[0], torch.zeros(16))
    assert torch.equal(h[3], torch.zeros(16))  # the farthest node hears from nothing
    # one undirected layer: every node hears only its neighbours' previous (zero) states, so the seed hears z of its own
    # edge only, and the depth-3 edge reaches no farther than its two ends
    assert torch.allclose(u[0], u_changed[0], atol=0)
    assert torch.allclose(u[1], u_changed[1], atol=0)
    assert not torch.allclose(u[2], u_changed[2], atol=1e-6)
    # edge order within a call does not matter: the sweep goes by depth, not by position
    order = torch.tensor([2, 0, 1])
    with torch.no_grad():
        shuffled = net.propagate(z[order], near[order], far[order], far_depth[order], 4)
    assert torch.allclose(shuffled, h, atol=1e-6)


def test_a_near_edge_indistinguishable_locally_is_raised_by_its_relevant_far_edge() -> None:
    """The paper's example: singer A sang S1 and S2 (the same relation, so the same z locally); S1 won award B (the
    relevant far edge), S2 won award C. Only feedback from the far edges can tell (A, S1) from (A, S2)."""
    net = tiny_net(layers=1, seed=0)
    torch.manual_seed(2)
    song, relevant, irrelevant = torch.randn(16), torch.randn(16), torch.randn(16)
    # nodes: A 0, S1 1, S2 2, B 3, C 4; edges: (A, sang, S1), (A, sang, S2), (S1, won, B), (S2, won, C)
    z = torch.stack([song, song, relevant, irrelevant])
    near, far, far_depth = torch.tensor([0, 0, 1, 2]), torch.tensor([1, 2, 3, 4]), torch.tensor([1, 1, 2, 2])
    heads, tails = torch.tensor([0, 0, 1, 2]), torch.tensor([1, 2, 3, 4])
    labels = torch.tensor([1.0, 0.0, 1.0, 0.0])

    with torch.no_grad():
        before = torch.sigmoid(net.score(z))
    assert before[0] == before[1]

    trainable = [p for name, p in net.named_parameters() if name.startswith(("message", "attend", "phi", "head"))]
    frozen = {name: p.detach().clone() for name, p in net.named_parameters()
              if not name.startswith(("message", "attend", "phi", "head"))}
    optimiser = torch.optim.Adam(trainable, lr=1e-2)
    net.train()
    for _ in range(150):
        h = net.propagate(z, near, far, far_depth, 5)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(net.rescore(z, heads, tails, h), labels)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    net.eval()
    assert all(torch.equal(p, frozen[name]) for name, p in net.named_parameters() if name in frozen)

    with torch.no_grad():
        zero_state = torch.sigmoid(net.score(z))
        h = net.propagate(z, near, far, far_depth, 5)
        after = torch.sigmoid(net.rescore(z, heads, tails, h))
    assert zero_state[0] == zero_state[1]  # still indistinguishable without the far signal
    assert float(after[0] - after[1]) > 0.2  # the far signal raised (A, S1) above (A, S2)
    assert float(after[2]) > 0.5 > float(after[3])
    # without the far edges the two songs are one again: the difference came from B and C alone
    with torch.no_grad():
        local = net.propagate(z[:2], near[:2], far[:2], far_depth[:2], 5)
        alone = torch.sigmoid(net.rescore(z[:2], heads[:2], tails[:2], local))
    assert torch.allclose(alone[0], alone[1])


# ---------------------------------------------------------------------------------------------------------------------
# 5. reading the propagated graph

# director D directed films F1, F2, F3; F1 stars X and Y, F2 stars X, F3 stars Z; D was born in P (a distractor).
# Y has no name (a mediator-like node that may not be an answer).
FILMS = [("D", "directed", "F1"), ("D", "directed", "F2"), ("D", "directed", "F3"), ("F1", "starring", "X"),
         ("F1", "starring", "Y"), ("F2", "starring", "X"), ("F3", "starring", "Z"), ("D", "born_in", "P")]
FILM_NAMES = {e: f"name of {e}" for e in ("D", "F1", "F2", "F3", "X", "Z", "P")}


@pytest.fixture(scope="module")
def film_kg(tmp_path_factory: pytest.TempPathFactory) -> EmbeddedKG:
    return small_kg(tmp_path_factory.mktemp("films") / "kg", FILMS, FILM_NAMES)


def test_simple_paths_never_revisit_an_entity(film_kg: EmbeddedKG) -> None:
    graph = expand(film_kg, ["D"], by_relation({}), hops=3, tau_e=0.1)
    # layer 3 holds edges back to films already on the walk: X(2) -> F1(3) after D -> F1 -> X
    assert ("X", 2, "F1", 3) in edge_entities(graph)
    paths = simple_paths(graph, range(len(graph)))
    assert paths
    for path in paths:
        entities = ["D"] + [graph.node_entity[graph.far[e]] for e in path.edges]
        assert len(entities) == len(set(entities)), entities
        assert path.end == graph.far[path.edges[-1]]
        for a, b in zip(path.edges, path.edges[1:], strict=False):
            assert graph.far[a] == graph.near[b]  # a walk: each edge starts where the last one ended
        assert path.score == pytest.approx(float(np.prod([graph.scores[e] for e in path.edges])))
    walks = {tuple(graph.node_entity[graph.far[e]] for e in p.edges) for p in paths}
    assert ("F1", "X", "F2") in walks and ("F2", "X", "F1") in walks  # 3-hop walks through X are simple
    assert ("F1", "X", "F1") not in walks
    # only the given edges are walked
    hop1 = [e for e, d in enumerate(graph.layers) if d == 1]
    assert {len(p.edges) for p in simple_paths(graph, hop1)} == {1}


def film_graph(kg: EmbeddedKG, hops: int = 2) -> ExpandedGraph:
    scores = {("D", "directed", f): 0.9 for f in ("F1", "F2", "F3")}
    scores |= {t: 0.8 for t in FILMS if t[1] == "starring"}
    scores[("F3", "starring", "Z")] = 0.95
    scores[("D", "born_in", "P")] = 0.3
    return expand(kg, ["D"], by_triple(scores, default=0.05), hops=hops, tau_e=0.1)


def test_entities_a_relevant_edge_leads_on_from_are_intermediates_and_support_ranks_answers(film_kg: EmbeddedKG) -> None:
    graph = film_graph(film_kg)
    ranked, potential = rank_answers(graph, 0.7)
    assert sorted(graph.triples[e] for e in potential) == sorted(t for t in FILMS if t[1] != "born_in")
    # the films (0.9, but a 0.8+ edge leads on from each) are not answers; the actors are
    assert [a.entity for a in ranked] == ["X", "Z", "Y"]  # X by two films first, then by score: Z (0.855), Y (0.72)
    assert [a.support for a in ranked] == [2, 1, 1]
    assert ranked[0].pattern == (("directed", False), ("starring", False))
    assert ranked[1].score == pytest.approx(0.9 * 0.95)
    assert [graph.triples[e] for e in ranked[1].path.edges] == [("D", "directed", "F3"), ("F3", "starring", "Z")]
    by_score, _ = rank_answers(graph, 0.7, by_support=False)
    assert [a.entity for a in by_score] == ["Z", "X", "Y"]
    # ratio: answers scoring under ratio x best are left out (X and Y: 0.72 < 0.9 x 0.855)
    assert [a.entity for a in rank_answers(graph, 0.7, ratio=0.9)[0]] == ["Z"]


def test_statement_counts_rank_what_merged_remakes_share_first(tmp_path: Path) -> None:
    # two films titled T (as kb.txt lists remakes: two blocks, merged into one entity); both were written by W, the
    # 2011 one also by V, whom the scorer prefers
    remakes = [("T", "written_by", "W"), ("T", "written_by", "V"),  # 2011 block
               ("T", "written_by", "W"),  # 1940 block: the same statement again
               ("V", "directed", "A"), ("V", "directed", "B"), ("W", "directed", "A")]
    kg = small_kg(tmp_path / "kg", remakes, {e: e for e in ("T", "W", "V", "A", "B")})
    assert kg.statement_counts([("T", "written_by", "W"), ("T", "written_by", "V")]) == [2, 1]
    scores = {("T", "written_by", "V"): 0.95, ("T", "written_by", "W"): 0.9}
    graph = expand(kg, ["T"], by_triple(scores, default=0.05), hops=2, tau_e=0.1)
    by_score, _ = rank_answers(graph, 0.7)
    assert [a.entity for a in by_score] == ["V", "W"] and {a.records for a in by_score} == {1}
    ranked, _ = rank_answers(graph, 0.7, statement_counts=kg.statement_counts)
    assert [(a.entity, a.support, a.records) for a in ranked] == [("W", 1, 2), ("V", 1, 1)]
    assert ranked[0].score == pytest.approx(0.9)  # the score is the walk's, untouched
    # a by-score reading ignores the counts
    assert [a.entity for a in rank_answers(graph, 0.7, by_support=False, statement_counts=kg.statement_counts)[0]] \
        == ["V", "W"]
    # over two hops a walk counts the product of its edges' statements, and support (walks) still comes first: A is
    # reached through V (1 x 1) and through W (2 x 1), B through V only (1 x 1)
    scores |= {("V", "directed", "A"): 0.9, ("V", "directed", "B"): 0.97, ("W", "directed", "A"): 0.9}
    graph = expand(kg, ["T"], by_triple(scores, default=0.05), hops=2, tau_e=0.1)
    two_hop, _ = rank_answers(graph, 0.7, statement_counts=kg.statement_counts)
    assert [(a.entity, a.support, a.records) for a in two_hop] == [("A", 2, 3), ("B", 1, 1)]


def test_a_one_hop_question_reads_the_films_when_nothing_relevant_leads_on(film_kg: EmbeddedKG) -> None:
    scores = {("D", "directed", f): 0.9 for f in ("F1", "F2", "F3")}
    graph = expand(film_kg, ["D"], by_triple(scores, default=0.2), hops=2, tau_e=0.1)
    ranked, _ = rank_answers(graph, 0.7)
    assert sorted(a.entity for a in ranked) == ["F1", "F2", "F3"]
    assert {a.pattern for a in ranked} == {(("directed", False),)}


def test_a_pattern_prior_decides_between_the_films_and_what_leads_on_from_them(film_kg: EmbeddedKG) -> None:
    # the scorer reads "the films of D" (0.9) over their actors (0.2 on): a prior that says the question asks for
    # people (what an answer-type model gives) turns the reading to the longer pattern; a neutral prior changes nothing
    scores = {("D", "directed", f): 0.9 for f in ("F1", "F2", "F3")}
    graph = expand(film_kg, ["D"], by_triple(scores, default=0.2), hops=2, tau_e=0.1)
    asked: list[tuple] = []

    def people(pattern: tuple[tuple[str, bool], ...]) -> float:
        asked.append(pattern)
        return 1.0 if pattern[-1] == ("starring", False) else 0.05

    for rule in ("path", "pattern"):
        ranked, _ = rank_answers(graph, 0.7, within="expanded", continuation=rule, pattern_prior=people)
        assert {a.pattern for a in ranked} == {(("directed", False), ("starring", False))}, rule
        assert ranked and not {a.entity for a in ranked} & {"F1", "F2", "F3"}
        neutral, _ = rank_answers(graph, 0.7, within="expanded", continuation=rule, pattern_prior=lambda _: 1.0)
        plain, _ = rank_answers(graph, 0.7, within="expanded", continuation=rule)
        assert [a.entity for a in neutral] == [a.entity for a in plain] == ["F1", "F2", "F3"]
    assert len(asked) == len(set(asked)) * 2  # once per pattern and reading, not once per walk


def test_pattern_continuation_keeps_one_dead_end_film_from_making_the_films_the_answer(tmp_path: Path) -> None:
    # "who starred in D's films": F4 lists no actor, so nothing leads on from it. Read walk by walk, D -> F4 (0.9, no
    # continuation) beats every actor walk (0.6); read pattern by pattern, the films' pattern is penalised by what
    # leads on from its ends on average (0.6 at three of four), and the actors are the answer.
    triples = [("D", "directed", f) for f in ("F1", "F2", "F3", "F4")]
    triples += [("F1", "starring", "X"), ("F2", "starring", "Y"), ("F3", "starring", "Z")]
    kg = small_kg(tmp_path / "kg", triples, {e: f"name of {e}" for e in ("D", "F1", "F2", "F3", "F4", "X", "Y", "Z")})
    scores = {t: 0.9 for t in triples if t[1] == "directed"} | {t: 0.6 for t in triples if t[1] == "starring"}
    graph = expand(kg, ["D"], by_triple(scores, default=0.05), hops=2, tau_e=0.1)
    by_walk, _ = rank_answers(graph, 0.7, within="expanded", combine="min_last")
    assert by_walk[0].entity == "F4" and by_walk[0].pattern == (("directed", False),)
    by_pattern, _ = rank_answers(graph, 0.7, within="expanded", combine="min_last", continuation="pattern")
    assert sorted(a.entity for a in by_pattern) == ["X", "Y", "Z"]
    assert {a.pattern for a in by_pattern} == {(("directed", False), ("starring", False))}
    # with every film leading on, both rules agree
    scores[("F4", "starring", "X")] = 0.6
    kg2 = small_kg(tmp_path / "kg2", [*triples, ("F4", "starring", "X")],
                   {e: f"name of {e}" for e in ("D", "F1", "F2", "F3", "F4", "X", "Y", "Z")})
    graph2 = expand(kg2, ["D"], by_triple(scores, default=0.05), hops=2, tau_e=0.1)
    for rule in ("path", "pattern"):
        ranked, _ = rank_answers(graph2, 0.7, within="expanded", combine="min_last", continuation=rule)
        assert [a.entity for a in ranked] == ["X", "Y", "Z"]


def test_answerable_excludes_nameless_nodes(film_kg: EmbeddedKG) -> None:
    graph = film_graph(film_kg)
    asked: list[list[str]] = []

    def answerable(ids: list[str]) -> set[str]:
        asked.append(ids)
        return set(presentable(film_kg, ids))

    ranked, _ = rank_answers(graph, 0.7, answerable=answerable)
    assert [a.entity for a in ranked] == ["X", "Z"]
    assert "D" not in asked[0] and "Y" in asked[0]  # asked about the path ends, never about the seed


def test_when_nothing_passes_tau_p_the_whole_graph_is_read(film_kg: EmbeddedKG) -> None:
    graph = film_graph(film_kg)
    ranked, potential = rank_answers(graph, 0.99)
    assert potential == []
    whole, _ = rank_answers(graph, 0.0)
    assert [a.entity for a in ranked] == [a.entity for a in whole] == ["X", "Z", "Y"]
    # the propagated scores (not the initial ones) are what is read
    graph.scores[graph.triples.index(("F1", "starring", "Y"))] = 0.99
    assert [a.entity for a in rank_answers(graph, 0.7, by_support=False)[0]] == ["Y", "Z", "X"]
    assert rank_answers(expand(film_kg, ["nobody"], by_relation({}), hops=2), 0.7) == ([], [])


# ---------------------------------------------------------------------------------------------------------------------
# 6. gold walks
