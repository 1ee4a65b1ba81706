"""Endpoint benchmark: what `kgqa kg endpoint start` costs per engine, and what a query costs against the embedded store.

For each size (generated Freebase-style KG from kg_gen.py, written as N-Triples) and each engine (Oxigraph, Virtuoso):
load rate (triples/s, the whole `start`: load, Virtuoso's full-text index and checkpoint, server start), disk per
triple (the store directory after loading), server RSS; then latency (p50/p95 ms) of the same queries on the embedded
store built from the same graph and on the endpoint (`open_kg("endpoint:DIR")`). Also the rate of `kgqa kg
freebase-filter` on a synthetic dump in Freebase's format (the time of a full-dump filter follows from it).

    python benchmarks/endpoint_bench.py --sizes 1e6 10e6      # 10M only if 1M took < 2 min per engine
    python benchmarks/endpoint_bench.py --sizes 1e6 --engines oxigraph

Writes benchmarks/results/endpoint_bench.{json,md}. docs/freebase.md and docs/wikidata.md quote these numbers.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # kg_gen next to this file

import kg_gen  # noqa: E402
from kgqa.kg.base import Direction, Hop  # noqa: E402
from kgqa.kg.embedded import EmbeddedKGBuilder  # noqa: E402
from kgqa.kg.endpoint import endpoint_status, open_endpoint_kg, start_endpoint, stop_endpoint  # noqa: E402

RESULTS = HERE / "results"


def log(message: str) -> None:
    print(f"[{datetime.now().strftime('%H:%M:%S')}] {message}", flush=True)


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def make_queries(kg: Any, n: int, seed: int) -> list[tuple[str, Any]]:
    """The same queries for every backend: relation listings, neighbours, 2-hop chains and name batches from entities
    that have edges (drawn from the embedded store)."""
    rng = random.Random(seed)
    ids = [h for h, _r, _t in _sample_triples(kg, n * 4, rng)]
    queries: list[tuple[str, Any]] = []
    for entity in ids[:n]:
        queries.append(("relations_out", entity))
        rels = kg.relations(entity, Direction.OUT)
        if rels:
            rel = rels[rng.randrange(len(rels))]
            queries.append(("neighbors", (entity, rel)))
            nxt = kg.neighbors(entity, rel, Direction.OUT, limit=5)
            if nxt and not nxt[0].startswith('"'):
                rels2 = kg.relations(nxt[0], Direction.OUT)
                if rels2:
                    queries.append(("chain_2hop", (entity, (Hop(rel, Direction.OUT),
                                                            Hop(rels2[0], Direction.OUT)))))
    for start in range(0, min(len(ids), 10 * 100), 100):
        queries.append(("names_100", ids[start:start + 100]))
    return queries


def _sample_triples(kg: Any, n: int, rng: random.Random) -> list[tuple[str, str, str]]:
    picked: list[tuple[str, str, str]] = []
    for i, triple in enumerate(kg.iter_triples()):
        if len(picked) < n:
            picked.append(triple)
        else:
            j = rng.randrange(i + 1)
            if j < n:
                picked[j] = triple
        if i > 400_000:
            break
    return picked


def run_queries(kg: Any, queries: list[tuple[str, Any]]) -> dict[str, dict[str, Any]]:
    times: dict[str, list[float]] = {}
    for op, arg in queries:
        started = time.perf_counter()
        if op == "relations_out":
            kg.relations(arg, Direction.OUT)
        elif op == "neighbors":
            kg.neighbors(arg[0], arg[1], Direction.OUT, limit=100)
        elif op == "chain_2hop":
            kg.run_chain([arg[0]], arg[1], limit=1000)
        elif op == "names_100":
            kg.names(arg)
        times.setdefault(op, []).append((time.perf_counter() - started) * 1000)
    return {op: {"n": len(v), "p50_ms": round(pct(v, 0.5) or 0, 4), "p95_ms": round(pct(v, 0.95) or 0, 4)}
            for op, v in times.items()}


def bench_filter(workdir: Path, lines: int) -> dict[str, Any]:
    """freebase-filter on a synthetic gzipped dump in Freebase's tab-separated format: half kept, half noise."""
    from kgqa.kg.freebase_filter import filter_freebase

    ns = "http://rdf.freebase.com/ns/"
    dump = workdir / "freebase-sample.gz"
    rng = random.Random(0)
    with gzip.open(dump, "wt", encoding="utf-8", compresslevel=6) as fh:
        for i in range(lines):
            s = f"<{ns}m.0{i // 8:x}>"
            k = i % 8
            if k == 0:
                fh.write(f'{s}\t<{ns}type.object.name>\t"Name {i}"@en\t.\n')
            elif k == 1:
                fh.write(f'{s}\t<{ns}type.object.name>\t"Nom {i}"@fr\t.\n')
            elif k == 2:
                fh.write(f'{s}\t<{ns}type.object.key>\t"/wikipedia/en_id/{i}"\t.\n')
            elif k == 3:
                fh.write(f"{s}\t<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>\t<{ns}common.topic>\t.\n")
            else:
                fh.write(f"{s}\t<{ns}film.film.rel_{rng.randrange(50)}>\t<{ns}m.0{rng.randrange(lines):x}>\t.\n")
    report = filter_freebase(dump, workdir / "filtered.nt.gz", progress=False)
    return {"lines": report.read, "kept": report.kept, "seconds": round(report.seconds, 2),
            "lines_per_s": round(report.read / report.seconds), "input_mb": round(dump.stat().st_size / 1e6, 1)}


