"""The IO and CoT baselines with a scripted model: what they ask, what they return, how they fail."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kgqa.errors import ConfigError
from kgqa.llm.accounting import RecordedModel, Recorder
from kgqa.llm.base import LLMError
from kgqa.llm.scripted import ScriptedModel
from kgqa.methods import Grounding, MethodContext, Question, get_method, method_names, solve
from kgqa.methods.cot.method import CoTPrompting
from kgqa.methods.io.method import IOPrompting

FACTORIES = {"io": IOPrompting, "cot": CoTPrompting}
QUESTION = Question(id="q1", text="which languages are spoken in the films directed by Joel Zwick")


def ctx_for(rules: list[dict[str, Any]]) -> tuple[MethodContext, ScriptedModel, Recorder]:
    model = ScriptedModel(rules)
    recorder = Recorder()
    return MethodContext(kg=None, llm=RecordedModel(model, recorder), recorder=recorder), model, recorder  # type: ignore[arg-type]


def reply(**payload: Any) -> dict[str, Any]:
    return {"reply": json.dumps(payload)}


def build(name: str, **config: Any) -> Any:
    """The method as the registry builds it (the factory it registered), without depending on registry state."""
    return FACTORIES[name](**config)


def test_both_are_registered_and_need_no_kg() -> None:
    assert {"io", "cot"} <= set(method_names())
    for name in ("io", "cot"):
        method = get_method(name)
        assert method.name == name and type(method) is type(build(name))
        assert method.needs_kg is False  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="bad configuration"):
        get_method("io", temperature=0.5)


def test_io_asks_once_for_answers_only_and_returns_them_ranked() -> None:
    ctx, model, recorder = ctx_for([reply(answers=["Greek", " greek ", "English", ""])])
    with recorder.scope("q1"):
        prediction = solve(build("io"), QUESTION, ctx)
    assert prediction.names == ["Greek", "English"]  # stripped, empty and case-duplicates dropped, order kept
    assert all(a.id is None for a in prediction.answers)
    assert prediction.grounding is Grounding.PARAMETRIC and prediction.error is None
    assert recorder.totals("q1").calls == 1
    (messages,) = model.history
    system, user = messages[0]["content"], messages[-1]["content"]
    assert "own knowledge" in system and "JSON" in system and '"answers"' in system  # ask_json added the schema
    assert user == f"Question: {QUESTION.text}"
    # 3-5 worked examples kept with the prompt, shown after the system text, each a question and its JSON reply
    examples = build("io").signature.examples
    assert 3 <= len(examples) <= 5 and system.count("Question:") == len(examples)
    assert system.index("Examples:") < system.index(examples[0]) < system.index(examples[-1])
    assert all(json.loads(e.split("\n", 1)[1])["answers"] for e in examples)
    assert "step by step" not in user + system
    assert prediction.trace == [{"step": "io.generate", "prompt": "answer", "answers": ["Greek", "English"]}]
    assert [r.step for r in recorder.calls("q1")] == ["io.generate"]


def test_cot_reasons_step_by_step_before_answering() -> None:
    ctx, model, _ = ctx_for([reply(reasoning="Joel Zwick directed My Big Fat Greek Wedding, in Greek and English.",
                                   answers=["Greek", "English"])])
    prediction = solve(build("cot"), QUESTION, ctx)
    assert prediction.names == ["Greek", "English"]
    assert prediction.grounding is Grounding.PARAMETRIC
    user = model.history[0][-1]["content"]
    assert "Let's think step by step." in user
    assert user == f"Question: {QUESTION.text}\nLet's think step by step."
    system = model.history[0][0]["content"]
    examples = build("cot").signature.examples
    assert 3 <= len(examples) <= 5 and all(e in system for e in examples)
    for example in examples:  # each worked example reasons before it answers
        assert list(json.loads(example.split("\n", 1)[1])) == ["reasoning", "answers"]
    assert system.index('"reasoning"') < system.index('"answers"')  # the schema orders reasoning before answers
    (event,) = prediction.trace
    assert event["step"] == "cot.generate"
    assert event["reasoning"].startswith("Joel Zwick directed")


def test_zero_shot_prompts_have_no_examples() -> None:
    for name in ("io", "cot"):
        ctx, model, _ = ctx_for([reply(answers=["x"])])
        solve(build(name, few_shot=False), QUESTION, ctx)
        user = model.history[0][-1]["content"]
        assert user.count("Question:") == 1 and user.startswith(f"Question: {QUESTION.text}")
        system = model.history[0][0]["content"]
        assert "Examples:" not in system and "Question:" not in system
        assert build(name, few_shot=False).signature.examples == ()


def test_max_answers_keeps_the_best_ones() -> None:
    ctx, _, _ = ctx_for([reply(answers=["a", "b", "c"])])
    assert solve(build("io", max_answers=2), QUESTION, ctx).names == ["a", "b"]
    for bad in (0, -1, "3", True):
        with pytest.raises(ConfigError, match="max_answers"):
            build("cot", max_answers=bad)


def test_invalid_reply_is_reasked_once() -> None:
    ctx, model, recorder = ctx_for([{"replies": ["The answer is Greek.", json.dumps({"answers": ["Greek"]})]}])
    with recorder.scope("q1"):
        prediction = solve(build("io"), QUESTION, ctx)
    assert prediction.names == ["Greek"]
    assert recorder.totals("q1").calls == 2
    assert "not valid" in model.history[1][-1]["content"]


def test_unreadable_replies_give_no_answers_not_a_failure() -> None:
    ctx, _, recorder = ctx_for([{"reply": "I am not sure."}])
    with recorder.scope("q1"):
        prediction = solve(build("cot"), QUESTION, ctx)
    assert prediction.answers == [] and prediction.error is None
    assert prediction.grounding is Grounding.PARAMETRIC
    assert "unreadable" in prediction.trace[0] and prediction.trace[0]["answers"] == []
    assert recorder.totals("q1").calls == 2  # the first reply and the one re-ask


def test_backend_errors_propagate_to_the_runner() -> None:
    ctx, _, _ = ctx_for([{"match": "nothing like this", "reply": "{}"}])  # no rule matches, no default
    for name in ("io", "cot"):
        with pytest.raises(LLMError, match="no rule matches"):
            solve(build(name), QUESTION, ctx)


def test_replies_are_budgeted_and_a_reply_cut_by_its_budget_is_read_without_a_re_ask() -> None:
    from kgqa.testing.policy import PolicyModel, budget_cut

    # A small model looping on a list fills its budget; the completed names are the answers, with no second call.
    # (budget_cut: the replies end with finish_reason "length", as a reply the budget cut off does; issue 52)
    cut = budget_cut('{"answers": ["Greek", "English", "Gre')
    cot_cut = budget_cut('{"reasoning": "Zwick made one film.", "answers": ["Greek", "Eng')
    for name, budget in (("io", 128), ("cot", 384)):
        model = PolicyModel(cut if name == "io" else cot_cut)
        recorder = Recorder()
        ctx = MethodContext(kg=None, llm=RecordedModel(model, recorder), recorder=recorder)  # type: ignore[arg-type]
        with recorder.scope("q1"):
            prediction = solve(build(name), QUESTION, ctx)
        assert prediction.names == ["Greek"] + (["English"] if name == "io" else [])
        assert model.calls == 1 and model.prompts()[0].params["max_tokens"] == budget
    model = PolicyModel(cut)
    ctx = MethodContext(kg=None, llm=model, recorder=Recorder())  # type: ignore[arg-type]
    solve(build("io", answer_tokens=None), QUESTION, ctx)
    assert model.prompts()[0].params["max_tokens"] == 512  # None leaves the backend's default
    with pytest.raises(ConfigError, match="answer_tokens"):
        build("io", answer_tokens=4)


def test_format_placeholders_echoed_back_are_not_answers() -> None:
    # The prompts show the list as ["<answer>", ...]; a small model copies it ahead of its real answer.
    ctx, _, recorder = ctx_for([reply(answers=["<answer>", "Paris", "...", "\u2026", "<http://example.org/Q90>"])])
    with recorder.scope("q1"):
        prediction = solve(build("io"), QUESTION, ctx)
    assert prediction.names == ["Paris", "<http://example.org/Q90>"]  # an IRI in brackets is a name, not a placeholder
    ctx, _, recorder = ctx_for([reply(reasoning="x", answers=["<answer>"])])
    with recorder.scope("q1"):
        prediction = solve(build("cot"), QUESTION, ctx)
    assert prediction.names == [] and prediction.error is None  # only the placeholder: no answer, and no re-ask
    assert recorder.totals("q1").calls == 1


def test_the_kg_methods_sufficiency_replies_drop_placeholders_too() -> None:
    from kgqa.methods.pog.method import Sufficiency as PoGSufficiency
    from kgqa.methods.tog.method import Sufficiency as ToGSufficiency

    for model in (ToGSufficiency, PoGSufficiency):
        read = model.model_validate({"sufficient": True, "answers": ["<answer>", "Joel Zwick", "<your answer>"]})
        assert read.answers == ["Joel Zwick"]
