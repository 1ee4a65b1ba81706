"""FoG benchmark: training time, foresight-scorer throughput and per-question graph-mode cost, on MetaQA and on a
generated 1M-triple KG.

Run (see benchmarks/README.md)::

    python benchmarks/fog_bench.py                     # every measurement, defaults sized for a 2-core machine
    python benchmarks/fog_bench.py --only throughput,metaqa --questions 20 --out /tmp/fog-bench   # a quick look

Measurements (each a section of benchmarks/results/fog_bench.json and a table of fog_bench.md):

1. ``train``: the ``label-embeddings`` artifact of the MetaQA KG built into a temporary ArtifactStore (cold cache;
   labels/s), then ``train_scorer`` on a fixed subset (the first ``--train-questions`` MetaQA dev questions per hop with
   a gold chain), one scorer epoch and one propagation epoch, settings otherwise TrainSettings' defaults (learning rate
   the CLI's 1e-3; ``--propagation-questions`` bounds the subgraphs phase 2 expands): seconds and triples/s per epoch,
   and the phases around them (gold walks and sampling, subgraph expansion), from the progress messages' timestamps.
2. ``throughput``: ``ForesightScorer.score_triples`` on batches of random MetaQA triples (``--batches``): triples/s with
   the label lookup, the label lookup alone and the network alone (median of ``--repeats`` after a warm-up), plus the
   network at 1 thread for comparison.
3. ``metaqa``: graph mode per question for ``--questions`` dev questions per hop (seeded sample): (a) question
   encoding, (b) expansion, (c) ``scorer.propagate`` (propagation + re-scoring), (d) answer ranking, all as FoG's graph
   mode reads (``READING``: L=3, its tau_e and tau_p, default Caps; ``--hops``, ``--tau-e``, ``--tau-p`` change them);
   median and p90 per hop, triples scored and kept, and the total against the 0.2 s target. Hits@1 / F1 are printed
   as a sanity check, not as an evaluation. ``--scorer`` may be an ensemble directory (``kgqa train ensemble``).
4. ``kg1m``: a generated KG (benchmarks/kg_gen.py, ``--kg1m-triples``; generic schema, a name for every entity and CVT,
   hubs with 10k+ edges) built into a temporary embedded store; the same scorer, a fixed question text, ``--kg1m-seeds``
   seeds (half uniform over entities with an edge, half degree-weighted, interleaved). Labels are embedded on the fly
   (LabelVectors without a table; ``--kg1m-labels table`` builds a label table instead, which at 1M labels takes
   longer than the run's budget on 2 cores). Pass 1 (cold label cache) runs seeds until ``--kg1m-budget-s`` is spent;
   pass 2 re-runs the same seeds with every label in the cache (what a label table gives). Reports the per-question
   times, labels embedded, and what the hub caps cut.

The machine's facts, the command, the git commit, torch's thread count and the load average (at the start, around each
measurement, at the end) are recorded: times on a shared 2-core machine depend on what else runs. Next to wall times the
process CPU time is given (all threads), which load inflates less.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE))  # kg_gen next to this file, also when run from elsewhere

SCORER_CANDIDATES = (Path("/tmp/fog/scorer-v1"), Path("/tmp/fog/med2-model"))
TARGET_S = 0.2  # graph-mode seconds per question (MetaQA)
HUB_DEGREE = 1000  # a seed with at least this many edges counts as a hub in the kg1m report
DEFAULT_QUESTION_1M = "Who founded the company that employs this person?"
SECTIONS = ("train", "throughput", "metaqa", "kg1m")


def log(message: str) -> None:
    print(f"[fog_bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def pct(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if len(values) else None


def summary(values: Sequence[float]) -> dict[str, float | None]:
    vals = [float(v) for v in values]
    return {"median": pct(vals, 50), "p90": pct(vals, 90), "mean": statistics.fmean(vals) if vals else None,
            "max": max(vals) if vals else None, "n": len(vals)}


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


class Clock:
    """Wall and process-CPU seconds of a block."""

    def __enter__(self) -> Clock:
        self.wall0, self.cpu0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.wall = time.perf_counter() - self.wall0
        self.cpu = time.process_time() - self.cpu0


class CountingEmbedder:
    """An embedder that counts the texts it embeds and the seconds it spends (what on-the-fly labels cost)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.texts, self.seconds = 0, 0.0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        started = time.perf_counter()
        try:
            return self.inner.embed(texts)
        finally:
            self.seconds += time.perf_counter() - started
            self.texts += len(texts)

    def embed_tokens(self, texts: Sequence[str]) -> list[np.ndarray]:
        return self.inner.embed_tokens(texts)


# ---------------------------------------------------------------------------------------------------------------------
# Machine facts


