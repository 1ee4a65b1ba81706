"""SRP on the movie KG with scripted policies: instantiation (exact, similar, not instantiated), the judge/editor loop
and its limit, the audits the harness scores (a false have-answer is counted), and the three ablations."""

from __future__ import annotations

import re

import pytest

from kgqa.core import Grounding
from kgqa.eval.metrics import score_prediction
from kgqa.methods import get_method, solve
from kgqa.testing import by_step, context, question, shared_movie_kg, unreadable

INCEPTION = ("m.inception", "Inception")
NOLAN = ("m.nolan", "Christopher Nolan")


def _numbers(prompt) -> list[int]:  # type: ignore[no-untyped-def]
    return [int(n) for n in re.findall(r"^(\d+)\. ", prompt.request, re.M)]


def _keep_all(prompt):  # type: ignore[no-untyped-def]
    return {"verdict": "have_answer", "keep": _numbers(prompt), "message": "found"}


def _answer_tails(prompt):  # type: ignore[no-untyped-def]
    """The last node of every sequence listed (what an oracle answer step would copy)."""
    tails = [line.rsplit(" -> ", 1)[-1] for line in re.findall(r"^\d+\. (.+)$", prompt.request, re.M)]
    return {"reasoning": "copied", "answers": list(dict.fromkeys(tails))}


def _run(policy, text, topic, *, answers=(), **settings):  # type: ignore[no-untyped-def]
    ctx, model, recorder = context(shared_movie_kg(), policy, embedder="hash")
    q = question(text, topic, answers=answers)
    prediction = solve(get_method("srp", relation_scorer="llm", **settings), q, ctx, recorder=recorder)
    return q, prediction, model, recorder


BASE = {
    "srp.relation_check": lambda p: {"relations": list(p.options().values())[:3]},
    "srp.judge": _keep_all,
    "srp.answer": _answer_tails,
    "srp.generate": {"reasoning": "memory", "answers": ["Guess"]},
}


def test_a_planned_path_through_a_cvt_is_instantiated_judged_and_answered_structured() -> None:
    policy = by_step({**BASE, "srp.plan": {"paths": [["film.film.starring", "film.performance.actor"]]}})
    q, prediction, model, recorder = _run(policy, "Who starred in Inception?", INCEPTION,
                                          answers=[("m.dicaprio", "Leonardo DiCaprio"), ("m.page", "Elliot Page")])
    assert sorted(prediction.names) == ["Elliot Page", "Leonardo DiCaprio"]
    assert prediction.grounding is Grounding.STRUCTURED
    assert ["m.cvt1", "film.performance.actor", "m.dicaprio"] in prediction.evidence
    judge_prompt = model.prompts("srp.judge")[0].request
    assert "Inception -> film.film.starring -> [mediator m.cvt1] -> film.performance.actor -> Leonardo DiCaprio" in \
        judge_prompt
    assert prediction.stats == {"edits": 0.0}
    steps = recorder.by_step()
    assert [steps[s].calls for s in ("srp.relation_check", "srp.plan", "srp.judge", "srp.answer")] == [1, 1, 1, 1]
    score = score_prediction(q, prediction)
    assert score.audits["srp.judge"]["tp"] == 1 and score.audits["srp.retrieved"]["contained"] == 1


def test_an_uninstantiable_relation_becomes_the_editors_error_and_the_edit_is_walked() -> None:
    def plan(prompt):  # type: ignore[no-untyped-def]
        return {"paths": [["film.film.directed_by", "people.person.shoe_size"]]}

    edit_messages: list[str] = []

    def edit(prompt):  # type: ignore[no-untyped-def]
        edit_messages.append(prompt.request)
        return {"paths": [["film.film.directed_by", "people.person.nationality"]]}

    def judge(prompt):  # type: ignore[no-untyped-def]
        if "United Kingdom" in prompt.request:
            return _keep_all(prompt)
        return {"verdict": "no_answer", "keep": [], "message": "no country yet"}

    policy = by_step({**BASE, "srp.plan": plan, "srp.edit": edit, "srp.judge": judge})
    _, prediction, _, recorder = _run(policy, "Which country is the director of Inception from?", INCEPTION,
                                      min_match=0.99)
    first = next(e for e in prediction.trace if e["step"] == "srp.instantiate")
    assert first["error"] == "relation people.person.shoe_size not instantiated"
    assert "Message: relation people.person.shoe_size not instantiated" in edit_messages[0]
    judged = next(e for e in prediction.trace if e["step"] == "srp.judge")
    assert judged["called"] is False and judged["verdict"] == "no_answer"  # nothing instantiated: no judge call
    # The editor saw the relations where the walk stopped: at Christopher Nolan.
    assert "people.person.nationality" in edit_messages[0]
    assert prediction.names == ["United Kingdom"] and prediction.stats == {"edits": 1.0}
    assert recorder.by_step()["srp.edit"].calls == 1


def test_a_relation_the_kg_lacks_is_matched_to_similar_ones() -> None:
    policy = by_step({**BASE, "srp.plan": {"paths": [["film.film.director"]]}})
    _, prediction, _, _ = _run(policy, "Who directed Inception?", INCEPTION, min_match=0.3)
    event = next(e for e in prediction.trace if e["step"] == "srp.instantiate")
    assert "film.film.directed_by" in event["matches"][0]["matched"]
    assert len(event["matches"][0]["matched"]) <= 5
    assert "Christopher Nolan" in prediction.names


