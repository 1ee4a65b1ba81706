"""KG layer benchmark: the embedded store at 1M / 10M generated triples, and the same queries over HTTP against an
Oxigraph server and Virtuoso.

Run (see benchmarks/README.md)::

    python benchmarks/kg_bench.py --sizes 1e6,1e7 --queries 1000 --seed 0

Every size runs in fresh subprocesses so RSS readings are clean:

1. ``import``: generate the graph (benchmarks/kg_gen.py), feed it to an EmbeddedKGBuilder and build the store (timed,
   peak RSS from VmHWM after resetting it); draw the query workload from the generated graph (seeded) into
   ``queries.json`` so every backend answers exactly the same queries.
2. ``embedded``: open the store, run the workload (p50/p95 per operation), RSS before/after open and after the workload.
3. ``export`` + ``nt-import``: write the store as N-Triples (kgqa.kg.servers.export_ntriples) and re-import that file
   with ``kgqa kg import``'s loader in a clean process (the user's path; its peak RSS has no generator in it).
4. ``server oxigraph`` / ``server virtuoso``: load the N-Triples file, run the workload through SparqlKG.

Results go to benchmarks/results/kg_bench.json and kg_bench.md (targets of issue 2 with pass/fail).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gc
import hashlib
import importlib.util
import inspect
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE))  # kg_gen next to this file, also when run from elsewhere

#: Targets of issue 2, item 3 (embedded store at 10M triples). Latencies in ms, import in s, RAM in bytes per triple.
TARGETS: dict[str, tuple[str, float, str]] = {
    "relations_out": ("p50_ms", 0.05, "relation listing (out) p50 < 0.05 ms"),
    "relations_in": ("p50_ms", 0.05, "relation listing (in) p50 < 0.05 ms"),
    "neighbors": ("p50_ms", 0.05, "neighbours p50 < 0.05 ms"),
    "chain_2hop": ("p50_ms", 1.0, "2-hop chain p50 < 1 ms"),
    "search_fuzzy": ("p50_ms", 20.0, "fuzzy label search p50 < 20 ms"),
    "import_s": ("value", 30.0, "import < 30 s"),
    "import_ram_bpt": ("value", 150.0, "RAM per triple during import < 150 B"),
    "serve_ram_bpt": ("value", 150.0, "RAM per triple while serving < 150 B"),
}
TARGET_SIZE = 10_000_000

OPS = ["relations_out", "relations_in", "neighbors", "chain_1hop", "chain_2hop", "chain_3hop", "chain_2hop_bindings",
       "chain_relations", "filter_by_constraint", "names_100", "search_exact", "search_fuzzy",
       "neighbors_many", "subgraph", "neighbors_many_generic", "subgraph_generic"]
#: The generic derived operations (kgqa.kg.derived.DerivedOps over the backend's primitives), timed on the embedded store
#: only: on a server each would be one HTTP round trip per primitive call.
EMBEDDED_ONLY = {"neighbors_many_generic", "subgraph_generic"}
CHAIN_LIMIT = 1000
NEIGHBOR_LIMIT = 100
#: neighbors_many: entities per call; subgraph: a ToG/FoG-sized BFS around one topic.
MANY_ENTITIES = 50
SUBGRAPH_OPTIONS = {"depth": 2, "max_per_node": 20, "max_triples": 1000}


#: How the generator feeds the builder by default (see kg_gen.GeneratedKG.feed and --feed): arrow columns, as a
#: columnar source would.
FEED_MODE = "arrow"


def log(message: str) -> None:
    print(f"[kg_bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------------------------------
# Memory readings


def proc_status(pid: int | str = "self") -> dict[str, int]:
    """Memory fields of /proc/PID/status in bytes (VmRSS, VmHWM, RssAnon, RssFile, ...)."""
    out: dict[str, int] = {}
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        key, _, value = line.partition(":")
        parts = value.split()
        if key.startswith(("Vm", "Rss")) and len(parts) == 2 and parts[1] == "kB":
            out[key] = int(parts[0]) * 1024
    return out


def reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0: write 5 to clear_refs) so a later VmHWM is the peak of one phase."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def tree_rss(pid: int) -> int:
    """RSS of a process and its descendants, in bytes (servers may fork)."""
    total = proc_status(pid).get("VmRSS", 0)
    with contextlib.suppress(OSError):
        for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            total += tree_rss(int(child))
    return total


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def mb(n: float | int | None) -> float | None:
    return None if n is None else round(n / 2**20, 1)


# ---------------------------------------------------------------------------------------------------------------------
# The workload: drawn from the generated graph with the seed, saved as JSON, replayed on every backend


def make_workload(kg: Any, n: int, seed: int) -> dict[str, list[dict[str, Any]]]:
    """``n`` queries per operation. Topic entities are half uniform (over entities with an edge), half degree-weighted;
    chains follow real paths (no noise relations, no literal in the middle, never straight back along the same edge)
    so their results are non-empty; constraints are real edges off a path; fuzzy labels carry 1-2 typos."""
    from kg_gen import NOISE

    rng = np.random.default_rng([seed, 20240])
    (out_ptr, out_e), (in_ptr, in_e) = kg.csr()
    out_deg, in_deg = np.diff(out_ptr), np.diff(in_ptr)
    deg = out_deg + in_deg
    ids, rels, heads, tails = kg.node_ids, kg.relations, kg.heads, kg.tails
    noise = kg.relation_kinds == NOISE
    lit_start = kg.n_entities + kg.n_cvt
    candidates = np.flatnonzero(deg[: kg.n_entities] > 0)
    weights = deg[candidates].astype(np.float64)
    weights /= weights.sum()

    def topics(k: int) -> list[int]:
        half = k // 2
        picks = np.concatenate([rng.choice(candidates, size=half),
                                rng.choice(candidates, size=k - half, p=weights)])
        return rng.permutation(picks).tolist()

    def random_edge(node: int, exclude: set[int]) -> tuple[int, str, int] | None:
        """A random non-noise incident edge: (triple index, direction, other end)."""
        total = int(deg[node])
        for _ in range(12):
            if total == 0:
                return None
            pick = int(rng.integers(total))
            if pick < out_deg[node]:
                triple, direction = int(out_e[out_ptr[node] + pick]), "out"
                other = int(tails[triple])
            else:
                triple, direction = int(in_e[in_ptr[node] + pick - out_deg[node]]), "in"
                other = int(heads[triple])
            if not noise[kg.rels[triple]] and triple not in exclude:
                return triple, direction, other
        return None

    def hop_text(triple: int, direction: str) -> str:
        relation = rels[int(kg.rels[triple])]
        return relation if direction == "out" else "^" + relation

    def path(start: int, hops: int) -> tuple[list[int], list[str], list[int]] | None:
        """(nodes, hop texts, triple indices) of a random path of ``hops`` edges, or None."""
        for _ in range(8):
            nodes, texts, used = [start], [], []
            for h in range(hops):
                edge = random_edge(nodes[-1], set(used))
                if edge is None or (edge[2] >= lit_start and h < hops - 1):
                    break
                used.append(edge[0])
                texts.append(hop_text(edge[0], edge[1]))
                nodes.append(edge[2])
            if len(texts) == hops:
                return nodes, texts, used
        return None

    def paths(k: int, hops: int) -> list[tuple[list[int], list[str], list[int]]]:
        found: list[tuple[list[int], list[str], list[int]]] = []
        while len(found) < k:
            for start in topics(k - len(found)):
                p = path(start, hops)
                if p is not None:
                    found.append(p)
        return found

    w: dict[str, list[dict[str, Any]]] = {}
    w["relations_out"] = [{"entity": ids[e]} for e in topics(n)]
    w["relations_in"] = [{"entity": ids[e]} for e in topics(n)]
    w["neighbors"] = []
    for nodes, texts, _ in paths(n, 1):
        text = texts[0]
        w["neighbors"].append({"entity": ids[nodes[0]], "relation": text.lstrip("^"),
                               "direction": "in" if text.startswith("^") else "out"})
    for hops in (1, 2, 3):
        w[f"chain_{hops}hop"] = [{"topic": ids[nodes[0]], "chain": ",".join(texts), "expect": ids[nodes[-1]]}
                                 for nodes, texts, _ in paths(n, hops)]
    w["chain_2hop_bindings"] = [dict(q) for q in w["chain_2hop"]]
    w["chain_relations"] = [{"topic": q["topic"], "chain": q["chain"].split(",")[0],
                             "direction": "out" if i % 2 == 0 else "in"} for i, q in enumerate(w["chain_2hop"])]
    w["filter_by_constraint"] = []
    while len(w["filter_by_constraint"]) < n:
        for nodes, texts, used in paths(n - len(w["filter_by_constraint"]), 2):
            # CCoR's usual constraint hangs off the CVT in the middle; else off the answer.
            for source in (1, 2):
                if nodes[source] >= lit_start:
                    continue
                edge = random_edge(nodes[source], set(used))
                if edge is not None and edge[2] not in (nodes[0], nodes[source - 1]):
                    w["filter_by_constraint"].append({
                        "topic": ids[nodes[0]], "chain": ",".join(texts), "source": source,
                        "constraint": hop_text(edge[0], edge[1]), "target": ids[edge[2]], "expect": ids[nodes[2]]})
                    break
    used_nodes = np.flatnonzero(deg > 0)
    w["names_100"] = [{"ids": [ids[i] for i in rng.choice(used_nodes, size=100).tolist()]} for _ in range(n)]
    named = np.array([i for i in candidates.tolist() if kg.names[i] is not None], dtype=np.int64)
    named_w = deg[named].astype(np.float64)
    named_w /= named_w.sum()

    def named_picks(k: int) -> list[int]:
        return rng.permutation(np.concatenate([rng.choice(named, size=k // 2),
                                               rng.choice(named, size=k - k // 2, p=named_w)])).tolist()

    w["search_exact"] = []
    for i, e in enumerate(named_picks(n)):
        name = kg.names[e]
        w["search_exact"].append({"label": name.lower() if i % 2 else name, "expect": ids[e]})
    w["search_fuzzy"] = [{"label": add_typos(kg.names[e], rng), "expect": ids[e]} for e in named_picks(n)]
    # The batched operations draw from a generator of their own, so the queries above stay those of earlier runs.
    extra = np.random.default_rng([seed, 20241])
    by_relation = np.argsort(kg.rels, kind="stable")
    relation_starts = np.searchsorted(kg.rels[by_relation], np.arange(len(rels) + 1))
    facts = np.flatnonzero(~noise[kg.rels])
    w["neighbors_many"] = []
    for _ in range(n):
        # Entities that share a relation (a frontier, as a method's exploration step has one): the heads (out) or tails
        # (in) of random triples of one relation.
        relation = int(kg.rels[facts[int(extra.integers(len(facts)))]])
        lo, hi = int(relation_starts[relation]), int(relation_starts[relation + 1])
        picked = by_relation[extra.integers(lo, hi, size=MANY_ENTITIES)]
        direction = "out" if extra.random() < 0.5 else "in"
        ends = heads[picked] if direction == "out" else tails[picked]
        w["neighbors_many"].append({"entities": list(dict.fromkeys(ids[int(e)] for e in ends)),
                                    "relation": rels[relation], "direction": direction})
    half = n // 2
    seeds = extra.permutation(np.concatenate([extra.choice(candidates, size=half),
                                              extra.choice(candidates, size=n - half, p=weights)])).tolist()
    w["subgraph"] = [{"seeds": [ids[e]]} for e in seeds]
    w["neighbors_many_generic"] = [dict(q) for q in w["neighbors_many"]]
    w["subgraph_generic"] = [dict(q) for q in w["subgraph"]]
    return w


def add_typos(name: str, rng: np.random.Generator) -> str:
    """One typo (70%) or two (30%) in words of 5+ letters (4+ if there is none): substitution, deletion, insertion or
    transposition, as a user would make them."""
    words = name.split()
    typos = 1 if rng.random() < 0.7 else 2
    for _ in range(typos):
        eligible = [i for i, word in enumerate(words) if len(word) >= 5] or \
                   [i for i, word in enumerate(words) if len(word) >= 4]
        if not eligible:
            break
        i = eligible[int(rng.integers(len(eligible)))]
        word = words[i]
        pos = int(rng.integers(1, len(word) - 1))  # keep the first letter, as most typos do
        letter = "abcdefghijklmnopqrstuvwxyz"[int(rng.integers(26))]
        kind = int(rng.integers(4))
        if kind == 0:
            word = word[:pos] + letter + word[pos + 1:]
        elif kind == 1:
            word = word[:pos] + word[pos + 1:]
        elif kind == 2:
            word = word[:pos] + letter + word[pos:]
        else:
            word = word[:pos - 1] + word[pos] + word[pos - 1] + word[pos + 1:]
        words[i] = word
    return " ".join(words)


# ---------------------------------------------------------------------------------------------------------------------
# Operations: prepare (untimed) -> call (timed) -> summarise (untimed: count, fingerprint for cross-backend agreement)


def _fp(values: list[str]) -> str:
    return hashlib.sha1("\x1f".join(sorted(values)).encode("utf-8")).hexdigest()[:16]


@dataclass
class Op:
    prepare: Callable[[dict[str, Any]], tuple[Any, ...]]
    call: Callable[..., Any]
    summarise: Callable[[Any, dict[str, Any]], dict[str, Any]]


def _ops() -> dict[str, Op]:
    from kgqa.kg import ConstraintChain, Direction, parse_chain
    from kgqa.kg.derived import DerivedOps

    def many_args(q: dict[str, Any]) -> tuple[Any, ...]:
        return q["entities"], q["relation"], Direction.parse(q["direction"])

    def chain_summary(result: Any, q: dict[str, Any]) -> dict[str, Any]:
        comparable = not result.truncated and len(result.entities) < CHAIN_LIMIT
        # The path's own end must be among the answers unless a cap cut the result (a correctness check).
        return {"n": len(result.entities), "fp": _fp(result.entities) if comparable else None,
                "hit": q["expect"] in result.entities if "expect" in q and comparable else None}

    def list_summary(limit: int | None) -> Callable[[Any, dict[str, Any]], dict[str, Any]]:
        def summarise(result: list[str], q: dict[str, Any]) -> dict[str, Any]:
            comparable = limit is None or len(result) < limit
            return {"n": len(result), "fp": _fp(result) if comparable else None}
        return summarise

    def bindings_summary(result: Any, q: dict[str, Any]) -> dict[str, Any]:
        paths = result.paths or []
        comparable = not result.truncated and len(result.entities) < CHAIN_LIMIT
        return {"n": len(paths), "fp": _fp(["|".join(p) for p in paths]) if comparable else None,
                "hit": q["expect"] in result.entities if comparable else None}

    def names_summary(result: dict[str, str | None], q: dict[str, Any]) -> dict[str, Any]:
        return {"n": sum(v is not None for v in result.values()),
                "fp": _fp([f"{k}={v}" for k, v in result.items()])}

    def many_summary(result: dict[str, list[str]], q: dict[str, Any]) -> dict[str, Any]:
        comparable = all(len(found) < NEIGHBOR_LIMIT for found in result.values())
        return {"n": sum(len(found) for found in result.values()),
                "fp": _fp([f"{e}={','.join(sorted(found))}" for e, found in result.items()]) if comparable else None}

    def subgraph_summary(result: Any, q: dict[str, Any]) -> dict[str, Any]:
        return {"n": len(result.triples), "fp": None if result.truncated else _fp(["|".join(t) for t in result.triples])}

    def search_summary(result: list[Any], q: dict[str, Any]) -> dict[str, Any]:
        found = [m.id for m in result]
        return {"n": len(found), "fp": None, "hit": q["expect"] in found,
                "rank": found.index(q["expect"]) + 1 if q["expect"] in found else None}

    return {
        "relations_out": Op(lambda q: (q["entity"], Direction.OUT), lambda kg, e, d: kg.relations(e, d),
                            list_summary(None)),
        "relations_in": Op(lambda q: (q["entity"], Direction.IN), lambda kg, e, d: kg.relations(e, d),
                           list_summary(None)),
        "neighbors": Op(lambda q: (q["entity"], q["relation"], Direction.parse(q["direction"])),
                        lambda kg, e, r, d: kg.neighbors(e, r, d, limit=NEIGHBOR_LIMIT), list_summary(NEIGHBOR_LIMIT)),
        **{name: Op(lambda q: ([q["topic"]], parse_chain(q["chain"])),
                    lambda kg, t, c: kg.run_chain(t, c, limit=CHAIN_LIMIT), chain_summary)
           for name in ("chain_1hop", "chain_2hop", "chain_3hop")},
        "chain_2hop_bindings": Op(lambda q: ([q["topic"]], parse_chain(q["chain"])),
                                  lambda kg, t, c: kg.run_chain(t, c, bindings=True, limit=CHAIN_LIMIT),
                                  bindings_summary),
        "chain_relations": Op(lambda q: ([q["topic"]], parse_chain(q["chain"]), Direction.parse(q["direction"])),
                              lambda kg, t, c, d: kg.chain_relations(t, c, d), list_summary(None)),
        "filter_by_constraint": Op(
            lambda q: ([q["topic"]], parse_chain(q["chain"]),
                       ConstraintChain(q["source"], parse_chain(q["constraint"]), q["target"])),
            lambda kg, t, m, c: kg.filter_by_constraint(t, m, c, limit=CHAIN_LIMIT), chain_summary),
        "names_100": Op(lambda q: (q["ids"],), lambda kg, ids: kg.names(ids), names_summary),
        "search_exact": Op(lambda q: (q["label"],), lambda kg, label: kg.search(label, limit=10), search_summary),
        "search_fuzzy": Op(lambda q: (q["label"],), lambda kg, label: kg.search(label, fuzzy=True, limit=10),
                           search_summary),
        "neighbors_many": Op(many_args, lambda kg, es, r, d: kg.neighbors_many(es, r, d, NEIGHBOR_LIMIT), many_summary),
        "subgraph": Op(lambda q: (q["seeds"],), lambda kg, seeds: kg.subgraph(seeds, **SUBGRAPH_OPTIONS),
                       subgraph_summary),
        # The generic versions, called unbound on the backend (which inherits DerivedOps): they use its primitives.
        "neighbors_many_generic": Op(many_args,
                                     lambda kg, es, r, d: DerivedOps.neighbors_many(kg, es, r, d, NEIGHBOR_LIMIT),
                                     many_summary),
        "subgraph_generic": Op(lambda q: (q["seeds"],),
                               lambda kg, seeds: DerivedOps.subgraph(kg, seeds, **SUBGRAPH_OPTIONS), subgraph_summary),
    }


def pct(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 4) if values else None


def run_workload(kg: Any, workload: dict[str, list[dict[str, Any]]], *, budget_s: float, warmup: int,
                 profile_dir: Path | None = None, skip: set[str] | frozenset[str] = frozenset()) -> dict[str, Any]:
    """Time every operation over its queries. The first ``warmup`` queries run once untimed first (lazy opens, caches);
    an operation stops early when it has used ``budget_s`` seconds (reported as ``n`` < queries)."""
    ops = _ops()
    out: dict[str, Any] = {}
    for name in OPS:
        if name in skip or name not in workload:
            continue
        queries = workload[name]
        op = ops[name]
        prepared = [op.prepare(q) for q in queries]
        first_call_ms = None
        warm_deadline = time.perf_counter() + budget_s / 4  # a slow backend must not spend its budget warming up
        for i, args in enumerate(prepared[:warmup]):
            started = time.perf_counter()
            with contextlib.suppress(Exception):
                op.call(kg, *args)
            if i == 0:
                first_call_ms = round((time.perf_counter() - started) * 1e3, 3)
            if time.perf_counter() > warm_deadline:
                break
        profiler = None
        if profile_dir is not None:
            import cProfile

            profiler = cProfile.Profile()
        times: list[float] = []
        cpu_times: list[float] = []
        summaries: list[dict[str, Any] | None] = []
        errors: dict[str, int] = {}
        deadline = time.perf_counter() + budget_s
        for q, args in zip(queries, prepared, strict=True):
            if profiler is not None:
                profiler.enable()
            cpu_started = time.thread_time_ns()
            started = time.perf_counter_ns()
            try:
                result = op.call(kg, *args)
                error = None
            except Exception as exc:  # a failed query is counted, its time still spent
                result, error = None, type(exc).__name__
            elapsed = (time.perf_counter_ns() - started) / 1e6
            cpu_times.append((time.thread_time_ns() - cpu_started) / 1e6)
            if profiler is not None:
                profiler.disable()
            times.append(elapsed)
            if error is None:
                summaries.append(op.summarise(result, q))
            else:
                errors[error] = errors.get(error, 0) + 1
                summaries.append(None)
            if time.perf_counter() > deadline:
                break
        if profiler is not None and profile_dir is not None:
            import pstats

            with (profile_dir / f"profile-{name}.txt").open("w") as fh:
                pstats.Stats(profiler, stream=fh).sort_stats("cumulative").print_stats(40)
        ok = [s for s in summaries if s is not None]
        hits = [s["hit"] for s in ok if s.get("hit") is not None]
        ranks = [s.get("rank") for s in ok]
        entry: dict[str, Any] = {
            "n": len(times), "p50_ms": pct(times, 50), "p95_ms": pct(times, 95), "p99_ms": pct(times, 99),
            "mean_ms": round(float(np.mean(times)), 4) if times else None,
            "max_ms": round(max(times), 3) if times else None, "first_call_ms": first_call_ms, "errors": errors,
            # CPU time of the calling thread: less sensitive to other processes than wall time (for a server backend
            # it is only the client's share).
            "cpu_p50_ms": pct(cpu_times, 50), "cpu_p95_ms": pct(cpu_times, 95),
            "empty": sum(1 for s in ok if s["n"] == 0),
            "truncated": sum(1 for s in ok if s["fp"] is None) if not name.startswith("search") else None,
            "results_p50": pct([s["n"] for s in ok], 50), "results_max": max((s["n"] for s in ok), default=None),
            "fingerprints": [None if s is None else s["fp"] for s in summaries],
        }
        if hits:
            entry["hit_rate"] = round(sum(hits) / len(hits), 4)
        if name.startswith("search"):
            entry["recall_at_10"] = round(sum(r is not None for r in ranks) / max(len(ranks), 1), 4)
            entry["recall_at_1"] = round(sum(r == 1 for r in ranks) / max(len(ranks), 1), 4)
        out[name] = entry
        log(f"  {name:22s} n={entry['n']:5d} p50={entry['p50_ms']} ms p95={entry['p95_ms']} ms "
            f"cpu p50={entry['cpu_p50_ms']} ms errors={sum(errors.values())}")
    return out


# ---------------------------------------------------------------------------------------------------------------------
# Stages (each in its own process)


def stage_import(workdir: Path, size: int, seed: int, queries: int, feed: str = FEED_MODE) -> dict[str, Any]:
    from kg_gen import generate
    from kgqa.kg.embedded import EmbeddedKGBuilder

    rss_start = proc_status()
    log(f"generating {size:,} triples (seed {seed})")
    started = time.perf_counter()
    kg = generate(size, seed=seed)
    gen_s = time.perf_counter() - started
    gc.collect()
    rss_before = proc_status()
    generator_arrays = kg.heads.nbytes + kg.rels.nbytes + kg.tails.nbytes
    # The builder is fed arrow columns (FEED_MODE) and copies what it keeps, so it shares no strings with the generator
    # (with the "lists" mode it would keep references to the generator's strings; they are counted then). The arrow
    # id table the feed builds from the generator's strings is source memory, and it is inside the measured peak.
    shared_strings = 0 if feed == "arrow" else (
        sum(sys.getsizeof(s) for s in kg.node_ids) + sum(sys.getsizeof(s) for s in kg.names if s))
    peak_reset = reset_peak_rss()
    log(f"generated in {gen_s:.1f}s; RSS {mb(rss_before.get('VmRSS'))} MB; importing into the embedded store")
    store = workdir / "store"
    builder = EmbeddedKGBuilder(schema="freebase")
    cpu0, started = time.process_time(), time.perf_counter()
    kg.feed(builder, mode=feed)
    feed_s, feed_cpu = time.perf_counter() - started, time.process_time() - cpu0
    rss_fed = proc_status()
    cpu0, started = time.process_time(), time.perf_counter()
    built = builder.build(store)
    build_s, build_cpu = time.perf_counter() - started, time.process_time() - cpu0
    after = proc_status()
    stats = built.stats()
    built.close()
    del built, builder
    log(f"imported in {feed_s + build_s:.1f}s (feed {feed_s:.1f}s, build {build_s:.1f}s); peak RSS "
        f"{mb(after.get('VmHWM'))} MB")
    started = time.perf_counter()
    workload = make_workload(kg, queries, seed)
    (workdir / "queries.json").write_text(json.dumps(workload))
    files: dict[str, int] = {}
    for p in store.rglob("*"):
        if p.is_file():
            group = "fuzzy" if "fuzzy" in p.relative_to(store).parts else p.name.split(".")[0]
            files[group] = files.get(group, 0) + p.stat().st_size
    triples = stats.triples or 1
    peak = after.get("VmHWM", 0) if peak_reset else None
    import_peak_delta = None if peak is None else peak - rss_before.get("VmRSS", 0)
    return {
        "generator": kg.info | {"generate_s": round(gen_s, 2)},
        "workload_s": round(time.perf_counter() - started, 2),
        "import": {
            "import_s": round(feed_s + build_s, 2), "feed_s": round(feed_s, 2), "build_s": round(build_s, 2),
            "build_phases_s": stats.extra.get("build_seconds", {}),
            "feed_api": {"arrow": "arrow columns through add_triple_columns + add_names, 262,144 rows a call",
                         "lists": "lists of str through add_triple_columns + add_names, 262,144 rows a call",
                         "per-triple": "one add_triple / add_name call per row (as the file loaders)"}[feed],
            "triples_per_s": round(triples / (feed_s + build_s)),
            # Process CPU time (tantivy's writer threads included): closer to a quiet machine's wall time than the
            # wall time measured under contention.
            "import_cpu_s": round(feed_cpu + build_cpu, 2), "feed_cpu_s": round(feed_cpu, 2),
            "build_cpu_s": round(build_cpu, 2), "loadavg_1min": os.getloadavg()[0],
            "rss_process_start_mb": mb(rss_start.get("VmRSS")),
            "rss_before_import_mb": mb(rss_before.get("VmRSS")),
            "rss_after_feed_mb": mb(rss_fed.get("VmRSS")),
            "peak_rss_import_mb": mb(peak),
            "peak_rss_whole_process_mb": mb(after.get("VmHWM")) if not peak_reset else None,
            "peak_reset_worked": peak_reset,
            "generator_arrays_mb": mb(generator_arrays),
            "shared_strings_mb": mb(shared_strings),
            # Builder's own peak = peak above the pre-import baseline + the id/name strings it shares with the generator.
            "import_ram_mb": mb(None if import_peak_delta is None else import_peak_delta + shared_strings),
            "import_ram_bytes_per_triple": None if import_peak_delta is None else
            round((import_peak_delta + shared_strings) / triples, 1),
        },
        "store": {
            "triples": stats.triples, "entities": stats.entities, "literals": stats.literals, "names": stats.names,
            "relations": stats.relations, "disk_bytes": dir_size(store),
            "disk_bytes_per_triple": round(dir_size(store) / triples, 1), "disk_mb_by_file": {
                k: mb(v) for k, v in sorted(files.items(), key=lambda kv: -kv[1])},
        },
    }


def stage_embedded(workdir: Path, budget_s: float, warmup: int, profile: bool) -> dict[str, Any]:
    import kgqa.kg.label_index  # noqa: F401  (imported before the baseline reading: code, not store memory)
    from kgqa.kg.embedded import EmbeddedKG

    workload = json.loads((workdir / "queries.json").read_text())
    gc.collect()
    base = proc_status()
    started = time.perf_counter()
    kg = EmbeddedKG.open(workdir / "store")
    open_ms = (time.perf_counter() - started) * 1e3
    opened = proc_status()
    log(f"embedded store opened in {open_ms:.1f} ms; running {sum(len(v) for v in workload.values()):,} queries")
    ops = run_workload(kg, workload, budget_s=budget_s, warmup=warmup, profile_dir=workdir if profile else None)
    del workload
    gc.collect()
    after = proc_status()
    triples = kg.stats().triples or 1
    disk = dir_size(workdir / "store")
    anon_delta = after.get("RssAnon", 0) - base.get("RssAnon", 0)
    return {
        "open_ms": round(open_ms, 2),
        "rss": {
            "base_mb": mb(base.get("VmRSS")), "after_open_mb": mb(opened.get("VmRSS")),
            "after_workload_mb": mb(after.get("VmRSS")), "peak_mb": mb(after.get("VmHWM")),
            "anon_delta_mb": mb(anon_delta), "file_after_workload_mb": mb(after.get("RssFile")),
            "after_open_bytes_per_triple": round((opened.get("VmRSS", 0) - base.get("VmRSS", 0)) / triples, 1),
            "after_workload_bytes_per_triple": round((after.get("VmRSS", 0) - base.get("VmRSS", 0)) / triples, 1),
            # Upper bound if every page of the store were resident: private memory added + the whole mapped store.
            "serve_ram_bytes_per_triple": round((max(anon_delta, 0) + disk) / triples, 1),
        },
        "ops": ops,
    }


def stage_export(workdir: Path) -> dict[str, Any]:
    from kgqa.kg.embedded import EmbeddedKG
    from kgqa.kg.servers import export_ntriples

    nt = workdir / "kg.nt"
    started = time.perf_counter()
    with EmbeddedKG.open(workdir / "store") as kg:
        lines = export_ntriples(kg, nt)
    return {"export_s": round(time.perf_counter() - started, 2), "lines": lines, "bytes": nt.stat().st_size}


def stage_nt_import(workdir: Path) -> dict[str, Any]:
    """``kgqa kg import kg.nt`` in a clean process: the user's path; nothing but the loader and builder in memory."""
    from kgqa.kg.embedded import EmbeddedKGBuilder
    from kgqa.kg.loaders import load_into

    base = proc_status()
    reset_peak_rss()
    cpu0, started = time.process_time(), time.perf_counter()
    builder = EmbeddedKGBuilder(schema="freebase")
    report = load_into(builder, workdir / "kg.nt", "nt")
    load_s = time.perf_counter() - started
    kg = builder.build(workdir / "store-from-nt")
    total_s, total_cpu = time.perf_counter() - started, time.process_time() - cpu0
    after = proc_status()
    triples = kg.stats().triples or 1
    same = kg.stats().triples == json.loads((workdir / "stage-import.json").read_text())["store"]["triples"]
    kg.close()
    shutil.rmtree(workdir / "store-from-nt", ignore_errors=True)
    summary = report.to_dict() if hasattr(report, "to_dict") else {}
    return {"import_s": round(total_s, 2), "import_cpu_s": round(total_cpu, 2), "parse_s": round(load_s, 2),
            "build_s": round(total_s - load_s, 2),
            "peak_rss_mb": mb(after.get("VmHWM")), "base_rss_mb": mb(base.get("VmRSS")),
            "peak_bytes_per_triple": round((after.get("VmHWM", 0) - base.get("VmRSS", 0)) / triples, 1),
            "same_triple_count": same, "report": {k: v for k, v in summary.items() if k != "errors"}}


