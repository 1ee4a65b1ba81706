"""The test-split ledger (issue 51): every kgqa eval on a test split appends to CACHE/test-ledger.jsonl, says how often
this method's test split has been evaluated, and `kgqa eval ledger` lists them; other splits are not recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kgqa.cli import cli
from kgqa.datasets import load_dataset
from kgqa.eval.ledger import LEDGER_FILE, read_ledger
from kgqa.eval.runner import run_eval


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cache"
    monkeypatch.setenv("KGQA_CACHE_DIR", str(path))
    return path


def _eval(out: Path, method: str = "ccor") -> str:
    result = CliRunner().invoke(cli, ["eval", "--dataset", "demo", "--method", method, "--llm", "oracle", "--kg", "demo",
                                      "--limit", "3", "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    return result.output


def test_each_test_split_eval_is_recorded_and_counted(tmp_path: Path, cache: Path) -> None:
    first = _eval(tmp_path / "run1")
    assert "test split: evaluation 1 of ccor on demo/test" in first
    second = _eval(tmp_path / "run2")
    assert "test split: evaluation 2 of ccor on demo/test" in second
    _eval(tmp_path / "run3", method="cor")  # another method has its own count

    entries = read_ledger(cache / LEDGER_FILE)
    assert [(e["dataset"], e["method"]) for e in entries] == [("demo", "ccor"), ("demo", "ccor"), ("demo", "cor")]
    assert entries[0]["digest"] == entries[1]["digest"]  # the same configuration twice
    assert entries[0]["questions"] == 3 and 0.0 <= entries[0]["scores"]["hit"] <= 1.0
    assert entries[1]["run_dir"] == str((tmp_path / "run2").resolve())

    summary = json.loads((tmp_path / "run2" / "summary.json").read_text())
    assert summary["run"]["test_ledger"]["evaluations"] == 2
    assert "evaluation 2 of this method on this test split" in (tmp_path / "run2" / "report.md").read_text()

    listed = CliRunner().invoke(cli, ["eval", "ledger", "--method", "ccor", "--json"])
    assert listed.exit_code == 0, listed.output
    assert [e["method"] for e in json.loads(listed.output)["entries"]] == ["ccor", "ccor"]
    table = CliRunner().invoke(cli, ["eval", "ledger"])
    assert "3 test-split evaluations" in table.output and "| " not in table.output


def test_other_splits_are_not_recorded(tmp_path: Path, cache: Path) -> None:
    questions = load_dataset("demo", split="test")[:2]
    run = run_eval("demo", out=tmp_path / "dev", split="dev", questions=questions, method="ccor", llm="oracle",
                   kg="demo", progress=False, report=False)
    assert "test_ledger" not in run.summary["run"]
    assert read_ledger(cache / LEDGER_FILE) == []
    empty = CliRunner().invoke(cli, ["eval", "ledger"])
    assert empty.exit_code == 0 and "ledger is empty" in empty.output