def bench_size(size: int, engines: list[str], workdir: Path, queries_n: int, memory_gb: float) -> dict[str, Any]:
    log(f"generating {size:,} triples")
    kg = kg_gen.generate(size, seed=0)
    nt = workdir / f"kg{size}.nt"
    lines = kg.write_ntriples(nt)
    log(f"wrote {lines:,} lines ({nt.stat().st_size / 1e6:,.0f} MB)")
    builder = EmbeddedKGBuilder(schema="freebase")
    kg.feed(builder)
    embedded = builder.build(workdir / f"embedded{size}")
    queries = make_queries(embedded, queries_n, seed=1)
    result: dict[str, Any] = {"triples": size, "nt_lines": lines, "nt_bytes": nt.stat().st_size,
                              "embedded": {"queries": run_queries(embedded, queries)}}
    for engine in engines:
        directory = workdir / f"{engine}{size}"
        log(f"{engine}: start --data {nt.name}")
        started = time.perf_counter()
        state = start_endpoint(directory, engine=engine, data=[str(nt)],
                               memory_gb=memory_gb if engine == "virtuoso" else None,
                               progress=lambda line: log("  " + line))
        seconds = time.perf_counter() - started
        try:
            item = state.files[0]
            endpoint = open_endpoint_kg(str(directory), timeout=60)
            run_queries(endpoint, queries[:50])  # warm-up
            latency = run_queries(endpoint, queries)
            status = endpoint_status(directory, count_timeout=600)
            result[engine] = {
                "start_seconds": round(seconds, 2), "load_seconds": item.seconds, "triples_loaded": item.triples,
                "triples_counted": status["triples"], "load_rate_tps": round(lines / seconds),
                "disk_bytes": status["disk_bytes"], "disk_bytes_per_triple": round(status["disk_bytes"] / lines, 1),
                "rss_bytes_after_queries": status["memory_bytes"], "queries": latency,
            }
            log(f"{engine}: {lines / seconds:,.0f} triples/s, {status['disk_bytes'] / lines:.0f} B/triple on disk")
        finally:
            stop_endpoint(directory)
            shutil.rmtree(directory, ignore_errors=True)
    nt.unlink(missing_ok=True)
    return result


def machine() -> dict[str, Any]:
    mem = 0
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) * 1024
    cpu = platform.processor() or ""
    with open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True,
                            check=False).stdout.strip()
    oxigraph = subprocess.run(["oxigraph", "--version"], capture_output=True, text=True, check=False).stdout.strip()
    return {"cpus": os.cpu_count(), "cpu": cpu, "ram_gb": round(mem / 2**30, 1), "python": platform.python_version(),
            "commit": commit, "oxigraph": oxigraph, "virtuoso": "07.20.3229 (Debian virtuoso-opensource)",
            "loadavg": os.getloadavg()}


