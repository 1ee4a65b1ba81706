"""A new metric is one function and one registration (docs/adding-a-metric.md).

Registered here through the public API, "answers_mean" shows up with no other edit in a real `kgqa eval` run (the demo
dataset and KG, CCoR, the scripted oracle model of conftest.py as the only fake): its headline line, results.jsonl,
summary.json and its breakdowns, report.md, `kgqa eval compare`, `kgqa eval metrics`, and the service's run list and
run summary over real HTTP and in the viewer (headless Chromium). Once the registration is gone, a rebuilt summary and
every view lose it again.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from kgqa.cli import main
from kgqa.core import Prediction, Question
from kgqa.eval.metric_registry import METRICS, Direction, Format, Metric, Place, register_metric
from kgqa.eval.metrics import QuestionScore
from kgqa.eval.rundir import read_results
from kgqa.eval.runner import run_eval


def answer_count(question: Question, prediction: Prediction, score: QuestionScore) -> float:
    return float(len(prediction.answers))


ANSWERS_MEAN = Metric("answers_mean", "answers / q", "mean number of answers a question gets", per_question=answer_count,
                      direction=Direction.NEITHER, format=Format.NUMBER,
                      shown={Place.REPORT, Place.HEADLINE, Place.COMPARE, Place.SERVICE}, short_label="answers/q")


def _line_with(text: str, output: str) -> str:
    (line,) = [line for line in output.splitlines() if text in line]
    return line


def test_a_registered_metric_shows_up_in_every_view_and_leaves_with_its_registration(
        tmp_path: Path, rules_file: Path, start_server: Any, token: str, capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    run = runs / "ccor-answers"
    with METRICS.restored():
        register_metric(ANSWERS_MEAN)
        assert main(["eval", "--dataset", "demo", "--method", "ccor", "--llm", f"scripted:{rules_file}", "--limit", "6",
                     "--out", str(run), "--no-progress"]) == 0
        printed = capsys.readouterr().out

        rows = read_results(run)
        assert len(rows) == 6 and 0 in {len(r["answers"]) for r in rows} and len({len(r["answers"]) for r in rows}) > 2
        for row in rows:
            assert row["metrics"] == {"answers_mean": float(len(row["answers"]))}
        expected = sum(len(r["answers"]) for r in rows) / 6
        assert 1 <= expected < 100  # a table writes such a number with two decimals

        summary = json.loads((run / "summary.json").read_text())
        assert summary["answers_mean"] == pytest.approx(expected)
        for groups in summary["breakdowns"].values():
            for group in groups.values():
                assert group["answers_mean"] is not None
        # The headline: the built-ins' text as it always was, then the new metric.
        assert printed.splitlines()[1] == (
            f"Hits@1 {100 * summary['hits@1']:.1f}  F1 {100 * summary['f1']:.1f}  "
            f"legacy Hits@1 {100 * summary['legacy_hits@1']:.1f}  KGR {100 * summary['kgr']:.1f}  "
            f"Faithful-F1 {100 * summary['faithful_f1']:.1f}  calls/q {summary['llm_calls_mean']:.2f}  "
            f"tokens/q {summary['tokens_mean']:.0f}  answers/q {expected:.2f}")

        report = (run / "report.md").read_text()
        first_table = report.split("## Accuracy and faithfulness", 1)[1].split("Grounding:", 1)[0]
        assert "| Answers / q |" in first_table and f"| {expected:.2f} |" in first_table
        hops_table = report.split("## By hops", 1)[1]
        assert hops_table.splitlines()[2].endswith("| Answers/q | errors |")

        assert main(["eval", "compare", str(run), "--no-breakdowns"]) == 0
        assert _line_with("answers / q", capsys.readouterr().out).split() == ["answers", "/", "q", f"{expected:.2f}"]

        assert main(["eval", "metrics"]) == 0
        listed = re.split(r"\s{2,}", _line_with("answers_mean", capsys.readouterr().out))
        assert listed == ["answers_mean", "answers / q", "no direction", ANSWERS_MEAN.description]

        server = start_server(runs=runs, token=token, rate_limit=0)
        try:
            with server.client() as client:
                listing = client.get("/v1/runs").json()
                shown = client.get("/v1/runs/ccor-answers").json()
        finally:
            server.stop()
        assert listing["metrics"][-1]["name"] == "answers_mean" and listing["metrics"][-1]["short_label"] == "answers/q"
        assert listing["runs"][0]["answers_mean"] == pytest.approx(expected)
        (entry,) = [m for m in shown["metrics"] if m["name"] == "answers_mean"]
        assert entry["value"] == pytest.approx(expected) and entry["label"] == "answers / q"
        assert entry["format"] == "number" and entry["description"] == ANSWERS_MEAN.description

    assert "answers_mean" not in METRICS
    assert main(["eval", "report", str(run)]) == 0
    capsys.readouterr()
    assert "answers_mean" not in json.loads((run / "summary.json").read_text())
    assert "Answers / q" not in (run / "report.md").read_text()
    assert main(["eval", "compare", str(run)]) == 0
    assert "answers / q" not in capsys.readouterr().out
    server = start_server(runs=runs, token=token, rate_limit=0)
    try:
        with server.client() as client:
            assert "answers_mean" not in {m["name"] for m in client.get("/v1/runs/ccor-answers").json()["metrics"]}
    finally:
        server.stop()


@pytest.mark.browser
def test_the_viewer_shows_a_registered_metric_in_the_run_list_and_the_run_summary(
        browser: Any, tmp_path: Path, rules_file: Path, start_server: Any, token: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def texts(css: str) -> list[str]:
        WebDriverWait(browser, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, css))
        return [e.text for e in browser.find_elements(By.CSS_SELECTOR, css)]

    with METRICS.restored():
        register_metric(ANSWERS_MEAN)
        run_eval("demo", out=tmp_path / "runs" / "ccor-answers", method="ccor", llm=f"scripted:{rules_file}", limit=3,
                 progress=False, report=False, embedder=None)
        expected = sum(len(r["answers"]) for r in read_results(tmp_path / "runs" / "ccor-answers")) / 3
        server = start_server(runs=tmp_path / "runs", token=token, rate_limit=0)
        try:
            browser.get(f"{server.url}/#token={token}")
            browser.execute_script("location.hash = '#/runs'")
            assert texts("#runs-table thead th")[-1] == "answers/q"
            assert texts("#runs-table tbody td")[-1] == f"{expected:.2f}"
            browser.execute_script("location.hash = '#/runs/ccor-answers'")
            shown = dict(zip(texts("#run-metrics tbody th"), texts("#run-metrics tbody td"), strict=True))
            assert list(shown) == ["Hits@1 %", "Hit %", "Precision %", "Recall %", "F1 %", "KGR %", "Faithful-F1 %",
                                   "answers / q", "legacy Hits@1 %", "legacy Hit %", "legacy F1 %", "LLM calls / q",
                                   "tokens / q", "latency s / q", "reliable answering %"]
            assert shown["answers / q"] == f"{expected:.2f}"
        finally:
            server.stop()
