"""Import cost of the embedded store's table hash: millions of short strings, and one long field (issue 16, finding 7).

The store orders its node and label tables by a 64-bit hash of each string (``kgqa.kg.embedded.arrays._hash_packed``,
equal to ``_key_hash`` of one string). This benchmark times, each in a fresh process:

* ``hash``: the table hash alone (CPU seconds, best of ``--repeats``) over the distinct node ids and the normalised
  labels of a generated Freebase-style KG (benchmarks/kg_gen.py, ``--triples``), and over 2M random ``m.0...`` mids;
* ``build``: an arrow-column import of that KG (feed + ``build()``), with the store's own ``order nodes`` and
  ``exact labels`` phases (where the hash runs);
* ``tsv``: ``load_into`` of that KG written as a TSV file, then ``build()`` (the path of ``kgqa kg import``, including
  the per-line field-length check);
* ``long``: a TSV of 10,000 short triples plus one triple whose tail is a ``--long-sizes`` MB id, imported with the
  field limit raised above it (``KGQA_MAX_FIELD_CHARS``): wall seconds and peak RSS, stopped at ``--timeout``;
* ``cap``: the same file with a 3 MB field under the default limit: how long until the error (or the import).

Run the same command on two trees and keep both under their labels, e.g. before and after a change::

    PYTHONPATH=/path/to/old/src python benchmarks/import_fields_bench.py --label before
    python benchmarks/import_fields_bench.py --label after --merge

Results: ``benchmarks/results/import_fields_bench.json`` and ``.md`` (``--out`` elsewhere).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
LONG_ROWS = 10_000


def _best(fn: Any, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.process_time()
        fn()
        best = min(best, time.process_time() - started)
    return best


def _packed_of(strings: list[str]) -> tuple[Any, Any]:
    import pyarrow as pa

    from kgqa.kg.embedded import _packed

    return _packed(pa.array(strings, type=pa.large_string()))


def stage_hash(triples: int, repeats: int) -> dict[str, Any]:
    import numpy as np

    sys.path.insert(0, str(HERE))
    from kg_gen import generate
    from kgqa.kg.embedded import _hash_packed
    from kgqa.normalize import normalize_labels

    kg = generate(triples, seed=0)
    rng = np.random.default_rng(0)
    cases = {
        "node ids": kg.node_ids,
        "labels": [s for s in normalize_labels([n for n in kg.names if n]) if s],
        "2M mids": [f"m.0{x:x}" for x in rng.integers(0, 2**40, 2_000_000)],
    }
    out = {}
    for name, strings in cases.items():
        data, offsets = _packed_of(strings)
        out[name] = {"strings": len(strings), "bytes": len(data),
                     "cpu_s": round(_best(lambda d=data, o=offsets: _hash_packed(d, o), repeats), 4)}
    return out


def stage_build(triples: int, workdir: Path) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    from kg_gen import generate
    from kgqa.kg.embedded import EmbeddedKGBuilder

    kg = generate(triples, seed=0)
    wall, cpu = time.perf_counter(), time.process_time()
    builder = EmbeddedKGBuilder(schema="freebase")
    kg.feed(builder, mode="arrow")
    store = builder.build(workdir / "build-store")
    return {"wall_s": round(time.perf_counter() - wall, 3), "cpu_s": round(time.process_time() - cpu, 3),
            "phases": store.stats().extra.get("build_seconds", {})}


def stage_tsv(triples: int, workdir: Path) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    from kg_gen import generate
    from kgqa.kg.embedded import EmbeddedKGBuilder
    from kgqa.kg.loaders import load_into

    source = workdir / f"kg{triples}.tsv"
    if not source.exists():
        kg = generate(triples, seed=0)
        with source.open("w", encoding="utf-8") as fh:
            fh.writelines(f"{h}\t{r}\t{t}\n" for h, r, t in kg.iter_triples())
    wall, cpu = time.perf_counter(), time.process_time()
    builder = EmbeddedKGBuilder(schema="freebase")
    report = load_into(builder, source, "tsv")
    load_s = time.perf_counter() - wall
    builder.build(workdir / "tsv-store")
    return {"wall_s": round(time.perf_counter() - wall, 3), "cpu_s": round(time.process_time() - cpu, 3),
            "load_s": round(load_s, 3), "triples": report.triples}


def _long_file(workdir: Path, megabytes: float) -> Path:
    path = workdir / f"long-{megabytes:g}MB.tsv"
    if not path.exists():
        with path.open("w", encoding="utf-8") as fh:
            fh.writelines(f"e{i}\trel\te{i + 1}\n" for i in range(LONG_ROWS))
            fh.write("e0\trel\t" + "x" * int(megabytes * 1_000_000) + "\n")
    return path


def stage_long(megabytes: float, workdir: Path) -> dict[str, Any]:
    from kgqa.errors import KGQAError
    from kgqa.kg.embedded import EmbeddedKGBuilder
    from kgqa.kg.loaders import load_into

    source = _long_file(workdir, megabytes)
    started = time.perf_counter()
    try:
        builder = EmbeddedKGBuilder()
        load_into(builder, source, "tsv")
        builder.build(workdir / f"long-store-{megabytes:g}")
        outcome = "imported"
    except KGQAError as exc:
        outcome = f"error: {str(exc)[:160]}"
    return {"wall_s": round(time.perf_counter() - started, 3), "outcome": outcome,
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def _run_stage(args: list[str], *, env: dict[str, str] | None = None, timeout: float = 3600) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, __file__, "--stage", *args], capture_output=True, text=True,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"outcome": f"not finished in {timeout:g} s", "wall_s": round(time.perf_counter() - started, 1)}
    if proc.returncode != 0:
        return {"outcome": f"failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(args: argparse.Namespace) -> dict[str, Any]:
    if args.workdir:
        Path(args.workdir).mkdir(parents=True, exist_ok=True)
        return _measure(args, Path(args.workdir))
    with tempfile.TemporaryDirectory(prefix="kgqa-import-fields-") as tmp:
        return _measure(args, Path(tmp))


def _measure(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    common = ["--triples", str(args.triples), "--workdir", str(workdir), "--repeats", str(args.repeats)]
    result: dict[str, Any] = {"hash": _run_stage(["hash", *common])}
    for stage in ("build", "tsv"):
        runs = [_run_stage([stage, *common]) for _ in range(args.repeats)]
        result[stage] = min(runs, key=lambda r: r.get("cpu_s", float("inf")))
        result[stage]["wall_s_all"] = [r.get("wall_s") for r in runs]
    result["long"] = {}
    for size in args.long_sizes:
        env = {**os.environ, "KGQA_MAX_FIELD_CHARS": str(int(size * 1_000_000) + 1000)}
        result["long"][f"{size:g}"] = _run_stage(["long", "--size", str(size), *common], env=env, timeout=args.timeout)
    env = {k: v for k, v in os.environ.items() if k != "KGQA_MAX_FIELD_CHARS"}
    result["cap"] = _run_stage(["long", "--size", "3", *common], env=env, timeout=args.timeout)
    return result


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def render(results: dict[str, Any]) -> str:
    labels = list(results["runs"])
    lines = ["# Import cost of the table hash (benchmarks/import_fields_bench.py)", ""]
    for label in labels:
        run = results["runs"][label]
        lines.append(f"* **{label}**: {run['when']} at commit {run['commit']} (kgqa from `{run['kgqa']}`), "
                     f"{run['cpus']} CPUs, load average at start {run['load']}. Command: `{run['command']}`")
    if results.get("note"):
        lines += ["", f"**Note:** {results['note']}"]
    lines += ["", "## Many short strings: the table hash alone (CPU s, best of repeats)", "",
              "| strings | count | bytes | " + " | ".join(labels) + " |", "|---|---|---|" + "---|" * len(labels)]
    first = results["runs"][labels[0]]["result"]["hash"]
    for name, case in first.items():
        cells = [str(results["runs"][lb]["result"]["hash"].get(name, {}).get("cpu_s", "-")) for lb in labels]
        lines.append(f"| {name} | {case['strings']:,} | {case['bytes']:,} | " + " | ".join(cells) + " |")
    lines += ["", "## Whole imports of the generated KG (best of repeats by CPU time)", "",
              "| import | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for stage, title in (("build", "arrow columns + build: wall / CPU s"), ("tsv", "TSV file via load_into + build: "
                                                                             "wall / CPU s")):
        cells = []
        for lb in labels:
            r = results["runs"][lb]["result"][stage]
            cells.append(f"{r.get('wall_s', '-')} / {r.get('cpu_s', '-')}")
        lines.append(f"| {title} | " + " | ".join(cells) + " |")
    cells = []
    for lb in labels:
        phases = results["runs"][lb]["result"]["build"].get("phases", {})
        cells.append(f"{phases.get('order nodes', '-')} / {phases.get('exact labels', '-')}")
    lines.append("| hash phases of the build: order nodes / exact labels (s) | " + " | ".join(cells) + " |")
    lines += ["", f"## One long field among {LONG_ROWS:,} short triples (limit raised above it)", "",
              "| field | " + " | ".join(f"{lb}: wall s, peak RSS MB" for lb in labels) + " |",
              "|---|" + "---|" * len(labels)]
    sizes = list(dict.fromkeys(s for lb in labels for s in results["runs"][lb]["result"]["long"]))
    for size in sizes:
        cells = []
        for lb in labels:
            r = results["runs"][lb]["result"]["long"].get(size)
            if r is None:
                cells.append("-")
            elif r.get("outcome") == "imported":
                cells.append(f"{r['wall_s']} s, {r['peak_rss_mb']:,} MB")
            else:
                cells.append(r.get("outcome", "?"))
        lines.append(f"| {size} MB | " + " | ".join(cells) + " |")
    lines += ["", "## A 3 MB field under the default limit", "", "| " + " | ".join(labels) + " |",
              "|" + "---|" * len(labels)]
    cells = []
    for lb in labels:
        r = results["runs"][lb]["result"]["cap"]
        cells.append(f"{r.get('wall_s', '-')} s: {r.get('outcome', '?')}")
    lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", choices=["hash", "build", "tsv", "long"], help=argparse.SUPPRESS)
    parser.add_argument("--size", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--triples", type=lambda s: int(float(s)), default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--long-sizes", type=lambda s: [float(x) for x in s.split(",")], default=[0.1, 1, 3, 10, 30])
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per long-field import")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--label", default="current")
    parser.add_argument("--merge", action="store_true", help="keep the other labels already in the results file")
    parser.add_argument("--note", default=None)
    parser.add_argument("--out", default=str(HERE / "results"))
    args = parser.parse_args(argv)
    if args.stage:
        workdir = Path(args.workdir)
        payload = {"hash": lambda: stage_hash(args.triples, args.repeats),
                   "build": lambda: stage_build(args.triples, workdir),
                   "tsv": lambda: stage_tsv(args.triples, workdir),
                   "long": lambda: stage_long(args.size, workdir)}[args.stage]()
        print(json.dumps(payload))
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "import_fields_bench.json"
    results = json.loads(path.read_text()) if args.merge and path.exists() else {"runs": {}}
    import kgqa

    run = {"when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "commit": _commit(), "kgqa": str(Path(kgqa.__file__).parent),
           "cpus": os.cpu_count(), "python": platform.python_version(),
           "load": ", ".join(f"{x:.2f}" for x in os.getloadavg()),
           "command": "python benchmarks/import_fields_bench.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    run["result"] = measure(args)
    results["runs"][args.label] = run
    if args.note:
        results["note"] = args.note
    path.write_text(json.dumps(results, indent=2))
    (out / "import_fields_bench.md").write_text(render(results))
    print(render(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
