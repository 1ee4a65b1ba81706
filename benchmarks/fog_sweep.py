"""FoG's knowledge retrieval capacity against its two thresholds (the paper's Sec. 4.5, Figure 5), on MetaQA dev.

For every tau_e of the grid each question's subgraph is expanded (hop budget L = 3, the method's default caps and
layered orientation) and propagated ONCE, then every tau_p of the grid is read off that same graph. Gold evidence is
:func:`kgqa.steps.foresight.training.gold_walk`: the (triple, layer, direction) edges on walks of the question's gold
relation chain from its topic to a gold answer. The metrics (ours: the paper names them but does not define them):

* H_path: share of questions whose potential subgraph (the edges re-scored above tau_p) holds at least one complete
  gold walk, topic to gold answer, every edge present at its own layer and direction.
* R_evid: recall of the gold-walk edges (layer-aware) in the potential subgraph, averaged over questions.
* P_prune: share of the scored candidate triples that are NOT on a gold walk and are not in the potential subgraph
  (pruned by tau_e at expansion or by tau_p after propagation), averaged over questions: the noise removed.
* A_1shot: share of questions whose potential subgraph reaches EVERY gold answer through gold-walk edges (every answer
  the gold chain reaches on the KG; answers the chain cannot reach are not held against it: their share is reported).

Questions: a seeded sample (``random.Random(seed).shuffle`` of each hop's dev file, then the first N: the same draw as
``kgqa eval --shuffle --seed``) of 1-, 2- and 3-hop dev. When the scorer was trained on MetaQA dev (its scorer.json
says so), the pool the sample is drawn from matters:

* ``heldout`` (what ``auto`` picks for such a scorer): only the questions its training held out for validation,
  re-drawn exactly as :func:`kgqa.steps.foresight.training.train_scorer` drew them (and checked against the validation
  numbers the scorer recorded): unseen questions of the templates it trained on.
* ``unseen``: every dev question the scorer did not train on (the held-out ones and those past a training ``--limit``;
  the files are grouped by template, so this can hold templates training never saw).
* ``all``: the whole dev split (in-sample for such a scorer).

    python benchmarks/fog_sweep.py --scorer /tmp/fog/scorer-v1 --kg /tmp/kgs/metaqa --data-dir ../shared/data

Writes ``benchmarks/results/fog_sweep.{json,md,png}`` (``--out-dir``, ``--name``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import inspect
import json
import os
import platform
import random
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kgqa.steps.foresight.graph import Caps, ExpandedGraph, expand
from kgqa.steps.foresight.training import GoldWalk, TrainingQuestion, gold_walk

ROOT = Path(__file__).resolve().parent
GRID = (0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9)
PAPER_POINT = (0.1, 0.7)
METRICS = ("H_path", "R_evid", "P_prune", "A_1shot")
DEFINITIONS = {
    "H_path": "share of questions whose potential subgraph (edges with propagated score > tau_p) contains at least one "
              "complete gold walk from a topic to a gold answer (every edge of the walk at its layer and direction)",
    "R_evid": "recall of the gold-walk edges (triple, layer, direction) in the potential subgraph, averaged over "
              "questions",
    "P_prune": "share of the scored candidate triples that are not on a gold walk and are not in the potential subgraph "
               "(cut by tau_e at expansion or by tau_p after propagation), averaged over questions; the pooled share "
               "over all questions is P_prune_pooled; P_prune_kept is the share of the non-gold edges the expansion "
               "kept that tau_p leaves out (tau_p's own pruning)",
    "A_1shot": "share of questions whose potential subgraph reaches every gold answer the gold chain reaches on the KG, "
               "through gold-walk edges only (the complete evidence in one round); A_1shot_strict counts every gold "
               "answer, reachable by the chain or not",
    "xpd (tau_p = none)": "the same readings over the whole expanded subgraph (every edge kept by tau_e): what the "
                          "expansion alone keeps, before tau_p",
}


# ---------------------------------------------------------------------------------------------------------------------
# Questions


@dataclass
class Pools:
    """What the scorer's training used of MetaQA dev (empty when it did not train on it or cannot be re-drawn)."""

    note: str
    validation: set[str] = field(default_factory=set)  # source ids training held out
    trained: set[str] = field(default_factory=set)  # source ids of every training question (validation included)
    questions: list[TrainingQuestion] = field(default_factory=list)  # in training's order

    @property
    def known(self) -> bool:
        return bool(self.trained)

    def held_out(self, source: str) -> bool:
        return source in self.validation

    def unseen(self, source: str) -> bool:
        return source in self.validation or source not in self.trained


