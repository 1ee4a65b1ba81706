"""The evaluation runner end to end: `kgqa eval` as a real subprocess on real MetaQA questions, with a scripted model
(a JSONL rules file written here) as the only fake; crash (SIGKILL) and resume; failures; refusing to clobber a run.

Python-API tests use real files and a real embedded KG; the only other fakes are methods that raise on purpose.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kgqa.core import AnswerItem, GoldAnswer, Grounding, MethodContext, Prediction, Question, TopicEntity
from kgqa.datasets import load_dataset
from kgqa.errors import ConfigError
from kgqa.eval.runner import (
    RESULTS_FILE,
    TRACES_FILE,
    RunDirError,
    RunStopped,
    parse_method_config,
    read_results,
    run_eval,
    summarize_run,
)
from kgqa.kg.embedded import EmbeddedKGBuilder
from kgqa.llm.scripted import ScriptedModel

IN_CI = os.environ.get("CI", "").lower() == "true"
REPO = Path(__file__).resolve().parents[2]
SCORE_KEYS = ("hit1", "hit", "precision", "recall", "f1", "legacy_hit1", "legacy_hit", "legacy_precision",
              "legacy_recall", "legacy_f1", "grounding", "kgr", "answers", "gold", "error", "llm_calls",
              "prompt_tokens", "completion_tokens", "n_pred", "n_gold", "n_matched")
REQUIRED_ROW_KEYS = {"id", "question", "answers", "gold", "hit1", "f1", "grounding", "llm_calls", "prompt_tokens",
                     "completion_tokens", "latency_s", "kg_time_s", "precision", "recall", "hit", "legacy_hit1",
                     "legacy_f1", "answer_ids", "error", "hops", "qtype"}
SUMMARY_KEYS = {"n", "hits@1", "hit", "precision", "recall", "f1", "kgr", "faithful_f1", "llm_calls_mean", "tokens_mean",
                "legacy_hits@1", "legacy_f1", "breakdowns", "kg_time_share", "run"}


def _data_dir() -> Path:
    default = REPO / ".." / "shared" / "data"
    return Path(os.environ.get("KGQA_DATA_DIR") or default)


@pytest.fixture(scope="module")
def data_dir() -> Path:
    path = _data_dir()
    if not (path / "metaqa" / "2-hop" / "qa_dev.txt").is_file():
        if IN_CI:
            pytest.fail(f"MetaQA data under {path} is missing (CI=true, so this is an error)")
        pytest.skip(f"MetaQA data under {path} is missing")
    return path.resolve()


@pytest.fixture(scope="module")
def questions(data_dir: Path) -> list[Question]:
    return load_dataset("metaqa-2hop", "dev", data_dir=data_dir, limit=600)


def _pattern(text: str) -> str:
    # The question closes the io prompt and is followed by a newline in the cot prompt.
    return "Question: " + re.escape(text) + r"(\n|$)"


def _expected(question: Question, index: int) -> list[str]:
    """What the scripted model answers to question ``index``: all golds, a gold plus a wrong one, or a wrong one."""
    golds = [g.name for g in question.answers]
    if index % 3 == 0:
        return golds
    if index % 5 == 0:
        return [golds[0], "Not An Answer"]
    return ["Not An Answer"]


def write_rules(path: Path, questions: list[Question], *, skip: frozenset[int] | set[int] = frozenset(),
                default: bool = True) -> Path:
    lines = []
    for i, q in enumerate(questions):
        if i in skip or _expected(q, i) == ["Not An Answer"]:
            continue
        lines.append({"match": _pattern(q.text), "reply": {"answers": _expected(q, i)}})
    if default:
        lines.append({"reply": {"answers": ["Not An Answer"]}})
    else:
        for i, q in enumerate(questions):  # without a default, every question but the skipped ones needs its rule
            if i not in skip and _expected(q, i) == ["Not An Answer"]:
                lines.append({"match": _pattern(q.text), "reply": {"answers": ["Not An Answer"]}})
    path.write_text("\n".join(json.dumps(r) for r in lines) + "\n", encoding="utf-8")
    return path


def _env(tmp_path: Path, data_dir: Path) -> dict[str, str]:
    # An empty config file of our own: the user's ~/.config/kgqa/config.toml and KGQA_* variables must not leak in.
    config = tmp_path / "kgqa-test-config.toml"
    config.write_text("", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KGQA_")}
    env.update({"KGQA_DATA_DIR": str(data_dir), "KGQA_CACHE_DIR": str(tmp_path / "cache"), "KGQA_CONFIG": str(config),
                "PYTHONPATH": str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")})
    return env


def kgqa(args: list[str], *, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kgqa", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def eval_args(rules: Path, out: Path, limit: int, *extra: str, method: str = "io") -> list[str]:
    return ["eval", "--dataset", "metaqa-2hop", "--split", "dev", "--method", method, "--llm", f"scripted:{rules}",
            "--limit", str(limit), "--out", str(out), "--no-progress", *extra]


def rows_by_id(run_dir: Path) -> dict[str, dict[str, Any]]:
    rows = read_results(run_dir)
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "a question was written twice"
    return {r["id"]: r for r in rows}


def snapshot(run_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(run_dir.iterdir()) if p.is_file() and p.name != ".lock"}


# ---------------------------------------------------------------------------------------------------------------------
# Through the CLI, on real MetaQA questions


# A plugin module (the config key `plugins`) that holds every scripted model call after the first GATE_AFTER until the
# file GATE_FILE exists: a run under it cannot finish before the test has seen its state and killed it.
GATE_PLUGIN = """
import os, threading, time
from kgqa.llm.scripted import ScriptedModel

