"""The OpenAI-compatible backend against a real HTTP server on 127.0.0.1 that injects faults."""

from __future__ import annotations

import asyncio
import socket
from concurrent.futures import ThreadPoolExecutor

import pytest
from llm_fault_server import FaultServer
from pydantic import BaseModel

from kgqa.errors import ConfigError
from kgqa.llm import LLMError, Recorder, load
from kgqa.llm.openai_compat import OpenAIChatModel, parse_openai_spec
from kgqa.llm.structured import ask_json

HELLO = [{"role": "user", "content": "say hello to the graph"}]
FAST = {"backoff_base": 0.01, "backoff_max": 0.05, "timeout": 5.0}


def model_for(server: FaultServer, **options: object) -> OpenAIChatModel:
    merged = {**FAST, **options}
    return OpenAIChatModel("test-model", base_url=server.url, **merged)  # type: ignore[arg-type]


class Answer(BaseModel):
    answer: str
    confidence: float


def test_plain_call_reports_server_usage(server: FaultServer) -> None:
    reply = model_for(server).chat(HELLO)
    assert reply.text == "echo: say hello to the graph"
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (5, 6)
    assert reply.retries == 0
    assert reply.model == f"openai:test-model@{server.url}"


def test_spec_with_url_reaches_that_server(server: FaultServer) -> None:
    model = load(f"openai:test-model@{server.url}", cache=False, **FAST)
    assert model.chat(HELLO).text.startswith("echo:")
    assert server.state.requests[0]["model"] == "test-model"


def test_step_and_cache_params_are_never_sent(server: FaultServer) -> None:
    model_for(server).chat(HELLO, step="ccor.prune", cache=False, temperature=0.3, seed=7, stop="\n")
    body = server.state.requests[0]
    assert "step" not in body and "cache" not in body
    assert body["temperature"] == 0.3 and body["seed"] == 7 and body["stop"] == ["\n"]


def test_429_retry_after_is_honoured(server: FaultServer) -> None:
    server.state.retry_after = "1"
    server.inject("429")
    reply = model_for(server).chat(HELLO)
    assert reply.retries == 1
    (t429, first), (t_ok, second) = server.state.arrivals
    assert (first, second) == ("429", "ok")
    assert t_ok - t429 >= 1.0  # the retry did not come before the server's Retry-After


def test_retry_after_beyond_limit_fails_fast(server: FaultServer) -> None:
    server.state.retry_after = "3600"
    server.inject("429")
    with pytest.raises(LLMError, match="Retry-After") as info:
        model_for(server).chat(HELLO)
    assert info.value.status == 429
    assert len(server.state.requests) == 1


@pytest.mark.parametrize("fault", ["500", "503", "truncate", "malformed", "empty_choices"])
def test_transient_fault_then_success(server: FaultServer, fault: str) -> None:
    server.inject(fault)
    reply = model_for(server).chat(HELLO)
    assert reply.text.startswith("echo:")
    assert reply.retries == 1
    assert len(server.state.requests) == 2


def test_stall_past_timeout_is_retried(server: FaultServer) -> None:
    server.state.stall_s = 4.0
    server.inject("stall")
    reply = model_for(server, timeout=1.5).chat(HELLO)
    assert reply.retries == 1
    assert reply.text.startswith("echo:")


def test_budget_exhausted_gives_clear_error(server: FaultServer) -> None:
    server.inject("500", "500", "500")
    rec = Recorder()
    model = load(f"openai:test-model@{server.url}", recorder=rec, cache=False, max_retries=2, **FAST)
    with rec.scope("q7"), pytest.raises(LLMError, match=r"gave up after 3 attempts.*HTTP 500") as info:
        model.chat(HELLO, step="ccor.answer")
    assert info.value.retries == 2
    assert len(server.state.requests) == 3
    [record] = rec.calls("q7")
    assert record.error is not None and record.retries == 2 and record.step == "ccor.answer"
    assert rec.totals("q7").to_dict() | {"latency_s": 0} == {"calls": 1, "prompt_tokens": 0, "completion_tokens": 0,
                                                               "latency_s": 0, "cache_hits": 0, "retries": 2,
                                                               "unreadable_replies": 0, "salvaged_replies": 0}


def test_client_error_is_not_retried(server: FaultServer) -> None:
    server.inject("400")
    with pytest.raises(LLMError, match="HTTP 400") as info:
        model_for(server).chat(HELLO)
    assert info.value.retries == 0
    assert len(server.state.requests) == 1