def training_pools(meta: dict[str, Any], data_dir: str) -> Pools:
    """Re-draw the scorer's training questions and its validation share from its scorer.json ``trained_on``."""
    from kgqa.eval.gold_paths import training_questions

    trained = meta.get("trained_on")
    if not isinstance(trained, dict):
        return Pools("the scorer's scorer.json records no 'trained_on': its training questions are unknown")
    datasets = list(trained.get("datasets") or [])
    if trained.get("split") != "dev" or not any(d.startswith("metaqa") for d in datasets):
        return Pools(f"the scorer was trained on {datasets} {trained.get('split')}: MetaQA dev is out of sample")
    settings = trained.get("settings") or {}
    recorded = (trained.get("data") or {}).get("per_dataset") or {}
    data = None
    # `kgqa train fog --limit N` draws N per dataset, seeded by --seed when training_questions takes a seed
    sampled = {"seed": int(settings.get("seed", 0))} if "seed" in inspect.signature(training_questions).parameters \
        else {}
    for limit in dict.fromkeys((None, max(recorded.values(), default=None))):
        candidate = training_questions(datasets, "dev", data_dir=data_dir, limit=limit, **sampled)
        if candidate.per_dataset == recorded:
            data = candidate
            break
    if data is None:
        return Pools(f"cannot re-draw the training questions (recorded per dataset {recorded})")
    # as train_scorer draws them: its rng's first use is this shuffle
    order = list(range(len(data.questions)))
    random.Random(int(settings.get("seed", 0))).shuffle(order)
    share = float(settings.get("validation_share", 0.05))
    n_val = max(1, round(share * len(order))) if share > 0 and len(order) > 1 else 0
    return Pools(f"the scorer trained on {len(order)} questions ({recorded}, dev) and held out {n_val} of them "
                 f"(seed {settings.get('seed', 0)}, validation share {share})",
                 {data.questions[i].source for i in order[:n_val]}, {q.source for q in data.questions}, data.questions)


def _check_heldout(kg: Any, scorer: Any, labels: Any, meta: dict[str, Any], pools: Pools) -> dict[str, Any]:
    """Re-run the scorer's recorded validation (graph-mode answers on its first held-out questions) on the re-drawn set:
    equal numbers mean the held-out set is the one training used."""
    from kgqa.steps.foresight.training import validate_answers

    recorded = meta.get("validation") or {}
    questions = pools.questions
    ids = [i for i, q in enumerate(questions) if q.source in pools.validation]
    limit = int(recorded.get("questions") or 300)
    again = validate_answers(kg, scorer, labels, ids, questions, limit=limit)
    same = bool(recorded) and all(abs(float(recorded[k]) - float(again[k])) < 1e-6 for k in ("hit", "hits1", "f1"))
    return {"recorded": {k: recorded.get(k) for k in ("hit", "hits1", "f1", "questions")},
            "recomputed": {k: again[k] for k in ("hit", "hits1", "f1", "questions")}, "match": same}


def sample_questions(data_dir: str, hops: Sequence[int], per_hop: int, seed: int,
                     keep: Callable[[str], bool] | None = None) -> dict[int, list[TrainingQuestion]]:
    from kgqa.eval.gold_paths import training_questions

    out = {}
    for hop in hops:
        questions = training_questions([f"metaqa-{hop}hop"], "dev", data_dir=data_dir).questions
        random.Random(seed).shuffle(questions)
        if keep is not None:
            questions = [q for q in questions if keep(q.source)]
        out[hop] = questions[:per_hop]
    return out