_after, _gate = int(os.environ["GATE_AFTER"]), os.environ["GATE_FILE"]
_lock, _calls, _complete = threading.Lock(), [0], ScriptedModel._complete


def _gated(self, messages, params):
    with _lock:
        _calls[0] += 1
        held = _calls[0] > _after
    while held and not os.path.exists(_gate):
        time.sleep(0.01)
    return _complete(self, messages, params)


ScriptedModel._complete = _gated
"""


def test_sigkill_mid_run_then_resume_matches_an_uninterrupted_run(tmp_path: Path, data_dir: Path,
                                                                  questions: list[Question]) -> None:
    n, held_after = 600, 40
    rules = write_rules(tmp_path / "rules.jsonl", questions[:n])
    env = _env(tmp_path, data_dir)
    reference, crashed = tmp_path / "reference", tmp_path / "crashed"

    done = kgqa(eval_args(rules, reference, n, "--no-report"), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr

    # The crashed run answers 40 questions (io: one model call each), then every call waits for a gate that stays
    # closed: it is alive, mid-run, with two workers inside the model, whatever the machine's speed.
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "kgqa_test_gate.py").write_text(GATE_PLUGIN, encoding="utf-8")
    gate = tmp_path / "gate-open"
    gated = {**env, "KGQA_PLUGINS": "kgqa_test_gate", "GATE_AFTER": str(held_after), "GATE_FILE": str(gate),
             "PYTHONPATH": str(plugins) + os.pathsep + env["PYTHONPATH"]}
    proc = subprocess.Popen([sys.executable, "-m", "kgqa", *eval_args(rules, crashed, n, "--workers", "2",
                                                                      "--no-report")],
                            cwd=tmp_path, env=gated, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    results = crashed / RESULTS_FILE
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if results.exists() and results.read_bytes().count(b"\n") >= held_after:
                break
            time.sleep(0.005)
        assert proc.poll() is None, "the run ended before it could be killed: " + proc.stderr.read().decode()[-500:]
        assert results.read_bytes().count(b"\n") >= held_after, "the run did not reach the gate in 300 s"
        proc.send_signal(signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=60)
        proc.stderr.close()  # type: ignore[union-attr]
    assert proc.returncode == -signal.SIGKILL
    written = results.read_bytes().count(b"\n")
    assert written == held_after
    assert not (crashed / "summary.json").exists()  # the run really died before its end

    gate.touch()  # the resumed run (same plugin, same settings) is not held
    resumed = kgqa(eval_args(rules, crashed, n, "--workers", "2", "--resume", "--no-report"), cwd=tmp_path, env=gated)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{written} finished before" in resumed.stdout

    ref, got = rows_by_id(reference), rows_by_id(crashed)
    assert set(got) == set(ref) == {q.id for q in questions[:n]}
    for qid, row in ref.items():
        assert {k: got[qid][k] for k in SCORE_KEYS} == {k: row[k] for k in SCORE_KEYS}, qid
    traces = [json.loads(line)["id"] for line in (crashed / TRACES_FILE).read_text(encoding="utf-8").splitlines()]
    assert sorted(traces) == sorted(ref)  # one trace per result, none duplicated by the crash

    ref_summary = json.loads((reference / "summary.json").read_text())
    got_summary = json.loads((crashed / "summary.json").read_text())
    for key in ("n", "hits@1", "hit", "precision", "recall", "f1", "kgr", "faithful_f1", "legacy_hits@1", "legacy_f1",
                "llm_calls_mean", "tokens_mean", "breakdowns"):
        if key == "breakdowns":
            strip = {"latency_s_mean"}
            for bkey, groups in ref_summary[key].items():
                for value, group in groups.items():
                    other = got_summary[key][bkey][value]
                    assert {k: v for k, v in group.items() if k not in strip} == \
                        {k: v for k, v in other.items() if k not in strip}
        else:
            assert got_summary[key] == ref_summary[key], key
    assert got_summary["n"] == n
    assert len(json.loads((crashed / "config.json").read_text())["resumes"]) == 1


def test_io_on_200_metaqa_questions_offline_with_report_and_compare(tmp_path: Path, data_dir: Path,
                                                                   questions: list[Question]) -> None:
    n = 200
    rules = write_rules(tmp_path / "rules.jsonl", questions[:n])
    env = _env(tmp_path, data_dir)
    env.update({"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9"})  # any network use would fail
    io_run, cot_run = tmp_path / "io-run", tmp_path / "cot-run"

    done = kgqa(eval_args(rules, io_run, n), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert "200 answered now" in done.stdout

    rows = read_results(io_run)
    assert [r["id"] for r in rows] == [q.id for q in questions[:n]]  # one worker: file order
    for row, (i, q) in zip(rows, enumerate(questions[:n]), strict=True):
        assert set(row) >= REQUIRED_ROW_KEYS
        assert row["answers"] == _expected(q, i)
        assert row["gold"] == [g.name for g in q.answers]
        assert row["grounding"] == "parametric" and row["kgr"] == 0.0
        assert row["llm_calls"] == 1 and row["prompt_tokens"] > 0 and row["completion_tokens"] > 0
        assert row["hops"] == 2 and row["qtype"] == q.metadata["qtype"]
        assert row["kg_time_s"] == 0.0 and row["error"] is None

    # The expected scores, computed here from what the script answers.
    hits = [1.0 if i % 3 == 0 or i % 5 == 0 else 0.0 for i in range(n)]
    f1s = []
    for i, q in enumerate(questions[:n]):
        if i % 3 == 0:
            f1s.append(1.0)
        elif i % 5 == 0:
            p, r = 0.5, 1 / len(q.answers)
            f1s.append(2 * p * r / (p + r))
        else:
            f1s.append(0.0)
    summary = json.loads((io_run / "summary.json").read_text())
    assert set(summary) >= SUMMARY_KEYS
    assert summary["n"] == n and summary["errors"] == 0
    assert summary["hits@1"] == pytest.approx(sum(hits) / n)
    assert summary["f1"] == pytest.approx(sum(f1s) / n)
    assert summary["kgr"] == 0.0 and summary["faithful_f1"] == 0.0
    assert summary["llm_calls_mean"] == 1.0
    assert summary["grounding"] == {"structured": 0, "synthesis": 0, "parametric": n}
    assert set(summary["breakdowns"]) == {"hops", "qtype"}
    assert sum(g["n"] for g in summary["breakdowns"]["qtype"].values()) == n
    config = json.loads((io_run / "config.json").read_text())
    assert {"dataset": "metaqa-2hop", "split": "dev", "method": "io", "limit": n, "seed": 0, "kg": None}.items() \
        <= config.items()
    assert config["llm"] == f"scripted:{rules}" and config["kgqa_version"] and config["started_at"]
    # The source commit, when kgqa runs from a git checkout (CI and development do): a short hash, maybe +dirty.
    assert config["kgqa_commit"] is None or re.fullmatch(r"[0-9a-f]{7,}(\+dirty|\+export)?", config["kgqa_commit"])

    report = (io_run / "report.md").read_text()
    assert "# io on metaqa-2hop / dev" in report and "## By qtype" in report and "Faithful-F1" in report
    pngs = sorted(p.name for p in io_run.glob("*.png"))
    assert {"accuracy.png", "accuracy_by_hops.png", "accuracy_by_qtype.png", "llm_calls_hist.png",
            "tokens_hist.png"} <= set(pngs)
    for name in pngs:
        assert (io_run / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({name})" in report

    done = kgqa(eval_args(rules, cot_run, 50, "--no-report", method="cot"), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr

    compared = kgqa(["eval", "compare", str(io_run), str(cot_run)], cwd=tmp_path, env=env)
    assert compared.returncode == 0, compared.stderr
    lines = compared.stdout.splitlines()
    assert "io-run" in lines[0] and "cot-run" in lines[0]
    by_label = {re.split(r"\s{2,}", line.strip())[0]: re.split(r"\s{2,}", line.strip())[1:] for line in lines[2:]}
    assert by_label["method"] == ["io", "cot"]
    assert by_label["n"] == ["200", "50"]
    assert by_label["Hits@1 %"][0] == f"{100 * sum(hits) / n:.1f}"
    assert by_label["Hits@1 %"][1] == f"{100 * sum(hits[:50]) / 50:.1f}"
    as_json = kgqa(["eval", "compare", "--json", str(io_run), str(cot_run)], cwd=tmp_path, env=env)
    assert json.loads(as_json.stdout)[str(cot_run)]["method"] == "cot"


def test_a_failing_question_is_recorded_and_the_run_goes_on(tmp_path: Path, data_dir: Path,
                                                            questions: list[Question]) -> None:
    n = 20
    # No default rule and no rule for question 7: the model raises for it, as a dead or confused backend would.
    rules = write_rules(tmp_path / "rules.jsonl", questions[:n], skip={7}, default=False)
    env = _env(tmp_path, data_dir)
    out = tmp_path / "run"
    done = kgqa(eval_args(rules, out, n), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    rows = rows_by_id(out)
    assert len(rows) == n
    failed = rows[questions[7].id]
    assert failed["error"].startswith("LLMError") and "no rule matches" in failed["error"]
    assert failed["answers"] == [] and failed["hit1"] == 0.0 and failed["grounding"] == "parametric"
    assert failed["llm_calls"] == 1  # the failed call is still counted
    assert [qid for qid, r in rows.items() if r["error"]] == [questions[7].id]
    assert rows[questions[9].id]["hit1"] == 1.0  # answered after the failure
    summary = json.loads((out / "summary.json").read_text())
    assert summary["errors"] == 1 and summary["n"] == n
    traces = {json.loads(line)["id"]: json.loads(line) for line in (out / TRACES_FILE).read_text().splitlines()}
    assert "Traceback" in traces[questions[7].id]["traceback"]
    assert "## Failures" in (out / "report.md").read_text()


def test_existing_run_directory_is_refused_without_resume_and_nothing_is_lost(tmp_path: Path, data_dir: Path,
                                                                             questions: list[Question]) -> None:
    rules = write_rules(tmp_path / "rules.jsonl", questions[:30])
    env = _env(tmp_path, data_dir)
    out = tmp_path / "run"
    assert kgqa(eval_args(rules, out, 30, "--no-report"), cwd=tmp_path, env=env).returncode == 0
    before = snapshot(out)

    again = kgqa(eval_args(rules, out, 30, "--no-report"), cwd=tmp_path, env=env)
    assert again.returncode == 2
    assert "not empty" in again.stderr and "--resume" in again.stderr and "--out" in again.stderr
    assert "Traceback" not in again.stderr
    assert snapshot(out) == before

    other = kgqa(eval_args(rules, out, 30, "--resume", "--no-report", method="cot"), cwd=tmp_path, env=env)
    assert other.returncode == 2 and "different settings" in other.stderr and "method" in other.stderr
    assert snapshot(out) == before

    # Resuming a finished run answers nothing and writes no question twice.
    same = kgqa(eval_args(rules, out, 30, "--resume", "--no-report"), cwd=tmp_path, env=env)
    assert same.returncode == 0 and "0 answered now" in same.stdout
    assert (out / RESULTS_FILE).read_bytes() == before[RESULTS_FILE]


def test_torn_last_line_is_truncated_and_that_question_rerun(tmp_path: Path, data_dir: Path,
                                                             questions: list[Question]) -> None:
    rules = write_rules(tmp_path / "rules.jsonl", questions[:30])
    env = _env(tmp_path, data_dir)
    out = tmp_path / "run"
    assert kgqa(eval_args(rules, out, 30, "--no-report"), cwd=tmp_path, env=env).returncode == 0
    original = rows_by_id(out)
    data = (out / RESULTS_FILE).read_bytes()
    lines = data.splitlines(keepends=True)
    # A crash mid-write: the last row is cut in half, the 29th is complete; its trace line is there, also torn.
    (out / RESULTS_FILE).write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    (out / "summary.json").unlink()
    traces = (out / TRACES_FILE).read_bytes()
    (out / TRACES_FILE).write_bytes(traces + b'{"id": "torn')

    assert len(read_results(out)) == 29  # reading ignores the torn line without touching the file
    resumed = kgqa(eval_args(rules, out, 30, "--resume", "--no-report"), cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert "1 answered now" in resumed.stdout and "29 finished before" in resumed.stdout
    got = rows_by_id(out)
    assert set(got) == set(original)
    last = questions[29].id
    assert {k: got[last][k] for k in SCORE_KEYS} == {k: original[last][k] for k in SCORE_KEYS}
    trace_ids = [json.loads(line)["id"] for line in (out / TRACES_FILE).read_text().splitlines()]
    assert sorted(trace_ids) == sorted(original)


def test_method_config_reaches_the_method_from_the_command_line(tmp_path: Path, data_dir: Path,
                                                                questions: list[Question]) -> None:
    rules = write_rules(tmp_path / "rules.jsonl", questions[:10])
    env = _env(tmp_path, data_dir)
    out = tmp_path / "run"
    done = kgqa(eval_args(rules, out, 10, "--no-report", "--method-config", "max_answers=1"), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert all(len(r["answers"]) <= 1 for r in read_results(out))
    run_config = json.loads((out / "config.json").read_text())
    assert run_config["method_config"] == {"max_answers": 1}
    bad = kgqa(eval_args(rules, tmp_path / "bad", 10, "--method-config", "max_answers=0"), cwd=tmp_path, env=env)
    assert bad.returncode == 2 and "max_answers" in bad.stderr and "Traceback" not in bad.stderr
    assert not (tmp_path / "bad").exists()  # a bad configuration leaves nothing behind


def test_compare_subcommand_is_not_parsed_as_run_options(tmp_path: Path, data_dir: Path) -> None:
    env = _env(tmp_path, data_dir)
    missing = kgqa(["eval", "compare", str(tmp_path / "nope")], cwd=tmp_path, env=env)
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    mixed = kgqa(["eval", "--dataset", "metaqa-1hop", "compare", str(tmp_path)], cwd=tmp_path, env=env)
    assert mixed.returncode == 2 and "cannot be combined" in mixed.stderr
    bare = kgqa(["eval"], cwd=tmp_path, env=env)
    assert bare.returncode == 2 and "--dataset is required" in bare.stderr


# ---------------------------------------------------------------------------------------------------------------------
# The Python API


def _toy_questions(n: int) -> list[Question]:
    return [Question(id=f"q{i}", text=f"what is item {i}", topic_entities=[TopicEntity(id=f"e{i}", name=f"E{i}")],
                     answers=[GoldAnswer(id=None, name=f"answer {i}")], metadata={"hops": 1 + i % 2}) for i in range(n)]


class ToyMethod:
    """Answers ``answer i`` from the KG's relations of the topic entity; raises for the ids in ``fail``."""

    name = "toy"

    def __init__(self, fail: Callable[[str], bool] = lambda qid: False) -> None:
        self.fail = fail

    def answer(self, question: Question, ctx: MethodContext) -> Prediction:
        ctx.trace.add("toy.start", qid=question.id)
        if self.fail(question.id):
            raise RuntimeError(f"injected failure for {question.id}")
        topic = question.topic_entities[0].id
        targets = ctx.kg.neighbors(topic, "has_answer") if ctx.kg is not None else []
        names = ctx.kg.names(targets) if ctx.kg is not None else {}
        answers = [AnswerItem(id=t, name=names.get(t) or t) for t in targets]
        return Prediction(answers=answers, grounding=Grounding.STRUCTURED, trace=list(ctx.trace))


