"""Issue 52 in `kgqa eval`: a reply still unreadable after its re-ask is an error that --retry-errors asks again (the
score reported with and without such questions) (item 6); a salvaged reply is said on its row (item 1); one deadline per
question (item 5); the commit is read without git's index lock (item 7); trace compaction (item 13)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "llm"))

from llm_fault_server import FaultServer

from kgqa.cli import main
from kgqa.datasets import load_dataset
from kgqa.eval.rundir import compact_traces

REPO = Path(__file__).resolve().parents[2]
NOT_VALID = {"result": "x", "items": [1, 2]}  # valid JSON of the wrong shape: unreadable


@pytest.fixture(autouse=True)
def _private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "kgqa-test-config.toml"
    config.write_text("", encoding="utf-8")
    monkeypatch.setenv("KGQA_CONFIG", str(config))
    monkeypatch.setenv("KGQA_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("KGQA_QUESTION_TIMEOUT", "KGQA_LLM_CACHE", "KGQA_LLM_TIMEOUT", "KGQA_LLM_RETRIES"):
        monkeypatch.delenv(name, raising=False)


def _rules(path: Path, replies: dict[str, Any], reask: Any) -> Path:
    lines = [{"match": "^That reply was not valid", "reply": reask}]
    lines += [{"match": "^Question: " + re.escape(text) + "$", "reply": reply} for text, reply in replies.items()]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path


def _rows(run: Path) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in map(json.loads, (run / "results.jsonl").read_text(encoding="utf-8").splitlines())}


def test_an_unreadable_reply_is_an_error_that_retry_errors_asks_again(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    questions = load_dataset("demo", limit=4)
    broken = questions[1]
    gold = {q.text: {"answers": [a.name for a in q.answers]} for q in questions}
    first = _rules(tmp_path / "first.jsonl", {**gold, broken.text: NOT_VALID}, NOT_VALID)
    out = tmp_path / "run"
    # --max-failures 1: an unreadable reply is not a dead model, so it must not stop the run
    code = main(["eval", "--dataset", "demo", "--method", "io", "--llm", f"scripted:{first}", "--limit", "4",
                 "--out", str(out), "--no-progress", "--max-failures", "1"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    rows = _rows(out)
    assert len(rows) == 4
    assert rows[broken.id]["error"].startswith("UnreadableReply: a reply still unreadable after the re-ask")
    assert "first at step io." in rows[broken.id]["error"] and rows[broken.id]["unreadable_replies"] == 1
    assert rows[broken.id]["answers"] == [] and rows[broken.id]["hit1"] == 0
    assert all(r["error"] is None and r["hit1"] == 1 for qid, r in rows.items() if qid != broken.id)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["errors"] == 1 and summary["questions_with_unreadable"] == 1
    assert summary["hits@1"] == pytest.approx(0.75) and summary["hits@1_readable"] == pytest.approx(1.0)
    assert summary["f1_readable"] == pytest.approx(1.0) and summary["run"]["unreadable"] == 1
    assert "(1 failed, 1 of them for an unreadable reply)" in printed.out
    assert "1 questions got a reply still unreadable" in printed.out and "Hits@1 75.0 with them, 100.0 without" in \
        printed.out
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "Hits@1 without unreadable" in report

    # the model reads now: --retry-errors asks the marked question again, and only it
    _rules(first, gold, NOT_VALID)  # the same --llm (a resumed run keeps its settings), now with a readable reply
    code = main(["eval", "--dataset", "demo", "--method", "io", "--llm", f"scripted:{first}", "--limit", "4",
                 "--out", str(out), "--no-progress", "--resume", "--retry-errors"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "1 answered now (0 failed), 3 finished before" in printed.out
    rows = _rows(out)
    assert rows[broken.id]["error"] is None and rows[broken.id]["hit1"] == 1
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["errors"] == 0 and summary["hits@1"] == 1.0 == summary["hits@1_readable"]


def test_a_reply_its_budget_cut_off_is_salvaged_and_said_on_the_row(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    [question] = load_dataset("demo", limit=1)
    names = [question.answers[0].name, "Not An Answer 1", "Not An Answer 2", "Not An Answer 3"]
    with FaultServer(responder=lambda body: json.dumps({"answers": names})) as server:
        server.inject("truncated_json")
        out = tmp_path / "run"
        code = main(["eval", "--dataset", "demo", "--method", "io", "--llm", f"openai:probe@{server.url}", "--limit",
                     "1", "--out", str(out), "--no-progress", "--no-cache"])
        assert code == 0, capsys.readouterr().err
        assert len(server.state.requests) == 1
    row = _rows(out)[question.id]
    assert row["salvaged_replies"] == 1 and row["unreadable_replies"] == 0 and row["error"] is None
    assert row["answers"] and row["answers"] == names[:len(row["answers"])] and len(row["answers"]) < len(names)
    [trace] = map(json.loads, (out / "traces.jsonl").read_text(encoding="utf-8").splitlines())
    assert trace["salvaged_replies"][0]["step"].startswith("io.")
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["salvaged_replies_total"] == 1 and summary["questions_with_salvaged"] == 1


def test_each_question_of_eval_has_one_deadline_for_its_llm_calls_and_retries(tmp_path: Path,
                                                                               capsys: pytest.CaptureFixture[str],
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # The endpoint holds every request for 30 s; each attempt may wait 60 s and 4 retries follow: without a deadline a
    # question would wait minutes. With --timeout 2 each fails after about 2 s, recorded as an error to retry.
    monkeypatch.setenv("KGQA_LLM_TIMEOUT", "60")
    with FaultServer(stall_s=30.0) as server:
        server.inject(*["stall"] * 10)
        out = tmp_path / "run"
        started = time.monotonic()
        code = main(["eval", "--dataset", "demo", "--method", "io", "--llm", f"openai:probe@{server.url}", "--limit",
                     "2", "--out", str(out), "--no-progress", "--no-cache", "--timeout", "2"])
        elapsed = time.monotonic() - started
    printed = capsys.readouterr()
    assert code == 1, printed.err  # every question failed: the command fails, naming the error
    assert "deadline" in printed.err
    rows = _rows(out)
    assert len(rows) == 2
    for row in rows.values():
        assert row["error"].startswith("DeadlineExceeded: the question ran out of its 2 s deadline")
        assert "waiting for openai:probe" in row["error"] and "--timeout" in row["error"]
        assert row["latency_s"] < 6.0  # the question's own clock: within ~3x the deadline
    assert elapsed < 60.0  # neither question waited out the stall (30 s, and 4 retries of it)
    assert json.loads((out / "config.json").read_text(encoding="utf-8"))["question_timeout"] == 2.0


def test_a_bad_question_timeout_is_refused_naming_where_it_came_from(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGQA_QUESTION_TIMEOUT", "soon")
    code = main(["eval", "--dataset", "demo", "--method", "io", "--llm", "scripted:x.jsonl", "--out",
                 str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and "question_timeout from $KGQA_QUESTION_TIMEOUT must be a number of seconds" in err
    assert not (tmp_path / "run").exists()


def test_compaction_keeps_one_trace_of_a_question_written_twice_the_last(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    lines = [{"id": "q1", "trace": ["first attempt"]}, {"id": "q2", "trace": ["q2"]},
             {"id": "q1", "trace": ["second attempt"]}, {"id": "q3", "trace": ["unfinished"]}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    compact_traces(path, {"q1", "q2"})
    kept = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert kept == [{"id": "q2", "trace": ["q2"]}, {"id": "q1", "trace": ["second attempt"]}]
    before = path.read_bytes()
    compact_traces(path, {"q1", "q2"})  # nothing left to drop: the file is not rewritten
    assert path.read_bytes() == before


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


def test_eval_reads_the_commit_without_taking_the_checkouts_index_lock(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "checkout"
    shutil.copytree(REPO / "src", repo / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    _git(repo, "init", "-q")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "add", "-A")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "snapshot")
    head = _git(repo, "rev-parse", "--short", "HEAD")
    # A tracked file whose stat data no longer match the index (content unchanged): a plain `git status` refreshes the
    # index and writes it back under .git/index.lock, which is what every `kgqa eval` did to the installed checkout.
    touched = repo / "src" / "kgqa" / "config.py"
    stamp = touched.stat().st_mtime + 100
    os.utime(touched, (stamp, stamp))
    index = repo / ".git" / "index"
    before = (index.read_bytes(), index.stat().st_mtime_ns)
    rules = tmp_path / "rules.jsonl"
    rules.write_text(json.dumps({"reply": {"answers": ["Christopher Nolan"]}}) + "\n", encoding="utf-8")
    config = tmp_path / "empty.toml"
    config.write_text("", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KGQA_")}
    env.update(PYTHONPATH=str(repo / "src"), KGQA_CACHE_DIR=str(tmp_path / "cache"), KGQA_CONFIG=str(config))
    done = subprocess.run([sys.executable, "-m", "kgqa", "eval", "--dataset", "demo", "--method", "io", "--llm",
                           f"scripted:{rules}", "--limit", "1", "--out", str(tmp_path / "run"), "--no-progress",
                           "--no-report"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (index.read_bytes(), index.stat().st_mtime_ns) == before  # the index was neither locked nor rewritten
    assert not (repo / ".git" / "index.lock").exists()
    recorded = json.loads((tmp_path / "run" / "config.json").read_text(encoding="utf-8"))["kgqa_commit"]
    assert recorded == head  # the content is unchanged: not dirty
