"""VoG on the movie KG with scripted policies: a contradicted prediction is revised and the revised plan answers; the
call and step limits hold; a nameless CVT in an observation is shown by its facts; the ablations."""

from __future__ import annotations

import re

from kgqa.core import Grounding
from kgqa.methods import get_method, solve
from kgqa.testing import by_step, context, question, shared_movie_kg

INCEPTION = ("m.inception", "Inception")
DIRECTOR = {"thought": "Find the director.", "action": "Search[director of Inception]",
            "predicted": "Inception was directed by James Cameron."}
NATIONALITY = {"thought": "Find the director's country.", "action": "Search[nationality of the director]",
               "predicted": "He is from the United Kingdom."}
FINISH = {"thought": "Answer.", "action": "Finish[United Kingdom]", "predicted": "United Kingdom"}


def _relations(prompt):  # type: ignore[no-untyped-def]
    step = re.search(r"^Step: (.+)$", prompt.request, re.M).group(1)  # type: ignore[union-attr]
    wanted = {"director": "film.film.directed_by", "nationality": "people.person.nationality",
              "cast": "film.film.starring"}
    names = list(prompt.options().values())
    for word, relation in wanted.items():
        if word in step and relation in names:
            return {"relations": [relation]}
    return {"relations": names[:1]}


def _verify(prompt):  # type: ignore[no-untyped-def]
    if "James Cameron" in prompt.request and "Christopher Nolan" in prompt.request:
        return {"revise": True, "reason": "The graph says Nolan.", "revised_observation": "Directed by Nolan."}
    return {"revise": False, "reason": "agree", "revised_observation": ""}


BASE = {
    "vog.relations": _relations,
    "vog.entities": lambda p: {"keep": list(p.options())},
    "vog.verify": _verify,
    "vog.answer": {"reasoning": "From the facts.", "answers": ["United Kingdom"]},
    "vog.generate": {"reasoning": "memory", "answers": ["Guess"]},
}


def _run(policy, text="Which country is the director of Inception from?", topic=INCEPTION, **settings):  # type: ignore[no-untyped-def]
    ctx, model, recorder = context(shared_movie_kg(), policy, embedder="hash")
    # The hash embedder is no judge of meaning: the proxy checker is off (threshold -1) unless a test sets it.
    settings.setdefault("checker", "embedding:-1")
    method = get_method("vog", relation_selector="llm", entity_selector="llm", **settings)
    prediction = solve(method, question(text, topic), ctx, recorder=recorder)
    return prediction, model, recorder, method


def test_a_contradicted_prediction_is_revised_and_the_revised_plan_reaches_the_answer() -> None:
    revised = {**DIRECTOR, "predicted": "Inception was directed by Christopher Nolan."}
    policy = by_step({**BASE, "vog.plan": {"steps": [DIRECTOR, NATIONALITY, FINISH]},
                      "vog.revise": {"steps": [revised, NATIONALITY, FINISH]}})
    prediction, model, recorder, method = _run(policy)
    assert prediction.names == ["United Kingdom"] and prediction.answers[0].id == "m.uk"
    assert prediction.grounding is Grounding.STRUCTURED
    assert ["m.nolan", "people.person.nationality", "m.uk"] in prediction.evidence
    verifies = [e for e in prediction.trace if e["step"] == "vog.verify"]
    assert [e["revise"] for e in verifies] == [True, False, False]  # the bad prediction, its revision, nationality
    bandit = [e for e in prediction.trace if e["step"] == "vog.bandit"]
    assert len(bandit) == 1 and bandit[0]["arm"] == "local" and bandit[0]["reason"] == "untried"
    assert prediction.stats["revisions"] == 1.0 and prediction.stats["arm_local"] == 1.0
    assert "Inception, film.film.directed_by, Christopher Nolan" in model.prompts("vog.revise")[0].request
    assert any(line.startswith("  revision 1 with local context") for line in method.explain(prediction).lines)
    assert recorder.by_step()["vog.plan"].calls == 1


def test_the_call_limit_holds_whatever_the_model_replies() -> None:
    policy = by_step({**BASE, "vog.plan": {"steps": [DIRECTOR, NATIONALITY, FINISH]},
                      "vog.verify": {"revise": True, "reason": "never happy", "revised_observation": ""},
                      "vog.revise": {"steps": [DIRECTOR, NATIONALITY, FINISH]}})
    prediction, _, recorder, _ = _run(policy, max_calls=9)
    assert recorder.totals().calls <= 9
    assert any(e["step"] == "vog.limit" and "9 calls" in e["cause"] for e in prediction.trace)
    assert recorder.by_step()["vog.answer"].calls == 1  # the answer keeps its own call