@pytest.fixture
def toy_kg(tmp_path: Path) -> Any:
    builder = EmbeddedKGBuilder(schema="generic")
    for i in range(40):
        builder.add_triple(f"e{i}", "has_answer", f"a{i}")
        builder.add_name(f"a{i}", f"answer {i}")
    return builder.build(tmp_path / "kg")


def test_kg_time_is_measured_through_the_timing_proxy(tmp_path: Path, toy_kg: Any) -> None:
    run = run_eval("toy", questions=_toy_questions(12), out=tmp_path / "run", method=ToyMethod(),
                   llm=ScriptedModel([{"reply": "unused"}]), kg=toy_kg, progress=False, report=False)
    rows = read_results(run.out_dir)
    assert [r["hit1"] for r in rows] == [1.0] * 12
    assert all(r["kg_calls"] == 2 and r["kg_time_s"] > 0 for r in rows)  # neighbors + names
    assert all(r["grounding"] == "structured" for r in rows)
    assert run.summary["kgr"] == 1.0 and run.summary["faithful_f1"] == 1.0
    assert 0 < run.summary["kg_time_share"] <= 1
    assert run.summary["breakdowns"]["hops"]["1"]["n"] == 6
    config = json.loads((run.out_dir / "config.json").read_text())
    assert config["topic_coverage"] == {"checked": 12, "covered": 12}


