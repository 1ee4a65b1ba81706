"""Phase 2 of training: the propagation layers and the scoring MLP re-score every edge of expanded subgraphs labelled by
the gold walks (the encoder frozen)."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kgqa.datasets.gold_chains import TrainingQuestion
from kgqa.kg.base import KnowledgeGraph
from kgqa.methods.fog.training.examples import GoldWalk
from kgqa.methods.fog.training.scorer_phase import BestEpoch, Progress
from kgqa.methods.fog.training.settings import TrainSettings
from kgqa.methods.fog.training.validation import validate_answers
from kgqa.steps.foresight.graph import Caps, ExpandedGraph, expand
from kgqa.steps.foresight.scorer import ForesightScorer, LabelVectors


@dataclass
class _Graph:
    z: Any
    near: Any
    far: Any
    depth: Any
    heads: Any
    tails: Any
    labels: Any
    nodes: int


def weighted_mean(torch: Any, per_edge: Any, graph_of_edge: Any, graphs: int, weighting: str) -> Any:
    """The mean of ``per_edge`` losses over edges (``weighting="edge"``) or over subgraphs (``"question"``: each
    subgraph's mean edge loss, ``graph_of_edge`` giving each edge's subgraph in ``range(graphs)``)."""
    if weighting == "edge":
        return per_edge.mean()
    sums = torch.zeros(graphs, dtype=per_edge.dtype).index_add(0, graph_of_edge, per_edge)
    sizes = torch.zeros(graphs, dtype=per_edge.dtype).index_add(0, graph_of_edge, torch.ones_like(per_edge))
    return (sums / sizes.clamp(min=1)).mean()


def _labelled_graph(torch: Any, kg: KnowledgeGraph, question: TrainingQuestion, walk: GoldWalk, labels: LabelVectors,
                    scorer: ForesightScorer, settings: TrainSettings) -> _Graph | None:
    qv = scorer.questions(labels, [question.text])
    graph: ExpandedGraph = expand(kg, question.topics, scorer.scorer_for(labels, qv), hops=settings.hops,
                                  tau_e=settings.tau_e, caps=Caps())
    if not len(graph):
        return None
    z = torch.cat([p[torch.from_numpy(r)] for p, r in graph.payloads if len(r)])
    layers = graph.layers
    y = [1.0 if (t, d, b) in walk.positives else 0.0
         for t, d, b in zip(graph.triples, layers, graph.backward, strict=True)]
    heads, tails = graph.head_tail_nodes()
    return _Graph(z.detach(), torch.tensor(graph.near), torch.tensor(graph.far), torch.tensor(layers),
                  torch.tensor(heads), torch.tensor(tails), torch.tensor(y), len(graph.node_entity))


def train_propagation(torch: Any, kg: KnowledgeGraph, questions: Sequence[TrainingQuestion], walks: dict[int, GoldWalk],
                       labels: LabelVectors, scorer: ForesightScorer, train_ids: list[int], val_ids: list[int],
                       settings: TrainSettings, history: list[dict[str, Any]], say: Progress, bar: bool,
                       rng: random.Random) -> dict[str, Any]:
    net = scorer.net
    reached_train = [i for i in train_ids if walks[i].reached]
    reached_val = [i for i in val_ids if walks[i].reached]
    n_val = min(len(reached_val), max(50, settings.propagation_questions // 10))
    chosen = rng.sample(reached_train, min(len(reached_train), settings.propagation_questions))
    # a random sample: the ids are sorted, so the first ones would all be of the first dataset (MetaQA 1-hop), whose
    # loss falls as the deeper hops' rises, and early stopping would then keep the untrained propagation
    chosen_val = rng.sample(reached_val, n_val)
    say(f"expanding {len(chosen)} training and {len(chosen_val)} validation subgraphs with the phase-1 scorer")
    net.eval()
    build: Any = chosen + chosen_val
    if bar:
        from tqdm import tqdm

        build = tqdm(build, desc="subgraphs", unit="q", mininterval=2.0)
    graphs: dict[int, _Graph] = {}
    total, started = len(chosen) + len(chosen_val), time.monotonic()
    every = max(1, math.ceil(total / 10))
    for done, i in enumerate(build, 1):
        g = _labelled_graph(torch, kg, questions[i], walks[i], labels, scorer, settings)
        if g is not None and float(g.labels.sum()) > 0:
            graphs[i] = g
        if not bar and (done % every == 0 or done == total):  # a log has no bar: ten lines, each with time left
            spent = time.monotonic() - started
            say(f"expanded {done} of {total} subgraphs ({spent:.0f} s; about {spent / done * (total - done):.0f} s "
                "left)")
    train_graphs = [graphs[i] for i in chosen if i in graphs]
    val_graphs = [graphs[i] for i in chosen_val if i in graphs]
    edges = sum(int(g.labels.shape[0]) for g in train_graphs)
    say(f"{len(train_graphs)} training subgraphs ({edges} edges), {len(val_graphs)} validation subgraphs")
    from kgqa.steps.foresight.model import PROPAGATION_PHASE_PARAMETERS

    trainable = [p for name, p in net.named_parameters() if name.startswith(PROPAGATION_PHASE_PARAMETERS)]
    optimiser = torch.optim.AdamW(trainable, lr=settings.propagation_lr or settings.lr, betas=settings.betas,
                                  weight_decay=settings.weight_decay)

    def batch_loss(batch: list[_Graph]) -> tuple[Any, Any, Any, int]:
        """The batch's loss (a mean over edges or over subgraphs, ``propagation_weighting``), logits, labels and the
        number of units the loss is a mean over (edges or subgraphs), to weigh it in an epoch's mean."""
        offset, parts = 0, {k: [] for k in ("z", "near", "far", "depth", "heads", "tails", "labels", "graph")}
        for k, g in enumerate(batch):
            parts["z"].append(g.z)
            parts["depth"].append(g.depth)
            parts["labels"].append(g.labels)
            parts["graph"].append(torch.full((int(g.labels.shape[0]),), k, dtype=torch.long))
            for key in ("near", "far", "heads", "tails"):
                parts[key].append(getattr(g, key) + offset)
            offset += g.nodes
        cat = {k: torch.cat(v) for k, v in parts.items()}
        h = net.propagate(cat["z"], cat["near"], cat["far"], cat["depth"], offset)
        logits = net.rescore(cat["z"], cat["heads"], cat["tails"], h)
        initial = net.score(cat["z"])
        per_edge = (torch.nn.functional.binary_cross_entropy_with_logits(logits, cat["labels"], reduction="none")
                    + torch.nn.functional.binary_cross_entropy_with_logits(initial, cat["labels"], reduction="none"))
        loss = weighted_mean(torch, per_edge, cat["graph"], len(batch), settings.propagation_weighting)
        units = len(batch) if settings.propagation_weighting == "question" else len(per_edge)
        return loss, logits, cat["labels"], units

    def evaluate(graph_list: list[_Graph]) -> dict[str, float]:
        net.eval()
        total, weight, n, right = 0.0, 0, 0, 0
        with torch.no_grad():
            for lo in range(0, len(graph_list), settings.graph_batch):
                loss, logits, y, units = batch_loss(graph_list[lo:lo + settings.graph_batch])
                total += float(loss) * units
                weight += units
                n += len(y)
                right += int(((logits > 0).float() == y).sum())
        return {"loss": total / max(weight, 1), "accuracy": right / max(n, 1)}

    by_answers = settings.propagation_select == "answers"

    def validate() -> dict[str, float]:
        """Validation loss and accuracy, and with answers choosing, graph-mode hit and Hits@1."""
        val_m = evaluate(val_graphs)
        if by_answers:
            answers = validate_answers(kg, scorer, labels, chosen_val, questions)
            val_m |= {"hit": answers["hit"], "hits1": answers["hits1"]}
        return val_m

    def key(val_m: dict[str, float]) -> tuple[float, ...]:
        return (-val_m["hit"], -val_m["hits1"], val_m["loss"]) if by_answers else (val_m["loss"],)

    before = validate() if val_graphs else {}
    best = BestEpoch(net, settings.patience, key(before) if val_graphs else (math.inf,))
    if by_answers and val_graphs:
        say(f"before propagation: validation loss {before['loss']:.4f}, graph-mode hit {before['hit']:.2f}, "
            f"Hits@1 {before['hits1']:.2f} on {len(chosen_val)} questions")
    for epoch in range(1, settings.propagation_epochs + 1):
        t0 = time.perf_counter()
        net.train()
        order = list(range(len(train_graphs)))
        rng.shuffle(order)
        total, n = 0.0, 0
        for lo in range(0, len(order), settings.graph_batch):
            batch = [train_graphs[i] for i in order[lo:lo + settings.graph_batch]]
            loss, _, _, units = batch_loss(batch)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total += float(loss.detach()) * units
            n += units
        val_m = validate() if val_graphs else {"loss": math.nan, "accuracy": math.nan}
        row = {"phase": "propagation", "epoch": epoch, "train_loss": total / max(n, 1), "val_loss": val_m["loss"],
               "val_accuracy": val_m["accuracy"], "seconds": time.perf_counter() - t0}
        answers = ""
        if by_answers and val_graphs:
            row |= {"val_hit": val_m["hit"], "val_hits1": val_m["hits1"]}
            answers = f", graph-mode hit {val_m['hit']:.2f}, Hits@1 {val_m['hits1']:.2f}"
        history.append(row)
        say(f"propagation epoch {epoch}: train loss {row['train_loss']:.4f}, validation loss {val_m['loss']:.4f}, "
            f"validation accuracy {val_m['accuracy']:.4f}{answers} ({row['seconds']:.0f} s)")
        if best.update(key(val_m) if val_graphs else (math.nan,), bool(val_graphs)):
            say(f"early stop after propagation epoch {epoch}")
            break
    best_key = best.restore()
    net.eval()
    summary = {"train_graphs": len(train_graphs), "validation_graphs": len(val_graphs), "train_edges": edges,
               "val_loss_before": before.get("loss"), "val_loss_best": best_key[-1],
               "selected_by": settings.propagation_select}
    if by_answers and val_graphs:
        summary |= {"val_hit_before": before["hit"], "val_hits1_before": before["hits1"],
                    "val_hit_best": -best_key[0], "val_hits1_best": -best_key[1]}
    return summary