def _sparql_kg(url: str, timeout: float, graph: str | None) -> Any:
    from kgqa.kg.sparql import SparqlKG

    params = inspect.signature(SparqlKG).parameters
    options: dict[str, Any] = {"schema": "freebase"}
    if graph and "default_graph" in params:
        options["default_graph"] = graph  # Virtuoso: query the loaded graph, not the union with its system graphs
    if "timeout" in params:
        options["timeout"] = timeout
    if "retries" in params:
        options["retries"] = 0  # a retried query would hide its failure and double its time
    return SparqlKG(url, **options)


def stage_server(workdir: Path, kind: str, budget_s: float, warmup: int, timeout: float) -> dict[str, Any]:
    from kgqa.kg.servers import OxigraphServer, VirtuosoServer

    workload = json.loads((workdir / "queries.json").read_text())
    server_dir = workdir / kind
    shutil.rmtree(server_dir, ignore_errors=True)
    cls = OxigraphServer if kind == "oxigraph" else VirtuosoServer
    log(f"{kind}: loading {workdir / 'kg.nt'}")
    started = time.perf_counter()
    server = cls([workdir / "kg.nt"], server_dir)
    with server:
        load_s = time.perf_counter() - started
        log(f"{kind}: loaded and serving in {load_s:.1f}s at {server.url}")
        kg = _sparql_kg(server.url, timeout, getattr(server, "graph", None))
        ops = run_workload(kg, workload, budget_s=budget_s, warmup=warmup, skip=EMBEDDED_ONLY)
        with contextlib.suppress(Exception):
            kg.close()
        rss = tree_rss(server.proc.pid) if server.proc is not None else 0
        disk = dir_size(server_dir) - sum(p.stat().st_size for p in (server_dir / "load").glob("*")
                                          if p.is_file())
    return {"load_s": round(load_s, 2), "server_rss_mb": mb(rss), "disk_mb": mb(disk), "ops": ops}