def test_consecutive_failures_stop_the_run_and_retry_errors_reruns_them(tmp_path: Path, toy_kg: Any) -> None:
    questions = _toy_questions(10)
    out = tmp_path / "run"
    llm = ScriptedModel([{"reply": "unused"}])
    with pytest.raises(RunStopped, match=r"3 consecutive failed questions.*--resume --retry-errors"):
        run_eval("toy", questions=questions, out=out, method=ToyMethod(fail=lambda qid: True), llm=llm, kg=toy_kg,
                 progress=False, report=False, max_consecutive_failures=3)
    rows = read_results(out)
    assert len(rows) == 3 and all(r["error"].startswith("RuntimeError: injected failure") for r in rows)
    assert json.loads((out / "summary.json").read_text())["run"]["stopped"].startswith("stopped after 3")

    # Resume with a method that fails only q5: keeps the 3 failed rows, answers the rest, q5 failing on its own.
    run = run_eval("toy", questions=questions, out=out, method=ToyMethod(fail=lambda qid: qid == "q5"), llm=llm,
                   kg=toy_kg, progress=False, report=False, resume=True, max_consecutive_failures=3)
    assert run.skipped == 3 and run.answered == 7 and run.failed == 1
    assert run.summary["errors"] == 4

    run = run_eval("toy", questions=questions, out=out, method=ToyMethod(), llm=llm, kg=toy_kg, progress=False,
                   report=False, resume=True, retry_errors=True)
    assert run.answered == 4 and run.failed == 0
    rows = rows_by_id(out)
    assert len(rows) == 10 and not any(r["error"] for r in rows.values())
    assert run.summary["hits@1"] == 1.0
    trace_ids = [json.loads(line)["id"] for line in (out / TRACES_FILE).read_text().splitlines()]
    assert sorted(trace_ids) == sorted(rows)


