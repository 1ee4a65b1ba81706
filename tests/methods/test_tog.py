"""ToG on the movie KG with scripted policies: beam width and depth, calls per depth, CVT paths, seeded sampling, the
half stop and the fallback to the LLM alone."""

from __future__ import annotations

import re

import pytest

from kgqa.core import Grounding
from kgqa.methods import get_method, solve
from kgqa.testing import by_step, context, question, shared_movie_kg, unreadable

NOLAN = ("m.nolan", "Christopher Nolan")
INCEPTION = ("m.inception", "Inception")


def _all_relations(prompt):  # type: ignore[no-untyped-def]
    return {"relations": list(prompt.options().values())}


def _onward_relations(prompt):  # type: ignore[no-untyped-def]
    """Every listed relation but those into dead ends (years, nationalities, the award branch), so walks go deep."""
    dead = ("release_date", "nationality", "award")
    return {"relations": [r for r in prompt.options().values() if not any(d in r for d in dead)]}


def _uniform_scores(prompt):  # type: ignore[no-untyped-def]
    return {"scores": [{"id": n, "score": 0.5} for n in prompt.options()]}


def _entity_of(prompt) -> str:  # type: ignore[no-untyped-def]
    return re.search(r"^Entity: (.+?)(?:, relation .*)?$", prompt.request, re.M).group(1)  # type: ignore[union-attr]


NEVER_ENOUGH = by_step({
    "tog.relations": _onward_relations,
    "tog.entities": _uniform_scores,
    "tog.reason": {"sufficient": False, "answers": [], "reason": "not yet"},
    "tog.generate": {"reasoning": "from memory", "answers": ["Somebody"]},
    "tog.answer": {"reasoning": "from the triples", "answers": ["Christopher Nolan"]},
})


def _run(policy, text="Who starred in films by Christopher Nolan?", topic=NOLAN, **settings):  # type: ignore[no-untyped-def]
    ctx, model, recorder = context(shared_movie_kg(), policy, embedder="hash")
    method = get_method("tog", relation_pruner="llm", entity_pruner="llm", **settings)
    prediction = solve(method, question(text, topic), ctx, recorder=recorder)
    return prediction, model, recorder, method


def test_beam_width_and_depth_are_respected_then_the_llm_answers_alone() -> None:
    prediction, _, recorder, _ = _run(NEVER_ENOUGH, width=2, depth=3)
    beams = [e for e in prediction.trace if e["step"] == "tog.beam"]
    assert [e["depth"] for e in beams] == [1, 2, 3]
    assert all(len(e["kept"]) <= 2 for e in beams)
    # Each kept path is one triple longer than the last depth's.
    assert [len(e["kept"][0]["path"]) for e in beams] == [1, 2, 3]
    steps = recorder.by_step()
    assert steps["tog.reason"].calls == 3  # one reasoning call per depth
    # Relation exploration: one call per beam entity (1 topic, then at most 2 per depth).
    assert 1 + 2 <= steps["tog.relations"].calls <= 1 + 2 * 2
    fallback = [e for e in prediction.trace if e["step"] == "fallback"]
    assert fallback and "depth 3 exhausted" in fallback[0]["cause"]
    assert prediction.names == ["Somebody"] and prediction.grounding is Grounding.PARAMETRIC


def test_calls_per_depth_are_relations_per_entity_entities_per_relation_and_one_reasoning() -> None:
    prediction, _, recorder, _ = _run(NEVER_ENOUGH, width=3, depth=1)
    steps = recorder.by_step()
    # Depth 1 from Nolan: one relation call; each kept relation with 2+ named neighbours costs one entity call
    # (film.director.film and the incoming film.film.directed_by reach 3 films each: two calls).
    neighbours = [e for e in prediction.trace if e["step"] == "tog.neighbours"]
    assert steps["tog.relations"].calls == 1
    assert steps["tog.entities"].calls == sum(1 for e in neighbours if e["reached"] >= 2) == 2
    assert steps["tog.reason"].calls == 1
    assert sum(s.calls for s in steps.values()) == 1 + 2 + 1 + 1  # + the fallback generation


