"""Issue 16, findings 1 and 2: a well-formed reply of the wrong shape is unreadable (re-asked, then counted), never an
empty answer; and the cache keeps only replies that validated."""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
from pathlib import Path

import pytest

import kgqa.methods
import kgqa.steps
from kgqa.cli import main
from kgqa.llm import CachedModel, RecordedModel, Recorder, SQLiteCache, load
from kgqa.llm.base import Completion, Usage
from kgqa.llm.scripted import ScriptedModel
from kgqa.llm.structured import Reply, StructuredOutputError, ask_json, schema_instruction
from kgqa.llm.tokens import approx_tokens
from kgqa.methods.llm_only import DirectAnswer

WRONG_SHAPE = {"result": "Christopher Nolan", "items": [1, 2]}


def _all_reply_models() -> list[type[Reply]]:
    for package in (kgqa.methods, kgqa.steps):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            importlib.import_module(info.name)
    found: list[type[Reply]] = []
    todo = list(Reply.__subclasses__())
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return sorted(found, key=lambda c: f"{c.__module__}.{c.__qualname__}")


REPLY_MODELS = _all_reply_models()


def test_every_method_reply_model_is_strict() -> None:
    names = {c.__qualname__ for c in REPLY_MODELS}
    # the replies of IO/CoT, CCoR, ToG, PoG, FoG, SRP, VoG and the shared pruning steps all derive from Reply
    assert {"DirectAnswer", "ReasonedAnswer", "MainDecision", "ConstraintDecision", "Sufficiency", "Reflection",
            "SubQuestions", "MemoryReply", "Judgement", "Verification", "RelationChoice", "FilterChoice",
            "EntityScores"} <= names


@pytest.mark.parametrize("reply_model", REPLY_MODELS, ids=lambda c: f"{c.__module__.split('.')[-2]}.{c.__qualname__}")
def test_a_reply_of_another_shape_never_validates(reply_model: type[Reply]) -> None:
    assert reply_model.model_json_schema().get("additionalProperties") is False
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        reply_model.model_validate(WRONG_SHAPE)


def test_the_answers_field_is_required_and_unknown_keys_refused() -> None:
    with pytest.raises(ValueError, match="answers"):
        DirectAnswer.model_validate({})
    with pytest.raises(ValueError, match="Extra inputs"):
        DirectAnswer.model_validate({"answers": ["a"], "confidence": 0.9})
    assert DirectAnswer.model_validate({"answers": []}).answers == []


def test_wrong_shape_is_re_asked_and_a_good_second_reply_wins() -> None:
    rec = Recorder()
    model = RecordedModel(ScriptedModel([{"replies": [json.dumps(WRONG_SHAPE), '{"answers": ["Nolan"]}']}]), rec)
    with rec.scope("q1"):
        reply = ask_json(model, [{"role": "user", "content": "who?"}], DirectAnswer, step="io.generate")
    assert reply.answers == ["Nolan"]
    assert rec.totals("q1").calls == 2 and rec.totals("q1").unreadable_replies == 0


def test_wrong_shape_twice_is_counted_as_unreadable_for_its_question() -> None:
    rec = Recorder()
    model = RecordedModel(ScriptedModel([{"reply": json.dumps(WRONG_SHAPE)}]), rec)
    with rec.scope("q1"), pytest.raises(StructuredOutputError, match="Extra inputs"):
        ask_json(model, [{"role": "user", "content": "who?"}], DirectAnswer, step="io.generate")
    with rec.scope("q2"):
        ask_json(RecordedModel(ScriptedModel([{"reply": '{"answers": ["x"]}'}]), rec),
                 [{"role": "user", "content": "who?"}], DirectAnswer, step="io.generate")
    assert rec.totals("q1").unreadable_replies == 1
    assert rec.unreadable("q1")[0][0] == "io.generate"
    assert rec.totals("q2").unreadable_replies == 0
    assert rec.totals().unreadable_replies == 1


def test_the_cache_stores_only_replies_that_validated(tmp_path: Path) -> None:
    cache = SQLiteCache(tmp_path / "c.sqlite3")
    scripted = ScriptedModel([{"replies": [json.dumps(WRONG_SHAPE), json.dumps(WRONG_SHAPE), '{"answers": ["ok"]}']}])
    model = CachedModel(scripted, cache, deterministic_only=False)
    messages = [{"role": "user", "content": "who?"}]
    with pytest.raises(StructuredOutputError):
        ask_json(model, messages, DirectAnswer, step="s")
    assert len(cache) == 0  # neither the first reply nor the re-ask's was kept
    assert ask_json(model, messages, DirectAnswer, step="s").answers == ["ok"]
    assert len(cache) == 1
    # plain calls (no schema) are cached as before
    model.chat([{"role": "user", "content": "free text"}])
    assert len(cache) == 2


