"""The metric registry: `kgqa eval metrics` lists it, summarize computes every registered metric (for the run and each
breakdown group), and a registration that cannot work is refused where it is made."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import pytest

from kgqa.cli import main
from kgqa.core import GoldAnswer, Prediction, Question
from kgqa.errors import ConfigError
from kgqa.eval.metric_registry import METRICS, Metric, Place, register_metric, registered_metrics, shown_in, sum_of
from kgqa.eval.metrics import QuestionScore, score_prediction, summarize

#: Every key summary.json had before metrics were registered; other tools read them.
SUMMARY_KEYS = {"n", "errors", "hits@1", "hit", "precision", "recall", "f1", "kgr", "faithful_f1", "legacy_hits@1",
                "legacy_hit", "legacy_precision", "legacy_recall", "legacy_f1", "grounding", "llm_calls_mean",
                "prompt_tokens_mean", "completion_tokens_mean", "tokens_mean", "latency_s_mean", "llm_calls_total",
                "tokens_total", "reliable_answering", "audits", "stats", "breakdowns", "kg_time_s_mean", "kg_calls_mean",
                "kg_time_share", "llm_time_share", "cache_hits_total", "unreadable_replies_total",
                "questions_with_unreadable",
                # issue 52: the score without the questions an unreadable reply marked, and the salvaged replies
                "hits@1_readable", "f1_readable", "salvaged_replies_total", "questions_with_salvaged"}
#: The keys of summary.json kept to the whole run: a breakdown group has the others.
WHOLE_RUN_KEYS = {"breakdowns", "kg_time_s_mean", "kg_calls_mean", "kg_time_share", "llm_time_share", "cache_hits_total",
                  "unreadable_replies_total", "questions_with_unreadable", "salvaged_replies_total",
                  "questions_with_salvaged"}


def question(qid: str, gold: str, hops: int) -> Question:
    return Question(id=qid, text="?", answers=[GoldAnswer(id=None, name=gold)], metadata={"hops": hops})


def scored_run() -> list[QuestionScore]:
    return [score_prediction(question("q1", "Paris", 1), Prediction(answers=["Paris", "Lyon"])),
            score_prediction(question("q2", "Rome", 2), Prediction(answers=["Milan"])),
            score_prediction(question("q3", "Oslo", 2), Prediction(answers=[]))]


def test_kgqa_eval_metrics_lists_every_metric_one_a_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "metrics"]) == 0
    lines = capsys.readouterr().out.splitlines()
    listed = {fields[0]: fields for fields in (re.split(r"\s{2,}", line) for line in lines)}
    assert len(lines) == len(registered_metrics()) == len(listed)
    assert listed["hits@1"] == ["hits@1", "Hits@1", "higher is better",
                                "share of questions whose first answer matches a gold answer (strict rule)"]
    assert listed["f1"][1:3] == ["F1", "higher is better"]
    assert listed["kgr"][1] == "KGR" and "grounding weight" in listed["kgr"][3]
    assert listed["faithful_f1"][1] == "Faithful-F1" and "KGR x" in listed["faithful_f1"][3]
    assert listed["tokens_mean"][2] == "lower is better" and listed["kg_time_share"][2] == "no direction"

    assert main(["eval", "metrics", "--json"]) == 0
    described = json.loads(capsys.readouterr().out)
    assert described["unloadable"] == {}
    assert [m["name"] for m in described["metrics"]] == list(listed)
    assert described["metrics"][0] == {
        "name": "hits@1", "label": "Hits@1", "short_label": "Hits@1", "description": listed["hits@1"][3],
        "direction": "higher", "format": "rate", "section": "answers", "kind": "over_rows",
        "shown": ["compare", "headline", "report", "service"], "in_breakdowns": True}


def test_run_options_are_refused_beside_the_metrics_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "--limit", "3", "metrics"]) == 2
    assert "run options (--limit) cannot be combined with `kgqa eval metrics`" in capsys.readouterr().err


def test_the_headline_is_the_run_in_one_line_as_kgqa_eval_always_printed_it() -> None:
    assert [m.name for m in shown_in(Place.HEADLINE)] == ["hits@1", "f1", "legacy_hits@1", "kgr", "faithful_f1",
                                                          "llm_calls_mean", "tokens_mean"]
    assert [m.short_label for m in shown_in(Place.HEADLINE)][-2:] == ["calls/q", "tokens/q"]


def test_summary_keeps_every_key_and_computes_a_registered_metric_per_breakdown_group() -> None:
    def answered(rows: Sequence[Any]) -> int:
        return sum(1 for row in rows if row["n_pred"] > 0)

    with METRICS.restored():
        register_metric(Metric("answered", "answered", "questions with at least one answer", over_rows=answered,
                               format="whole", direction="higher"))
        summary = summarize(scored_run())
        rows = [json.loads(json.dumps(s.to_dict())) for s in scored_run()]
        assert summarize(rows)["answered"] == summary["answered"] == 2
    assert set(summary) == SUMMARY_KEYS | {"answered"}
    assert set(summary["breakdowns"]["hops"]["2"]) == SUMMARY_KEYS - WHOLE_RUN_KEYS | {"answered"}
    assert summary["breakdowns"]["hops"]["1"]["answered"] == 1 and summary["breakdowns"]["hops"]["2"]["answered"] == 1
    assert summary["hits@1"] == pytest.approx(1 / 3) and summary["faithful_f1"] == 0.0  # parametric: KGR 0
    assert "answered" not in summarize(scored_run())


def test_a_per_question_metric_is_kept_in_the_row_and_unmeasured_before_it_was_registered() -> None:
    before = scored_run()
    with METRICS.restored():
        register_metric(Metric("answers_mean", "answers / q", "mean number of answers",
                               per_question=lambda q, p, score: len(p.answers),
                               format="number"))
        after = scored_run()
        assert [s.metrics for s in after] == [{"answers_mean": 2.0}, {"answers_mean": 1.0}, {"answers_mean": 0.0}]
        assert QuestionScore.from_dict(json.loads(json.dumps(after[0].to_dict()))) == after[0]
        assert summarize(after)["answers_mean"] == pytest.approx(1.0)
        assert summarize(after)["breakdowns"]["hops"]["2"]["answers_mean"] == pytest.approx(0.5)
        assert summarize(before)["answers_mean"] is None  # scored before it existed: not measured
        assert summarize([])["answers_mean"] is None
    assert all(s.metrics == {} for s in before)


@pytest.mark.parametrize(("fields", "message"), [
    ({"name": "Hits", "over_rows": sum_of("hit1")}, "must be lower case"),
    ({"name": "errors", "over_rows": sum_of("hit1")}, "summary.json already uses"),
    ({"name": "two_lines", "description": "first\nsecond", "over_rows": sum_of("hit1")}, "one-line description"),
    ({"name": "both", "over_rows": sum_of("hit1"), "per_question": lambda q, p, s: 1.0}, "exactly one of"),
    ({"name": "neither"}, "exactly one of"),
    ({"name": "odd_format", "over_rows": sum_of("hit1"), "format": "percent"}, "'percent' is not a valid Format"),
])
def test_a_metric_that_cannot_work_is_refused_when_created(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Metric(**{"label": "a label", "description": "what it measures", **fields})


def test_a_taken_name_and_an_entry_that_is_no_metric_are_refused() -> None:
    hits = METRICS.get("hits@1")
    with pytest.raises(ValueError, match="already registered"):
        register_metric(Metric("hits@1", "Hits@1", "another Hits@1", over_rows=sum_of("hit1")))
    with METRICS.restored():
        METRICS.add("broken", "not a metric")  # type: ignore[arg-type]  # what a mistyped entry point would add
        with pytest.raises(ConfigError, match="metric 'broken' is registered as 'not a metric', not a Metric"):
            registered_metrics()
    assert METRICS.get("hits@1") is hits