def test_the_revisions_per_step_and_the_step_limit_hold() -> None:
    def revise(prompt):  # type: ignore[no-untyped-def]  # the plan from the step that disagreed on
        if "Thought: Find the director." in prompt.request:
            return {"steps": [DIRECTOR, NATIONALITY, FINISH]}
        return {"steps": [NATIONALITY, FINISH]}

    always = by_step({**BASE, "vog.plan": {"steps": [DIRECTOR, NATIONALITY, FINISH]},
                      "vog.verify": {"revise": True, "reason": "no", "revised_observation": ""},
                      "vog.revise": revise})
    prediction, _, recorder, _ = _run(always, max_revisions=2)
    assert recorder.by_step()["vog.revise"].calls == 2 * 2  # two revisions on each of the two search steps
    many = [{"thought": "", "action": f"Search[director of Inception {i}]", "predicted": ""} for i in range(10)]
    prediction, _, _, _ = _run(by_step({**BASE, "vog.plan": {"steps": many}}), max_steps=3, verification=False)
    assert len([e for e in prediction.trace if e["step"] == "vog.observe"]) == 3
    assert any(e["step"] == "vog.limit" and "3 steps" in e["cause"] for e in prediction.trace)


def test_a_nameless_cvt_in_an_observation_is_shown_by_its_facts() -> None:
    cast = {"thought": "Find the cast.", "action": "Search[cast of Inception]", "predicted": "Leonardo DiCaprio"}
    policy = by_step({**BASE, "vog.plan": {"steps": [cast, {**FINISH, "action": "Finish[Leonardo DiCaprio]"}]},
                      "vog.answer": {"reasoning": "", "answers": ["Leonardo DiCaprio", "Elliot Page"]}})
    prediction, _, _, _ = _run(policy, text="Who starred in Inception?", verification=False)
    observed = next(e for e in prediction.trace if e["step"] == "vog.observe")["observation"]
    assert "(Inception, film.film.starring, [mediator m.cvt1])" in observed
    assert "([mediator m.cvt1], film.performance.actor, Leonardo DiCaprio)" in observed
    assert sorted(prediction.names) == ["Elliot Page", "Leonardo DiCaprio"]


def test_ablations_no_verification_and_a_fixed_arm() -> None:
    plan = {"vog.plan": {"steps": [DIRECTOR, NATIONALITY, FINISH]},
            "vog.revise": {"steps": [{**DIRECTOR, "predicted": "Christopher Nolan"}, NATIONALITY, FINISH]}}
    prediction, _, recorder, _ = _run(by_step({**BASE, **plan}), verification=False)
    assert "vog.verify" not in recorder.by_step() and "vog.revise" not in recorder.by_step()
    assert prediction.names == ["United Kingdom"]
    prediction, _, _, _ = _run(by_step({**BASE, **plan}), fixed_arm="global")
    arms = [e["arm"] for e in prediction.trace if e["step"] == "vog.bandit"]
    assert arms == ["global"] and prediction.stats["arm_global"] == 1.0


def test_the_second_checker_asks_for_a_revision_the_llm_did_not() -> None:
    revised = {**DIRECTOR, "predicted": "Inception was directed by Christopher Nolan."}
    policy = by_step({**BASE, "vog.plan": {"steps": [revised, NATIONALITY, FINISH]},
                      "vog.verify": {"revise": False, "reason": "agree", "revised_observation": ""},
                      "vog.revise": {"steps": [revised, NATIONALITY, FINISH]}})
    prediction, _, _, _ = _run(policy, checker="embedding:0.999", max_revisions=1)
    first = next(e for e in prediction.trace if e["step"] == "vog.verify")
    assert first["revise"] is True and first["llm_revise"] is False and first["checker"]["contradiction"] is True


def test_a_question_without_a_topic_is_answered_by_the_llm_alone() -> None:
    prediction, _, recorder, _ = _run(by_step(BASE), topic=("m.nowhere", "Nowhere"))
    assert prediction.names == ["Guess"] and list(recorder.by_step()) == ["vog.generate"]


def test_a_plan_that_only_echoes_the_reply_format_is_read_as_no_plan() -> None:
    # The 135M model's plans: "Search[...]" steps and a "Finish[..." cut off before its bracket, nothing else.
    echoed = [{"thought": "...", "action": "Search[...]", "predicted": "..."},
              {"thought": "...", "action": "Finish[...", "predicted": "..."}] * 5
    policy = by_step({**BASE, "vog.plan": {"steps": echoed}})
    prediction, _, recorder, _ = _run(policy, text="Who directed Inception?", verification=False)
    plan = next(e for e in prediction.trace if e["step"] == "vog.plan")
    assert plan["actions"] == [] and plan["failure"] == "no step"
    assert recorder.by_step()["vog.plan"].calls == 1  # a readable reply that says nothing: not re-asked
    observed = [e for e in prediction.trace if e["step"] == "vog.observe"]
    assert [e["action"] for e in observed] == ["Search[Who directed Inception?]"]  # the question is the one step
    assert observed[0]["relations"] == ["film.film.directed_by"]


def test_a_placeholder_action_keeps_the_step_and_searches_by_its_thought() -> None:
    from kgqa.methods.vog.method import Plan

    plan = Plan.model_validate({"steps": [{"thought": "Find the director.", "action": "Search[...]",
                                           "predicted": "<observation>"},
                                          {"thought": "", "action": "Finish[Christopher Nolan", "predicted": ""}]})
    first, last = plan.steps
    assert (first.kind, first.target, first.thought, first.predicted) == ("search", "", "Find the director.", "")
    assert (last.kind, last.target) == ("finish", "Christopher Nolan")
