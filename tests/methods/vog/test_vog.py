"""VoG on the movie KG and the demo KG with scripted policies: a revision is one call and the walk goes on from what the
step reached; the best of at most four revised plans is kept, a good one ends the revisions; the answer is the plan's
Finish; an empty observation ends the search without a revision; an answer read through a mediator is structured; the
call and step limits hold; the ablations."""

from __future__ import annotations

import re

from kgqa.core import Grounding
from kgqa.kg import open_kg
from kgqa.methods import get_method, solve
from kgqa.testing import by_step, context, question, script, shared_movie_kg

INCEPTION = ("m.inception", "Inception")
DIRECTOR = {"thought": "Find the director.", "action": "Search[director of Inception]",
            "predicted": "Inception was directed by James Cameron."}
NATIONALITY = {"thought": "Find the director's country.", "action": "Search[nationality of the director]",
               "predicted": "He is from the United Kingdom."}
FINISH = {"thought": "Answer.", "action": "Finish[United Kingdom]", "predicted": "United Kingdom"}
REVISED = {**DIRECTOR, "predicted": "Inception was directed by Christopher Nolan."}


def _relations(prompt):  # type: ignore[no-untyped-def]
    step = re.search(r"^Step: (.+)$", prompt.request, re.M).group(1)  # type: ignore[union-attr]
    wanted = {"director": "film.film.directed_by", "nationality": "people.person.nationality",
              "cast": "film.film.starring", "wife": "people.person.spouse_s"}
    names = list(prompt.options().values())
    for word, relation in wanted.items():
        if word in step and relation in names:
            return {"relations": [relation]}
    return {"relations": names[:1]}


def _verify(prompt):  # type: ignore[no-untyped-def]
    if "James Cameron" in prompt.request and "Christopher Nolan" in prompt.request:
        return {"reasoning": "The graph says Nolan.", "revise": True, "revised_observation": "Directed by Nolan."}
    return {"reasoning": "They agree.", "revise": False, "revised_observation": ""}


BASE = {
    "vog.relations": _relations,
    "vog.entities": lambda p: {"keep": list(p.options())},
    "vog.verify": _verify,
    "vog.answer": {"reasoning": "From the facts.", "answers": ["United Kingdom"]},
    "vog.generate": {"reasoning": "memory", "answers": ["Guess"]},
}


def _run(policy, text="Which country is the director of Inception from?", topic=INCEPTION, kg=None,  # type: ignore[no-untyped-def]
         **settings):
    ctx, model, recorder = context(kg or shared_movie_kg(), policy, embedder="hash")
    # The hash embedder is no judge of meaning: the proxy checker is off (threshold -1) unless a test sets it.
    settings.setdefault("checker", "embedding:-1")
    method = get_method("vog", relation_selector="llm", entity_selector="llm", **settings)
    prediction = solve(method, question(text, topic), ctx, recorder=recorder)
    return prediction, model, recorder, method


def _calls(recorder) -> dict[str, int]:  # type: ignore[no-untyped-def]
    return {step: usage.calls for step, usage in recorder.by_step().items()}


def test_a_revision_is_one_call_and_the_walk_goes_on_from_what_the_step_reached() -> None:
    policy = by_step({**BASE, "vog.plan": {"steps": [DIRECTOR, NATIONALITY, FINISH]},
                      "vog.revise": {"steps": [REVISED, NATIONALITY, FINISH]}})
    prediction, model, recorder, method = _run(policy, max_revisions=1)
    # one call for the revision; the step it revised is neither searched nor verified again; the Finish answers
    assert _calls(recorder) == {"vog.plan": 1, "vog.relations": 2, "vog.verify": 2, "vog.revise": 1}
    observed = [e for e in prediction.trace if e["step"] == "vog.observe"]
    assert [e["action"] for e in observed] == ["Search[director of Inception]", "Search[nationality of the director]"]
    assert observed[1]["observation"] == ["(Christopher Nolan, people.person.nationality, United Kingdom)"]
    assert [e["revise"] for e in prediction.trace if e["step"] == "vog.verify"] == [True, False]
    assert prediction.names == ["United Kingdom"] and prediction.answers[0].id == "m.uk"
    assert prediction.grounding is Grounding.STRUCTURED
    assert ["m.nolan", "people.person.nationality", "m.uk"] in prediction.evidence
    bandit = [e for e in prediction.trace if e["step"] == "vog.bandit"]
    assert len(bandit) == 1 and bandit[0]["arm"] == "local" and bandit[0]["reason"] == "untried"
    assert prediction.stats["revisions"] == 1.0 and prediction.stats["arm_local"] == 1.0
    request = model.prompts("vog.revise")[0].request
    assert "Inception, film.film.directed_by, Christopher Nolan" in request and "The graph says Nolan." in request
    assert any(line.startswith("  revision 1 with local context") for line in method.explain(prediction).lines)