STAGES = {"import", "embedded", "export", "nt-import", "oxigraph", "virtuoso"}


def run_stage(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="kg_bench.py _stage")
    parser.add_argument("stage", choices=sorted(STAGES))
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--size", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--budget-s", type=float, default=600.0)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--feed", choices=["arrow", "lists", "per-triple"], default=FEED_MODE)
    args = parser.parse_args(argv)
    if args.stage == "import":
        result = stage_import(args.workdir, args.size, args.seed, args.queries, args.feed)
    elif args.stage == "embedded":
        result = stage_embedded(args.workdir, args.budget_s, args.warmup, args.profile)
    elif args.stage == "export":
        result = stage_export(args.workdir)
    elif args.stage == "nt-import":
        result = stage_nt_import(args.workdir)
    else:
        result = stage_server(args.workdir, args.stage, args.budget_s, args.warmup, args.timeout)
    (args.workdir / f"stage-{args.stage}.json").write_text(json.dumps(result, indent=1))
    return 0


# ---------------------------------------------------------------------------------------------------------------------
# Orchestration


def _subprocess(stage: str, workdir: Path, *extra: str, timeout: float | None = None) -> dict[str, Any]:
    """Run one stage in a fresh interpreter; its JSON, or ``{"status": "failed", ...}``."""
    out = workdir / f"stage-{stage}.json"
    out.unlink(missing_ok=True)
    argv = [sys.executable, str(Path(__file__).resolve()), "_stage", stage, "--workdir", str(workdir), *extra]
    started = time.perf_counter()
    try:
        done = subprocess.run(argv, check=False, timeout=timeout)
        code: int | str = done.returncode
    except subprocess.TimeoutExpired:
        code = "timeout"
    wall = round(time.perf_counter() - started, 1)
    if code == 0 and out.is_file():
        result = json.loads(out.read_text())
        result["stage_wall_s"] = wall
        return result
    return {"status": "failed", "reason": f"stage {stage} exited with {code} after {wall}s (see stderr above)"}


