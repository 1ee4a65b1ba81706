"""What an endpoint accepts is negotiated once: reasoning-model parameters and the structured-output mode.

The fault server imitates OpenAI's reasoning models (HTTP 400 naming ``max_tokens`` or ``temperature``) and
llama-cpp-python's server (HTTP 500 about ``response_format`` for ``json_schema``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from llm_fault_server import FaultServer, format_kind
from pydantic import BaseModel

from kgqa.errors import ConfigError
from kgqa.llm import LLMError, Recorder, load
from kgqa.llm.openai_compat import OpenAIChatModel, is_reasoning_model, negotiations
from kgqa.llm.structured import ask_json

HELLO = [{"role": "user", "content": "say hello to the graph"}]
FAST = {"backoff_base": 0.01, "backoff_max": 0.05, "timeout": 5.0}


class Answer(BaseModel):
    answer: str
    confidence: float


def model_for(server: FaultServer, name: str = "test-model", **options: Any) -> OpenAIChatModel:
    return OpenAIChatModel(name, base_url=server.url, **{**FAST, **options})


def sent(server: FaultServer, key: str) -> list[Any]:
    return [body.get(key, "<absent>") for body in server.state.requests]


# -- reasoning models ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "reasoning"), [
    ("o1", True), ("o1-mini", True), ("o3-mini", True), ("o4-mini-2025-04-16", True), ("gpt-5", True),
    ("gpt-5-mini", True), ("openai/o3", True), ("gpt-5-chat-latest", False), ("gpt-4.1-mini", False),
    ("gpt-4o", False), ("qwen2.5:7b", False), ("smollm2", False), ("omni-7b", False),
])
def test_reasoning_model_name_rule(name: str, reasoning: bool) -> None:
    assert is_reasoning_model(name) is reasoning


def test_refused_max_tokens_and_temperature_are_learned_once_and_not_counted(server: FaultServer) -> None:
    server.state.refuse = {"max_tokens", "temperature"}
    rec = Recorder()
    model = load(f"openai:test-model@{server.url}", recorder=rec, cache=False, max_retries=0, **FAST)
    with rec.scope("q1"):
        reply = model.chat(HELLO, step="s", max_tokens=64)
    assert reply.text == "echo: say hello to the graph"
    assert reply.retries == 0  # negotiations are not retries, and max_retries=0 did not stop them
    assert reply.negotiations == ("token_param: max_tokens -> max_completion_tokens (HTTP 400)",
                                  "sampling_params: send -> omit (HTTP 400)")
    assert sent(server, "max_tokens") == [64, "<absent>", "<absent>"]
    assert sent(server, "max_completion_tokens") == ["<absent>", 64, 64]
    assert sent(server, "temperature") == [0.0, 0.0, "<absent>"]
    assert rec.totals("q1").to_dict() | {"latency_s": 0} == {
        "calls": 1, "prompt_tokens": 5, "completion_tokens": 6, "latency_s": 0, "cache_hits": 0, "retries": 0,
        "unreadable_replies": 0, "salvaged_replies": 0}
    assert [c.error for c in rec.calls()] == [None]

    # learned once per endpoint: later calls, and other model objects for the same endpoint, send the fix at once
    model.chat(HELLO, temperature=0.7)
    OpenAIChatModel("test-model", base_url=server.url, **FAST).chat(HELLO)
    assert len(server.state.requests) == 5
    assert all("max_tokens" not in b and "temperature" not in b for b in server.state.requests[3:])
    assert [e.setting for e in model.negotiations] == ["token_param", "sampling_params"]
    assert model.endpoint_settings()["token_param"] == "max_completion_tokens"
    assert model.endpoint_settings()["omitted_params"] == ["temperature", "top_p"]


def test_refusal_named_only_in_the_message_is_understood(server: FaultServer) -> None:
    server.state.refuse = {"max_tokens"}
    server.state.name_param = False
    assert model_for(server).chat(HELLO).retries == 0
    assert sent(server, "max_completion_tokens") == ["<absent>", 512]


def test_reasoning_model_name_sends_the_right_parameters_first(server: FaultServer) -> None:
    server.state.refuse = {"max_tokens", "temperature"}
    model_for(server, "o3-mini").chat(HELLO, temperature=0.0, top_p=0.9)
    [body] = server.state.requests
    assert body["max_completion_tokens"] == 512
    assert "max_tokens" not in body and "temperature" not in body and "top_p" not in body


def test_name_rule_is_undone_by_an_endpoint_that_wants_max_tokens(server: FaultServer) -> None:
    # a server that serves a model called gpt-5-something but only knows max_tokens
    server.state.refuse = {"max_completion_tokens"}
    model = model_for(server, "gpt-5-local")
    reply = model.chat(HELLO, max_tokens=32)
    assert reply.negotiations == ("token_param: max_completion_tokens -> max_tokens (HTTP 400)",)
    assert sent(server, "max_tokens") == ["<absent>", 32]
    model.chat(HELLO)
    assert sent(server, "max_tokens") == ["<absent>", 32, 512]


def test_token_parameter_flips_at_most_once(server: FaultServer) -> None:
    server.state.refuse = {"max_tokens", "max_completion_tokens"}  # a confused endpoint: no ping-pong
    with pytest.raises(LLMError, match="HTTP 400"):
        model_for(server).chat(HELLO)
    assert len(server.state.requests) == 2


def test_forced_settings_are_never_negotiated(server: FaultServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.state.refuse = {"max_tokens"}
    monkeypatch.setenv("KGQA_LLM_TOKEN_PARAM", "max_tokens")
    with pytest.raises(LLMError, match=r"HTTP 400.*max_tokens") as info:
        model_for(server).chat(HELLO)
    assert info.value.retries == 0 and len(server.state.requests) == 1
    monkeypatch.setenv("KGQA_LLM_TOKEN_PARAM", "max_completion_tokens")
    monkeypatch.setenv("KGQA_LLM_TEMPERATURE_PARAM", "omit")
    model_for(server).chat(HELLO, temperature=0.5)
    assert "max_tokens" not in server.state.requests[-1] and "temperature" not in server.state.requests[-1]
    assert OpenAIChatModel("m", base_url=server.url, temperature_param="send").temperature_param == "send"
    with pytest.raises(ConfigError, match="llm_token_param"):
        model_for(server, token_param="max_length")
    with pytest.raises(ConfigError, match="llm_temperature_param"):
        model_for(server, temperature_param="sometimes")


def test_an_unrelated_bad_request_is_not_negotiated(server: FaultServer) -> None:
    server.inject("400")
    model = model_for(server)
    with pytest.raises(LLMError, match="HTTP 400"):
        model.chat(HELLO, schema=Answer)
    assert len(server.state.requests) == 1 and model.negotiations == []
    assert model.structured_mode == "json_schema" and model.structured_mode_source == "untested"


# -- structured output -------------------------------------------------------------------------------------------------


def test_llama_cpp_like_endpoint_settles_on_json_object_with_schema(server: FaultServer,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    server.state.format_errors = {"json_schema": 500}
    rec = Recorder()
    model = load(f"openai:test-model@{server.url}", recorder=rec, cache=True, max_retries=0, **FAST)
    assert model.structured_mode == "json_schema" and model.structured_mode_source == "untested"  # through wrappers
    with caplog.at_level(logging.INFO, logger="kgqa.llm"), rec.scope("q"):
        result = ask_json(model, HELLO, Answer, step="s")
    assert result.confidence == 0.5
    assert [format_kind(b) for b in server.state.requests] == ["json_schema", "json_object_schema"]
    assert server.state.requests[1]["response_format"]["schema"]["required"] == ["answer", "confidence"]
    assert model.structured_mode == "json_object_schema" and model.structured_mode_source == "negotiated"
    assert "structured_mode: json_schema -> json_object_schema (HTTP 500)" in caplog.text
    assert rec.totals("q").calls == 1 and rec.totals("q").retries == 0 and rec.calls()[0].error is None
    ask_json(model, [{"role": "user", "content": "another question"}], Answer, step="s")
    assert [format_kind(b) for b in server.state.requests][2:] == ["json_object_schema"]  # never re-probed
    [event] = [e for e in negotiations() if e.endpoint == server.url]
    assert (event.setting, event.old, event.new, event.status) == ("structured_mode", "json_schema",
                                                                   "json_object_schema", 500)


def test_ladder_down_to_a_plain_prompt_with_validation_and_re_ask(server: FaultServer) -> None:
    server.state.format_errors = {"json_schema": 400, "json_object_schema": 400, "json_object": 422}
    replies = iter(["Sure: {\"answer\": \"Nolan\"}", "```json\n{\"answer\": \"Nolan\", \"confidence\": 0.9}\n```"])
    server.state.responder = lambda body: next(replies)
    model = model_for(server)
    result = ask_json(model, HELLO, Answer, step="s")
    assert result == Answer(answer="Nolan", confidence=0.9)
    kinds = [format_kind(b) for b in server.state.requests]
    assert kinds == ["json_schema", "json_object_schema", "json_object", None, None]  # 3 refusals, ask, re-ask
    assert model.structured_mode == "none"
    system = server.state.requests[-1]["messages"][0]
    assert system["role"] == "system" and '"confidence"' in system["content"]  # the schema is in the prompt


def test_a_transient_500_is_a_retry_not_a_negotiation(server: FaultServer) -> None:
    server.inject("500")
    model = model_for(server)
    reply = model.chat(HELLO, schema=Answer)
    assert reply.retries == 1 and reply.negotiations == ()
    assert model.structured_mode == "json_schema" and model.structured_mode_source == "accepted"


def test_forced_mode_is_kept_even_when_refused(server: FaultServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.state.format_errors = {"json_schema": 500}
    monkeypatch.setenv("KGQA_LLM_JSON_MODE", "json_schema")
    model = model_for(server, max_retries=1)
    with pytest.raises(LLMError, match=r"gave up after 2 attempts.*HTTP 500"):
        model.chat(HELLO, schema=Answer)
    assert model.structured_mode == "json_schema" and model.structured_mode_source == "forced"
    assert model.negotiations == []
    forced = model_for(server, json_mode="json_object_schema")
    forced.chat(HELLO, schema=Answer)
    assert server.state.requests[-1]["response_format"]["type"] == "json_object"


def test_concurrent_first_calls_probe_once(server: FaultServer) -> None:
    server.state.format_errors = {"json_schema": 500}
    server.state.ok_delay_s = 0.05
    model = model_for(server)
    with ThreadPoolExecutor(max_workers=8) as pool:
        replies = list(pool.map(lambda i: model.chat([{"role": "user", "content": f"q{i}"}], schema=Answer),
                                range(8)))
    assert all(r.json["confidence"] == 0.5 for r in replies)
    kinds = [format_kind(b) for b in server.state.requests]
    assert kinds.count("json_schema") == 1 and kinds.count("json_object_schema") == 8
    assert sum(len(r.negotiations) for r in replies) == 1
    assert server.state.max_in_flight >= 2  # once the probe settled, the others did not queue behind one another


def test_async_negotiates_too(server: FaultServer) -> None:
    server.state.format_errors = {"json_schema": 500}
    server.state.refuse = {"max_tokens"}
    model = model_for(server)

    async def run() -> list[Any]:
        first = await model.achat(HELLO, schema=Answer)
        rest = await asyncio.gather(*(model.achat(HELLO, schema=Answer) for _ in range(3)))
        return [first, *rest]

    replies = asyncio.run(run())
    assert all(r.retries == 0 for r in replies)
    assert len(replies[0].negotiations) == 2 and all(r.negotiations == () for r in replies[1:])
    assert len(server.state.requests) == 3 + 3
    assert model.endpoint_settings() == {
        "structured_mode": "json_object_schema", "structured_mode_source": "negotiated",
        "token_param": "max_completion_tokens", "omitted_params": [],
        "negotiations": ["token_param: max_tokens -> max_completion_tokens (HTTP 400)",
                         "structured_mode: json_schema -> json_object_schema (HTTP 500)"]}


def test_json_reply_shape_unchanged_by_negotiation(server: FaultServer) -> None:
    server.state.format_errors = {"json_schema": 500}
    reply = model_for(server).chat(HELLO, schema=Answer.model_json_schema())
    assert json.loads(reply.text) == reply.json == {"answer": "say hello to the graph", "confidence": 0.5}


def test_a_bad_value_of_a_supported_parameter_is_the_callers_error_not_a_negotiation(server: FaultServer) -> None:
    server.state.max_tokens_limit = 1000
    model = load(f"openai:test-model@{server.url}", cache=False, max_retries=0, **FAST)
    with pytest.raises(LLMError, match="max_tokens is too large"):
        model.chat(HELLO, step="s", max_tokens=99_999)
    assert sent(server, "max_completion_tokens") == ["<absent>"]  # one request, nothing re-sent with another name
    assert model.endpoint_settings()["token_param"] == "max_tokens"  # and nothing learned for later calls
    assert model.chat(HELLO, step="s", max_tokens=64).text == "echo: say hello to the graph"