def test_the_best_of_four_revised_plans_is_kept_and_its_finish_answers() -> None:
    def plan_naming(answer: str) -> dict:  # type: ignore[type-arg]
        return {"steps": [REVISED, {**NATIONALITY, "predicted": f"He is from {answer}."},
                          {**FINISH, "action": f"Finish[{answer}]"}]}

    revisions = script({"steps": []}, plan_naming("France"), plan_naming("United Kingdom"), plan_naming("Spain"))
    policy = by_step({**BASE, "vog.plan": {"steps": [DIRECTOR, NATIONALITY, FINISH]}, "vog.revise": revisions})
    prediction, _, recorder, _ = _run(policy, reward_threshold=2.0)  # a reward no plan reaches: all four are tried
    assert _calls(recorder)["vog.revise"] == 4 and "vog.answer" not in _calls(recorder)
    tried = [e for e in prediction.trace if e["step"] == "vog.bandit"]
    assert [e["candidate"] for e in tried] == [1, 2, 3, 4] and tried[0]["empty"] and tried[0]["reward"] == -0.1
    best = max(tried[1:], key=lambda e: e["reward"])
    assert any(e["step"] == "vog.revision_limit" and e["best"] == best["reward"] for e in prediction.trace)
    # the kept plan is the best-rewarded one: its Finish is the answer, and its second step ran
    kept = ["France", "United Kingdom", "Spain"][best["candidate"] - 2]
    assert prediction.names == [kept]
    verified = [e for e in prediction.trace if e["step"] == "vog.verify"]
    assert len(verified) == 2  # the revised step is not verified again; the next step of the kept plan is


def test_a_revised_plan_that_reaches_the_threshold_ends_the_revisions() -> None:
    from kgqa.methods.vog.method import VoGConfig

    assert VoGConfig().max_revisions == 4 and VoGConfig().reward_threshold == 0.73  # the authors' code's values
    policy = by_step({**BASE, "vog.plan": {"steps": [DIRECTOR, NATIONALITY, FINISH]},
                      "vog.revise": {"steps": [REVISED, NATIONALITY, FINISH]}})
    prediction, _, recorder, _ = _run(policy, reward_threshold=-0.5)
    assert _calls(recorder)["vog.revise"] == 1
    assert not any(e["step"] == "vog.revision_limit" for e in prediction.trace)


def test_an_empty_observation_ends_the_search_without_a_revision() -> None:
    # The United Kingdom is reached by people.person.nationality and opens no other relation: the second step reaches
    # nothing, which no verdict can check and no revision can mend.
    capital = {"thought": "Find its capital.", "action": "Search[capital of that country]",
               "predicted": "(United Kingdom, location.country.capital, London)"}
    nationality = {**NATIONALITY, "predicted": "(Christopher Nolan, people.person.nationality, United Kingdom)"}
    policy = by_step({**BASE, "vog.plan": {"steps": [nationality, capital, {**FINISH, "action": "Finish[London]"}]},
                      "vog.verify": lambda p: {"reasoning": "", "revise": "nothing found" in p.request,
                                               "revised_observation": ""},
                      "vog.revise": {"steps": [nationality, capital, FINISH]}})
    prediction, _, recorder, _ = _run(policy, text="What is the capital of Christopher Nolan's country?",
                                      topic=("m.nolan", "Christopher Nolan"))
    assert _calls(recorder) == {"vog.plan": 1, "vog.relations": 1, "vog.verify": 1}  # the first step only
    assert any(e["step"] == "vog.empty" and e["index"] == 1 for e in prediction.trace)
    # the plan's Finish answers; the graph never showed it, so it is the model's own (parametric)
    assert prediction.names == ["London"] and prediction.grounding is Grounding.PARAMETRIC