def test_unreachable_server_gives_clear_error() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = OpenAIChatModel("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, **FAST)
    with pytest.raises(LLMError, match=r"gave up after 2 attempts.*connection to http://127.0.0.1"):
        model.chat(HELLO)


def test_usage_totals_equal_what_the_server_counted(server: FaultServer) -> None:
    rec = Recorder()
    model = load(f"openai:test-model@{server.url}", recorder=rec, cache=False, max_retries=6, **FAST)
    faults = ["500", "truncate", "malformed", "429", "503"]  # all hit the first call: 5 retries, then success
    server.state.retry_after = "0"
    server.inject(*faults)
    questions = {f"q{i}": [{"role": "user", "content": "word " * (i + 1)}] for i in range(6)}
    for qid, messages in questions.items():
        with rec.scope(qid):
            model.chat(messages, step="probe")
    totals = rec.totals()
    assert totals.calls == 6
    assert totals.prompt_tokens == server.state.prompt_tokens
    assert totals.completion_tokens == server.state.completion_tokens
    assert totals.retries == len(faults)
    assert sum(rec.totals(q).prompt_tokens for q in questions) == server.state.prompt_tokens
    assert rec.totals("q3").prompt_tokens == 4  # "word word word word"


def test_async_calls_respect_the_concurrency_limit(server: FaultServer) -> None:
    server.state.ok_delay_s = 0.15
    model = model_for(server, max_concurrency=3)

    async def run() -> list[str]:
        replies = await asyncio.gather(*(model.achat([{"role": "user", "content": f"n{i}"}]) for i in range(12)))
        return [r.text for r in replies]

    texts = asyncio.run(run())
    assert texts == [f"echo: n{i}" for i in range(12)]
    assert 2 <= server.state.max_in_flight <= 3  # calls did overlap, never beyond the limit
    assert server.state.ok_replies == 12


def test_threaded_calls_respect_the_concurrency_limit(server: FaultServer) -> None:
    server.state.ok_delay_s = 0.1
    model = model_for(server, max_concurrency=2)
    with ThreadPoolExecutor(max_workers=6) as pool:
        texts = list(pool.map(lambda i: model.chat([{"role": "user", "content": f"t{i}"}]).text, range(8)))
    assert texts == [f"echo: t{i}" for i in range(8)]
    assert server.state.max_in_flight <= 2


def test_async_retries_and_accounting(server: FaultServer) -> None:
    server.state.retry_after = "0"
    server.inject("429", "500")
    rec = Recorder()
    model = load(f"openai:test-model@{server.url}", recorder=rec, cache=False, **FAST)

    async def run() -> None:
        with rec.scope("qa"):
            await model.achat(HELLO, step="a1")

    asyncio.run(run())
    [record] = rec.calls("qa")
    assert record.retries == 2 and record.step == "a1" and record.error is None
    assert record.prompt_tokens == server.state.prompt_tokens


def test_async_works_across_event_loops(server: FaultServer) -> None:
    model = model_for(server)
    assert asyncio.run(model.achat(HELLO)).text.startswith("echo:")
    assert asyncio.run(model.achat(HELLO)).text.startswith("echo:")


def test_schema_uses_json_schema_response_format(server: FaultServer) -> None:
    reply = model_for(server).chat(HELLO, schema=Answer)
    fmt = server.state.requests[0]["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["schema"]["required"] == ["answer", "confidence"]
    assert reply.json == {"answer": "say hello to the graph", "confidence": 0.5}


def test_json_object_mode_and_ask_json(server: FaultServer) -> None:
    model = model_for(server, json_mode="json_object")
    result = ask_json(model, HELLO, Answer, step="s")
    assert result == Answer(answer="say hello to the graph", confidence=0.5)
    assert server.state.requests[0]["response_format"] == {"type": "json_object"}


def test_spec_parsing_and_key_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_openai_spec("gpt-4.1-mini") == ("gpt-4.1-mini", None)
    assert parse_openai_spec("qwen2.5-7b@http://127.0.0.1:8000/v1") == ("qwen2.5-7b", "http://127.0.0.1:8000/v1")
    with pytest.raises(ConfigError, match="malformed"):
        parse_openai_spec("model@ftp://x")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        load("openai:gpt-4.1-mini", cache=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert load("openai:gpt-4.1-mini", cache=False).name == "openai:gpt-4.1-mini"
    with pytest.raises(ConfigError, match="json_mode"):
        OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", json_mode="xml")


def test_env_settings_apply_and_flags_win(server: FaultServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("KGQA_LLM_RETRIES", "0")
    monkeypatch.setenv("KGQA_LLM_TIMEOUT", "7.5")
    model = OpenAIChatModel("env-model")
    assert model.base_url == server.url and model.policy.max_retries == 0 and model.timeout == 7.5
    assert OpenAIChatModel("env-model", max_retries=3).policy.max_retries == 3
    server.inject("500")
    with pytest.raises(LLMError, match="HTTP 500"):
        model.chat(HELLO)
    monkeypatch.setenv("KGQA_LLM_RETRIES", "many")
    with pytest.raises(ConfigError, match="llm_retries"):
        OpenAIChatModel("env-model")