def test_a_damaged_entry_already_in_the_cache_is_skipped(tmp_path: Path) -> None:
    cache = SQLiteCache(tmp_path / "c.sqlite3")
    messages = [{"role": "user", "content": "who?"}]
    healthy = ScriptedModel([{"reply": '{"answers": ["fresh"]}'}])
    model = CachedModel(healthy, cache, deterministic_only=False)
    # What an older kgqa stored from a faulty endpoint, under the key this request has.
    key = model._key(messages, {"schema": DirectAnswer})
    assert key is not None
    cache.put(key, Completion(text=json.dumps(WRONG_SHAPE), usage=Usage(3, 4), model="m"))
    reply = model.chat(messages, schema=DirectAnswer)
    assert not reply.cached and json.loads(reply.text) == {"answers": ["fresh"]}
    again = model.chat(messages, schema=DirectAnswer)
    assert again.cached and json.loads(again.text) == {"answers": ["fresh"]}  # the healthy reply replaced it


def test_refresh_asks_again_and_rewrites_the_entry(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    messages = [{"role": "user", "content": "q"}]
    first = CachedModel(ScriptedModel([{"reply": "old"}]), SQLiteCache(path), deterministic_only=False)
    assert first.chat(messages).text == "old"
    refreshing = CachedModel(ScriptedModel([{"reply": "new"}]), SQLiteCache(path), deterministic_only=False,
                             refresh=True)
    assert refreshing.chat(messages).text == "new"
    reader = CachedModel(ScriptedModel([{"reply": "unused"}]), SQLiteCache(path), deterministic_only=False)
    hit = reader.chat(messages)
    assert hit.cached and hit.text == "new"


def test_cache_modes_from_the_flag_and_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tests.llm.llm_fault_server import FaultServer

    with FaultServer() as srv:
        assert not isinstance(load(f"openai:m@{srv.url}", cache=False), CachedModel)
        refreshing = load(f"openai:m@{srv.url}", cache="refresh")
        assert isinstance(refreshing, CachedModel) and refreshing.refresh
        monkeypatch.setenv("KGQA_LLM_CACHE", "refresh")
        from_env = load(f"openai:m@{srv.url}")
        assert isinstance(from_env, CachedModel) and from_env.refresh


def _io_rules(path: Path, questions: list[str], broken: str) -> Path:
    lines: list[dict] = [{"match": "^That reply was not valid", "reply": WRONG_SHAPE}]  # the re-ask fails too
    for text in questions:
        reply = WRONG_SHAPE if text == broken else {"answers": ["Some Answer"]}
        lines.append({"match": re.escape(text), "reply": reply})
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path


def test_eval_counts_the_unreadable_reply_in_results_summary_and_report(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kgqa.datasets import load_dataset

    questions = load_dataset("demo", limit=4)
    broken = questions[1]
    rules = _io_rules(tmp_path / "rules.jsonl", [q.text for q in questions], broken.text)
    out = tmp_path / "run"
    code = main(["eval", "--dataset", "demo", "--method", "io", "--llm", f"scripted:{rules}", "--limit", "4",
                 "--out", str(out), "--no-progress"])
    assert code == 0, capsys.readouterr().err
    rows = {r["id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert rows[broken.id]["unreadable_replies"] == 1 and rows[broken.id]["answers"] == []
    assert rows[broken.id]["llm_calls"] == 2  # the first ask and the re-ask
    assert all(r["unreadable_replies"] == 0 for qid, r in rows.items() if qid != broken.id)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["unreadable_replies_total"] == 1 and summary["questions_with_unreadable"] == 1
    assert "| unreadable replies | 1 in 1 questions |" in (out / "report.md").read_text()
    trace = {t["id"]: t for t in map(json.loads, (out / "traces.jsonl").read_text().splitlines())}
    assert "unreadable" in json.dumps(trace[broken.id])


def test_a_reply_cut_off_by_its_budget_is_cached_when_its_completed_part_validates(tmp_path: Path) -> None:
    cache = SQLiteCache(tmp_path / "c.sqlite3")
    cut = '{"answers": ["Greek", "English", "Gre'
    inner = ScriptedModel([{"reply": cut}])
    model = CachedModel(inner, cache, deterministic_only=False)
    messages = [{"role": "user", "content": "which languages?"}]
    budget = approx_tokens(cut)  # the reply spent its whole budget
    assert ask_json(model, messages, DirectAnswer, step="s", salvage=True, max_tokens=budget).answers == [
        "Greek", "English"]
    assert len(cache) == 1 and len(inner.history) == 1
    again = model.chat(messages=[{"role": "system", "content": schema_instruction(DirectAnswer)}, *messages],
                       schema=DirectAnswer, max_tokens=budget)
    assert again.cached and again.text == cut
    # the same text under a larger budget was not cut off by it: a damaged reply, neither stored nor replayed
    model.chat(messages, schema=DirectAnswer, max_tokens=budget + 100)
    assert len(cache) == 1
    # a cut reply whose completed part does not validate is not stored either
    model = CachedModel(ScriptedModel([{"reply": '{"answ'}]), cache, deterministic_only=False)
    model.chat([{"role": "user", "content": "other"}], schema=DirectAnswer, max_tokens=1)
    assert len(cache) == 1
