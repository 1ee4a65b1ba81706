"""The method seam: question/prediction models, trace, context, and the registry with subpackage discovery."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

import kgqa.methods
from kgqa.core import (
    GROUNDING_WEIGHTS,
    AnswerItem,
    GoldAnswer,
    Grounding,
    MethodContext,
    Prediction,
    Question,
    TopicEntity,
    Trace,
)
from kgqa.errors import ConfigError
from kgqa.methods.base import Method
from kgqa.methods.registry import METHODS, discover_methods, get_method, method_names, register_method


@pytest.fixture
def registry() -> Iterator[None]:
    """Restore the global registry (and discovery state) after a test that registers methods."""
    # Discover first: the real methods register on import, which happens once per process, so they must be in the
    # snapshot that is restored.
    with METHODS.restored():
        yield


def test_question_round_trips_through_json() -> None:
    q = Question(id="q1", text="who directed Heat?", topic_entities=[TopicEntity(id="m.0abc", name="Heat")],
                 answers=[GoldAnswer(id="m.0m", name="Michael Mann", aliases=["Mann"])],
                 metadata={"hops": 1, "constraints": []})
    back = Question.model_validate_json(q.model_dump_json())
    assert back == q
    assert q.topic_ids == ["m.0abc"] and q.gold_names == ["Michael Mann"]
    assert GoldAnswer(name="1999").id is None and GoldAnswer(name="x").aliases == []
    with pytest.raises(ValidationError):
        Question(id="q2", text="?", answers=[{"id": "m.1"}])  # a gold answer needs a name


def test_grounding_states_and_weights() -> None:
    assert [g.value for g in Grounding] == ["structured", "synthesis", "parametric"]
    assert GROUNDING_WEIGHTS == {Grounding.STRUCTURED: 1.0, Grounding.SYNTHESIS: 0.5, Grounding.PARAMETRIC: 0.0}
    assert Grounding("synthesis").weight == 0.5
    assert Grounding.STRUCTURED == "structured"  # a StrEnum: writes as plain text


def test_prediction_is_json_serialisable_and_coerces_answers() -> None:
    pred = Prediction(answers=["Paris", ("m.05qtj", "Paris"), {"id": None, "name": "Lyon"}],
                      grounding="structured", evidence=[["m.0f8l9c", "location.country.capital", "m.05qtj"]],
                      trace=[{"step": "ccor.prune", "kept": 3}], usage={"calls": 2, "prompt_tokens": 10})
    assert pred.answers[0] == AnswerItem(id=None, name="Paris")
    assert pred.answers[1] == AnswerItem(id="m.05qtj", name="Paris")
    assert pred.names == ["Paris", "Paris", "Lyon"]
    dumped = json.loads(json.dumps(pred.model_dump(mode="json")))
    assert dumped["grounding"] == "structured" and dumped["error"] is None
    assert Prediction.model_validate(dumped) == pred
    assert Prediction().grounding is Grounding.PARAMETRIC  # never over-credited by default
    with pytest.raises(ValidationError):
        Prediction(answers=[], grounding="guessed")


def test_failed_prediction() -> None:
    pred = Prediction.failed("KGError: unknown entity 'm.x'", usage={"calls": 1}, trace=[{"step": "link"}])
    assert pred.answers == [] and pred.grounding is Grounding.PARAMETRIC
    assert pred.error == "KGError: unknown entity 'm.x'" and pred.usage == {"calls": 1}


def test_trace_and_context() -> None:
    trace = Trace()
    event = trace.add("ccor.relations", topic="m.1", candidates=["a", "b"])
    event["chosen"] = "a"  # a step may complete its event later
    trace.add("ccor.answer", answers=["X"])
    assert trace.steps() == ["ccor.relations", "ccor.answer"]
    assert json.loads(json.dumps(trace))[0] == {"step": "ccor.relations", "topic": "m.1", "candidates": ["a", "b"],
                                                "chosen": "a"}
    assert Prediction(trace=trace).trace[0]["chosen"] == "a"

    kg, llm = object(), object()
    ctx1 = MethodContext(kg=kg, llm=llm)  # type: ignore[arg-type]
    ctx2 = MethodContext(kg=kg, llm=llm, seed=7)  # type: ignore[arg-type]
    ctx1.trace.add("x")
    assert ctx2.trace == [] and ctx1.embedder is None and ctx1.recorder is None and ctx2.seed == 7
    fresh = ctx1.for_question()
    assert fresh.trace == [] and fresh.kg is kg and fresh.llm is llm and ctx1.trace.steps() == ["x"]


class _Echo:
    """A tiny method: answers with the topic entity names."""

    def __init__(self, prefix: str = "") -> None:
        self.name = "test-echo"
        self.prefix = prefix

    def answer(self, question: Question, ctx: MethodContext) -> Prediction:
        ctx.trace.add("echo", n=len(question.topic_entities))
        return Prediction(answers=[AnswerItem(id=t.id, name=self.prefix + t.name) for t in question.topic_entities],
                          grounding=Grounding.STRUCTURED, trace=list(ctx.trace))


def test_registry_builds_registered_methods(registry: None) -> None:
    register_method("Test-Echo")(_Echo)
    assert "test-echo" in method_names()
    method = get_method("test-echo", prefix=">")
    assert isinstance(method, Method)
    q = Question(id="q", text="?", topic_entities=[TopicEntity(id="m.1", name="One")])
    pred = method.answer(q, MethodContext(kg=object(), llm=object()))  # type: ignore[arg-type]
    assert pred.names == [">One"] and pred.trace == [{"step": "echo", "n": 1}]
    assert isinstance(get_method(" TEST-ECHO "), _Echo)  # names are case-insensitive
    register_method("test-echo")(_Echo)  # re-registering the same factory is harmless

    with pytest.raises(ConfigError, match=r"unknown method 'nope'; known methods: .*test-echo"):
        get_method("nope")
    with pytest.raises(ConfigError, match=r"bad configuration for method 'test-echo'"):
        get_method("test-echo", width=3)

    def other() -> _Echo:
        return _Echo()

    with pytest.raises(ValueError, match="already registered"):
        register_method("test-echo")(other)


def test_discovery_imports_subpackages_and_tolerates_broken_ones(registry: None, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    extra = tmp_path / "methods"
    (extra / "zz_good").mkdir(parents=True)
    (extra / "zz_good" / "__init__.py").write_text(
        "from kgqa.core import Prediction\nfrom kgqa.methods.registry import register_method\n\n\n"
        "@register_method('zz_good')\n"
        "class Good:\n"
        "    name = 'zz_good'\n\n"
        "    def answer(self, question, ctx):\n"
        "        return Prediction(answers=['ok'])\n", encoding="utf-8")
    (extra / "zz_broken").mkdir()
    (extra / "zz_broken" / "__init__.py").write_text("import kgqa_missing_dependency_xyz\n", encoding="utf-8")
    (extra / "_zz_private").mkdir()
    (extra / "_zz_private" / "__init__.py").write_text("raise RuntimeError('must not be imported')\n",
                                                       encoding="utf-8")
    monkeypatch.setattr(kgqa.methods, "__path__", [*kgqa.methods.__path__, str(extra)])
    importlib.invalidate_caches()
    try:
        discover_methods(force=True)
        assert "zz_good" in method_names()
        assert get_method("zz_good").answer(Question(id="q", text="?"), None).names == ["ok"]  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match=r"method 'zz_broken' could not be loaded: .*kgqa_missing_dependency_xyz"):
            get_method("zz_broken")
        assert "kgqa.methods._zz_private" not in sys.modules
    finally:
        for name in ("kgqa.methods.zz_good", "kgqa.methods.zz_broken"):
            sys.modules.pop(name, None)