def test_a_path_through_a_nameless_performance_node_reaches_the_actors() -> None:
    def reason(prompt):  # type: ignore[no-untyped-def]
        if "Leonardo DiCaprio" in prompt.request:
            return {"sufficient": True, "answers": ["Leonardo DiCaprio", "Elliot Page"], "reason": "the cast"}
        return {"sufficient": False, "answers": [], "reason": "need the actors"}

    def relations(prompt):  # type: ignore[no-untyped-def]
        want = {"Inception": "film.film.starring"}.get(_entity_of(prompt), "film.performance.actor")
        return {"relations": [want]}

    policy = by_step({"tog.relations": relations, "tog.entities": _uniform_scores, "tog.reason": reason})
    prediction, _, recorder, _ = _run(policy, text="Who starred in Inception?", topic=INCEPTION, width=2)
    assert sorted(prediction.names) == ["Elliot Page", "Leonardo DiCaprio"]
    assert {a.id for a in prediction.answers} == {"m.dicaprio", "m.page"}
    assert prediction.grounding is Grounding.SYNTHESIS
    # The evidence runs through the CVT, the right way round.
    assert ["m.inception", "film.film.starring", "m.cvt1"] in prediction.evidence
    assert ["m.cvt1", "film.performance.actor", "m.dicaprio"] in prediction.evidence
    beam = next(e for e in prediction.trace if e["step"] == "tog.beam")
    assert any("[mediator m.cvt" in step for kept in beam["kept"] for step in kept["path"])
    assert recorder.by_step()["tog.reason"].calls == 2


def test_the_hop_back_along_the_incoming_edge_is_not_offered_and_heads_are_looked_up_the_right_way() -> None:
    seen: dict[str, list[str]] = {}

    def relations(prompt):  # type: ignore[no-untyped-def]
        entity = _entity_of(prompt)
        seen[entity] = list(prompt.options().values())
        return {"relations": ["film.film.directed_by"] if entity == "Inception" else ["film.director.film"]}

    policy = by_step({"tog.relations": relations, "tog.entities": _uniform_scores,
                      "tog.reason": {"sufficient": False, "answers": []},
                      "tog.generate": {"reasoning": "", "answers": []}})
    prediction, _, _, _ = _run(policy, text="Who directed Inception?", topic=INCEPTION, width=1, depth=2)
    # From Inception, film.director.film comes in (a head lookup) and the directed_by hop goes out.
    assert "film.director.film (incoming)" in seen["Inception"] and "film.film.directed_by" in seen["Inception"]
    # Having walked Inception -> directed_by -> Nolan, the hop straight back is not offered at Nolan.
    assert "film.film.directed_by (incoming)" not in seen["Christopher Nolan"]
    first = next(e for e in prediction.trace if e["step"] == "tog.beam")
    assert first["kept"][0]["path"] == ["(Inception, film.film.directed_by, Christopher Nolan)"]


def test_sampling_above_the_threshold_is_seeded() -> None:
    def kept(seed: int) -> list[list[str]]:
        ctx, _, _ = context(shared_movie_kg(), NEVER_ENOUGH, embedder="hash", seed=seed)
        method = get_method("tog", relation_pruner="llm", entity_pruner="llm", sample_above=2, retain=1, depth=1)
        prediction = solve(method, question("Films by Nolan?", NOLAN, qid="q7"), ctx)
        events = [e for e in prediction.trace if e["step"] == "tog.neighbours" and e["relation"] == "film.director.film"]
        assert events[0]["reached"] == 3 and events[0]["sampled"] == 1
        return [k["path"] for e in prediction.trace if e["step"] == "tog.beam" for k in e["kept"]]

    assert kept(1) == kept(1)
    assert len({str(kept(seed)) for seed in range(8)}) > 1  # another seed draws another film