# ---------------------------------------------------------------------------------------------------------------------
# One question


def _readings(graph: ExpandedGraph, layers: np.ndarray, gold: np.ndarray, keep: np.ndarray, walk: GoldWalk,
              answers: frozenset[str], depth: int, gold_scored: int) -> dict[str, Any]:
    """The metrics of one question over the edges ``keep`` (a bool mask over the graph's edges; ``layers`` the edges'
    layers, ``gold`` whether each edge is on a gold walk)."""
    n_pos = len(walk.positives)
    kept_gold = keep & gold
    recall = len({(graph.triples[e], int(layers[e]), graph.backward[e]) for e in np.flatnonzero(kept_gold)}) / n_pos
    nongold_scored = graph.scored - gold_scored
    nongold_kept = int((keep & ~gold).sum())
    nongold_xpd = int((~gold).sum())
    # complete gold walks: forward reachability from the seeds through kept gold edges, one layer at a time
    reached = {graph.find(s, 0) for s in graph.seeds} - {None}
    for d in range(1, depth + 1):
        step = np.flatnonzero(kept_gold & (layers == d))
        reached = {graph.far[e] for e in step.tolist() if graph.near[e] in reached}
        if not reached:
            break
    ends = {graph.node_entity[n] for n in reached}
    reachable_answers = walk.path_nodes.get(depth, set())
    return {
        "H_path": float(bool(ends & reachable_answers)),
        "R_evid": recall,
        "P_prune": None if nongold_scored <= 0 else 1.0 - nongold_kept / nongold_scored,
        # of the non-gold edges the expansion kept, the share tau_p leaves out (tau_p's own pruning)
        "P_prune_kept": None if nongold_xpd <= 0 else 1.0 - nongold_kept / nongold_xpd,
        "A_1shot": float(bool(reachable_answers) and reachable_answers <= ends),
        "A_1shot_strict": float(answers <= ends),
        "nongold_scored": nongold_scored,
        "nongold_kept": nongold_kept,
        "edges": int(keep.sum()),
    }


def sweep_question(kg: Any, scorer: Any, labels: Any, q: TrainingQuestion, grid_e: Sequence[float],
                   grid_p: Sequence[float], hops: int, caps: Caps) -> dict[str, Any] | None:
    walk = gold_walk(kg, q)
    if not walk.reached:
        return None
    depth = len(q.chain)
    base = scorer.scorer_for(labels, scorer.questions(labels, [q.text]))
    out: dict[str, Any] = {"source": q.source, "positives": len(walk.positives),
                           "answers_reachable": walk.path_nodes.get(depth, set()) >= q.answers, "per_tau_e": {}}
    for tau_e in grid_e:
        gold_scored = 0

        def score_batch(triples: list, layers: np.ndarray, backward: np.ndarray) -> Any:
            nonlocal gold_scored
            gold_scored += sum((t, int(d), bool(b)) in walk.positives
                               for t, d, b in zip(triples, layers.tolist(), backward.tolist(), strict=True))
            return base(triples, layers, backward)

        t0 = time.perf_counter()
        graph = expand(kg, q.topics, score_batch, hops=hops, tau_e=tau_e, caps=caps)
        t1 = time.perf_counter()
        scorer.propagate(graph)
        t2 = time.perf_counter()
        layers = np.asarray(graph.layers, dtype=np.int64)
        gold = np.fromiter(((t, d, b) in walk.positives
                            for t, d, b in zip(graph.triples, layers.tolist(), graph.backward, strict=True)),
                           dtype=bool, count=len(graph))
        scores = np.asarray(graph.scores, dtype=np.float64)
        row: dict[str, Any] = {
            "scored": graph.scored, "kept": len(graph), "gold_scored": gold_scored, "gold_kept": int(gold.sum()),
            "expand_s": t1 - t0, "propagate_s": t2 - t1, "cut": dict(graph.cut),
            "xpd": _readings(graph, layers, gold, np.ones(len(graph), dtype=bool), walk, q.answers, depth, gold_scored),
            "per_tau_p": {str(tau_p): _readings(graph, layers, gold, scores > tau_p, walk, q.answers, depth,
                                                gold_scored) for tau_p in grid_p},
        }
        out["per_tau_e"][str(tau_e)] = row
    return out