def test_an_answer_read_through_a_mediator_is_structured() -> None:
    # The demo KG's marriage CVT holds both spouses under people.marriage.spouse: the observation must show the other one
    # (the walk came from Christopher Nolan), and the answer read there links to the node, with the path to it.
    wife = {"thought": "Find his wife.", "action": "Search[wife of Christopher Nolan]", "predicted": "Emma Thomas"}
    policy = by_step({**BASE, "vog.plan": {"steps": [wife, {**FINISH, "action": "Finish[Emma Thomas]"}]}})
    prediction, _, _, _ = _run(policy, text="Who is Christopher Nolan married to?", kg=open_kg("demo"),
                               topic=("m.0demo_christopher_nolan", "Christopher Nolan"))
    observed = next(e for e in prediction.trace if e["step"] == "vog.observe")["observation"]
    cvt = "m.0demo_cvt_marriage_christopher_nolan_emma_thomas"
    assert f"([mediator {cvt}], people.marriage.spouse, Emma Thomas)" in observed
    assert prediction.names == ["Emma Thomas"] and prediction.answers[0].id == "m.0demo_emma_thomas"
    assert prediction.grounding is Grounding.STRUCTURED
    assert ["m.0demo_christopher_nolan", "people.person.spouse_s", cvt] in prediction.evidence
    assert [cvt, "people.marriage.spouse", "m.0demo_emma_thomas"] in prediction.evidence


def test_the_call_limit_holds_and_a_finish_that_names_nothing_takes_one_answer_call() -> None:
    unnamed = {**FINISH, "action": "Finish[]"}
    policy = by_step({**BASE, "vog.plan": {"steps": [DIRECTOR, NATIONALITY, unnamed]},
                      "vog.verify": {"reasoning": "never happy", "revise": True, "revised_observation": ""},
                      "vog.revise": {"steps": []}})
    prediction, _, recorder, _ = _run(policy, max_calls=9)
    assert recorder.totals().calls <= 9
    assert any(e["step"] == "vog.limit" and "9 calls" in e["cause"] for e in prediction.trace)
    assert _calls(recorder)["vog.answer"] == 1  # the answer keeps its own call
    assert next(e for e in prediction.trace if e["step"] == "answer")["source"] == "answer call"
    # the budget runs out among the revisions of the first step: the best revised plan so far answers
    france = {"steps": [REVISED, NATIONALITY, {**FINISH, "action": "Finish[France]"}]}
    policy = by_step({**BASE, "vog.plan": {"steps": [DIRECTOR, NATIONALITY, FINISH]}, "vog.revise": france})
    prediction, _, recorder, _ = _run(policy, max_calls=5, reward_threshold=2.0)
    assert _calls(recorder) == {"vog.plan": 1, "vog.relations": 1, "vog.verify": 1, "vog.revise": 1}
    assert any(e["step"] == "vog.limit" and "5 calls" in e["cause"] for e in prediction.trace)
    assert prediction.names == ["France"]


def test_the_revisions_per_step_and_the_step_limit_hold() -> None:
    always = by_step({**BASE, "vog.plan": {"steps": [DIRECTOR, NATIONALITY, FINISH]},
                      "vog.verify": {"reasoning": "no", "revise": True, "revised_observation": ""},
                      "vog.revise": {"steps": []}})  # empty revisions: the plan stands, each step uses its limit
    _, _, recorder, _ = _run(always, max_revisions=2)
    assert _calls(recorder)["vog.revise"] == 2 * 2  # two candidates on each of the two search steps
    many = [{"thought": "", "action": f"Search[director of Inception {i}]", "predicted": ""} for i in range(10)]
    prediction, _, _, _ = _run(by_step({**BASE, "vog.plan": {"steps": many}}), max_steps=3, verification=False,
                               walk_back="always")
    assert len([e for e in prediction.trace if e["step"] == "vog.observe"]) == 3
    assert any(e["step"] == "vog.limit" and "3 steps" in e["cause"] for e in prediction.trace)