def _servers_available() -> str | None:
    """Why the server comparison cannot run, or None."""
    for module in ("kgqa.kg.servers", "kgqa.kg.sparql"):
        if importlib.util.find_spec(module) is None:
            return f"{module} does not exist yet"
    return None


def _binary_missing(kind: str) -> str | None:
    exe = "oxigraph" if kind == "oxigraph" else "virtuoso-t"
    hint = "pip install oxigraph" if kind == "oxigraph" else "apt-get install -y virtuoso-opensource"
    return None if shutil.which(exe) else f"{exe} not on PATH ({hint})"


def agreement(embedded: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """Per operation: among queries both backends answered comparably (untruncated), how many gave the same result."""
    out: dict[str, Any] = {}
    for name, entry in other.items():
        ours = embedded.get(name, {}).get("fingerprints", [])
        theirs = entry.get("fingerprints", [])
        pairs = [(i, a, b) for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a and b]
        if not pairs:
            continue
        differ = [i for i, a, b in pairs if a != b]
        out[name] = {"compared": len(pairs), "agree": len(pairs) - len(differ), "first_differences": differ[:5]}
    return out


def ratios(embedded: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, entry in other.items():
        mine = embedded.get(name, {})
        if entry.get("p50_ms") and mine.get("p50_ms"):
            out[name] = {"p50": round(entry["p50_ms"] / mine["p50_ms"], 1),
                         "p95": round(entry["p95_ms"] / mine["p95_ms"], 1) if mine.get("p95_ms") else None}
    return out


def machine_facts() -> dict[str, Any]:
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
    versions = {}
    for package in ("numpy", "pyoxigraph", "oxigraph", "tantivy", "rapidfuzz", "httpx", "kgqa"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[package] = metadata.version(package)
    commit = None
    with contextlib.suppress(Exception):
        commit = subprocess.run(["git", "-C", str(HERE.parent), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=False).stdout.strip() or None
    virtuoso = None
    with contextlib.suppress(Exception):
        if shutil.which("dpkg-query"):
            virtuoso = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "virtuoso-opensource-7-bin"],
                                      capture_output=True, text=True, check=False).stdout.strip() or None
    return {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "cpu_count": os.cpu_count(),
            "cpu_model": cpu, "memory_gb": round(mem / 2**30, 1), "python": platform.python_version(),
            "platform": platform.platform(), "numpy": np.__version__, "versions": versions, "virtuoso": virtuoso,
            "git_commit": commit, "loadavg_start": list(os.getloadavg())}


def bench_size(size: int, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    workdir.mkdir(parents=True, exist_ok=True)
    common = ["--seed", str(args.seed), "--queries", str(args.queries), "--warmup", str(args.warmup)]
    facts = machine_facts()
    entry: dict[str, Any] = {"triples_requested": size, "workdir": str(workdir),
                             "run": {"date": facts["date"], "git_commit": facts["git_commit"]},
                             "loadavg_before": list(os.getloadavg())}
    marker = workdir / "stage-import.json"
    reuse_ok = False
    if args.reuse and marker.is_file() and (workdir / "queries.json").is_file():
        previous = json.loads(marker.read_text())
        reuse_ok = previous.get("key") == [size, args.seed, args.queries]
    if reuse_ok:
        log(f"{size:,}: reusing the store in {workdir}")
        imported = json.loads(marker.read_text())
        imported["reused"] = True
    else:
        imported = _subprocess("import", workdir, "--size", str(size), "--feed", args.feed, *common)
        if imported.get("status") == "failed":
            entry["import"] = imported
            return entry
        imported["key"] = [size, args.seed, args.queries]
        marker.write_text(json.dumps(imported, indent=1))
    entry.update({k: imported[k] for k in ("generator", "import", "store", "workload_s") if k in imported})
    entry["reused"] = bool(imported.get("reused"))
    embedded = _subprocess("embedded", workdir, *common, "--budget-s", str(args.budget_s),
                           *(["--profile"] if args.profile else []))
    entry["embedded"] = embedded
    emb_ops = embedded.get("ops", {})
    # The generic derived operations against the store's native ones: same answers (untruncated), and the speed-up.
    generic = {name[:-len("_generic")]: entry for name, entry in emb_ops.items() if name.endswith("_generic")}
    if generic:
        native = {name: emb_ops[name] for name in generic if name in emb_ops}
        embedded["generic_vs_native"] = {"agreement": agreement(native, generic), "ratios": ratios(native, generic)}

    run_servers = not args.no_servers and any(abs(size - s) < 1 for s in args.server_sizes)
    reason = _servers_available() if run_servers else None
    if (run_servers and reason is None) or args.nt_import:
        if (workdir / "kg.nt").is_file() and reuse_ok:
            entry["export"] = {"reused": True, "bytes": (workdir / "kg.nt").stat().st_size}
        else:
            log(f"{size:,}: exporting N-Triples")
            entry["export"] = _subprocess("export", workdir)
    if args.nt_import and (workdir / "kg.nt").is_file():
        log(f"{size:,}: importing the N-Triples file with the kgqa loader")
        entry["nt_import"] = _subprocess("nt-import", workdir)
    servers: dict[str, Any] = {}
    for kind in ("oxigraph", "virtuoso"):
        why = ("not requested for this size (--server-sizes)" if not run_servers else reason or _binary_missing(kind)
               or (None if (workdir / "kg.nt").is_file() else "N-Triples export failed"))
        if why:
            servers[kind] = {"status": "unrun", "reason": why}
            continue
        result = _subprocess(kind, workdir, *common, "--budget-s", str(args.server_budget_s),
                             "--timeout", str(args.server_timeout))
        if result.get("status") != "failed":
            result["ratios_vs_embedded"] = ratios(emb_ops, result.get("ops", {}))
            result["agreement_with_embedded"] = agreement(emb_ops, result.get("ops", {}))
        servers[kind] = result
    entry["servers"] = servers
    entry["loadavg_after"] = list(os.getloadavg())
    return entry


# ---------------------------------------------------------------------------------------------------------------------
# Reporting


def _strip_fingerprints(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _strip_fingerprints(v) for k, v in data.items() if k != "fingerprints"}
    if isinstance(data, list):
        return [_strip_fingerprints(v) for v in data]
    return data


def target_rows(sizes: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (target, size): measured value and pass/fail. Targets are stated for 10M; smaller sizes are shown
    as indicative."""
    rows = []
    for key, (field_name, limit, label) in TARGETS.items():
        for size_key, entry in sorted(sizes.items(), key=lambda kv: int(kv[0])):
            if key == "import_s":
                value = entry.get("import", {}).get("import_s")
            elif key == "import_ram_bpt":
                value = entry.get("import", {}).get("import_ram_bytes_per_triple")
            elif key == "serve_ram_bpt":
                value = entry.get("embedded", {}).get("rss", {}).get("serve_ram_bytes_per_triple")
            else:
                value = entry.get("embedded", {}).get("ops", {}).get(key, {}).get(field_name)
            rows.append({"target": label, "key": key, "size": int(size_key), "value": value, "limit": limit,
                         "pass": None if value is None else value < limit,
                         "binding": int(size_key) >= TARGET_SIZE})
    return rows


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _size_label(n: int) -> str:
    return f"{n / 1e6:g}M" if n >= 1e6 else f"{n / 1e3:g}k"


def write_markdown(result: dict[str, Any], path: Path) -> None:
    m = result["machine"]
    lines = [
        "# KG benchmark (benchmarks/kg_bench.py)", "",
        f"Run {m['date']} on {m['cpu_count']} CPUs ({m['cpu_model']}), {m['memory_gb']} GB RAM, Python {m['python']}, "
        f"numpy {m['numpy']}, commit {m.get('git_commit')}. Load average at start: "
        f"{', '.join(f'{x:.2f}' for x in m['loadavg_start'])}.",
        f"Command: `{result['command']}`", "",
    ]
    if result.get("note"):
        lines += [f"**Note:** {result['note']}", ""]
    lines += ["## Targets (issue 2, item 3: embedded store at 10M triples)", "",
              "| target | size | measured | limit | pass |", "|---|---|---|---|---|"]
    for row in result["targets"]:
        verdict = "-" if row["pass"] is None else ("PASS" if row["pass"] else "FAIL")
        if not row["binding"] and row["pass"] is not None:
            verdict += " (indicative)"
        lines.append(f"| {row['target']} | {_size_label(row['size'])} | {_fmt(row['value'])} | {_fmt(row['limit'])} | "
                     f"{verdict} |")
    for size_key, entry in sorted(result["sizes"].items(), key=lambda kv: int(kv[0])):
        size = int(size_key)
        lines += ["", f"## {_size_label(size)} triples", ""]
        gen, imp, store = entry.get("generator", {}), entry.get("import", {}), entry.get("store", {})
        if gen:
            run = entry.get("run", {})
            if run:
                lines.append(f"Measured {run.get('date')} at commit {run.get('git_commit')}"
                             f"{' (store reused from an earlier import)' if entry.get('reused') else ''}.")
            lines.append(f"Generated: {gen.get('triples'):,} triples, {gen.get('relations')} relations, "
                         f"{gen.get('entities'):,} entities with edges, {gen.get('cvt_nodes'):,} CVTs "
                         f"({gen.get('cvt_share_of_nodes', 0) * 100:.1f}% of nodes), {gen.get('literal_nodes'):,} "
                         f"literals, max degree {gen.get('max_degree'):,} ({gen.get('nodes_with_100k_edges')} nodes "
                         f"with 100k+ edges, {gen.get('nodes_with_10k_edges')} with 10k+), generated in "
                         f"{gen.get('generate_s')} s. Load average before/after: "
                         f"{_fmt(entry.get('loadavg_before', [None])[0])} / "
                         f"{_fmt(entry.get('loadavg_after', [None])[0])}.")
            lines.append("")
        emb = entry.get("embedded", {})
        rss = emb.get("rss", {})
        nt = entry.get("nt_import", {})
        lines += ["| import and memory | value |", "|---|---|",
                  f"| import (feed + build) | {_fmt(imp.get('import_s'))} s (feed {_fmt(imp.get('feed_s'))} s, "
                  f"build {_fmt(imp.get('build_s'))} s); CPU time {_fmt(imp.get('import_cpu_s'))} s (feed "
                  f"{_fmt(imp.get('feed_cpu_s'))} s, build {_fmt(imp.get('build_cpu_s'))} s) |",
                  f"| peak RSS during import (process) | {_fmt(imp.get('peak_rss_import_mb'))} MB (before import "
                  f"{_fmt(imp.get('rss_before_import_mb'))} MB, of which generator arrays "
                  f"{_fmt(imp.get('generator_arrays_mb'))} MB) |",
                  f"| builder's RAM at peak (peak - baseline + shared strings) | {_fmt(imp.get('import_ram_mb'))} MB = "
                  f"{_fmt(imp.get('import_ram_bytes_per_triple'))} B/triple |",
                  f"| store on disk | {_fmt(mb(store.get('disk_bytes')))} MB = "
                  f"{_fmt(store.get('disk_bytes_per_triple'))} B/triple |",
                  f"| open | {_fmt(emb.get('open_ms'))} ms |",
                  f"| RSS: base / after open / after workload | {_fmt(rss.get('base_mb'))} / "
                  f"{_fmt(rss.get('after_open_mb'))} / {_fmt(rss.get('after_workload_mb'))} MB "
                  f"({_fmt(rss.get('after_workload_bytes_per_triple'))} B/triple over base) |",
                  f"| serving RAM upper bound (anon delta + whole store mapped) | "
                  f"{_fmt(rss.get('serve_ram_bytes_per_triple'))} B/triple |"]
        if nt:
            if nt.get("status") == "failed":
                lines.append(f"| `kgqa kg import` of the N-Triples file | failed: {nt.get('reason')} |")
            else:
                lines.append(f"| `kgqa kg import` of the N-Triples file (clean process) | {_fmt(nt.get('import_s'))} s "
                             f"(parse {_fmt(nt.get('parse_s'))} s), peak RSS {_fmt(nt.get('peak_rss_mb'))} MB = "
                             f"{_fmt(nt.get('peak_bytes_per_triple'))} B/triple |")
        servers = entry.get("servers", {})
        for kind, srv in servers.items():
            if srv.get("status") in ("unrun", "failed"):
                lines.append(f"| {kind} | {srv['status']}: {srv.get('reason')} |")
            else:
                lines.append(f"| {kind}: load + start | {_fmt(srv.get('load_s'))} s, server RSS after workload "
                             f"{_fmt(srv.get('server_rss_mb'))} MB, disk {_fmt(srv.get('disk_mb'))} MB |")
        live = [k for k, v in servers.items() if "ops" in v]
        header = "| operation | embedded p50 | p95 | CPU p50 | results p50 | notes |"
        sep = "|---|---|---|---|---|---|"
        for kind in live:
            header += f" {kind} p50 | p95 | x p50 | agree |"
            sep += "---|---|---|---|"
        lines += ["", "Latency in ms over the same queries (p50 / p95 wall time; CPU p50 = thread CPU time of the "
                      "embedded call, less sensitive to a busy machine; `x` = server p50 / embedded p50; `agree` = "
                      "identical results among untruncated answers):", "", header, sep]
        for name in OPS:
            e = emb.get("ops", {}).get(name)
            if not e:
                continue
            notes = []
            if e.get("hit_rate") is not None and not name.startswith("search"):
                notes.append(f"path end found in {e['hit_rate'] * 100:.0f}% of untruncated results")
            if e.get("truncated"):
                notes.append(f"{e['truncated']} truncated")
            if e.get("recall_at_10") is not None:
                notes.append(f"recall@10 {e['recall_at_10']:.2f}, @1 {e['recall_at_1']:.2f}")
            if e.get("errors"):
                notes.append(f"errors {e['errors']}")
            if e.get("n") and e["n"] < result["args"]["queries"]:
                notes.append(f"n={e['n']} (budget)")
            row = (f"| {name} | {_fmt(e.get('p50_ms'))} | {_fmt(e.get('p95_ms'))} | {_fmt(e.get('cpu_p50_ms'))} | "
                   f"{_fmt(e.get('results_p50'))} | {'; '.join(notes)} |")
            for kind in live:
                s = servers[kind]["ops"].get(name, {})
                ratio = servers[kind].get("ratios_vs_embedded", {}).get(name, {}).get("p50")
                agree = servers[kind].get("agreement_with_embedded", {}).get(name)
                extra = []
                if s.get("errors"):
                    extra.append(f"errors {s['errors']}")
                if s.get("n") and s["n"] < result["args"]["queries"]:
                    extra.append(f"n={s['n']}")
                agree_text = f"{agree['agree']}/{agree['compared']}" if agree else "-"
                if extra:
                    agree_text += " (" + ", ".join(extra) + ")"
                row += f" {_fmt(s.get('p50_ms'))} | {_fmt(s.get('p95_ms'))} | {_fmt(ratio)} | {agree_text} |"
            lines.append(row)
        versus = emb.get("generic_vs_native", {})
        if versus.get("ratios"):
            parts = []
            for name, ratio in versus["ratios"].items():
                agree = versus.get("agreement", {}).get(name)
                parts.append(f"`{name}` {_fmt(ratio.get('p50'))}x slower at p50"
                             + (f" ({agree['agree']}/{agree['compared']} untruncated answers identical)" if agree else ""))
            lines += ["", "Generic derived operations (DerivedOps over the store's primitives) against the store's "
                          "native ones: " + "; ".join(parts) + "."]
    lines += ["", "Operations: `relations_*` = relations(entity, out/in); `neighbors` = neighbors(entity, relation, "
              f"direction, limit={NEIGHBOR_LIMIT}); `chain_Nhop` = run_chain from one topic along a real N-hop path "
              f"(limit {CHAIN_LIMIT}); `chain_2hop_bindings` = the same with paths; `chain_relations` = relations at "
              "the end of a 1-hop chain; `filter_by_constraint` = a 2-hop main chain with a 1-hop constraint off the "
              "middle (CVT) node or the answer; `names_100` = names of 100 random nodes; `search_exact` / "
              "`search_fuzzy` = label search (fuzzy with 1-2 typos injected), limit 10; `neighbors_many` = "
              f"neighbours of up to {MANY_ENTITIES} entities sharing a relation, limit {NEIGHBOR_LIMIT} each; "
              "`subgraph` = a BFS around one topic (depth {depth}, {max_per_node} edges per node, {max_triples} "
              "triples at most); `*_generic` = the same through the generic DerivedOps (embedded store only). Topic "
              "entities: half uniform, half degree-weighted.".format(**SUBGRAPH_OPTIONS)]
    path.write_text("\n".join(lines) + "\n")


def parse_sizes(text: str) -> list[int]:
    return [int(float(s)) for s in text.split(",") if s.strip()]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_stage":
        return run_stage(argv[1:])
    parser = argparse.ArgumentParser(description="Benchmark the KG layer (see benchmarks/README.md).")
    parser.add_argument("--sizes", default="1e6,1e7", help="comma-separated triple counts (default 1e6,1e7)")
    parser.add_argument("--queries", type=int, default=1000, help="queries per operation (default 1000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warmup", type=int, default=20, help="untimed warm-up queries per operation")
    parser.add_argument("--budget-s", type=float, default=600.0, help="time budget per embedded operation")
    parser.add_argument("--server-sizes", default=None,
                        help="sizes at which to run the servers (default: all of --sizes)")
    parser.add_argument("--no-servers", action="store_true", help="skip Oxigraph/Virtuoso")
    parser.add_argument("--server-budget-s", type=float, default=120.0,
                        help="time budget per server operation (a slow operation reports fewer queries)")
    parser.add_argument("--server-timeout", type=float, default=30.0, help="per-query HTTP timeout for the servers")
    parser.add_argument("--feed", choices=["arrow", "lists", "per-triple"], default=FEED_MODE,
                        help="how the generator feeds the builder: arrow columns (default), lists of str, or one "
                             "add_triple call per row as the file loaders do")
    parser.add_argument("--nt-import", action="store_true",
                        help="also time `kgqa kg import` of the exported N-Triples file in a clean process")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="where stores and N-Triples go (default: a temp dir, removed unless --keep)")
    parser.add_argument("--keep", action="store_true", help="keep the work dir")
    parser.add_argument("--reuse", action="store_true", help="reuse a store already in --workdir for the same size/seed")
    parser.add_argument("--merge", action="store_true",
                        help="keep sizes from the existing results file that this run does not measure")
    parser.add_argument("--profile", action="store_true", help="cProfile each embedded operation into the work dir")
    parser.add_argument("--note", default=None, help="a note printed at the top of the markdown report")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    parser.add_argument("--render", action="store_true",
                        help="only rewrite kg_bench.md from the existing kg_bench.json (no measurement)")
    args = parser.parse_args(argv)
    if args.render:
        existing = json.loads((args.out / "kg_bench.json").read_text())
        existing["targets"] = target_rows(existing["sizes"])
        write_markdown(existing, args.out / "kg_bench.md")
        return 0
    sizes = parse_sizes(args.sizes)
    args.server_sizes = parse_sizes(args.server_sizes) if args.server_sizes else sizes
    root = args.workdir or Path(tempfile.mkdtemp(prefix="kgqa-kg-bench-"))
    result: dict[str, Any] = {
        "benchmark": "kg_bench", "version": 1, "command": "python benchmarks/kg_bench.py " + shlex.join(argv),
        "machine": machine_facts(), "args": {k: v for k, v in vars(args).items() if k not in ("out", "workdir")}
        | {"workdir": str(root)}, "targets_spec": {k: {"field": f, "limit": v, "label": label}
                                                   for k, (f, v, label) in TARGETS.items()},
        "note": args.note, "sizes": {},
    }
    out_json = args.out / "kg_bench.json"
    if args.merge and out_json.is_file():
        previous = json.loads(out_json.read_text())
        result["sizes"] = {k: v for k, v in previous.get("sizes", {}).items() if int(k) not in sizes}
    try:
        for size in sizes:
            log(f"=== {size:,} triples ===")
            entry = bench_size(size, args, root / f"size-{size}-seed-{args.seed}")
            result["sizes"][str(size)] = _strip_fingerprints(entry)
            result["targets"] = target_rows(result["sizes"])
            result["machine"]["loadavg_end"] = list(os.getloadavg())
            args.out.mkdir(parents=True, exist_ok=True)
            out_json.write_text(json.dumps(result, indent=1) + "\n")
            write_markdown(result, args.out / "kg_bench.md")
            if not args.keep and not args.workdir:
                shutil.rmtree(root / f"size-{size}-seed-{args.seed}", ignore_errors=True)
    finally:
        if not args.keep and not args.workdir:
            shutil.rmtree(root, ignore_errors=True)
    log(f"results in {out_json} and {args.out / 'kg_bench.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
