"""Benchmark of the evaluation harness, part ``harness``: end-to-end runner throughput with a scripted model.

The other part (scoring 10,000 predictions) is benchmarks/eval_bench.py. Here the whole run path is timed as a user
runs it: ``run_eval`` loads MetaQA 2-hop dev questions, builds the ``io`` method, calls a scripted model (a JSONL rules
file: every third question answered right, every fifth half right, the rest wrong) through the LLM layer (prompt
rendering, structured output, accounting), scores each answer, writes results.jsonl (fsynced) and traces.jsonl, and
summarises. Target: >= 200 questions/s end to end on 2 cores, so the harness never shows next to a real model.

Measured, each the median of ``--repeats`` fresh run directories:

* ``run_eval`` with 1 and 2 workers, report off (dataset loading and summary included, interpreter start excluded);
* the same with ``fsync="line"`` (every line fsynced before the next question) to show what group commit buys;
* a question's time inside the method (the row's ``latency_s``) and outside it (the runner: scoring, rows, writes),
  and, measured apart, the scripted LLM call path (``generate_answers``: prompt, ``ask_json``, recorder), the pydantic
  JSON-schema build inside it, and scoring (``score_prediction``);
* once: ``kgqa eval`` as a subprocess with report and plots (what a user waits for, interpreter start included).

    python benchmarks/eval_bench_harness.py [--n 2000] [--repeats 3] [--data-dir DIR]

Writes benchmarks/results/eval_bench_harness.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kgqa.core import AnswerItem, Grounding, Prediction, Question
from kgqa.eval.datasets import DATA_DIR_ENV, load_dataset
from kgqa.eval.metrics import score_prediction
from kgqa.eval.runner import run_eval
from kgqa.llm.accounting import RecordedModel, Recorder
from kgqa.llm.prompts import PromptBook
from kgqa.llm.scripted import ScriptedModel
from kgqa.methods.llm_only import DirectAnswer, generate_answers

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_QPS = 200.0
REPO = Path(__file__).resolve().parents[1]


def _data_dir(arg: str | None) -> Path:
    default = REPO / ".." / "shared" / "data"
    path = Path(arg or os.environ.get(DATA_DIR_ENV) or default).resolve()
    if not (path / "metaqa" / "2-hop" / "qa_dev.txt").is_file():
        raise SystemExit(f"MetaQA 2-hop dev not found under {path}; pass --data-dir or set {DATA_DIR_ENV}")
    return path


def _answers(q: Question, i: int) -> list[str]:
    golds = [g.name for g in q.answers]
    if i % 3 == 0:
        return golds
    if i % 5 == 0:
        return [golds[0], "Not An Answer"]
    return ["Not An Answer"]


def write_rules(path: Path, questions: list[Question], max_rules: int = 100) -> None:
    """Rules for the first ``max_rules`` right/half-right questions plus a default (first match wins, so the rules
    file stays the size a test script has; a longer one would time the scripted model's regex scan, not the harness)."""
    rules = []
    for i, q in enumerate(questions):
        if len(rules) >= max_rules:
            break
        answers = _answers(q, i)
        if answers != ["Not An Answer"]:
            rules.append({"match": "Question: " + re.escape(q.text) + "$", "reply": {"answers": answers}})
    rules.append({"reply": {"answers": ["Not An Answer"]}})
    path.write_text("\n".join(json.dumps(r) for r in rules) + "\n", encoding="utf-8")


def _machine() -> dict[str, Any]:
    return {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count(),
            "load_avg_1m": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None}


def bench_run(n: int, workers: int, fsync: str, rules: Path, data_dir: Path, work: Path, repeats: int) -> dict[str, Any]:
    walls: list[float] = []
    loops: list[float] = []
    cpus: list[float] = []
    outside: list[float] = []
    method_ms: list[float] = []
    summary: dict[str, Any] = {}
    for r in range(repeats):
        out = work / f"run-w{workers}-{fsync}-{r}"
        t0, c0 = time.perf_counter(), time.process_time()
        run = run_eval("metaqa-2hop", split="dev", out=out, method="io", llm=f"scripted:{rules}", limit=n,
                       workers=workers, fsync=fsync, data_dir=data_dir, progress=False, report=False)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        loops.append(run.summary["run"]["loop_s"])
        # latency_s is the wall time of method.answer; the rest of the loop is the runner's (scoring included).
        outside.append(1e3 * (run.summary["run"]["loop_s"] / n - run.summary["latency_s_mean"]))
        method_ms.append(1e3 * run.summary["latency_s_mean"])
        summary = run.summary
        assert run.answered == n and summary["n"] == n
        shutil.rmtree(out)
    wall, loop, cpu = statistics.median(walls), statistics.median(loops), statistics.median(cpus)
    return {"workers": workers, "fsync": fsync, "n": n, "wall_s": walls, "loop_s": loops, "cpu_s": cpus,
            "qps_end_to_end": n / wall, "qps_loop": n / loop, "qps_per_cpu_second": n / cpu,
            "method_ms": statistics.median(method_ms), "outside_method_ms": statistics.median(outside),
            "hits@1": summary["hits@1"], "f1": summary["f1"]}


def bench_components(n: int, rules: Path, data_dir: Path) -> dict[str, Any]:
    """Per-question cost of the LLM call path and of scoring, outside the runner."""
    questions = load_dataset("metaqa-2hop", "dev", data_dir=data_dir, limit=n)
    prompts = PromptBook.for_package("kgqa.methods.io")
    model = RecordedModel(ScriptedModel.from_file(rules), Recorder())
    t0 = time.perf_counter()
    answers = [generate_answers(model, prompts, "answer", q.text, reasoning=False, step="io.generate")[0]
               for q in questions]
    llm_s = time.perf_counter() - t0
    predictions = [Prediction(answers=[AnswerItem(name=a) for a in ans], grounding=Grounding.PARAMETRIC,
                              usage={"calls": 1}) for ans in answers]
    t0 = time.perf_counter()
    for q, p in zip(questions, predictions, strict=True):
        score_prediction(q, p)
    score_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(n):
        DirectAnswer.model_json_schema()
    schema_s = time.perf_counter() - t0
    return {"n": n, "llm_path_ms": 1e3 * llm_s / n, "scoring_ms": 1e3 * score_s / n,
            "json_schema_build_ms": 1e3 * schema_s / n}


def bench_cli(n: int, rules: Path, data_dir: Path, work: Path) -> dict[str, Any]:
    out = work / "cli-run"
    env = {**os.environ, DATA_DIR_ENV: str(data_dir)}
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "kgqa", "eval", "--dataset", "metaqa-2hop", "--split", "dev",
                           "--method", "io", "--llm", f"scripted:{rules}", "--limit", str(n), "--out", str(out),
                           "--no-progress"], env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"kgqa eval failed: {done.stderr[-2000:]}")
    run = json.loads((out / "summary.json").read_text())["run"]
    return {"n": n, "wall_s": wall, "run_eval_wall_s": run["wall_s"], "loop_s": run["loop_s"],
            "qps_including_startup_and_report": n / wall,
            "pngs": sorted(p.name for p in out.glob("*.png"))}


