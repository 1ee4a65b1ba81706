"""The summary of a run directory: :func:`summarize_run` scores ALL rows of results.jsonl (a resumed run summarises
everything) with :func:`kgqa.eval.metrics.summarize` (every registered metric, the KG/LLM time shares among them, read
from the runner's timings in the rows), adds the run's facts, and writes summary.json (and, with ``report``, report.md
and the plots of :mod:`kgqa.eval.report`).

Usable on any run directory, e.g. one whose process was killed before it wrote its summary (``kgqa eval report``).

summary.json's ``method`` is the name the figures are reported under (:func:`reported_method`: config.json's
``method_label``, e.g. ``fog[graph]`` for FoG's graph mode) and ``method_name`` the registered name the run was made
with (config.json's ``method``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kgqa.eval.losses import loss_table
from kgqa.eval.metrics import summarize
from kgqa.eval.report import reported_method, write_report
from kgqa.eval.rundir import RESULTS_FILE, SUMMARY_FILE, RunDirError, read_config, read_results, write_json

__all__ = ["summarize_run"]

#: Keys of config.json repeated in summary.json, so a summary says what it measured.
CONFIG_KEYS = ("dataset", "split", "method", "method_config", "method_config_resolved", "llm", "kg", "seed", "ablation",
               "method_checks")


def summarize_run(run_dir: str | os.PathLike[str], *, report: bool = True,
                  run_facts: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Summarise ALL rows of RUNDIR/results.jsonl into RUNDIR/summary.json (and report.md + plots with ``report``).

    ``run_facts`` (timings and counts of the invocation that wrote the run) go under ``"run"``; without them a rebuild
    keeps the facts of the summary.json it replaces.
    """
    path = Path(run_dir)
    rows = read_results(path)
    if not rows and not (path / RESULTS_FILE).exists():
        raise RunDirError(f"{path} holds no {RESULTS_FILE}; is it a kgqa eval run directory?")
    run_config = read_config(path)
    # Completion order depends on workers and resumes; summing in id order makes the summary bit-for-bit repeatable.
    summary = summarize(sorted(rows, key=lambda r: str(r["id"])))
    losses = loss_table(rows)
    if losses is not None:
        summary["losses"] = losses
    for key in CONFIG_KEYS:
        if key in run_config:
            summary[key] = run_config[key]
    if run_config.get("method"):
        summary["method_name"], summary["method"] = run_config["method"], reported_method(run_config)
    if run_config.get("questions") is not None:
        summary["selected"] = max([int(run_config["questions"]),
                                   *(int(r.get("questions") or 0) for r in run_config.get("resumes", []))])
    if run_facts is None and (path / SUMMARY_FILE).is_file():  # a rebuild keeps the facts of the run that wrote it
        with contextlib.suppress(ValueError, AttributeError):
            run_facts = json.loads((path / SUMMARY_FILE).read_text(encoding="utf-8")).get("run")
    summary["run"] = dict(run_facts or {})
    summary = _finite(summary)
    write_json(path / SUMMARY_FILE, summary)
    if report:
        write_report(path, summary, rows, run_config)
    return summary


def _finite(value: Any) -> Any:
    """JSON has no NaN/inf: a summary must load anywhere."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