def write_markdown(data: dict[str, Any], path: Path) -> None:
    m = data["machine"]
    lines = [
        "# Endpoint benchmark (benchmarks/endpoint_bench.py)", "",
        f"Run {data['run_at']} on {m['cpus']} CPUs ({m['cpu']}), {m['ram_gb']} GB RAM, Python {m['python']}, "
        f"commit {m['commit']}; {m['oxigraph']}, Virtuoso {m['virtuoso']}. Command: `{data['command']}`.", "",
        "Load = the whole `kgqa kg endpoint start` (load, Virtuoso's full-text index of literals and checkpoint, "
        f"server start), Virtuoso with `--memory {data['memory_gb']:g}`. Disk = the store directory after loading.", "",
        "| size (lines) | engine | start s | triples/s | disk | B/triple | server RSS |", "|---|---|---|---|---|---|---|",
    ]
    for size in data["sizes"]:
        for engine in ("oxigraph", "virtuoso"):
            r = size.get(engine)
            if not r:
                continue
            lines.append(f"| {size['nt_lines']:,} | {engine} | {r['start_seconds']:.1f} | {r['load_rate_tps']:,} | "
                         f"{r['disk_bytes'] / 1e6:,.0f} MB | {r['disk_bytes_per_triple']:.0f} | "
                         f"{(r['rss_bytes_after_queries'] or 0) / 1e6:,.0f} MB |")
    lines += ["", "Query latency, ms (p50 / p95; the same queries on each backend):", "",
              "| size | operation | embedded | oxigraph | virtuoso |", "|---|---|---|---|---|"]
    for size in data["sizes"]:
        for op, emb in size["embedded"]["queries"].items():
            cells = [f"{emb['p50_ms']:.3f} / {emb['p95_ms']:.3f}"]
            for engine in ("oxigraph", "virtuoso"):
                q = size.get(engine, {}).get("queries", {}).get(op)
                cells.append(f"{q['p50_ms']:.2f} / {q['p95_ms']:.2f}" if q else "-")
            lines.append(f"| {size['nt_lines']:,} | {op} (n={emb['n']}) | " + " | ".join(cells) + " |")
    f = data.get("filter")
    if f:
        lines += ["", f"`freebase-filter` on a synthetic gzipped dump in Freebase's format ({f['lines']:,} lines, "
                      f"{f['input_mb']} MB, half kept): {f['seconds']} s, **{f['lines_per_s']:,} lines/s** "
                      "(one core)."]
    if data.get("notes"):
        lines += ["", *[f"Note: {n}" for n in data["notes"]]]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["1e6"], help="triples per generated KG (1e6 style)")
    parser.add_argument("--engines", nargs="+", default=["oxigraph", "virtuoso"])
    parser.add_argument("--queries", type=int, default=300, help="entities the query workload starts from")
    parser.add_argument("--memory", type=float, default=4.0, help="Virtuoso --memory (GB)")
    parser.add_argument("--filter-lines", type=float, default=2e6, help="lines of the freebase-filter sample (0: skip)")
    parser.add_argument("--max-1m-seconds", type=float, default=120.0,
                        help="skip sizes above 1M when an engine's 1M start took longer than this")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    sizes = sorted(int(float(s)) for s in args.sizes)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="kgqa-endpoint-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {"run_at": datetime.now(UTC).isoformat(timespec="seconds"), "machine": machine(),
                            "command": "python benchmarks/endpoint_bench.py " + " ".join(argv or sys.argv[1:]),
                            "memory_gb": args.memory, "sizes": [], "notes": []}
    try:
        if args.filter_lines:
            log("freebase-filter rate")
            data["filter"] = bench_filter(workdir, int(args.filter_lines))
        for size in sizes:
            if size > 1_000_000 and data["sizes"]:
                slow = [e for e in args.engines if data["sizes"][0].get(e, {}).get("start_seconds", 0)
                        > args.max_1m_seconds]
                if slow:
                    data["notes"].append(f"{size:,} skipped: 1M took more than {args.max_1m_seconds:.0f} s on {slow}")
                    continue
            data["sizes"].append(bench_size(size, args.engines, workdir, args.queries, args.memory))
            RESULTS.mkdir(exist_ok=True)
            (RESULTS / "endpoint_bench.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
            write_markdown(data, RESULTS / "endpoint_bench.md")
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "endpoint_bench.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    write_markdown(data, RESULTS / "endpoint_bench.md")
    log(f"wrote {RESULTS / 'endpoint_bench.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
