"""Issue 52, items 1 and 13: only a reply its token budget cut off is salvaged, and the salvage is counted; the cache key
and the check of cached replies cover a schema given as a JSON-schema dict as well as a pydantic class."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from llm_fault_server import FaultServer
from pydantic import BaseModel

from kgqa.llm import CachedModel, Recorder, SQLiteCache, load
from kgqa.llm.base import Completion, Usage, cut_by_budget
from kgqa.llm.cache import request_key
from kgqa.llm.scripted import ScriptedModel
from kgqa.llm.structured import Reply, StructuredOutputError, ask_json
from kgqa.llm.tokens import approx_tokens

FAST = {"max_retries": 0, "backoff_base": 0.01, "backoff_max": 0.05}
ASK = [{"role": "user", "content": "Which relations lead from a film to its crew?"}]
FULL = ["film.film.directed_by", "film.film.written_by", "film.film.produced_by", "film.film.music"]


class Relations(Reply):
    relations: list[str]


def relations_server() -> FaultServer:
    return FaultServer(responder=lambda body: json.dumps({"relations": FULL}))


def test_a_reply_cut_short_that_ended_on_its_own_is_re_asked_never_shortened() -> None:
    # At 9cf0ed4 salvage read any reply that did not decode as cut off by its budget: a reply damaged on the way
    # (finish reason "stop", a few of its 384 tokens used) became a shorter relation list, and nothing said so.
    with relations_server() as server:
        server.inject("cut_short")
        rec = Recorder()
        model = load(f"openai:probe@{server.url}", recorder=rec, cache=False, **FAST)
        with rec.scope("q1"):
            got = ask_json(model, ASK, Relations, step="prune", salvage=True, max_tokens=384)
        assert got.relations == FULL  # the re-ask's full reply, not the first half of the cut one
        assert len(server.state.requests) == 2
        assert rec.totals("q1").salvaged_replies == 0 and rec.totals("q1").unreadable_replies == 0


def test_a_reply_its_budget_cut_off_is_salvaged_and_counted() -> None:
    with relations_server() as server:
        server.inject("truncated_json")  # finish reason "length", the whole max_tokens billed
        rec = Recorder()
        model = load(f"openai:probe@{server.url}", recorder=rec, cache=False, **FAST)
        with rec.scope("q1"):
            got = ask_json(model, ASK, Relations, step="prune", salvage=True, max_tokens=384)
        assert len(server.state.requests) == 1  # read as far as it got, not re-asked
        assert got.relations and got.relations == FULL[:len(got.relations)] and len(got.relations) < len(FULL)
        totals = rec.totals("q1")
        assert totals.salvaged_replies == 1 and totals.to_dict()["salvaged_replies"] == 1
        [(step, kept)] = rec.salvaged("q1")
        assert step == "prune" and "cut off by the token budget" in kept and FULL[0] in kept
        assert rec.totals().salvaged_replies == 1 and rec.salvaged("other") == []


def test_the_scripted_model_says_length_only_when_the_reply_used_its_whole_budget() -> None:
    cut = '{"relations": ["film.film.directed_by", "film.film.written_by", "film.fi'
    budget = approx_tokens(cut)
    # the same text under a larger budget ended on its own: re-asked (and still unreadable), never shortened
    scripted = ScriptedModel([{"reply": cut}])
    with pytest.raises(StructuredOutputError):
        ask_json(scripted, ASK, Relations, step="x", salvage=True, max_tokens=budget + 50)
    assert len(scripted.history) == 2
    scripted = ScriptedModel([{"reply": cut}])
    rec = Recorder()
    with rec.scope("q"):
        got = ask_json(scripted, ASK, Relations, step="x", salvage=True, max_tokens=budget)
    assert got.relations == ["film.film.directed_by", "film.film.written_by"] and len(scripted.history) == 1
    assert rec.totals("q").salvaged_replies == 1


@pytest.mark.parametrize(("finish", "tokens", "cut"), [
    ("length", 3, True), ("stop", 512, False), ("content_filter", 10, False),
    (None, 512, True), (None, 511, False),  # a backend that gives no reason (a cache hit): the budget decides
])
def test_cut_by_budget_trusts_the_finish_reason_and_else_the_budget(finish: str | None, tokens: int, cut: bool) -> None:
    completion = Completion(text="{", usage=Usage(1, tokens), finish_reason=finish)
    assert cut_by_budget(completion, 512) is cut


# -- the cache: a schema given as a dict ------------------------------------------------------------------------


class Named(BaseModel):
    name: str


NAMED = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
OBJECT = {"type": "object"}


def test_the_cache_key_holds_the_schema_given_as_a_dict_or_a_class(tmp_path: Path) -> None:
    # A mutation that dropped the schema from the key failed no test (issue 52): these requests differ only by it.
    inner = ScriptedModel([{"reply": '{"name": "Titanic"}'}])
    model = CachedModel(inner, SQLiteCache(tmp_path / "c.sqlite3"), deterministic_only=False)
    schemas: list[object] = [NAMED, OBJECT, None, Named]
    first = [model.chat(ASK, schema=schema) for schema in schemas]
    again = [model.chat(ASK, schema=schema) for schema in schemas]
    assert [c.cached for c in first] == [False] * 4 and [c.cached for c in again] == [True] * 4
    assert len(inner.history) == 4 and len(model.cache) == 4
    keys = {request_key("m", ASK, {"temperature": 0.0, "max_tokens": 512, "schema": s}) for s in (NAMED, OBJECT, None)}
    assert len(keys) == 3


def test_a_reply_that_does_not_match_its_dict_schema_is_neither_stored_nor_replayed(tmp_path: Path) -> None:
    cache = SQLiteCache(tmp_path / "c.sqlite3")
    inner = ScriptedModel([{"reply": '{"title": "Titanic"}'}])  # valid JSON, but no "name"
    model = CachedModel(inner, cache, deterministic_only=False)
    model.chat(ASK, schema=NAMED)
    assert len(cache) == 0  # not stored
    # an entry left by an older kgqa (or a laxer schema) under this very key is skipped as a miss, not replayed
    key = model._key(ASK, {"schema": NAMED})
    assert key is not None
    cache.put(key, Completion(text='{"title": "Titanic"}', usage=Usage(3, 4), json={"title": "Titanic"}, model="m"))
    replay = model.chat(ASK, schema=NAMED)
    assert not replay.cached and len(inner.history) == 2
    # a reply that matches is stored and replayed
    good = CachedModel(ScriptedModel([{"reply": '{"name": "Titanic"}'}]), cache, deterministic_only=False)
    good.chat([{"role": "user", "content": "other"}], schema=NAMED)
    assert good.chat([{"role": "user", "content": "other"}], schema=NAMED).cached


@pytest.mark.parametrize(("value", "ok"), [
    ({"name": "x"}, True), ({"name": 3}, False), ({}, False), ({"name": "x", "extra": 1}, True),
    ([{"name": "x"}], False),
])
def test_the_dict_schema_check_reads_the_usual_keywords(value: object, ok: bool) -> None:
    from kgqa.llm.structured import reply_error

    assert (reply_error(NAMED, json.dumps(value)) is None) is ok
    strict = {**NAMED, "additionalProperties": False}
    assert (reply_error(strict, json.dumps({"name": "x", "extra": 1})) is None) is False
    # pydantic's own schema of a reply model, with $defs and anyOf, is read too
    nested = {"$defs": {"N": NAMED}, "type": "object", "properties": {"items": {"type": "array", "items": {
        "$ref": "#/$defs/N"}}, "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}}, "required": ["items"]}
    assert reply_error(nested, '{"items": [{"name": "a"}], "note": null}') is None
    assert reply_error(nested, '{"items": [{"nom": "a"}]}') is not None
    assert reply_error(nested, '{"items": [], "note": 3}') is not None