def test_workers_give_the_same_rows_as_one_worker(tmp_path: Path, toy_kg: Any) -> None:
    questions = _toy_questions(40)
    llm = ScriptedModel([{"reply": "unused"}])
    one = run_eval("toy", questions=questions, out=tmp_path / "one", method=ToyMethod(fail=lambda q: q == "q3"),
                   llm=llm, kg=toy_kg, progress=False, report=False)
    four = run_eval("toy", questions=questions, out=tmp_path / "four", method=ToyMethod(fail=lambda q: q == "q3"),
                    llm=llm, kg=toy_kg, progress=False, report=False, workers=4)
    a, b = rows_by_id(one.out_dir), rows_by_id(four.out_dir)
    assert set(a) == set(b) and len(a) == 40
    for qid in a:
        assert {k: a[qid][k] for k in SCORE_KEYS} == {k: b[qid][k] for k in SCORE_KEYS}
    assert {k: v for k, v in one.summary.items() if k in ("n", "errors", "hits@1", "f1", "kgr")} == \
        {k: v for k, v in four.summary.items() if k in ("n", "errors", "hits@1", "f1", "kgr")}


def test_a_locked_run_directory_is_refused(tmp_path: Path, toy_kg: Any) -> None:
    fcntl = pytest.importorskip("fcntl")
    out = tmp_path / "run"
    out.mkdir()
    with open(out / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        with pytest.raises(RunDirError, match="in use by another kgqa eval"):
            run_eval("toy", questions=_toy_questions(2), out=out, method=ToyMethod(),
                     llm=ScriptedModel([{"reply": "unused"}]), kg=toy_kg, progress=False, report=False)
    assert not (out / RESULTS_FILE).exists()


def test_summarize_run_rebuilds_the_summary_of_a_killed_run(tmp_path: Path, toy_kg: Any) -> None:
    run = run_eval("toy", questions=_toy_questions(5), out=tmp_path / "run", method=ToyMethod(),
                   llm=ScriptedModel([{"reply": "unused"}]), kg=toy_kg, progress=False, report=False)
    (run.out_dir / "summary.json").unlink()
    summary = summarize_run(run.out_dir, report=True)
    assert summary["n"] == 5 and summary["hits@1"] == 1.0
    assert (run.out_dir / "report.md").is_file() and (run.out_dir / "summary.json").is_file()


def test_parse_method_config_coerces_values() -> None:
    assert parse_method_config(["pruner=embedding", "top_k=5", "alpha=0.25", "backtracking=false", "x=yes",
                                "max_depth=none", "ids=[1, 2]", "name=nan"]) == {
        "pruner": "embedding", "top_k": 5, "alpha": 0.25, "backtracking": False, "x": True, "max_depth": None,
        "ids": [1, 2], "name": "nan"}
    for bad in ("pruner", "=3", "bad key=1"):
        with pytest.raises(ConfigError, match="key=value"):
            parse_method_config([bad])


def test_results_writer_modes_write_the_same_whole_lines(tmp_path: Path) -> None:
    from kgqa.eval.runner import ResultsWriter

    rows = [{"id": f"q{i}", "text": "line\nbreak and ünïcode", "n": i} for i in range(200)]
    contents = []
    for mode in ("group", "line", "none"):
        path = tmp_path / f"{mode}.jsonl"
        with ResultsWriter(path, fsync=mode) as writer:
            for row in rows:
                writer.write(row)
        contents.append(path.read_bytes())
        assert [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] == rows
    assert contents[0] == contents[1] == contents[2]
    with pytest.raises(ConfigError, match="fsync mode"):
        ResultsWriter(tmp_path / "x.jsonl", fsync="sometimes")


@pytest.mark.parametrize("method", ["chains", "fog"])
def test_a_scorer_method_on_a_kg_with_no_scorer_is_refused_before_the_run_starts(tmp_path: Path, toy_kg: Any,
                                                                                 method: str) -> None:
    """Not one error row per question: one error, naming both ways to train a scorer, and no run directory."""
    from kgqa.errors import ConfigError

    out = tmp_path / "run"
    with pytest.raises(ConfigError, match="needs a trained scorer for this KG") as caught:
        run_eval("toy", questions=_toy_questions(3), out=out, method=method, llm=ScriptedModel([{"reply": "unused"}]),
                 kg=toy_kg, progress=False, report=False)
    assert "--synthetic" in str(caught.value) and "--dataset NAME" in str(caught.value)
    assert not out.exists()