def test_no_candidate_left_is_the_half_stop_answered_from_the_triples() -> None:
    def relations(prompt):  # type: ignore[no-untyped-def]
        return {"relations": ["film.film.initial_release_date"]}

    policy = by_step({"tog.relations": relations, "tog.reason": {"sufficient": False, "answers": []},
                      "tog.answer": {"reasoning": "Memento came out in 2000.", "answers": ["2000"]}})
    prediction, _, recorder, _ = _run(policy, text="When did Memento come out?", topic=("m.memento", "Memento"),
                                      width=1)
    half = [e for e in prediction.trace if e["step"] == "tog.half_stop"]
    assert half and half[0]["depth"] == 2  # the year literal opens no hop but the one it came by
    assert prediction.names == ["2000"] and prediction.grounding is Grounding.SYNTHESIS
    assert prediction.evidence == [["m.memento", "film.film.initial_release_date",
                                    '"2000"^^<http://www.w3.org/2001/XMLSchema#gYear>']]
    assert "tog.generate" not in recorder.by_step()


def test_an_unreadable_reasoning_reply_means_go_on_and_is_recorded() -> None:
    policy = by_step({"tog.relations": _all_relations, "tog.entities": _uniform_scores,
                      "tog.reason": unreadable(), "tog.generate": {"reasoning": "", "answers": ["X"]}})
    prediction, _, _, method = _run(policy, depth=2)
    reasons = [e for e in prediction.trace if e["step"] == "tog.reason"]
    assert len(reasons) == 2 and all(e["failure"] and e["sufficient"] is False for e in reasons)
    assert any("unreadable" in line for line in method.explain(prediction).lines)


def test_a_question_without_a_topic_in_the_kg_is_answered_by_the_llm_alone() -> None:
    policy = by_step({"tog.generate": {"reasoning": "I know it", "answers": ["Paris"]}})
    prediction, _, recorder, _ = _run(policy, text="Capital of France?", topic=("m.nowhere", "France"))
    assert prediction.names == ["Paris"] and prediction.grounding is Grounding.PARAMETRIC
    assert list(recorder.by_step()) == ["tog.generate"]


@pytest.mark.parametrize("model_name", ["local:smollm2", "openai:gpt-4.1-mini", "oracle"])
def test_the_embedder_is_loaded_with_any_model_and_any_scorer(model_name: str) -> None:
    """It ranks a relation list over the prompt's budget, whatever scores the relations."""
    assert get_method("tog").needs(model_name).embedder is True  # type: ignore[attr-defined]
    assert get_method("tog", relation_pruner="llm", entity_pruner="bm25").needs(model_name).embedder is True  # type: ignore[attr-defined]


def test_explain_shows_each_depth_and_the_verdicts() -> None:
    prediction, _, _, method = _run(NEVER_ENOUGH, width=2, depth=2)
    lines = method.explain(prediction).lines
    assert lines[0].startswith("depth 1:") and any(line.startswith("reasoning at depth 2: not sufficient")
                                                   for line in lines)
    assert lines[-1] == "fallback: depth 2 exhausted without sufficient knowledge"


def test_entities_scored_zero_leave_the_beam_even_when_it_has_room() -> None:
    """As in the reference: a candidate whose score is zero is pruned, not kept to fill the beam's width."""
    def one_film(prompt):  # type: ignore[no-untyped-def]
        return {"scores": [{"id": n, "score": float(name == "Inception")} for n, name in prompt.options().items()]}

    def films(prompt):  # type: ignore[no-untyped-def]
        return {"relations": [r for r in prompt.options().values() if "director.film" in r]}

    policy = by_step({"tog.relations": films, "tog.entities": one_film,
                      "tog.reason": {"sufficient": False, "answers": []},
                      "tog.generate": {"reasoning": "from memory", "answers": ["Somebody"]}})
    prediction, _, _, _ = _run(policy, width=10, depth=1)  # room for every candidate
    beam = next(e for e in prediction.trace if e["step"] == "tog.beam")
    ends = [k["path"][0].rsplit(", ", 1)[1].rstrip(")") for k in beam["kept"]]
    assert "Inception" in ends
    assert "Interstellar" not in ends and "Memento" not in ends  # scored zero: pruned
