"""The scripted model and the ``load`` registry."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from kgqa.errors import ConfigError, DataError
from kgqa.llm import LLMError, load
from kgqa.llm.base import Completion
from kgqa.llm.scripted import ScriptedModel
from kgqa.llm.tokens import approx_prompt_tokens, approx_tokens


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "be brief"}, {"role": "user", "content": text}]


def write_script(path: Path, *rules: dict | str) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rules) + "\n", encoding="utf-8")
    return path


def test_first_matching_rule_wins_and_default_is_last_resort(tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "s.jsonl",
        {"reply": "I do not know."},
        {"match": r"(?i)capital of (france|paris)", "reply": "Paris"},
        "# comments and blank lines are skipped",
        "",
        {"match": r"capital", "reply": "some capital"},
    )
    model = load(f"scripted:{script}")
    assert model.chat(user("What is the capital of France?")).text == "Paris"
    assert model.chat(user("the capital of Peru")).text == "some capital"
    assert model.chat(user("who wrote Hamlet")).text == "I do not know."


def test_match_is_searched_in_the_last_user_message_only() -> None:
    model = ScriptedModel([{"match": "France", "reply": "yes"}, {"reply": "no"}])
    history = [{"role": "user", "content": "France"}, {"role": "assistant", "content": "ok"},
               {"role": "user", "content": "and Spain?"}]
    assert model.chat(history).text == "no"
    assert model.history == [history]


def test_replies_are_served_in_turn_and_json_rules(tmp_path: Path) -> None:
    model = ScriptedModel([{"match": "x", "replies": ["first", {"a": 1}]}])
    assert [model.chat(user("x")).text for _ in range(3)] == ["first", '{"a": 1}', '{"a": 1}']
    reply = model.chat(user("x"), schema={"type": "object"})
    assert reply.json == {"a": 1}


def test_callable_responder_and_async() -> None:
    model = ScriptedModel(lambda msgs: msgs[-1]["content"].upper())
    assert model.chat(user("abc")).text == "ABC"
    assert asyncio.run(model.achat(user("def"))).text == "DEF"
    bad = ScriptedModel(lambda msgs: 42)  # type: ignore[arg-type,return-value]
    with pytest.raises(LLMError, match="returned int"):
        bad.chat(user("x"))


def test_usage_is_the_documented_approximation() -> None:
    messages = user("Which films did Christopher Nolan direct?")
    reply = ScriptedModel([{"reply": "Inception, Memento."}]).chat(messages)
    assert reply.usage.prompt_tokens == approx_prompt_tokens(messages)
    assert reply.usage.completion_tokens == approx_tokens("Inception, Memento.")
    # words: one token per 4 characters (rounded up); punctuation one token each
    assert approx_tokens("Inception, Memento.") == 3 + 1 + 2 + 1
    assert approx_prompt_tokens([{"role": "user", "content": ""}]) == 4


def test_no_match_and_no_default_is_a_clear_error() -> None:
    model = ScriptedModel([{"match": "^only this$", "reply": "x"}])
    with pytest.raises(LLMError, match="no rule matches the last user message 'something else'"):
        model.chat(user("something else"))


@pytest.mark.parametrize(("line", "message"), [
    ("{not json", "not valid JSON"),
    ('{"match": "(", "reply": "x"}', "not a valid regular expression"),
    ('{"match": "a"}', "exactly one of 'reply' or 'replies'"),
    ('{"reply": "x", "extra": 1}', "unknown key"),
    ('["reply"]', "must be a JSON object"),
])
def test_malformed_script_lines_name_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    script = write_script(tmp_path / "bad.jsonl", {"reply": "ok"}, line)
    with pytest.raises(DataError, match=rf"bad.jsonl:2: .*{message}"):
        load(f"scripted:{script}")


def test_missing_or_empty_script(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not exist"):
        load(f"scripted:{tmp_path / 'nope.jsonl'}")
    (tmp_path / "empty.jsonl").write_text("\n# nothing\n")
    with pytest.raises(DataError, match="has no rules"):
        load(f"scripted:{tmp_path / 'empty.jsonl'}")


def test_load_rejects_bad_specs_and_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="not understood"):
        load("gpt4")
    with pytest.raises(ConfigError, match="not understood"):
        load("anthropic:claude")
    with pytest.raises(ConfigError, match="needs a file"):
        load("scripted:")
    with pytest.raises(ConfigError, match="unknown local model"):
        load("local:llama-70b")
    script = write_script(tmp_path / "s.jsonl", {"reply": "hi"})
    with pytest.raises(ConfigError, match="take no options"):
        load(f"scripted:{script}", temperature=0)
    monkeypatch.setenv("KGQA_LLM", f"scripted:{script}")
    assert load().chat(user("x")).text == "hi"  # the default spec comes from KGQA_LLM


def test_bad_messages_and_params_are_refused() -> None:
    model = ScriptedModel([{"reply": "x"}])
    with pytest.raises(ConfigError, match="non-empty list"):
        model.chat([])
    with pytest.raises(ConfigError, match="role 'robot'"):
        model.chat([{"role": "robot", "content": "x"}])
    with pytest.raises(ConfigError, match="string content"):
        model.chat([{"role": "user", "content": None}])  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match=r"unknown chat parameter\(s\) \['temprature'\]"):
        model.chat(user("x"), temprature=0.5)
    with pytest.raises(ConfigError, match="temperature"):
        model.chat(user("x"), temperature=5)
    with pytest.raises(ConfigError, match="schema"):
        model.chat(user("x"), schema=42)
    assert isinstance(model.chat(user("x"), step="s", max_tokens=5, seed=1, stop=["."]), Completion)