def write_results(result: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "eval_bench_harness.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    machine = result["machine"]
    lines = ["# Evaluation harness: end-to-end runner throughput (scripted model)", "",
             f"{result['n']:,} MetaQA 2-hop dev questions, method `io`, scripted model; median of "
             f"{result['repeats']} runs. Machine: {machine['cpus']} CPUs, Python {machine['python']}, load average "
             f"{machine['load_avg_1m_before']} before / {machine['load_avg_1m']} after"
             + (f". {result['note'].rstrip('.')}." if result.get("note") else "."), "",
             "| workers | fsync | questions/s end to end | questions/s (question loop) | questions per CPU-second |"
             " target >= 200/s |",
             "|---:|---|---:|---:|---:|---|"]
    for run in result["runs"]:
        met = "met" if run["qps_end_to_end"] >= TARGET_QPS else "NOT met"
        lines.append(f"| {run['workers']} | {run['fsync']} | {run['qps_end_to_end']:.0f} | {run['qps_loop']:.0f} | "
                     f"{run['qps_per_cpu_second']:.0f} | {met} |")
    comp = result["components"]
    one = result["runs"][0]
    lines += ["", "Where a question's time goes (1 worker, fsync=group):", "",
              "| part | ms / question |", "|---|---:|",
              f"| inside the method (`io`: prompt, ask_json, recorder, scripted reply), in the run | {one['method_ms']:.2f} |",
              f"| outside the method (scoring, rows, writes, accounting, progress), in the run | "
              f"{one['outside_method_ms']:.2f} |",
              f"| measured apart: the LLM call path alone | {comp['llm_path_ms']:.2f} |",
              f"| measured apart: of which building the reply's JSON schema, twice per call (pydantic) | "
              f"{2 * comp['json_schema_build_ms']:.2f} |",
              f"| measured apart: scoring (strict + legacy) | {comp['scoring_ms']:.2f} |", ""]
    cli = result["cli"]
    lines += [f"`kgqa eval` as a subprocess with report and {len(cli['pngs'])} plots: {cli['wall_s']:.1f} s wall for "
              f"{cli['n']:,} questions (run_eval {cli['run_eval_wall_s']:.1f} s of it; the rest is interpreter start, "
              "imports and the matplotlib report).", "",
              "`fsync=group` (the default) fsyncs every result line from a background thread, one fsync covering the "
              "lines written meanwhile; `fsync=line` waits for each fsync before the next question. Questions per "
              "CPU-second (all threads of the process) is the figure to compare across machines; wall-clock rates "
              "depend on what else runs (see the load average).", ""]
    (out / "eval_bench_harness.md").write_text("\n".join(lines), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--note", default="", help="Printed at the top of the report (e.g. 'machine busy').")
    args = parser.parse_args(argv)
    data_dir = _data_dir(args.data_dir)
    load_before = _machine()["load_avg_1m"]
    with tempfile.TemporaryDirectory(prefix="kgqa-eval-bench-") as tmp:
        work = Path(tmp)
        questions = load_dataset("metaqa-2hop", "dev", data_dir=data_dir, limit=args.n)
        rules = work / "rules.jsonl"
        write_rules(rules, questions)
        # Warm-up: imports, method discovery and the dataset file in the page cache are not the harness's cost.
        bench_run(50, 1, "group", rules, data_dir, work, 1)
        runs = [bench_run(args.n, w, fsync, rules, data_dir, work, args.repeats)
                for w, fsync in ((1, "group"), (2, "group"), (1, "line"))]
        components = bench_components(min(args.n, 1000), rules, data_dir)
        cli = bench_cli(min(args.n, 1000), rules, data_dir, work)
    one = runs[0]
    result = {
        "benchmark": "eval_harness", "n": args.n, "repeats": args.repeats, "target_qps": TARGET_QPS,
        "runs": runs, "components": components, "cli": cli,
        "meets_target": one["qps_end_to_end"] >= TARGET_QPS,
        "note": args.note,
        "machine": {**_machine(), "load_avg_1m_before": load_before},
    }
    write_results(result, args.out)
    print(json.dumps({"runs": [{k: round(v, 1) if isinstance(v, float) else v for k, v in r.items()
                                if k in ("workers", "fsync", "qps_end_to_end", "qps_loop", "qps_per_cpu_second",
                                         "method_ms", "outside_method_ms")}
                               for r in runs],
                      "components_ms": {k: round(v, 3) for k, v in components.items() if k != "n"},
                      "load_avg": result["machine"]["load_avg_1m"]}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
