"""What VoG did on each question of finished runs, read from their traces: plans, verifications, revisions, arms, limits.

``kgqa eval compare`` gives the scores and the means of VoG's statistics (revisions, arm choices); this script adds
what only the traces hold: how often the plan reply was unreadable, how many verifications asked for a revision (and
whether the LLM or the second checker asked), how often a step hit its revision limit or the question its call or
step limit, and on how many questions an answer was given at all. It re-runs nothing.

    python benchmarks/vog_traces.py RUNDIR [RUNDIR ...]

Writes ``benchmarks/results/vog_traces.{json,md}`` (``--out-dir``).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from _run_readers import run_reader_main
from kgqa.eval.rundir import TRACES_FILE, parse_lines, read_config, read_results
from kgqa.provenance import short_commit


def read_run(run: Path) -> dict[str, Any]:
    """One row of counts for the VoG run in ``run`` (questions with a result only; a run still writing is read as far
    as its last whole line)."""
    config = read_config(run)
    if config.get("method") != "vog":
        raise ValueError(f"{run}: a {config.get('method')!r} run, not a vog run")
    results = {r["id"]: r for r in read_results(run)}
    counts: Counter[str] = Counter()
    limits: Counter[str] = Counter()
    for trace in parse_lines(run / TRACES_FILE, repair=False):
        if trace["id"] not in results:
            continue
        for event in trace.get("trace") or []:
            step = event.get("step")
            if step == "vog.plan":
                counts["plan_steps"] += len(event.get("actions") or [])
                counts["plans_unreadable"] += "failure" in event
            elif step == "vog.verify":
                counts["verifications"] += 1
                counts["asked_to_revise"] += bool(event.get("revise"))
                counts["llm_asked"] += bool(event.get("llm_revise"))
                counts["checker_contradicted"] += bool((event.get("checker") or {}).get("contradiction"))
            elif step == "vog.revision_limit":
                counts["revision_limits"] += 1
            elif step == "vog.limit":
                limits[str(event.get("cause", "?")).split(":")[0]] += 1
    rows = list(results.values())
    n = len(rows)
    answered = sum(1 for r in rows if r.get("n_pred"))
    return {"run": str(run), "dataset": config.get("dataset"), "split": config.get("split"),
            "commit": config.get("kgqa_commit"), "n": n,
            "plans_unreadable": counts["plans_unreadable"],
            "plan_steps_per_q": round(counts["plan_steps"] / n, 2) if n else None,
            "verifications": counts["verifications"], "asked_to_revise": counts["asked_to_revise"],
            "llm_asked": counts["llm_asked"], "checker_contradicted": counts["checker_contradicted"],
            "revision_limits": counts["revision_limits"], "question_limits": dict(limits),
            "answered": answered, "errors": sum(1 for r in rows if r.get("error"))}


def table(rows: list[dict[str, Any]]) -> list[str]:
    """The markdown table of the rows."""
    lines = ["| run | dataset | run commit | n | plans unreadable | plan steps/q | verifications | asking to revise "
             "| of which the LLM | checker contradictions | steps at revision limit | questions at call/step limit "
             "| answered | errors |", "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        limits = "; ".join(f"{k}: {v}" for k, v in sorted(r["question_limits"].items())) or "0"
        lines.append(f"| {Path(r['run']).name} | {r['dataset']} {r['split']} | {short_commit(r['commit'])} | {r['n']} | "
                     f"{r['plans_unreadable']} | {r['plan_steps_per_q']} | {r['verifications']} | "
                     f"{r['asked_to_revise']} | {r['llm_asked']} | {r['checker_contradicted']} | "
                     f"{r['revision_limits']} | {limits} | {r['answered']} | {r['errors']} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    return run_reader_main(argv, name="vog_traces", description=__doc__.split("\n\n")[0],
                           runs_help="VoG run directories (kgqa eval --method vog --out)", read_run=read_run,
                           table=table, title="VoG's traces counted",
                           about="Counts over the questions of each run; not a re-run.")


if __name__ == "__main__":
    raise SystemExit(main())