def test_a_nameless_cvt_in_an_observation_is_shown_by_its_facts_once() -> None:
    cast = {"thought": "Find the cast.", "action": "Search[cast of Inception]", "predicted": "Leonardo DiCaprio"}
    policy = by_step({**BASE, "vog.plan": {"steps": [cast, {**FINISH, "action": "Finish[Leonardo DiCaprio; Elliot Page]"}]}})
    prediction, _, recorder, _ = _run(policy, text="Who starred in Inception?", verification=False)
    observed = next(e for e in prediction.trace if e["step"] == "vog.observe")["observation"]
    assert "(Inception, film.film.starring, [mediator m.cvt1])" in observed
    assert "([mediator m.cvt1], film.performance.actor, Leonardo DiCaprio)" in observed
    assert not any(line.startswith("(Leonardo DiCaprio,") for line in observed)  # no fact twice, the other way round
    assert sorted(prediction.names) == ["Elliot Page", "Leonardo DiCaprio"]
    assert prediction.grounding is Grounding.STRUCTURED and "vog.answer" not in _calls(recorder)


def test_ablations_no_verification_and_a_fixed_arm() -> None:
    plan = {"vog.plan": {"steps": [DIRECTOR, NATIONALITY, FINISH]}, "vog.revise": {"steps": [REVISED, NATIONALITY, FINISH]}}
    prediction, _, recorder, _ = _run(by_step({**BASE, **plan}), verification=False)
    assert "vog.verify" not in recorder.by_step() and "vog.revise" not in recorder.by_step()
    assert prediction.names == ["United Kingdom"]
    prediction, _, _, _ = _run(by_step({**BASE, **plan}), fixed_arm="global", max_revisions=1)
    arms = [e["arm"] for e in prediction.trace if e["step"] == "vog.bandit"]
    assert arms == ["global"] and prediction.stats["arm_global"] == 1.0


def test_the_second_checker_asks_for_a_revision_the_llm_did_not() -> None:
    policy = by_step({**BASE, "vog.plan": {"steps": [REVISED, NATIONALITY, FINISH]},
                      "vog.verify": {"reasoning": "They agree.", "revise": False, "revised_observation": ""},
                      "vog.revise": {"steps": [REVISED, NATIONALITY, FINISH]}})
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
    assert recorder.by_step()["vog.answer"].calls == 1  # no Finish names an answer: the one answer call


def test_a_placeholder_action_keeps_the_step_and_searches_by_its_thought() -> None:
    from kgqa.methods.vog.plan import Plan, finish_answers

    plan = Plan.model_validate({"steps": [{"thought": "Find the director.", "action": "Search[...]",
                                           "predicted": "<observation>"},
                                          {"thought": "", "action": "Finish[Christopher Nolan", "predicted": ""}]})
    first, last = plan.steps
    assert (first.kind, first.target, first.thought, first.predicted) == ("search", "", "Find the director.", "")
    assert (last.kind, last.target) == ("finish", "Christopher Nolan")
    assert finish_answers(plan.steps) == ["Christopher Nolan"]
    several = Plan.model_validate({"steps": [{"thought": "", "action": "Finish[Mandarin; English | <answer>]",
                                              "predicted": ""}]})
    assert finish_answers(several.steps) == ["Mandarin", "English"]


def test_a_plan_cut_off_by_its_reply_budget_keeps_its_whole_steps_without_a_re_ask() -> None:
    # The 135M model writes steps until the reply budget cuts one short: the whole steps before it are the plan.
    import json

    cut = json.dumps({"steps": [DIRECTOR, NATIONALITY, FINISH]})[:-2] + ', {"thought": "Answer.", "'
    policy = by_step({**BASE, "vog.plan": cut, "vog.revise": {"steps": [REVISED, NATIONALITY, FINISH]}})
    prediction, _, recorder, _ = _run(policy, max_revisions=1, plan_tokens=32)  # the reply fills its budget: cut off
    assert _calls(recorder)["vog.plan"] == 1
    plan = next(e for e in prediction.trace if e["step"] == "vog.plan")
    assert plan["actions"] == [DIRECTOR["action"], NATIONALITY["action"], FINISH["action"]]
    assert prediction.names == ["United Kingdom"]
