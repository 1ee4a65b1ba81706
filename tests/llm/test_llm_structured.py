"""Structured output: JSON extraction from messy text, validation, one re-ask, never eval."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, Field

from kgqa.llm import RecordedModel, Recorder
from kgqa.llm.scripted import ScriptedModel
from kgqa.llm.structured import (
    StructuredOutputError,
    ask_json,
    close_truncated,
    drop_placeholders,
    extract_json,
    is_placeholder,
)
from kgqa.llm.tokens import approx_tokens


class Relations(BaseModel):
    relations: list[str]
    scores: list[float] = Field(default_factory=list)


@pytest.mark.parametrize(("text", "expected"), [
    ('{"a": 1}', {"a": 1}),
    ("  [1, 2, 3]\n", [1, 2, 3]),
    ('Sure! Here it is:\n```json\n{"relations": ["film.director"]}\n```\nHope this helps.',
     {"relations": ["film.director"]}),
    ('```\n{"x": "y"}\n```', {"x": "y"}),
    ('The answer is {"name": "a {tricky} }string", "n": [1, {"k": 2}]} as requested.',
     {"name": "a {tricky} }string", "n": [1, {"k": 2}]}),
    ('I think {this is prose} but {"ok": true} is JSON', {"ok": True}),
    ('{"relations": ["a", "b",], }', {"relations": ["a", "b"]}),
    ('Answer: {"relations": ["a",],} done', {"relations": ["a"]}),
    ('"just a string"', "just a string"),
])
def test_extract_json_from_messy_text(text: str, expected: object) -> None:
    assert extract_json(text) == expected


@pytest.mark.parametrize("text", [
    "no json here at all",
    "{'single': 'quotes'}",  # a Python literal is not JSON, and is never evaluated
    "__import__('os').system('touch /tmp/kgqa-pwned')",
    "{unclosed",
    "",
])
def test_extract_json_refuses_non_json(text: str) -> None:
    with pytest.raises(StructuredOutputError, match="no JSON value found"):
        extract_json(text)


def test_valid_first_reply_needs_one_call() -> None:
    rec = Recorder()
    model = RecordedModel(ScriptedModel([{"reply": 'Here: {"relations": ["people.person.spouse"]}'}]), rec)
    result = ask_json(model, [{"role": "user", "content": "which relation?"}], Relations, step="prune")
    assert result == Relations(relations=["people.person.spouse"])
    assert rec.totals().calls == 1


def test_invalid_reply_is_re_asked_once_with_the_validation_error() -> None:
    rec = Recorder()
    scripted = ScriptedModel([{"replies": ['{"relation": "typo"}', '{"relations": ["r1", "r2"], "scores": [1, 0.5]}']}])
    model = RecordedModel(scripted, rec)
    messages = [{"role": "system", "content": "You prune relations."}, {"role": "user", "content": "rank them"}]
    result = ask_json(model, messages, Relations, step="ccor.prune")
    assert result.relations == ["r1", "r2"] and result.scores == [1.0, 0.5]
    first, second = scripted.history
    assert first[0]["content"].startswith("You prune relations.") and '"relations"' in first[0]["content"]
    assert second[-2] == {"role": "assistant", "content": '{"relation": "typo"}'}
    assert "relations: Field required" in second[-1]["content"]
    assert [c.step for c in rec.calls()] == ["ccor.prune", "ccor.prune"]
    assert messages[0]["content"] == "You prune relations."  # the caller's messages are not modified


def test_still_invalid_after_re_ask_raises() -> None:
    scripted = ScriptedModel([{"reply": "I refuse to answer in JSON."}])
    with pytest.raises(StructuredOutputError, match="no valid Relations for step 'x' after one re-ask") as info:
        ask_json(scripted, [{"role": "user", "content": "q"}], Relations, step="x")
    assert info.value.text == "I refuse to answer in JSON."
    assert len(scripted.history) == 2
    assert "no JSON value found" in scripted.history[1][-1]["content"]


def test_backend_parsed_json_is_used_and_schema_passed_on() -> None:
    seen_params: list[dict] = []

    class Spy(ScriptedModel):
        def _complete(self, messages, params):  # type: ignore[no-untyped-def]
            seen_params.append(params)
            return super()._complete(messages, params)

    model = Spy([{"reply": json.dumps({"relations": []})}])
    assert ask_json(model, [{"role": "user", "content": "q"}], Relations, step="s", instruct=False,
                    temperature=0.2).relations == []
    assert seen_params[0]["schema"]["title"] == "Relations" and seen_params[0]["temperature"] == 0.2
    assert model.history[0] == [{"role": "user", "content": "q"}]  # instruct=False adds nothing


@pytest.mark.parametrize(("text", "expected"), [
    ('{"sub_questions": ["Who directed X?", "Who wrote X?", "Who dire', {"sub_questions": ["Who directed X?", "Who wrote X?"]}),
    ('Sure: {"selected": [1, 2, 13', {"selected": [1, 2]}),  # 13 may have been 130: an unfinished number is cut
    ('{"selected": [1, 2, 3]', {"selected": [1, 2, 3]}),
    ('{"a": "x\\"y", "b": [tr', {"a": 'x"y'}),  # a key without its value is dropped
    ('{"a": [{"k": "v"}, {"k": "w', {"a": [{"k": "v"}]}),
])
def test_close_truncated_keeps_what_a_cut_off_reply_completed(text: str, expected: object) -> None:
    assert close_truncated(text) == expected


@pytest.mark.parametrize("text", ["no json", '{"a', "", "__import__('os')"])
def test_close_truncated_finds_nothing_where_nothing_was_completed(text: str) -> None:
    assert close_truncated(text) is None


def test_salvage_reads_a_cut_off_reply_instead_of_re_asking_and_is_opt_in() -> None:
    cut = '{"relations": ["film.director", "film.writer", "film.prod'
    budget = approx_tokens(cut)  # the reply used its whole budget: the scripted model says "length"
    scripted = ScriptedModel([{"reply": cut}])
    result = ask_json(scripted, [{"role": "user", "content": "q"}], Relations, step="x", salvage=True, max_tokens=budget)
    assert result.relations == ["film.director", "film.writer"] and len(scripted.history) == 1
    # without salvage the same reply is re-asked, and the re-ask (the same cut reply) fails
    scripted = ScriptedModel([{"reply": cut}])
    with pytest.raises(StructuredOutputError):
        ask_json(scripted, [{"role": "user", "content": "q"}], Relations, step="x", max_tokens=budget)
    assert len(scripted.history) == 2


def test_salvage_still_re_asks_when_the_completed_part_does_not_validate() -> None:
    cut = '{"scores": [1, 0.5], "relat'
    scripted = ScriptedModel([{"replies": [cut, '{"relations": ["r1"]}']}])
    result = ask_json(scripted, [{"role": "user", "content": "q"}], Relations, step="x", salvage=True,
                      max_tokens=approx_tokens(cut))
    assert result.relations == ["r1"] and len(scripted.history) == 2


@pytest.mark.parametrize("text", ["<answer>", "<your answer>", "<answer_1>", "<answer 2>", "<entity-12>", " ... ", "\u2026"])
def test_format_placeholders_are_recognised(text: str) -> None:
    assert is_placeholder(text)


@pytest.mark.parametrize("text", ["<Q42>", "<http://example.org/Q90>", "Paris", "Ocean's 11", "<1>", "Answer 1"])
def test_names_are_not_placeholders(text: str) -> None:
    # a bracketed identifier, a name with a number in it, a bare number: all things a KG or a model may name
    assert not is_placeholder(text)


def test_numbered_placeholders_are_dropped_from_answer_lists() -> None:
    # At fcfad03 VoG's answer step echoed the format's list as "<answer_1>", "<answer_2>", ... on 6 of 200 questions.
    assert drop_placeholders(["<answer_1>", "Joel Zwick", "<answer_2>", "<Q42>"]) == ["Joel Zwick", "<Q42>"]
