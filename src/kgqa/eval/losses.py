"""The loss table of a run: where the gold left the candidates, question by question (:mod:`kgqa.steps.losses` names
each missed question's loss as it is answered), counted for the whole run, by the step that lost it and per hop count
and question type. ``kgqa eval diagnose RUNDIR`` prints it; summary.json keeps it under ``losses`` and report.md shows
it (:func:`kgqa.eval.report.render_loss_table`). Runs scored before loss attribution existed, and imported runs, have none.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from kgqa.steps.losses import LOSSES

__all__ = ["BREAKDOWN_KEYS", "MEANINGS", "diagnose_run", "loss_table"]

#: The question facts a loss table is broken down by, when the rows carry them.
BREAKDOWN_KEYS = ("hops", "qtype")
#: What each loss means, one line each (the table's legend).
MEANINGS = {
    "linking": "no gold topic among the topics found in the KG",
    "relation_pruning": "a relation step dropped (or never offered) the gold hop",
    "entity_cap": "a cap or selection over nodes dropped the gold nodes",
    "entity_sample": "a random sample of neighbours left the gold nodes out",
    "judge_stop": "a judge ended the search before the gold answer was reached",
    "depth_limit": "the depth ran out before the gold answer was reached",
    "budget_limit": "a call, round or iteration budget ran out first",
    "answer_step": "the gold answer was reached and shown; the answer step chose wrong",
    "no_gold_path": "the KG holds no walk of the gold chain to a gold answer (the coverage ceiling)",
    "error": "the method failed on the question",
    "unattributed": "none of the above was noted",
}


def _counts(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    losses = Counter(str(r["loss"]) for r in rows if r.get("loss") not in (None, "none"))
    steps = Counter(f"{r['loss']} @ {r.get('loss_step') or '-'}" for r in rows if r.get("loss") not in (None, "none"))
    order = {name: i for i, name in enumerate(LOSSES)}
    return {"questions": len(rows), "missed": sum(losses.values()),
            "counts": dict(sorted(losses.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0]))),
            "steps": dict(sorted(steps.items(), key=lambda kv: (-kv[1], kv[0])))}


def loss_table(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The loss counts of ``rows`` (results.jsonl rows): ``questions``, ``missed``, ``counts`` (per loss), ``steps``
    (per "loss @ step") and ``by`` (per breakdown key and value, the same counts); None when no row carries a loss."""
    attributed = [r for r in rows if "loss" in r]
    if not attributed:
        return None
    table = _counts(attributed)
    table["by"] = {}
    for key in BREAKDOWN_KEYS:
        values = sorted({str(r[key]) for r in attributed if r.get(key) is not None})
        if len(values) > 1:
            table["by"][key] = {v: _counts([r for r in attributed if str(r.get(key)) == v]) for v in values}
    return table


def diagnose_run(run_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The loss table of RUNDIR/results.jsonl (None when its rows carry no loss)."""
    from kgqa.eval.rundir import read_results

    return loss_table(read_results(run_dir))