def machine_facts(threads: int) -> dict[str, Any]:
    import torch

    cpu = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = 0
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = int(line.split()[1]) * 1024
    nproc = None
    with contextlib.suppress(Exception):
        nproc = int(subprocess.run(["nproc"], capture_output=True, text=True, check=False).stdout.strip())
    commit = None
    with contextlib.suppress(Exception):
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=False).stdout.strip() or None
    dirty = None
    with contextlib.suppress(Exception):
        dirty = bool(subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                                    capture_output=True, text=True, check=False).stdout.strip())
    versions = {}
    for package in ("torch", "numpy", "sentence-transformers", "transformers", "kgqa"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[package] = metadata.version(package)
    return {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "nproc": nproc,
            "cpu_count": os.cpu_count(), "cpu_model": cpu, "memory_gb": round(mem / 2**30, 1),
            "python": platform.python_version(), "platform": platform.platform(), "versions": versions,
            "git_commit": commit, "git_dirty": dirty, "torch_threads_requested": threads,
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY") or "default (unset)",
            "torch_threads": torch.get_num_threads(), "torch_interop_threads": torch.get_num_interop_threads(),
            "loadavg_start": loadavg()}


# ---------------------------------------------------------------------------------------------------------------------
# Shared set-up


class Env:
    """What the measurements share: the MetaQA KG, the embedder, the scorer, the label vectors."""

    def __init__(self, args: argparse.Namespace) -> None:
        import torch

        from kgqa.kg import open_kg
        from kgqa.steps.foresight.scorer import load_scorer
        from kgqa.text import load_embedder

        self.args = args
        self.torch = torch
        with Clock() as c:
            self.kg = open_kg(str(args.kg))
        self.kg_open_s = c.wall
        with Clock() as c:
            self.scorer = load_scorer(args.scorer)  # a scorer or an ensemble directory
        self.scorer_load_s = c.wall
        with Clock() as c:
            self.embedder = load_embedder(self.scorer.encoder)
        self.embedder_load_s = c.wall
        self.threads()  # the embedder sets torch's thread count when it loads
        self.table: Any = None
        self.table_source = ""
        self._labels: Any = None

    def threads(self, n: int | None = None) -> None:
        self.torch.set_num_threads(n or self.args.threads)

    def labels(self) -> Any:
        """MetaQA label vectors: the table the train section built (cold), else the default store's (built if absent)."""
        from kgqa.artifacts import ArtifactStore
        from kgqa.steps.foresight.scorer import LabelVectors

        if self._labels is None:
            if self.table is None:
                with Clock() as c:
                    self.table = ArtifactStore().get("label-embeddings", kg=self.kg, embedder=self.embedder)
                self.table_source = f"default artifact store ({c.wall:.1f} s to get)"
                self.threads()
            self._labels = LabelVectors(self.kg, self.embedder, self.table)
        return self._labels

    def close(self) -> None:
        self.kg.close()


def scorer_default() -> Path:
    for path in SCORER_CANDIDATES:
        if (path / "scorer.json").is_file() and (path / "weights.pt").is_file():
            return path
    return SCORER_CANDIDATES[-1]


def metaqa_texts(item: dict[str, Any]) -> str:
    return item["question"].replace("[", "").replace("]", "")


# ---------------------------------------------------------------------------------------------------------------------
# 1. Training time


def bench_train(env: Env) -> dict[str, Any]:
    from kgqa.artifacts import ArtifactStore
    from kgqa.datasets.gold_chains import training_questions
    from kgqa.methods.fog.training import TrainSettings, train_scorer
    from kgqa.steps.foresight.model import NetSpec
    from kgqa.steps.foresight.scorer import LabelVectors

    args = env.args
    out: dict[str, Any] = {"loadavg_before": loadavg()}
    if args.no_label_build:
        out["label_build"] = None
    else:
        root = Path(tempfile.mkdtemp(prefix="fog-bench-artifacts-"))
        try:
            log(f"building the label-embeddings artifact of {args.kg} into {root} (cold)")
            with Clock() as c:
                table = ArtifactStore(root=root).get("label-embeddings", kg=env.kg, embedder=env.embedder)
            env.threads()
            out["label_build"] = {"labels": len(table), "seconds": c.wall, "cpu_seconds": c.cpu,
                                  "labels_per_s": len(table) / c.wall, "embedder": env.embedder.name,
                                  "loadavg_after": loadavg()}
            # the vectors are memory-mapped: load them into memory so the temporary store can go
            table.matrix = np.array(table.matrix)
            env.table, env.table_source = table, "built cold by the train section"
            log(f"{len(table)} labels in {c.wall:.1f} s ({len(table) / c.wall:.0f} labels/s)")
        finally:
            shutil.rmtree(root, ignore_errors=True)
    labels: LabelVectors = env.labels()

    datasets = [f"metaqa-{h}hop" for h in (1, 2, 3)]
    with Clock() as c:
        data = training_questions(datasets, "dev", limit=args.train_questions, data_dir=str(args.data_dir))
    out["data"] = data.describe() | {"load_s": c.wall}
    settings = TrainSettings(lr=1e-3, epochs=1, propagation_epochs=1, propagation_questions=args.propagation_questions,
                             seed=args.seed)
    out["settings"] = settings.to_dict()
    spec = NetSpec(input_dim=int(env.embedder.dim))
    out["net"] = spec.to_dict()
    events: list[tuple[float, str]] = []
    started = time.perf_counter()

    def progress(message: str) -> None:
        events.append((time.perf_counter() - started, message))
        log(f"train: {message}")

    log(f"train_scorer on {len(data.questions)} questions ({data.per_dataset}), 1 + 1 epochs")
    with Clock() as c:
        result = train_scorer(env.kg, data.questions, labels, settings=settings, net_spec=spec,
                              encoder=env.embedder.name, progress=progress)
    env.threads()
    s = result.summary
    history = result.history
    scorer_rows = [r for r in history if r["phase"] == "scorer"]
    prop_rows = [r for r in history if r["phase"] == "propagation"]

    def at(prefix: str) -> float | None:
        return next((t for t, m in events if m.startswith(prefix)), None)

    t_walks, t_tokens = at("gold walks"), at("question token vectors")
    t_epoch1, t_expand = at("scorer epoch 1"), at("expanding ")
    t_graphs, t_prop1 = at(f"{s['propagation'].get('train_graphs')} training subgraphs"), at("propagation epoch 1")
    phases = {
        "gold walks + negative sampling": _span(t_walks, t_tokens),
        "question tokens + example tensors + scorer epoch 1": _span(t_tokens, t_epoch1),
        "expanding the propagation subgraphs (phase-1 scorer)": _span(t_expand, t_graphs),
        "propagation: validation before + epoch 1": _span(t_graphs, t_prop1),
    }
    prop = s.get("propagation") or {}
    graphs_built = (prop.get("train_graphs") or 0) + (prop.get("validation_graphs") or 0)
    expand_s = phases["expanding the propagation subgraphs (phase-1 scorer)"]
    epochs = []
    for row in scorer_rows:
        n = s["train_triples"]
        epochs.append({"phase": "scorer", "epoch": row["epoch"], "seconds": row["seconds"], "triples": n,
                       "validation_triples": s["validation_triples"], "triples_per_s": n / row["seconds"],
                       "train_loss": row["train_loss"], "val_loss": row["val_loss"]})
    for row in prop_rows:
        n = prop.get("train_edges") or 0
        epochs.append({"phase": "propagation", "epoch": row["epoch"], "seconds": row["seconds"], "triples": n,
                       "graphs": prop.get("train_graphs"), "validation_graphs": prop.get("validation_graphs"),
                       "triples_per_s": n / row["seconds"] if row["seconds"] else None,
                       "train_loss": row["train_loss"], "val_loss": row["val_loss"]})
    out.update({
        "questions": len(data.questions), "train_seconds": c.wall, "train_cpu_seconds": c.cpu, "epochs": epochs,
        "phases": phases, "summary": {k: v for k, v in s.items() if k != "validation_ids"},
        "subgraphs_built": graphs_built,
        "expand_s_per_subgraph": expand_s / graphs_built if expand_s and graphs_built else None,
        "events": [{"t": round(t, 3), "message": m} for t, m in events], "loadavg_after": loadavg(),
    })
    return out


def _span(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


# ---------------------------------------------------------------------------------------------------------------------
# 2. Scoring throughput


def _random_triples(kg: Any, n: int, seed: int) -> list[tuple[str, str, str]]:
    triples = list(kg.iter_triples())
    rng = random.Random(seed)
    return [triples[i] for i in (rng.sample(range(len(triples)), n) if n <= len(triples)
                                 else [rng.randrange(len(triples)) for _ in range(n)])]


def _network_only(scorer: Any, heads: np.ndarray, rels: np.ndarray, tails: np.ndarray, layers: np.ndarray,
                  backward: np.ndarray, questions: Any) -> None:
    """The network part of ``score_triples`` (same chunking), on label vectors already looked up; every member's
    network for an ensemble."""
    import torch

    from kgqa.steps.foresight.scorer import _CHUNK

    with torch.inference_mode():
        for member in scorer.members:
            for lo in range(0, len(heads), _CHUNK):
                hi = lo + _CHUNK
                z = member.net.encode(torch.from_numpy(heads[lo:hi]), torch.from_numpy(rels[lo:hi]),
                                      torch.from_numpy(tails[lo:hi]), torch.from_numpy(layers[lo:hi]),
                                      torch.from_numpy(backward[lo:hi].astype(np.int64)), *questions)
                torch.sigmoid(member.net.score(z))


def policy_probe(argv: list[str]) -> int:
    """``fog_bench.py _policy_probe SCORER KG THREADS``: embed 512 MetaQA labels and run the network on 4,000 random
    triples in this process (whose OMP_WAIT_POLICY the parent chose); print the seconds as JSON."""
    scorer_dir, kg_dir, threads = argv[0], argv[1], int(argv[2])
    import torch

    from kgqa.kg import open_kg
    from kgqa.steps.foresight.scorer import LabelVectors, load_scorer
    from kgqa.text import load_embedder

    kg = open_kg(kg_dir)
    scorer = load_scorer(scorer_dir)
    embedder = load_embedder(scorer.encoder)
    torch.set_num_threads(threads)
    rng = random.Random(0)
    names = [n for _, n in kg.iter_names()]
    texts = rng.sample(names, min(512, len(names)))
    labels = LabelVectors(kg, embedder)
    triples = _random_triples(kg, 4000, 0)
    layers = np.asarray([rng.randint(1, 3) for _ in triples], dtype=np.int64)
    back = np.asarray([rng.random() < 0.5 for _ in triples])
    qv = scorer.questions(labels, ["what movies did the director of this film also direct"])
    rels = labels.relations([t[1] for t in triples])
    embedder.embed(texts[:64])  # warm-up
    with Clock() as embed_clock:
        vectors = embedder.embed(texts)
    heads = np.resize(vectors, (len(triples), vectors.shape[1])).astype(np.float32)  # contents do not matter here
    tails = np.ascontiguousarray(np.roll(heads, 1, axis=0))
    _network_only(scorer, heads[:256], rels[:256], tails[:256], layers[:256], back[:256], qv)  # warm-up
    with Clock() as net_clock:
        _network_only(scorer, heads, rels, tails, layers, back, qv)
    print(json.dumps({"policy": os.environ.get("OMP_WAIT_POLICY") or "default", "threads": torch.get_num_threads(),
                      "embed_512_s": embed_clock.wall, "embed_512_cpu_s": embed_clock.cpu,
                      "network_4000_s": net_clock.wall, "network_4000_cpu_s": net_clock.cpu}))
    kg.close()
    return 0


def policy_check(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The same small workload (512 labels embedded, 4,000 triples through the network) in fresh processes under each
    OMP_WAIT_POLICY: on a 2-core machine where another process is busy, OpenMP's spinning workers can make 2 threads
    several times slower than 1."""
    rows = []
    for policy in ("default", "PASSIVE"):
        env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
        if policy != "default":
            env["OMP_WAIT_POLICY"] = policy
        done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "_policy_probe", str(args.scorer),
                               str(args.kg), str(args.threads)], capture_output=True, text=True, env=env, check=False,
                              timeout=600)
        line = next((x for x in reversed(done.stdout.splitlines()) if x.startswith("{")), None)
        row = json.loads(line) if line else {"policy": policy, "error": done.stderr[-500:]}
        row["loadavg_1min"] = loadavg()[0]
        rows.append(row)
        log(f"wait policy {policy}: {row}")
    return rows


def bench_throughput(env: Env) -> dict[str, Any]:
    args = env.args
    labels = env.labels()
    scorer = env.scorer
    out: dict[str, Any] = {"loadavg_before": loadavg(), "repeats": args.repeats, "rows": []}
    question = next(iter(_metaqa_items(args, 2, 1, args.seed)))
    text = metaqa_texts(question)
    out["question"] = text
    qv = scorer.questions(labels, [text])
    out["question_tokens"] = int(qv[0].shape[2])
    biggest = max(args.batches)
    pool = _random_triples(env.kg, biggest, args.seed)
    rng = np.random.default_rng(args.seed)
    layers_all = rng.integers(1, 4, size=biggest).astype(np.int64)
    back_all = rng.random(biggest) < 0.5
    scorer.score_triples(labels, qv, pool[:256], layers_all[:256], back_all[:256])  # warm-up (lazy inits)

    def timed(fn: Callable[[], Any]) -> tuple[float, float]:
        walls, cpus = [], []
        fn()  # warm-up
        for _ in range(args.repeats):
            with Clock() as c:
                fn()
            walls.append(c.wall)
            cpus.append(c.cpu)
        return statistics.median(walls), statistics.median(cpus)

    for n in args.batches:
        triples, layers, back = pool[:n], layers_all[:n], back_all[:n]
        log(f"throughput: {n} triples")
        full_s, full_cpu = timed(lambda t=triples, la=layers, b=back: scorer.score_triples(labels, qv, t, la, b))

        def lookup(t: list[tuple[str, str, str]] = triples) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            return (labels.entities([x[0] for x in t]), labels.relations([x[1] for x in t]),
                    labels.entities([x[2] for x in t]))

        lookup_s, _ = timed(lookup)
        h, r, t_ = lookup()
        net_s, net_cpu = timed(lambda h=h, r=r, t_=t_, la=layers, b=back: _network_only(scorer, h, r, t_, la, b, qv))
        out["rows"].append({"triples": n, "threads": env.args.threads, "score_triples_s": full_s,
                            "score_triples_per_s": n / full_s, "score_triples_cpu_s": full_cpu, "lookup_s": lookup_s,
                            "lookup_per_s": n / lookup_s, "network_s": net_s, "network_per_s": n / net_s,
                            "network_cpu_s": net_cpu})
    if args.compare_threads and args.threads != 1:
        n = min(4000, biggest)
        h, r, t_ = (labels.entities([x[0] for x in pool[:n]]), labels.relations([x[1] for x in pool[:n]]),
                    labels.entities([x[2] for x in pool[:n]]))
        env.threads(1)
        try:
            net_s, net_cpu = timed(lambda: _network_only(scorer, h, r, t_, layers_all[:n], back_all[:n], qv))
        finally:
            env.threads()
        out["one_thread"] = {"triples": n, "threads": 1, "network_s": net_s, "network_per_s": n / net_s,
                             "network_cpu_s": net_cpu}
    if args.policy_check:
        out["wait_policy_check"] = policy_check(args)
    out["loadavg_after"] = loadavg()
    return out


# ---------------------------------------------------------------------------------------------------------------------
# 3. Per question at MetaQA scale


def _metaqa_items(args: argparse.Namespace, hops: int, n: int, seed: int) -> list[dict[str, Any]]:
    from kgqa.datasets.metaqa_chains import iter_metaqa_questions

    items = list(iter_metaqa_questions(Path(args.data_dir) / "metaqa", hops, "dev"))
    rng = random.Random(f"{seed}-{hops}")
    return rng.sample(items, min(n, len(items)))


def reading(args: argparse.Namespace, caps: Any) -> Any:
    """FoG's default graph-mode reading (``kgqa.steps.foresight.graph.READING``), with ``--hops``, ``--tau-e`` and
    ``--tau-p`` when given, and ``caps``."""
    from kgqa.methods.fog.reading import READING

    changed = {k: v for k, v in (("hops", args.hops), ("tau_e", args.tau_e), ("tau_p", args.tau_p)) if v is not None}
    return replace(READING, caps=caps, **changed)


def answer_one(env: Env, kg: Any, labels: Any, seeds: list[str], text: str, read: Any) -> dict[str, Any]:
    """One graph-mode question read with ``read`` (:func:`reading`: FoG's graph mode), each step timed: encode,
    expand, propagate, rank."""
    from kgqa.steps.answers import presentable

    scorer = env.scorer
    row: dict[str, Any] = {}
    cpu0 = time.process_time()
    with Clock() as c:
        qv = scorer.questions(labels, [text])
    row["encode_s"] = c.wall
    score_batch = scorer.scorer_for(labels, qv)
    per_layer: list[tuple[int, int]] = []  # (candidates scored, kept above tau_e) per BFS layer

    def counted(triples: list[tuple[str, str, str]], layers: np.ndarray, backward: np.ndarray) -> tuple[Any, Any]:
        scores, payload = score_batch(triples, layers, backward)
        per_layer.append((len(triples), int((scores > read.tau_e).sum())))
        return scores, payload

    with Clock() as c:
        graph = read.expand(kg, seeds, counted)
    row["expand_s"] = c.wall
    row["per_layer"] = per_layer
    with Clock() as c:
        scorer.propagate(graph)
    row["propagate_s"] = c.wall
    with Clock() as c:
        ranked, potential = read.rank(graph, answerable=lambda ids: set(presentable(kg, ids)))
    row["rank_s"] = c.wall
    row["total_s"] = row["encode_s"] + row["expand_s"] + row["propagate_s"] + row["rank_s"]
    row["cpu_s"] = time.process_time() - cpu0
    row.update({"scored": graph.scored, "kept": len(graph), "nodes": len(graph.node_entity),
                "potential": len(potential), "answers": len(ranked), "cut": dict(graph.cut),
                # what FoG returns (FoGConfig.max_answers), so F1 scores the method's answer set, not its first five
                "ranked": [a.entity for a in ranked[:ANSWERS_RETURNED]]})
    return row


def _answers_returned() -> int:
    """FoG's default answer limit (FoGConfig.max_answers): the benchmark scores the answer set FoG returns."""
    from kgqa.methods.fog.method import FoGConfig

    return FoGConfig().max_answers


ANSWERS_RETURNED = _answers_returned()

STEPS = ("encode_s", "expand_s", "propagate_s", "rank_s", "total_s", "cpu_s")


def _aggregate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    agg: dict[str, Any] = {k: summary([r[k] for r in rows]) for k in (*STEPS, "scored", "kept", "nodes", "potential")}
    agg["questions"] = len(rows)
    if rows and "hits1" in rows[0]:
        agg["hits1"] = 100 * statistics.fmean(r["hits1"] for r in rows)
        agg["f1"] = 100 * statistics.fmean(r["f1"] for r in rows)
    agg["under_target"] = sum(r["total_s"] < TARGET_S for r in rows) / max(len(rows), 1)
    return agg


def bench_metaqa(env: Env) -> dict[str, Any]:
    from kgqa.methods.fog.training import answer_set_metrics
    from kgqa.steps.foresight.graph import Caps

    args = env.args
    labels = env.labels()
    caps = Caps()
    read = reading(args, caps)
    out: dict[str, Any] = {
        "loadavg_before": loadavg(), "caps": asdict(caps), "per_hop": {}, "hops_budget": read.hops,
        "tau_e": read.tau_e, "tau_p": read.tau_p,
        "reading": {k: v for k, v in asdict(read).items() if k not in ("hops", "tau_e", "tau_p", "caps")}}
    every: list[dict[str, Any]] = []
    warm = _metaqa_items(args, 1, 3, args.seed + 1)
    for item in warm:  # untimed: lazy initialisation of torch kernels and caches
        answer_one(env, env.kg, labels, [item["topic"]], metaqa_texts(item), read)
    for hops in (1, 2, 3):
        rows = []
        items = _metaqa_items(args, hops, args.questions, args.seed)
        log(f"metaqa: {len(items)} {hops}-hop dev questions")
        for item in items:
            if not env.kg.has_entity(item["topic"]):
                continue
            row = answer_one(env, env.kg, labels, [item["topic"]], metaqa_texts(item), read)
            row.update(answer_set_metrics(row.pop("ranked"), set(item["answers"])))
            row.update({"hops": hops, "qtype": item["qtype"], "line": item["line"]})
            rows.append(row)
        agg = _aggregate(rows)
        out["per_hop"][str(hops)] = agg
        every.extend(rows)
        log(f"metaqa {hops}-hop: total median {agg['total_s']['median']:.3f} s, p90 {agg['total_s']['p90']:.3f} s; "
            f"Hits@1 {agg.get('hits1', 0):.1f}")
    out["all"] = _aggregate(every)
    out["cut_totals"] = _cut_totals(every)
    out["rows"] = every
    out["loadavg_after"] = loadavg()
    return out


def _cut_totals(rows: list[dict[str, Any]]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for r in rows:
        for k, v in r["cut"].items():
            totals[k] = totals.get(k, 0) + v
    return totals


# ---------------------------------------------------------------------------------------------------------------------
# 4. A generated 1M-triple KG


def bench_kg1m(env: Env) -> dict[str, Any]:
    from kg_gen import _make_names, _make_words, generate
    from kgqa.artifacts import ArtifactStore
    from kgqa.kg.embedded import EmbeddedKGBuilder
    from kgqa.steps.foresight.graph import Caps
    from kgqa.steps.foresight.scorer import LabelVectors

    args = env.args
    out: dict[str, Any] = {"loadavg_before": loadavg(), "question": args.kg1m_question, "labels": args.kg1m_labels}
    work = Path(tempfile.mkdtemp(prefix="fog-bench-kg1m-"))
    try:
        log(f"kg1m: generating {args.kg1m_triples:,} triples (seed {args.seed})")
        with Clock() as c:
            gen = generate(args.kg1m_triples, seed=args.seed)
            # a name for every entity and CVT (the generator leaves ~7% of the entities and every CVT nameless)
            names = list(gen.names) + [None] * gen.n_cvt
            missing = [i for i in range(gen.n_entities + gen.n_cvt) if names[i] is None]
            name_rng = np.random.default_rng([args.seed, 7])
            for i, name in zip(missing, _make_names(name_rng, len(missing), _make_words(name_rng, 5000)), strict=True):
                names[i] = name
            gen.names = names
        out["generate_s"] = c.wall
        out["names_added"] = len(missing)
        with Clock() as c:
            builder = EmbeddedKGBuilder(schema="generic")
            gen.feed(builder)
            kg = builder.build(work / "store")
        out["build_s"] = c.wall
        stats = kg.stats()
        deg = gen.degrees()
        out["kg"] = {"triples": stats.triples, "entities": stats.entities, "relations": stats.relations,
                     "literals": stats.literals, "names": stats.names, "schema": stats.schema,
                     "max_degree": int(deg.max()), "nodes_1k_edges": int((deg >= 1000).sum()),
                     "nodes_10k_edges": int((deg >= 10_000).sum()), "cvt_nodes": gen.n_cvt}
        log(f"kg1m: {stats.triples:,} triples, {stats.names:,} names, max degree {int(deg.max()):,}; "
            f"generated in {out['generate_s']:.1f} s, built in {out['build_s']:.1f} s")

        # seeds: half uniform over entities with an edge, half degree-weighted (hubs), interleaved
        rng = np.random.default_rng([args.seed, 1_000_000])
        candidates = np.flatnonzero(deg[: gen.n_entities] > 0)
        weights = deg[candidates].astype(np.float64)
        weights /= weights.sum()
        half = args.kg1m_seeds // 2
        uniform = rng.choice(candidates, size=args.kg1m_seeds - half)
        weighted = rng.choice(candidates, size=half, p=weights)
        order = [int(x) for pair in zip(uniform, [*weighted, None], strict=False) for x in pair if x is not None]
        seeds = [(gen.node_ids[i], int(deg[i]), "uniform" if k % 2 == 0 else "degree-weighted")
                 for k, i in enumerate(order)]
        out["seed_degrees"] = summary([d for _, d, _ in seeds])
        out["seed_hubs"] = sum(d >= HUB_DEGREE for _, d, _ in seeds)
        node_count = gen.n_entities + gen.n_cvt
        del gen

        counting = CountingEmbedder(env.embedder)
        table = None
        if args.kg1m_labels == "table":
            root = work / "artifacts"
            log(f"kg1m: building a label table of {node_count:,} labels")
            with Clock() as c:
                table = ArtifactStore(root=root).get("label-embeddings", kg=kg, embedder=env.embedder)
            env.threads()
            out["label_table"] = {"labels": len(table), "seconds": c.wall, "labels_per_s": len(table) / c.wall}
        caps = Caps()
        read = reading(args, caps)
        passes: dict[str, list[dict[str, Any]]] = {"cold": [], "warm": []}
        # warm-up of torch on a few of the first seed's triples, with throwaway label vectors so pass 1 starts cold
        # (a whole warm-up question would embed tens of thousands of labels)
        warm = LabelVectors(kg, env.embedder, table)
        first = seeds[0][0]
        sample = [(first, r, o) for r in kg.relations(first)[:4] for o in kg.neighbors(first, r, limit=8)][:32] or \
            [(first, "r", first)]
        env.scorer.score_triples(warm, env.scorer.questions(warm, [args.kg1m_question]), sample,
                                 np.ones(len(sample), dtype=np.int64), np.zeros(len(sample), dtype=bool))
        labels = LabelVectors(kg, counting, table, cache_size=4_000_000)
        log(f"kg1m: pass 1 (labels {'from the table' if table is not None else 'embedded on the fly, cold cache'}), "
            f"budget {args.kg1m_budget_s:.0f} s")
        started = time.perf_counter()
        for seed_id, degree, how in seeds:
            if time.perf_counter() - started > args.kg1m_budget_s:
                break
            n0, s0 = counting.texts, counting.seconds
            row = answer_one(env, kg, labels, [seed_id], args.kg1m_question, read)
            row.pop("ranked")
            row.update({"seed": seed_id, "degree": degree, "sampled": how, "labels_embedded": counting.texts - n0,
                        "embed_s": counting.seconds - s0})
            passes["cold"].append(row)
            log(f"kg1m cold {len(passes['cold'])}/{len(seeds)}: degree {degree}, scored {row['scored']}, kept "
                f"{row['kept']}, labels embedded {row['labels_embedded']}, {row['total_s']:.2f} s")
        log(f"kg1m: pass 2 (the same {len(passes['cold'])} seeds, every label in the cache)")
        for cold in passes["cold"]:
            n0, s0 = counting.texts, counting.seconds
            row = answer_one(env, kg, labels, [cold["seed"]], args.kg1m_question, read)
            row.pop("ranked")
            row.update({"seed": cold["seed"], "degree": cold["degree"], "sampled": cold["sampled"],
                        "labels_embedded": counting.texts - n0, "embed_s": counting.seconds - s0})
            passes["warm"].append(row)
        kg.close()
        out["seeds_requested"] = len(seeds)
        out["budget_s"] = args.kg1m_budget_s
        out["label_rate_per_s"] = counting.texts / counting.seconds if counting.seconds else None
        out["labels_in_kg"] = node_count
        if out["label_rate_per_s"]:
            out["label_table_estimate_s"] = node_count / out["label_rate_per_s"]
        for name, rows in passes.items():
            if not rows:
                continue
            agg = _aggregate(rows)
            for key in ("labels_embedded", "embed_s"):
                agg[key] = summary([r[key] for r in rows])
            hubs = [r for r in rows if r["degree"] >= HUB_DEGREE]
            agg["hub_seeds"] = len(hubs)
            agg["hub_total_s"] = summary([r["total_s"] for r in hubs])
            agg["cut_totals"] = _cut_totals(rows)
            agg["seeds_cut_by_fanout"] = sum(1 for r in rows if r["cut"].get("fanout_triples"))
            agg["seeds_cut_by_frontier"] = sum(1 for r in rows if r["cut"].get("frontier_nodes"))
            agg["fanout_triples_cut"] = summary([r["cut"].get("fanout_triples", 0) for r in rows])
            agg["fanout_triples_cut_hubs"] = summary([r["cut"].get("fanout_triples", 0) for r in hubs])
            out[name] = agg
        out["rows"] = passes
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out["loadavg_after"] = loadavg()
    return out


# ---------------------------------------------------------------------------------------------------------------------
# Report


def _f(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 100:
            return f"{value:.0f}"
        return f"{value:.{digits}g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{1000 * value:.1f}"


def write_markdown(result: dict[str, Any], path: Path) -> None:
    m = result["machine"]
    label_source = result.get("label_source") or (
        "built cold by the train section" if (result["sections"].get("train") or {}).get("label_build") else "-")
    members = result.get("scorer_members", 1)
    members_note = f"an ensemble of {members} members, each " if members > 1 else ""
    lines = [
        "# FoG benchmark (benchmarks/fog_bench.py)", "",
        f"Run {m['date']} on {m['nproc']} CPUs ({m['cpu_model']}), {m['memory_gb']} GB RAM, Python {m['python']}, "
        f"torch {m['versions'].get('torch')} with {m['torch_threads']} intra-op threads "
        f"({m['torch_interop_threads']} inter-op), OMP_WAIT_POLICY {m.get('omp_wait_policy')}, "
        f"commit {m['git_commit']}"
        f"{' (working tree has uncommitted changes)' if m.get('git_dirty') else ''}.",
        f"Load average at start: {', '.join(f'{x:.2f}' for x in m['loadavg_start'])}; at end: "
        f"{', '.join(f'{x:.2f}' for x in m.get('loadavg_end', []))}. The machine is shared: compare CPU times when the "
        "load was high.",
        f"Command: `{result['command']}`",
        f"Scorer: `{result['scorer']}` ("
        f"{members_note}"
        f"encoder {result.get('encoder')}, net {result.get('net')}); "
        f"MetaQA KG `{result['kg']}`; MetaQA label vectors: {label_source}.",
        f"Wall time of the run: {result.get('seconds', 0):.0f} s.", "",
    ]
    if result.get("note"):
        lines += [f"**Note:** {result['note']}", ""]
    sec = result["sections"]
    runs = {json.dumps(v.get("run"), sort_keys=True) for v in sec.values()}
    if len(runs) > 1:
        lines += ["Sections come from more than one run (`--merge`); each says which run measured it.", ""]

    def measured(section: dict[str, Any]) -> list[str]:
        run = section.get("run")
        if not run or len(runs) <= 1:
            return []
        return [f"Measured {run['date']} at commit {run.get('git_commit')} with scorer `{run.get('scorer')}`, load "
                f"average at the section's start {section.get('loadavg_before')}, by `{run['command']}`.", ""]

    if "train" in sec:
        t = sec["train"]
        lines += ["## 1. Training time (fixed subset)", "", *measured(t)]
        lb = t.get("label_build")
        if lb:
            lines += [f"Label-embedding build of the MetaQA KG (cold, temporary ArtifactStore): {lb['labels']:,} labels "
                      f"in {lb['seconds']:.1f} s ({lb['labels_per_s']:.0f} labels/s, CPU {lb['cpu_seconds']:.1f} s).",
                      ""]
        d = t["data"]
        lines += [f"Data: {d['questions']} questions with gold chains ({d['per_dataset']}), the first "
                  f"{result['args']['train_questions']} MetaQA dev questions per hop; lr 1e-3, batch "
                  f"{t['settings']['batch_size']}, kappa {t['settings']['kappa']}, "
                  f"propagation_questions {t['settings']['propagation_questions']}; the scorer epoch's seconds include "
                  f"its validation pass ({t['summary']['validation_triples']:,} triples). "
                  f"train_scorer took {t['train_seconds']:.1f} s (CPU {t['train_cpu_seconds']:.1f} s).", "",
                  "| epoch | seconds | training triples | triples/s | train loss | validation loss |",
                  "|---|---|---|---|---|---|"]
        for e in t["epochs"]:
            what = f"{e['phase']} {e['epoch']}" + (f" ({e['graphs']} subgraphs)" if e["phase"] == "propagation" else "")
            lines.append(f"| {what} | {e['seconds']:.1f} | {e['triples']:,} | {_f(e['triples_per_s'])} | "
                         f"{e['train_loss']:.4f} | {e['val_loss']:.4f} |")
        lines += ["", "| phase of train_scorer | seconds |", "|---|---|"]
        for name, secs in t["phases"].items():
            lines.append(f"| {name} | {_f(secs)} |")
        if t.get("expand_s_per_subgraph"):
            lines.append(f"| (per expanded subgraph, {t['subgraphs_built']} built) | "
                         f"{t['expand_s_per_subgraph']:.3f} |")
        lines += ["", f"Load average before/after: {t['loadavg_before'][0]} / {t['loadavg_after'][0]}.", ""]
    if "throughput" in sec:
        t = sec["throughput"]
        lines += ["## 2. Scoring throughput (ForesightScorer.score_triples, random MetaQA triples)", "", *measured(t),
                  f"One question ({t['question_tokens']} tokens): \"{t['question']}\"; random layers 1-3 and "
                  f"directions; median of {t['repeats']} runs after a warm-up.", "",
                  "| triples | threads | score_triples s | triples/s (with label lookup) | label lookup triples/s | "
                  "network s | network triples/s | network CPU s |", "|---|---|---|---|---|---|---|---|"]
        for r in t["rows"]:
            lines.append(f"| {r['triples']:,} | {r['threads']} | {r['score_triples_s']:.3f} | "
                         f"{r['score_triples_per_s']:,.0f} | {r['lookup_per_s']:,.0f} | {r['network_s']:.3f} | "
                         f"{r['network_per_s']:,.0f} | {r['network_cpu_s']:.3f} |")
        if t.get("one_thread"):
            r = t["one_thread"]
            lines.append(f"| {r['triples']:,} | 1 (comparison) | - | - | - | {r['network_s']:.3f} | "
                         f"{r['network_per_s']:,.0f} | {r['network_cpu_s']:.3f} |")
        if t.get("wait_policy_check"):
            lines += ["", "OpenMP wait policy, the same small workload in a fresh process each (2 threads requested):",
                      "", "| OMP_WAIT_POLICY | threads | 512 labels embedded, s (CPU s) | 4,000 triples through the "
                      "network, s (CPU s) | load average (1 min) |", "|---|---|---|---|---|"]
            for r in t["wait_policy_check"]:
                if "error" in r:
                    lines.append(f"| {r['policy']} | - | error | - | - |")
                    continue
                lines.append(f"| {r['policy']} | {r['threads']} | {r['embed_512_s']:.2f} ({r['embed_512_cpu_s']:.2f}) | "
                             f"{r['network_4000_s']:.2f} ({r['network_4000_cpu_s']:.2f}) | {r['loadavg_1min']} |")
        lines += ["", f"Load average before/after: {t['loadavg_before'][0]} / {t['loadavg_after'][0]}.", ""]
    if "metaqa" in sec:
        t = sec["metaqa"]
        lines += [f"## 3. Graph mode per question, MetaQA (L={t['hops_budget']}, tau_e={t['tau_e']}, "
                  f"tau_p={t['tau_p']}, caps {t['caps']})", "", *measured(t),
                  *([f"Reading: {t['reading']} (FoG's graph mode).", ""] if t.get("reading") else []),
                  f"Target: total < {TARGET_S} s per question. Times in ms, median / p90.", "",
                  "| hops | questions | (a) encode | (b) expand | (c) propagate + re-score | (d) rank | total | "
                  "CPU | total < 0.2 s | scored | kept | Hits@1 | F1 |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for key, agg in [*t["per_hop"].items(), ("all", t["all"])]:
            cells = " | ".join(f"{_ms(agg[s]['median'])} / {_ms(agg[s]['p90'])}" for s in STEPS)
            lines.append(f"| {key} | {agg['questions']} | {cells} | {100 * agg['under_target']:.0f}% | "
                         f"{_f(agg['scored']['median'])} / {_f(agg['scored']['p90'])} | "
                         f"{_f(agg['kept']['median'])} / {_f(agg['kept']['p90'])} | {agg.get('hits1', 0):.1f} | "
                         f"{agg.get('f1', 0):.1f} |")
        lines += ["", f"Mean total per question (all hops): {_ms(t['all']['total_s']['mean'])} ms; cuts summed over "
                  f"the questions: {t['cut_totals'] or 'none'}. Hits@1/F1 are a sanity check on small samples.",
                  f"Load average before/after: {t['loadavg_before'][0]} / {t['loadavg_after'][0]}.", ""]
    if "kg1m" in sec:
        t = sec["kg1m"]
        k = t["kg"]
        lines += [f"## 4. Generated {k['triples'] / 1e6:g}M-triple KG (kg_gen.py, generic schema, every entity named)",
                  "", *measured(t),
                  f"KG: {k['triples']:,} triples, {k['entities']:,} entities, {k['relations']} relations, "
                  f"{k['literals']:,} literals, {k['names']:,} names ({t['names_added']:,} added to the generator's), "
                  f"max degree {k['max_degree']:,} ({k['nodes_10k_edges']} nodes with 10k+ edges, "
                  f"{k['nodes_1k_edges']} with 1k+); generated in {t['generate_s']:.1f} s, built in "
                  f"{t['build_s']:.1f} s.",
                  f"Question (fixed): \"{t['question']}\". Seeds: {t['seeds_requested']} requested (half uniform, half "
                  f"degree-weighted; {t['seed_hubs']} with {HUB_DEGREE}+ edges; degree median "
                  f"{_f(t['seed_degrees']['median'])}, max {_f(t['seed_degrees']['max'])}).", ""]
        if t["labels"] == "table":
            lt = t.get("label_table", {})
            lines.append(f"Labels: a label table built for this KG ({lt.get('labels', 0):,} labels in "
                         f"{lt.get('seconds', 0):.0f} s); literals, which the table does not hold, are embedded on the "
                         "fly (pass 1 with a cold cache for them, pass 2 with them cached).")
        else:
            est = t.get("label_table_estimate_s")
            lines.append(f"Labels: **embedded on the fly** (LabelVectors without a table): a label table of its "
                         f"{t['labels_in_kg']:,} entity and CVT labels would take about "
                         f"{_f(est / 60 if est else None)} min at the on-the-fly rate measured here "
                         f"({_f(t.get('label_rate_per_s'))} labels/s; "
                         f"{'over' if est is None or est > 180 else 'under'} the ~3 min a table may take here). "
                         "Pass 1 (cold cache) "
                         f"ran seeds until its {t['budget_s']:.0f} s budget was spent; pass 2 re-ran the same seeds "
                         "with every label cached, which is what a label table gives.")
        lines += ["", "Times in ms, median / p90.", "",
                  "| pass | seeds | (a) encode | (b) expand | (c) propagate + re-score | (d) rank | total | CPU | "
                  "labels embedded | embedding s | scored | kept | hub seeds: total |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for name in ("cold", "warm"):
            agg = t.get(name)
            if not agg:
                continue
            cells = " | ".join(f"{_ms(agg[s]['median'])} / {_ms(agg[s]['p90'])}" for s in STEPS)
            lines.append(f"| {name} | {agg['questions']} | {cells} | {_f(agg['labels_embedded']['median'])} / "
                         f"{_f(agg['labels_embedded']['p90'])} | {_f(agg['embed_s']['median'])} / "
                         f"{_f(agg['embed_s']['p90'])} | {_f(agg['scored']['median'])} / {_f(agg['scored']['p90'])} | "
                         f"{_f(agg['kept']['median'])} / {_f(agg['kept']['p90'])} | {agg['hub_seeds']}: "
                         f"{_ms(agg['hub_total_s']['median'])} / {_ms(agg['hub_total_s']['p90'])} |")
        agg = t.get("warm") or t.get("cold")
        if agg:
            lines += ["", "Hub caps (seed_fanout 2000 at the seed, fanout 200 further out, max_frontier 500 nodes per "
                      "layer):", "", "| what the caps cut | value |", "|---|---|",
                      f"| seeds whose expansion a fanout cap cut | {agg['seeds_cut_by_fanout']} of "
                      f"{agg['questions']} |",
                      f"| seeds whose frontier max_frontier cut | {agg['seeds_cut_by_frontier']} of "
                      f"{agg['questions']} |",
                      f"| triples cut by fanout caps, per seed (median / p90 / max) | "
                      f"{_f(agg['fanout_triples_cut']['median'])} / {_f(agg['fanout_triples_cut']['p90'])} / "
                      f"{_f(agg['fanout_triples_cut']['max'])} |",
                      f"| the same at hub seeds ({HUB_DEGREE}+ edges) | "
                      f"{_f(agg['fanout_triples_cut_hubs']['median'])} / {_f(agg['fanout_triples_cut_hubs']['p90'])} / "
                      f"{_f(agg['fanout_triples_cut_hubs']['max'])} |",
                      f"| all cuts summed over the seeds | {agg['cut_totals']} |"]
        lines += ["", "Per seed (pass 2 when run, else pass 1):", "",
                  "| seed | sampled | degree | scored | kept | scored / kept per layer | fanout cut | frontier cut | "
                  "total ms | labels embedded (pass 1) |", "|---|---|---|---|---|---|---|---|---|---|"]
        cold = {r["seed"]: r for r in t["rows"]["cold"]}
        for r in t["rows"]["warm"] or t["rows"]["cold"]:
            layers = ", ".join(f"{a:,}/{b:,}" for a, b in r.get("per_layer", [])) or "-"
            lines.append(f"| {r['seed']} | {r['sampled']} | {r['degree']:,} | {r['scored']:,} | {r['kept']:,} | "
                         f"{layers} | {r['cut'].get('fanout_triples', 0):,} | {r['cut'].get('frontier_nodes', 0):,} | "
                         f"{_ms(r['total_s'])} | {cold[r['seed']]['labels_embedded']:,} |")
        lines += ["", f"Load average before/after: {t['loadavg_before'][0]} / {t['loadavg_after'][0]}.", ""]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# ---------------------------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_policy_probe":
        return policy_probe(argv[1:])
    parser = argparse.ArgumentParser(description="Benchmark FoG's foresight scorer (see the module docstring).")
    parser.add_argument("--scorer", type=Path, default=None,
                        help="scorer directory (default: /tmp/fog/scorer-v1 when it exists, else /tmp/fog/med2-model)")
    parser.add_argument("--kg", type=Path, default=Path("/tmp/kgs/metaqa"), help="the embedded MetaQA KG")
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data",
                        help="benchmark data directory holding metaqa/{1,2,3}-hop (default ../shared/data)")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"sections to run (default all: {','.join(SECTIONS)})")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch intra-op threads (default: what kgqa runs with, KGQA_EMBED_THREADS or half the "
                             "cores, 1 to 4: the embedder sets it process-wide when FoG loads)")
    parser.add_argument("--omp-wait-policy", choices=["passive", "default"], default="passive",
                        help="passive (default): OMP_WAIT_POLICY=PASSIVE, set before torch loads, so idle OpenMP "
                             "workers sleep instead of spinning (on a busy 2-core machine spinning made 2 threads ~7x "
                             "slower than 1); default: leave the environment as it is. An OMP_WAIT_POLICY already in "
                             "the environment wins.")
    parser.add_argument("--no-policy-check", dest="policy_check", action="store_false",
                        help="skip the small fresh-process comparison of the two wait policies (section throughput)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train-questions", type=int, default=300, help="MetaQA dev questions per hop to train on")
    parser.add_argument("--propagation-questions", type=int, default=300,
                        help="questions whose subgraphs phase 2 expands (TrainSettings' default is 3000)")
    parser.add_argument("--no-label-build", action="store_true",
                        help="skip the cold label-embeddings build (use the default artifact store's table)")
    parser.add_argument("--batches", default="1000,4000,16000", help="triples per scoring batch")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per throughput batch")
    parser.add_argument("--no-compare-threads", dest="compare_threads", action="store_false",
                        help="skip the 1-thread network comparison")
    parser.add_argument("--questions", type=int, default=100, help="MetaQA dev questions per hop (section metaqa)")
    parser.add_argument("--hops", type=int, default=None, help="expansion hop budget L (default FoG's, 3)")
    parser.add_argument("--tau-e", type=float, default=None, help="expansion threshold (default FoG's reading's)")
    parser.add_argument("--tau-p", type=float, default=None, help="potential-subgraph threshold (default FoG's)")
    parser.add_argument("--kg1m-triples", type=float, default=1e6, help="size of the generated KG")
    parser.add_argument("--kg1m-seeds", type=int, default=50, help="seed entities on the generated KG")
    parser.add_argument("--kg1m-budget-s", type=float, default=240.0,
                        help="seconds for pass 1 (cold label cache) on the generated KG; seeds beyond it are skipped")
    parser.add_argument("--kg1m-labels", choices=["fly", "table"], default="fly",
                        help="fly: LabelVectors without a table (default); table: build a label table first")
    parser.add_argument("--kg1m-question", default=DEFAULT_QUESTION_1M, help="the fixed question on the generated KG")
    parser.add_argument("--merge", action="store_true",
                        help="keep the sections of the existing fog_bench.json that this run does not measure (each "
                             "section records the run that measured it)")
    parser.add_argument("--render", action="store_true",
                        help="only rewrite fog_bench.md from the existing fog_bench.json (no measurement)")
    parser.add_argument("--note", default=None, help="a note printed at the top of the markdown report")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results directory (fog_bench.json, fog_bench.md)")
    args = parser.parse_args(argv)
    args.batches = [int(float(x)) for x in args.batches.split(",") if x.strip()]
    args.kg1m_triples = int(args.kg1m_triples)
    sections = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)} (known: {', '.join(SECTIONS)})")
    if args.render:
        write_markdown(json.loads((args.out / "fog_bench.json").read_text(encoding="utf-8")), args.out / "fog_bench.md")
        return 0
    if args.scorer is None:
        args.scorer = scorer_default()
    if args.threads is None:
        from kgqa.llm.settings import default_threads

        args.threads = default_threads(None, key="embed_threads")

    if args.omp_wait_policy == "passive":
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read once, when torch's OpenMP runtime loads
    import torch

    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    result: dict[str, Any] = {
        "benchmark": "fog_bench", "version": 1, "command": shlex.join(["python", "benchmarks/fog_bench.py", *argv]),
        "machine": machine_facts(args.threads), "scorer": str(args.scorer), "kg": str(args.kg), "note": args.note,
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}, "sections": {},
    }
    log(f"scorer {args.scorer}, KG {args.kg}, threads {args.threads}, load average {result['machine']['loadavg_start']}")
    env = Env(args)
    result["machine"]["torch_threads"] = torch.get_num_threads()
    result["encoder"] = env.scorer.encoder
    result["net"] = env.scorer.members[0].net.spec.to_dict()
    result["scorer_members"] = len(env.scorer.members)

    def trained(member: Any) -> dict[str, Any]:
        on = member.meta.get("trained_on") or {}
        return {"path": str(member.path), "trained_on_command": on.get("command"),
                "trained_commit": on.get("kgqa_commit"), "settings": member.meta.get("settings"),
                "validation": member.meta.get("validation")}

    # one member: its record as before; an ensemble: each member's
    result["scorer_meta"] = (trained(env.scorer.members[0]) if len(env.scorer.members) == 1
                             else {"members": [trained(m) for m in env.scorer.members]})
    result["setup"] = {"kg_open_s": env.kg_open_s, "scorer_load_s": env.scorer_load_s,
                       "embedder_load_s": env.embedder_load_s}
    args.out.mkdir(parents=True, exist_ok=True)
    previous_path = args.out / "fog_bench.json"
    if args.merge and previous_path.is_file():
        previous = json.loads(previous_path.read_text(encoding="utf-8"))
        earlier = {"date": previous["machine"]["date"], "command": previous["command"],
                   "git_commit": previous["machine"].get("git_commit"), "scorer": previous.get("scorer"),
                   "loadavg_start": previous["machine"].get("loadavg_start")}
        for name, section in previous.get("sections", {}).items():
            if name not in sections:
                section.setdefault("run", earlier)
                result["sections"][name] = section
        result["label_source"] = previous.get("label_source")
    runners = {"train": bench_train, "throughput": bench_throughput, "metaqa": bench_metaqa, "kg1m": bench_kg1m}
    try:
        for name in SECTIONS:
            if name not in sections:
                continue
            log(f"=== {name} ===")
            run = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "command": result["command"],
                   "git_commit": result["machine"]["git_commit"], "scorer": str(args.scorer),
                   "loadavg_start": loadavg()}
            with Clock() as c:
                result["sections"][name] = runners[name](env)
            result["sections"][name]["section_s"] = c.wall
            result["sections"][name]["run"] = run
            log(f"{name} took {c.wall:.0f} s")
            result["label_source"] = env.table_source or result.get("label_source")
            result["machine"]["loadavg_end"] = loadavg()
            result["seconds"] = time.perf_counter() - started
            (args.out / "fog_bench.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
            write_markdown(result, args.out / "fog_bench.md")
    finally:
        env.close()
    log(f"results in {args.out / 'fog_bench.json'} and {args.out / 'fog_bench.md'} ({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