def test_the_edit_limit_holds_and_the_last_sequences_are_answered() -> None:
    policy = by_step({**BASE, "srp.plan": {"paths": [["film.film.directed_by"]]},
                      "srp.judge": {"verdict": "no_answer", "keep": [], "message": "wrong"},
                      "srp.edit": {"paths": [["film.film.initial_release_date"]]}})
    _, prediction, _, recorder = _run(policy, "When did Inception come out?", INCEPTION, max_edits=2)
    steps = recorder.by_step()
    assert steps["srp.judge"].calls == 3 and steps["srp.edit"].calls == 2
    assert prediction.stats == {"edits": 2.0}
    assert any(e["step"] == "srp.edits_exhausted" for e in prediction.trace)
    assert prediction.names == ["2010"]  # answered from the last sequences shown


def test_a_false_have_answer_is_counted_by_the_harness() -> None:
    policy = by_step({**BASE, "srp.plan": {"paths": [["film.film.initial_release_date"]]},
                      "srp.answer": {"reasoning": "", "answers": ["2010"]}})
    q, prediction, _, _ = _run(policy, "Who directed Inception?", INCEPTION,
                               answers=[("m.nolan", "Christopher Nolan")])
    score = score_prediction(q, prediction)
    assert score.audits["srp.judge"]["fp"] == 1 and score.audits["srp.judge"]["tp"] == 0
    assert score.audits["srp.retrieved"]["contained"] == 0
    assert score.hit1 == 0.0


def test_an_unreadable_judge_reply_is_a_no_answer_and_goes_to_the_editor() -> None:
    policy = by_step({**BASE, "srp.plan": {"paths": [["film.film.directed_by"]]}, "srp.judge": unreadable(),
                      "srp.edit": {"paths": [["film.film.directed_by"]]}})
    _, prediction, _, recorder = _run(policy, "Who directed Inception?", INCEPTION, max_edits=1)
    judges = [e for e in prediction.trace if e["step"] == "srp.judge"]
    assert all(e["verdict"] == "no_answer" and e["failure"] for e in judges)
    assert recorder.by_step()["srp.edit"].calls == 1


@pytest.mark.parametrize(("setting", "missing_step"), [
    ({"relation_check": False}, "srp.relation_check"),
    ({"reflection": False}, "srp.judge"),
])
def test_ablations_drop_exactly_their_step(setting: dict[str, bool], missing_step: str) -> None:
    policy = by_step({**BASE, "srp.plan": {"paths": [["film.film.directed_by"]]}})
    _, full, _, full_rec = _run(policy, "Who directed Inception?", INCEPTION)
    _, ablated, model, rec = _run(policy, "Who directed Inception?", INCEPTION, **setting)
    assert missing_step not in rec.by_step()
    assert set(full_rec.by_step()) - set(rec.by_step()) == {missing_step}
    assert ablated.names == full.names == ["Christopher Nolan"]
    if setting == {"relation_check": False}:
        assert "Checked relations: (not checked)" in model.prompts("srp.plan")[0].request


def test_without_references_the_prompts_say_none() -> None:
    policy = by_step({**BASE, "srp.plan": {"paths": [["film.film.directed_by"]]}})
    _, prediction, model, _ = _run(policy, "Who directed Inception?", INCEPTION)
    assert model.prompts("srp.plan")[0].request.startswith("References:\n(none)")
    event = next(e for e in prediction.trace if e["step"] == "srp.references")
    assert event == {"step": "srp.references", "used": False, "reason": "no reference base configured"}


def test_a_question_without_a_topic_is_answered_by_the_llm_alone() -> None:
    _, prediction, _, recorder = _run(by_step(BASE), "Who?", ("m.nowhere", "Nobody"))
    assert prediction.names == ["Guess"] and prediction.grounding is Grounding.PARAMETRIC
    assert list(recorder.by_step()) == ["srp.generate"]


def test_references_are_retrieved_deterministically_and_never_the_question_itself(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from kgqa.datasets import load_dataset
    from kgqa.kg import open_kg
    from kgqa.methods.srp.references import ReferenceBase, check_candidates
    from kgqa.testing import offline_embedder

    kg = open_kg("demo")
    questions = load_dataset("demo", "test")
    candidates, _ = check_candidates(questions, kg)
    ReferenceBase.build(candidates, offline_embedder(), size=20, clusters=4, seed=0).save(tmp_path / "refs")
    asked = next(q for q in questions if q.id in {c.id for c in candidates})

    def plan(prompt):  # type: ignore[no-untyped-def]
        return {"paths": [["film.film.directed_by"]]}

    def run() -> tuple[list[str], str]:
        ctx, model, _ = context(kg, by_step({**BASE, "srp.plan": plan}), embedder="hash", seed=3)
        prediction = solve(get_method("srp", references=str(tmp_path / "refs"), relation_check=False), asked, ctx)
        ids = next(e for e in prediction.trace if e["step"] == "srp.references")["ids"]
        return ids, model.prompts("srp.plan")[0].request

    ids, prompt = run()
    assert len(ids) == 4 and asked.id not in ids
    assert f"Question: {asked.text}\nPath:" not in prompt  # its own gold path is never shown as an example
    assert prompt.count("\nPath: ") == 4
    assert run()[0] == ids  # deterministic


def test_a_missing_reference_base_is_a_clear_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from kgqa.errors import ConfigError

    with pytest.raises(ConfigError, match=r"reference-base\.json: missing"):
        get_method("srp", references=str(tmp_path))
