"""Central accounting: per question and step, across threads and asyncio tasks, failures included."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from kgqa.errors import ConfigError
from kgqa.llm import LLMError, RecordedModel, Recorder
from kgqa.llm.accounting import current_question, current_step
from kgqa.llm.scripted import ScriptedModel
from kgqa.llm.tokens import approx_prompt_tokens, approx_tokens


def ask(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_scope_step_and_explicit_step() -> None:
    rec = Recorder()
    model = RecordedModel(ScriptedModel([{"reply": "ok then"}]), rec)
    model.chat(ask("outside"))
    with rec.scope("q1"):
        assert current_question() == "q1"
        with rec.step("ccor.prune"):
            assert current_step() == "ccor.prune"
            model.chat(ask("one two"))
            model.chat(ask("three"), step="ccor.answer")
        model.chat(ask("four"))
    assert current_question() is None and current_step() is None
    calls = rec.calls()
    assert [(c.question_id, c.step) for c in calls] == [
        (None, None), ("q1", "ccor.prune"), ("q1", "ccor.answer"), ("q1", None)]
    q1 = rec.totals("q1")
    assert q1.calls == 3
    assert q1.prompt_tokens == sum(approx_prompt_tokens(ask(t)) for t in ("one two", "three", "four"))
    assert q1.completion_tokens == 3 * approx_tokens("ok then")
    assert rec.totals().calls == 4
    assert set(rec.by_step("q1")) == {"ccor.prune", "ccor.answer", ""}
    assert q1.to_dict()["calls"] == 3 and calls[1].to_dict()["step"] == "ccor.prune"


def test_threads_with_copied_context_and_many_writers() -> None:
    rec = Recorder()
    model = RecordedModel(ScriptedModel(lambda msgs: "x"), rec)

    def work(qid: str) -> None:
        with rec.scope(qid):
            for _ in range(100):
                model.chat(ask(qid))

    threads = [threading.Thread(target=work, args=(f"q{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert rec.totals().calls == 800
    assert all(rec.totals(f"q{i}").calls == 100 for i in range(8))

    with rec.scope("parent"), ThreadPoolExecutor(2) as pool:
        ctx = contextvars.copy_context()
        pool.submit(ctx.run, model.chat, ask("from a worker")).result()
    assert rec.totals("parent").calls == 1


def test_asyncio_tasks_keep_their_own_question() -> None:
    rec = Recorder()
    model = RecordedModel(ScriptedModel(lambda msgs: msgs[-1]["content"]), rec)

    async def one(qid: str) -> None:
        with rec.scope(qid), rec.step("s"):
            for _ in range(3):
                await model.achat(ask(qid))
                await asyncio.sleep(0)

    async def main() -> None:
        await asyncio.gather(*(one(f"q{i}") for i in range(5)))

    asyncio.run(main())
    for i in range(5):
        calls = rec.calls(f"q{i}")
        assert len(calls) == 3 and all(c.step == "s" for c in calls)


def test_failures_are_recorded_but_malformed_requests_are_not() -> None:
    rec = Recorder()
    model = RecordedModel(ScriptedModel([{"match": "^ok$", "reply": "fine"}]), rec)
    with rec.scope("q"):
        with pytest.raises(LLMError):
            model.chat(ask("no rule for this"))
        with pytest.raises(ConfigError):
            model.chat(ask("ok"), temperature=9)
        model.chat(ask("ok"))
    calls = rec.calls("q")
    assert len(calls) == 2
    assert calls[0].error is not None and "no rule matches" in calls[0].error
    assert calls[1].error is None


def test_clear_and_len() -> None:
    rec = Recorder()
    model = RecordedModel(ScriptedModel([{"reply": "x"}]), rec)
    model.chat(ask("a"))
    assert len(rec) == 1
    rec.clear()
    assert len(rec) == 0 and rec.totals().calls == 0