# ---------------------------------------------------------------------------------------------------------------------
# Aggregation


def _mean(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else None


def _aggregate(readings: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {k: _mean([r[k] for r in readings]) for k in (*METRICS, "A_1shot_strict", "P_prune_kept", "edges")}
    scored = sum(r["nongold_scored"] for r in readings)
    out["P_prune_pooled"] = None if scored <= 0 else 1.0 - sum(r["nongold_kept"] for r in readings) / scored
    out["n"] = len(readings)
    return out


def aggregate(per_question: dict[str, list[dict[str, Any]]], grid_e: Sequence[float],
              grid_p: Sequence[float]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(rows per (group, tau_e, tau_p) with the four metrics, rows per (group, tau_e) with the expansion's numbers)."""
    rows, expansion = [], []
    for group, results in per_question.items():
        for tau_e in grid_e:
            per_e = [r["per_tau_e"][str(tau_e)] for r in results]
            xpd = _aggregate([p["xpd"] for p in per_e])
            expansion.append({
                "group": group, "tau_e": tau_e, "n": len(per_e),
                "scored_mean": _mean([p["scored"] for p in per_e]), "kept_mean": _mean([p["kept"] for p in per_e]),
                "gold_candidate_share": _mean([p["gold_scored"] / max(r["positives"], 1)
                                               for p, r in zip(per_e, results, strict=True)]),
                "expand_s_mean": _mean([p["expand_s"] for p in per_e]),
                "propagate_s_mean": _mean([p["propagate_s"] for p in per_e]),
                "capped_questions": sum(1 for p in per_e if any(k != "below_tau_e" for k in p["cut"])),
                **{f"xpd_{k}": v for k, v in xpd.items() if k != "n"},
            })
            for tau_p in grid_p:
                agg = _aggregate([p["per_tau_p"][str(tau_p)] for p in per_e])
                rows.append({"group": group, "tau_e": tau_e, "tau_p": tau_p, **agg})
    return rows, expansion


# ---------------------------------------------------------------------------------------------------------------------
# Report


def _git() -> dict[str, Any]:
    def run(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10, cwd=ROOT.parent)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    status = run("status", "--porcelain", "--", "src")
    return {"commit": run("rev-parse", "HEAD"), "short": run("rev-parse", "--short", "HEAD"),
            "src_dirty": None if status is None else bool(status),
            "src_changes": [] if not status else status.splitlines()}


def _scorer_facts(path: Path, meta: dict[str, Any]) -> dict[str, Any]:
    trained = meta.get("trained_on") if isinstance(meta.get("trained_on"), dict) else None
    summary = meta.get("summary") or {}
    facts: dict[str, Any] = {"dir": str(path), "encoder": meta.get("encoder"), "net": meta.get("net")}
    if trained:
        facts["trained_on"] = {k: trained.get(k) for k in ("command", "datasets", "split", "kg", "encoder", "data",
                                                           "kgqa_commit", "seconds")}
        facts["trained_on"]["settings"] = trained.get("settings")
    else:
        facts["trained_on"] = None
        facts["settings"] = meta.get("settings")
    facts["summary"] = {k: summary.get(k) for k in ("questions", "validation_questions", "unreached", "train_triples",
                                                    "positives", "best_scorer_val_loss", "propagation")
                        if k in summary}
    facts["validation"] = meta.get("validation")
    return facts


def _pct(value: Any, digits: int = 1) -> str:
    return "-" if value is None else f"{100 * float(value):.{digits}f}"


def _find(rows: list[dict[str, Any]], group: str, tau_e: float, tau_p: float) -> dict[str, Any]:
    return next(r for r in rows if r["group"] == group and r["tau_e"] == tau_e and r["tau_p"] == tau_p)


def to_markdown(result: dict[str, Any]) -> str:
    rows, expansion = result["rows"], result["expansion"]
    grid_e, grid_p = result["grid"]["tau_e"], result["grid"]["tau_p"]
    groups = result["groups"]
    sample, scorer, git = result["sample"], result["scorer"], result["git"]
    dirty = " (src/ had uncommitted changes: " + ", ".join(git["src_changes"]) + ")" if git.get("src_dirty") else ""
    lines = [
        "# FoG knowledge retrieval capacity: tau_e x tau_p sweep on MetaQA dev",
        "",
        f"Measured {result['date']} on {result['machine']['cpus']} CPUs (load average {result['machine']['load']}), "
        f"kgqa commit `{git.get('short')}`{dirty}.",
        "",
        f"Command: `{result['command']}`",
        "",
        f"Questions: MetaQA dev, {sample['per_hop']} per hop (1, 2, 3-hop), seeded sample (seed {sample['seed']}: "
        "`random.Random(seed).shuffle` of each hop's dev file, then the first N; the files are grouped by template). "
        f"Pool: {sample['pool']} ({sample['pool_note']}). Evaluated: {sample['evaluated']}; left out (the gold chain "
        f"reaches no gold answer on the KG): {sample['unreached']}. Every gold answer reachable by the chain: "
        f"{_pct(sample['answers_reachable_share'])}% of the evaluated questions."
        + (f" Sampled questions by what training did with them: {sample['composition']}." if sample.get("composition")
           else ""),
        "",
    ]
    if sample.get("heldout_check"):
        check = sample["heldout_check"]
        lines += [f"Held-out check: the scorer's recorded validation (graph mode) {check['recorded']} re-computed on the "
                  f"re-drawn held-out set: {check['recomputed']} ({'match' if check['match'] else 'NO MATCH'}).", ""]
    trained = scorer.get("trained_on")
    lines += [f"Scorer: `{scorer['dir']}` (encoder {scorer.get('encoder')}).", ""]
    if trained:
        settings = trained.get("settings") or {}
        lines += [
            f"* trained on: {trained.get('datasets')} {trained.get('split')}, {trained.get('data')}, KG "
            f"`{trained.get('kg')}`, kgqa commit `{trained.get('kgqa_commit')}`, {trained.get('seconds')} s",
            f"* command: `{trained.get('command')}`",
            "* settings: " + ", ".join(f"{k} {v}" for k, v in settings.items()),
            f"* summary: {scorer.get('summary')}",
            f"* recorded validation (graph mode, tau_e 0.1, tau_p 0.7): {scorer.get('validation')}",
        ]
    else:
        lines.append("* trained on: not recorded in its scorer.json (a development scorer)")
    lines += ["", "Hop budget L = 3 for every question, layered orientation, the method's default caps (seed fan-out "
              "2000, fan-out 200, frontier 500). For each tau_e each question is expanded and propagated once; "
              "every tau_p is read off that graph.", "", "## Definitions (ours; the paper does not spell them out)", ""]
    lines += [f"* **{k}**: {v}." for k, v in DEFINITIONS.items()]
    tau_e0, tau_p0 = PAPER_POINT
    lines += ["", f"## The paper's point (tau_e = {tau_e0}, tau_p = {tau_p0})", "",
              "| questions | n | H_path | R_evid | P_prune | A_1shot | A_1shot strict | P_prune pooled | edges in P |",
              "|---|---|---|---|---|---|---|---|---|"]
    for g in groups:
        if tau_e0 in grid_e and tau_p0 in grid_p:
            r = _find(rows, g, tau_e0, tau_p0)
            lines.append(f"| {g} | {r['n']} | {_pct(r['H_path'])} | {_pct(r['R_evid'])} | {_pct(r['P_prune'], 2)} | "
                         f"{_pct(r['A_1shot'])} | {_pct(r['A_1shot_strict'])} | {_pct(r['P_prune_pooled'], 2)} | "
                         f"{r['edges']:.1f} |")
    lines += ["", "## Diagonal (tau_e = tau_p), as the paper's single-threshold plot", "",
              "| tau | " + " | ".join(f"{g} {m}" for g in groups for m in ("H", "R", "P", "A")) + " |",
              "|---|" + "---|" * (4 * len(groups))]
    for tau in [t for t in grid_e if t in grid_p]:
        cells = []
        for g in groups:
            r = _find(rows, g, tau, tau)
            cells += [_pct(r[m], 2 if m == "P_prune" else 1) for m in METRICS]
        lines.append(f"| {tau} | " + " | ".join(cells) + " |")
    lines += ["", "H = H_path, R = R_evid, P = P_prune, A = A_1shot (percent; P_prune with two decimals: nearly every "
              "scored candidate is noise and nearly all of it is cut).", "",
              "## Expansion alone (per tau_e, all questions; xpd = the whole expanded subgraph, before tau_p)", "",
              "| tau_e | triples scored | edges kept | gold candidates scored / gold edges | xpd H_path | xpd R_evid "
              "| xpd P_prune | xpd A_1shot | questions hitting a cap | expand s/q | propagate s/q |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for e in (x for x in expansion if x["group"] == "overall"):
        lines.append(f"| {e['tau_e']} | {e['scored_mean']:.0f} | {e['kept_mean']:.1f} | "
                     f"{_pct(e['gold_candidate_share'])}% | {_pct(e['xpd_H_path'])} | {_pct(e['xpd_R_evid'])} | "
                     f"{_pct(e['xpd_P_prune'], 2)} | {_pct(e['xpd_A_1shot'])} | {e['capped_questions']} | "
                     f"{e['expand_s_mean']:.3f} | {e['propagate_s_mean']:.3f} |")
    lines += ["", "## Full grid, all questions (percent; a table per tau_e, a row per tau_p)", ""]
    for tau_e in grid_e:
        lines += [f"### tau_e = {tau_e}", "", "| tau_p | H_path | R_evid | P_prune | A_1shot | A_1shot strict | "
                  "P_prune pooled | P_prune of kept (tau_p alone) | edges in P |", "|---|---|---|---|---|---|---|---|---|"]
        for tau_p in grid_p:
            r = _find(rows, "overall", tau_e, tau_p)
            mark = " (paper)" if (tau_e, tau_p) == PAPER_POINT else ""
            lines.append(f"| {tau_p}{mark} | {_pct(r['H_path'])} | {_pct(r['R_evid'])} | {_pct(r['P_prune'], 2)} | "
                         f"{_pct(r['A_1shot'])} | {_pct(r['A_1shot_strict'])} | {_pct(r['P_prune_pooled'], 2)} | "
                         f"{_pct(r['P_prune_kept'])} | {r['edges']:.1f} |")
        lines.append("")
    lines += ["Per-hop grids are in the JSON (`rows`, group `1hop`/`2hop`/`3hop`); the plot is "
              f"`{result['plot']}`.", ""]
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    rows = result["rows"]
    grid_e, grid_p = result["grid"]["tau_e"], result["grid"]["tau_p"]
    diagonal = [t for t in grid_e if t in grid_p]
    fig, axes = plt.subplots(1, 3, figsize=(17, 5.2), gridspec_kw={"width_ratios": [1.25, 1, 1]})
    ax = axes[0]
    colours = dict(zip(METRICS, ("tab:blue", "tab:orange", "tab:green", "tab:red"), strict=True))
    for m in METRICS:
        ax.plot(diagonal, [100 * (_find(rows, "overall", t, t)[m] or 0) for t in diagonal], marker="o",
                color=colours[m], label=m)
        for g, style in (("1hop", ":"), ("2hop", "-."), ("3hop", "--")):
            if g in result["groups"]:
                ax.plot(diagonal, [100 * (_find(rows, g, t, t)[m] or 0) for t in diagonal], linestyle=style,
                        color=colours[m], alpha=0.35, linewidth=1)
    ax.plot(diagonal, [100 * (_find(rows, "overall", t, t)["P_prune_kept"] or 0) for t in diagonal], marker=".",
            color=colours["P_prune"], linestyle="--", label="P_prune of the kept edges (tau_p's own pruning)")
    if PAPER_POINT[0] in grid_e and PAPER_POINT[1] in grid_p:
        paper = _find(rows, "overall", *PAPER_POINT)
        for m in METRICS:
            ax.scatter([PAPER_POINT[1]], [100 * (paper[m] or 0)], marker="*", s=180, color=colours[m],
                       edgecolor="black", zorder=5)
        ax.scatter([], [], marker="*", s=120, color="white", edgecolor="black",
                   label=f"paper's point (tau_e {PAPER_POINT[0]}, tau_p {PAPER_POINT[1]}), at x = tau_p")
    ax.plot([], [], color="grey", linestyle=":", label="thin: 1-hop (:), 2-hop (-.), 3-hop (--)")
    ax.set_xlabel("threshold tau_e = tau_p")
    ax.set_ylabel("percent")
    ax.set_ylim(-2, 102)
    ax.set_title(f"Diagonal, MetaQA dev ({result['sample']['evaluated']} questions)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7.5, loc="lower left")
    for ax, metric in zip(axes[1:], ("H_path", "A_1shot"), strict=True):
        data = np.array([[100 * (_find(rows, "overall", e, p)[metric] or 0) for p in grid_p] for e in grid_e])
        image = ax.imshow(data, origin="lower", cmap="viridis", vmin=0, vmax=100, aspect="auto")
        ax.set_xticks(range(len(grid_p)), [str(p) for p in grid_p])
        ax.set_yticks(range(len(grid_e)), [str(e) for e in grid_e])
        ax.set_xlabel("tau_p (potential subgraph)")
        ax.set_ylabel("tau_e (expansion)")
        ax.set_title(f"{metric} (%), all questions")
        for i in range(len(grid_e)):
            for j in range(len(grid_p)):
                ax.text(j, i, f"{data[i, j]:.0f}", ha="center", va="center", fontsize=8,
                        color="white" if data[i, j] < 60 else "black")
        if PAPER_POINT[0] in grid_e and PAPER_POINT[1] in grid_p:
            i, j = grid_e.index(PAPER_POINT[0]), grid_p.index(PAPER_POINT[1])
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2.2))
        fig.colorbar(image, ax=ax, fraction=0.046)
    fig.suptitle("FoG retrieval capacity vs thresholds (red box / stars: the paper's tau_e 0.1, tau_p 0.7)")
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------------------------------


def _grid(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scorer", default="/tmp/fog/scorer-v1", help="a trained FoG scorer directory")
    parser.add_argument("--kg", default="/tmp/kgs/metaqa", help="embedded import of MetaQA kb.txt")
    parser.add_argument("--data-dir", default=os.environ.get("KGQA_DATA_DIR", "../shared/data"))
    parser.add_argument("--per-hop", type=int, default=100, help="questions per hop (1, 2, 3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pool", choices=("auto", "heldout", "unseen", "all"), default="auto",
                        help="heldout: the questions the scorer's training held out; unseen: every question it did not "
                             "train on; all: the whole dev split; auto: heldout when the scorer trained on MetaQA dev, "
                             "else all")
    parser.add_argument("--tau-e", default=",".join(map(str, GRID)))
    parser.add_argument("--tau-p", default=",".join(map(str, GRID)))
    parser.add_argument("--hops", type=int, default=3, help="hop budget L of the expansion")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "results")
    parser.add_argument("--name", default="fog_sweep")
    args = parser.parse_args()

    from kgqa.artifacts import ArtifactStore
    from kgqa.kg import open_kg
    from kgqa.steps.foresight.scorer import ForesightScorer, LabelVectors
    from kgqa.text import load_embedder

    started = time.perf_counter()
    grid_e, grid_p = sorted(_grid(args.tau_e)), sorted(_grid(args.tau_p))
    scorer = ForesightScorer.load(args.scorer)
    meta = scorer.meta
    kg = open_kg(args.kg)
    try:
        embedder = load_embedder(scorer.encoder)
        labels = LabelVectors(kg, embedder, ArtifactStore().get("label-embeddings", kg=kg, embedder=embedder))
        pools = training_pools(meta, args.data_dir)
        if args.pool in ("heldout", "unseen") and not pools.known:
            parser.error(f"--pool {args.pool}: {pools.note}")
        pool_name = args.pool if args.pool != "auto" else "heldout" if pools.known else "all"
        check, keep, note = None, None, pools.note
        if pool_name == "heldout":
            check = _check_heldout(kg, scorer, labels, meta, pools)
            print(f"held-out check: {check}", file=sys.stderr, flush=True)
            keep, note = pools.held_out, "the questions training held out; " + note
        elif pool_name == "unseen":
            keep = pools.unseen
            note = "every question the scorer did not train on; " + note
        elif pools.known:
            note = "IN-SAMPLE for most questions: " + note
        chosen = sample_questions(args.data_dir, (1, 2, 3), args.per_hop, args.seed, keep)
        sampled = [q.source for qs in chosen.values() for q in qs]
        composition = {"validation": sum(s in pools.validation for s in sampled),
                       "trained_on": sum(s in pools.trained and s not in pools.validation for s in sampled),
                       "not_in_training": sum(s not in pools.trained for s in sampled)} if pools.known else None
        per_question: dict[str, list[dict[str, Any]]] = {}
        unreached: dict[str, int] = {}
        for hop, questions in chosen.items():
            t0 = time.perf_counter()
            results = []
            for q in questions:
                r = sweep_question(kg, scorer, labels, q, grid_e, grid_p, args.hops, Caps())
                if r is None:
                    unreached[f"{hop}hop"] = unreached.get(f"{hop}hop", 0) + 1
                else:
                    results.append(r)
            per_question[f"{hop}hop"] = results
            print(f"{hop}-hop: {len(results)} questions in {time.perf_counter() - t0:.1f} s", file=sys.stderr,
                  flush=True)
    finally:
        kg.close()
    per_question["overall"] = [r for g in ("1hop", "2hop", "3hop") for r in per_question[g]]
    rows, expansion = aggregate(per_question, grid_e, grid_p)
    everyone = per_question["overall"]
    args.out_dir.mkdir(parents=True, exist_ok=True)
    png = args.out_dir / f"{args.name}.png"
    result = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                    "load": ", ".join(f"{x:.2f}" for x in os.getloadavg())},
        "command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
        "git": _git(),
        "scorer": _scorer_facts(Path(args.scorer), meta),
        "sample": {"dataset": "MetaQA dev", "per_hop": args.per_hop, "seed": args.seed, "pool": pool_name,
                   "pool_note": note, "heldout_check": check, "composition": composition,
                   "evaluated": len(everyone), "unreached": unreached,
                   "answers_reachable_share": _mean([float(r["answers_reachable"]) for r in everyone]),
                   "sources": {g: [r["source"] for r in per_question[g]] for g in ("1hop", "2hop", "3hop")}},
        "settings": {"hops": args.hops, "orientation": "layered", "caps": asdict(Caps()), "propagation": "directed"},
        "grid": {"tau_e": grid_e, "tau_p": grid_p},
        "paper_point": {"tau_e": PAPER_POINT[0], "tau_p": PAPER_POINT[1]},
        "groups": ["overall", "1hop", "2hop", "3hop"],
        "definitions": DEFINITIONS,
        "rows": rows,
        "expansion": expansion,
        "diagonal": [r for r in rows if r["tau_e"] == r["tau_p"]],
        "paper": [r for r in rows if (r["tau_e"], r["tau_p"]) == PAPER_POINT],
        "plot": png.name,
        "seconds": round(time.perf_counter() - started, 1),
    }
    (args.out_dir / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (args.out_dir / f"{args.name}.md").write_text(to_markdown(result), encoding="utf-8")
    plot(result, png)
    for r in result["paper"]:
        print(f"{r['group']}: " + ", ".join(f"{m} {_pct(r[m])}" for m in METRICS))
    print(f"wrote {args.out_dir / args.name}.{{json,md,png}} ({result['seconds']} s)")


if __name__ == "__main__":
    main()
