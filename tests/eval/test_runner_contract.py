"""The runner and the method contract: built by name from validated settings, loading exactly what the method needs,
recording its resolved config whole, attaching trace and usage itself.

The methods here are small test classes registered for the length of a test (``METHODS.restored()``); the KG is a real
embedded store, the model a scripted one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kgqa.core import GoldAnswer, Grounding, MethodContext, Prediction, Question, TopicEntity
from kgqa.errors import ConfigError
from kgqa.eval.runner import CONFIG_FILE, TRACES_FILE, RunDirError, read_results, run_eval
from kgqa.kg.embedded import EmbeddedKGBuilder
from kgqa.llm.scripted import ScriptedModel
from kgqa.methods.base import KGQAMethod, MethodConfig, Needs
from kgqa.methods.registry import METHODS


def _toy_questions(n: int) -> list[Question]:
    return [Question(id=f"q{i}", text=f"what is item {i}", topic_entities=[TopicEntity(id=f"e{i}", name=f"E{i}")],
                     answers=[GoldAnswer(id=None, name=f"answer {i}")]) for i in range(n)]


class EchoConfig(MethodConfig):
    prefix: str = "answer"
    max_answers: int = 3
    verbose: bool = False


class _ContextProbe(KGQAMethod):
    """Writes what its context holds into the trace, asks the LLM once if it has one, and answers ``answer i``.

    It returns no trace of its own: the runner must attach it.
    """

    summary = "test method"
    Config = EchoConfig
    NEEDS = Needs()

    def needs(self, llm: str | None = None) -> Needs:
        return self.NEEDS

    def answer(self, question: Question, ctx: MethodContext) -> Prediction:
        ctx.trace.add("probe.context", kg=ctx.kg is not None, llm=ctx.llm is not None,
                      embedder=type(ctx.embedder).__name__ if ctx.embedder is not None else None)
        if ctx.llm is not None:
            ctx.llm.chat([{"role": "user", "content": question.text}], step="probe.ask")
        if question.metadata.get("fail"):
            raise RuntimeError(f"injected failure for {question.id}")
        return Prediction(answers=[f"{self.config.prefix} {question.id[1:]}"], grounding=Grounding.PARAMETRIC)


class NoKGMethod(_ContextProbe):
    name = "test-no-kg"
    NEEDS = Needs(kg=False, llm=True)


class NoLLMMethod(_ContextProbe):
    name = "test-no-llm"
    NEEDS = Needs(kg=True, llm=False)


class EmbedderMethod(_ContextProbe):
    name = "test-embedder"
    NEEDS = Needs(kg=False, llm=False, embedder=True)


class TinyEmbedder:
    name = "tiny-embedder"

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), 2), dtype=np.float32)


@pytest.fixture
def methods() -> Iterator[None]:
    with METHODS.restored():
        for cls in (NoKGMethod, NoLLMMethod, EmbedderMethod):
            METHODS.add(cls.name, cls)
        yield


@pytest.fixture
def toy_kg(tmp_path: Path) -> Any:
    builder = EmbeddedKGBuilder(schema="generic")
    for i in range(10):
        builder.add_triple(f"e{i}", "has_answer", f"a{i}")
    return builder.build(tmp_path / "kg")


def _llm() -> ScriptedModel:
    return ScriptedModel([{"reply": "scripted"}])


def _config(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / CONFIG_FILE).read_text(encoding="utf-8"))


def _traces(run_dir: Path) -> dict[str, dict[str, Any]]:
    lines = (run_dir / TRACES_FILE).read_text(encoding="utf-8").splitlines()
    return {row["id"]: row for row in map(json.loads, lines)}


def test_resolved_config_is_written_whole_and_resume_compares_it(tmp_path: Path, methods: None) -> None:
    out = tmp_path / "run"
    questions = _toy_questions(4)
    run = run_eval("toy", questions=questions, out=out, method="test-no-kg", method_config={"max_answers": 5},
                   llm=_llm(), progress=False, report=False)
    config = _config(out)
    assert config["method"] == "test-no-kg"
    assert config["method_config_resolved"] == {"prefix": "answer", "max_answers": 5, "verbose": False}
    assert config["method_config"] == {"max_answers": 5}
    assert run.summary["method_config_resolved"] == config["method_config_resolved"]
    assert run.summary["hits@1"] == 1.0

    # Other settings, the same resolved config: the same experiment, so the resume is allowed.
    again = run_eval("toy", questions=questions, out=out, method="test-no-kg", llm=_llm(), progress=False,
                     report=False, resume=True, method_config={"max_answers": 5, "prefix": "answer"})
    assert again.answered == 0 and again.skipped == 4
    with pytest.raises(RunDirError, match=r"different settings.*method_config"):
        run_eval("toy", questions=questions, out=out, method="test-no-kg", method_config={"max_answers": 4},
                 llm=_llm(), progress=False, report=False, resume=True)

    # A run directory written before configs were resolved recorded the settings given as its method_config.
    legacy = {k: v for k, v in config.items() if k != "method_config_resolved"}
    (out / CONFIG_FILE).write_text(json.dumps(legacy), encoding="utf-8")
    resumed = run_eval("toy", questions=_toy_questions(6), out=out, method="test-no-kg", llm=_llm(), progress=False,
                       report=False, resume=True, method_config={"max_answers": 5})
    assert resumed.answered == 2 and len(read_results(out)) == 6


def test_a_method_needing_no_kg_gets_none_and_none_is_opened(tmp_path: Path, methods: None, toy_kg: Any) -> None:
    missing_kg = tmp_path / "no-such-kg"  # opening it would fail: the run shows it was never opened
    out = tmp_path / "run"
    run = run_eval("toy", questions=_toy_questions(3), out=out, method="test-no-kg", llm=_llm(), kg=str(missing_kg),
                   embedder="no-such-embedder", progress=False, report=False)
    assert run.answered == 3 and run.failed == 0
    config = _config(out)
    assert config["kg"] is None and config["embedder"] is None and "topic_coverage" not in config
    rows = read_results(out)
    assert all(r["kg_calls"] == 0 and r["kg_time_s"] == 0.0 for r in rows)
    assert all(r["llm_calls"] == 1 and r["prompt_tokens"] > 0 for r in rows)  # usage attached by the runner
    for trace in _traces(out).values():  # the method returned no trace: the runner attached its context's
        assert trace["trace"] == [{"step": "probe.context", "kg": False, "llm": True, "embedder": None}]

    # A KG object is not handed to it either.
    run = run_eval("toy", questions=_toy_questions(2), out=tmp_path / "object", method="test-no-kg", llm=_llm(),
                   kg=toy_kg, progress=False, report=False)
    assert all(t["trace"][0]["kg"] is False for t in _traces(run.out_dir).values())
    assert _config(run.out_dir)["kg"] is None


def test_a_method_needing_no_llm_gets_none_and_none_is_loaded(tmp_path: Path, methods: None, toy_kg: Any) -> None:
    out = tmp_path / "run"
    run = run_eval("toy", questions=_toy_questions(3), out=out, method="test-no-llm", kg=toy_kg,
                   llm=f"scripted:{tmp_path / 'no-such-rules.jsonl'}", progress=False, report=False)
    assert run.answered == 3 and run.failed == 0
    config = _config(out)
    assert config["llm"] is None and config["topic_coverage"] == {"checked": 3, "covered": 3}
    assert all(r["llm_calls"] == 0 for r in read_results(out))
    assert all(t["trace"][0] == {"step": "probe.context", "kg": True, "llm": False, "embedder": None}
               for t in _traces(out).values())


def test_the_embedder_is_given_only_to_a_method_that_needs_one(tmp_path: Path, methods: None) -> None:
    out = tmp_path / "run"
    run_eval("toy", questions=_toy_questions(2), out=out, method="test-embedder", embedder=TinyEmbedder(),
             progress=False, report=False)
    assert _config(out)["embedder"] == "tiny-embedder"
    assert all(t["trace"][0]["embedder"] == "TinyEmbedder" for t in _traces(out).values())

    with pytest.raises(ConfigError, match="needs an embedder"):
        run_eval("toy", questions=_toy_questions(2), out=tmp_path / "none", method="test-embedder", embedder=None,
                 progress=False, report=False)
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize(("method", "settings", "named", "valid"), [
    ("test-no-kg", {"nope": 1}, "nope", ("prefix", "max_answers", "verbose")),
    ("test-no-kg", {"max_answers": "many"}, "max_answers", ("prefix", "max_answers", "verbose")),
    ("io", {"nope": 1}, "nope", ("few_shot", "max_answers")),
])
def test_a_bad_method_config_is_refused_before_the_run_directory_is_touched(
        tmp_path: Path, methods: None, method: str, settings: dict[str, Any], named: str, valid: tuple[str, ...]) -> None:
    out = tmp_path / "run"
    with pytest.raises(ConfigError) as caught:
        run_eval("toy", questions=_toy_questions(2), out=out, method=method, method_config=settings, llm=_llm(),
                 progress=False, report=False)
    message = str(caught.value)
    assert f"'{named}'" in message or f"{named}=" in message
    assert "Valid settings" in message and all(name in message for name in valid)
    assert not out.exists()

    # The same for a run directory that exists: nothing in it changes.
    out.mkdir()
    (out / "keep.txt").write_text("untouched", encoding="utf-8")
    with pytest.raises(ConfigError):
        run_eval("toy", questions=_toy_questions(2), out=out, method=method, method_config=settings, llm=_llm(),
                 progress=False, report=False, resume=True)
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]


def test_settings_for_a_method_object_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="method given by name"):
        run_eval("toy", questions=_toy_questions(1), out=tmp_path / "run", method=NoKGMethod(),
                 method_config={"max_answers": 1}, llm=_llm(), progress=False, report=False)
    assert not (tmp_path / "run").exists()


def test_a_method_object_records_its_own_config(tmp_path: Path) -> None:
    run = run_eval("toy", questions=_toy_questions(2), out=tmp_path / "run", method=NoKGMethod(prefix="answer"),
                   llm=_llm(), progress=False, report=False)
    config = _config(run.out_dir)
    assert config["method"] == "test-no-kg" and config["method_config"] == {}
    assert config["method_config_resolved"] == {"prefix": "answer", "max_answers": 3, "verbose": False}


def test_no_method_means_the_configured_default(tmp_path: Path, methods: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGQA_METHOD", "test-no-kg")
    run = run_eval("toy", questions=_toy_questions(2), out=tmp_path / "run", method=None, llm=_llm(), progress=False,
                   report=False)
    assert _config(run.out_dir)["method"] == "test-no-kg" and run.summary["method"] == "test-no-kg"
    assert run.summary["hits@1"] == 1.0


def test_a_failed_question_keeps_its_trace_and_usage(tmp_path: Path, methods: None) -> None:
    questions = _toy_questions(3)
    questions[1] = questions[1].model_copy(update={"metadata": {"fail": True}})
    run = run_eval("toy", questions=questions, out=tmp_path / "run", method="test-no-kg", llm=_llm(), progress=False,
                   report=False)
    assert run.failed == 1
    rows = {r["id"]: r for r in read_results(run.out_dir)}
    assert rows["q1"]["error"] == "RuntimeError: injected failure for q1"
    assert rows["q1"]["llm_calls"] == 1  # the call before the failure is counted
    trace = _traces(run.out_dir)["q1"]
    assert [e["step"] for e in trace["trace"]] == ["probe.context"] and "Traceback" in trace["traceback"]
