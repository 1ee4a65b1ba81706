"""PoG on real embedded KGs with scripted policies: sub-objectives, calls per round, entity pruning above 70 candidates,
memory, reflection adding entities and going back (at most max_reverse times), the depth limit and the fallback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kgqa.core import Grounding
from kgqa.kg.embedded import EmbeddedKGBuilder
from kgqa.methods import get_method, solve
from kgqa.testing import by_step, context, question, shared_movie_kg, unreadable

NOLAN = ("m.nolan", "Christopher Nolan")


def _entity_of(prompt) -> str:  # type: ignore[no-untyped-def]
    return re.search(r"^Entity: (.+)$", prompt.request, re.M).group(1)  # type: ignore[union-attr]


def _first_scores(prompt):  # type: ignore[no-untyped-def]
    """The first listed candidate scores highest, then in list order."""
    n = len(prompt.options())
    return {"scores": [{"id": i, "score": round(1 - i / (n + 1), 3)} for i in prompt.options()]}


BASE = {
    "pog.decompose": {"subobjectives": ["Find the films of Christopher Nolan", "Find the year of each"]},
    "pog.entities": _first_scores,
    "pog.memory": {"solved": [1], "known": "Nolan directed films."},
    "pog.generate": {"reasoning": "from memory", "answers": ["Guess"]},
    "pog.answer": {"reasoning": "from the triples", "answers": []},
}


def _run(policy, text="Which film by Christopher Nolan came out in 2010?", topic=NOLAN, kg=None,
         **settings):  # type: ignore[no-untyped-def]
    ctx, model, recorder = context(kg or shared_movie_kg(), policy, embedder="hash")
    method = get_method("pog", relation_pruner="llm", entity_pruner="llm", **settings)
    prediction = solve(method, question(text, topic), ctx, recorder=recorder)
    return prediction, model, recorder, method


def test_reflection_adds_a_left_out_film_and_the_answer_follows_with_its_evidence() -> None:
    def relations(prompt):  # type: ignore[no-untyped-def]
        entity = _entity_of(prompt)
        return {"relations": ["film.director.film" if entity == "Christopher Nolan" else "film.film.initial_release_date"]}

    def reason(prompt):  # type: ignore[no-untyped-def]
        if "(Inception, film.film.initial_release_date, 2010)" in prompt.request:
            return {"sufficient": True, "answers": ["Inception"], "reason": "Inception came out in 2010."}
        return {"sufficient": False, "answers": [], "reason": "no 2010 film yet"}

    def reflect(prompt):  # type: ignore[no-untyped-def]
        label = re.search(r"^(A\d+)\. Inception$", prompt.request, re.M)
        return {"action": "add", "entities": [label.group(1)]} if label else {"action": "continue"}

    def entities(prompt):  # type: ignore[no-untyped-def]  # the years: 2010 first; the films: in list order
        return {"scores": [{"id": i, "score": 1.0 if name == "2010" else 0.5 - i / 100}
                           for i, name in prompt.options().items()]}

    policy = by_step({**BASE, "pog.relations": relations, "pog.reason": reason, "pog.reflect": reflect,
                      "pog.entities": entities})
    prediction, model, recorder, method = _run(policy, width=1)
    assert prediction.names == ["Inception"] and prediction.answers[0].id == "m.inception"
    assert prediction.grounding is Grounding.SYNTHESIS
    assert ["m.nolan", "film.director.film", "m.inception"] in prediction.evidence
    reflections = [e for e in prediction.trace if e["step"] == "pog.reflect"]
    assert reflections[0]["action"] == "add" and reflections[0]["entities"] == ["m.inception"]
    steps = recorder.by_step()
    # Round 1 (Nolan): 1 relation call, 1 entity call (3 films, 1 kept), memory, reasoning, reflection. Round 2
    # (the kept film and the added Inception): 2 relation calls, 1 entity call (two years, 2010 kept), memory,
    # reasoning: sufficient.
    assert steps["pog.decompose"].calls == 1
    assert steps["pog.relations"].calls == 3 and steps["pog.entities"].calls == 1
    assert steps["pog.memory"].calls == steps["pog.reason"].calls == 2 and steps["pog.reflect"].calls == 1
    assert model.prompts("pog.relations")[0].params["temperature"] == 0.3
    lines = method.explain(prediction).lines
    assert lines[0].startswith("sub-objectives: Find the films") and "reflection: add ['m.inception']" in lines
    memory = next(e for e in prediction.trace if e["step"] == "pog.memory")["memory"]
    assert memory == ("1. Find the films of Christopher Nolan: solved\n2. Find the year of each: open\n"
                      "Known: Nolan directed films.")


def test_backtracking_returns_to_earlier_entities_at_most_max_reverse_times_within_the_depth() -> None:
    def relations(prompt):  # type: ignore[no-untyped-def]
        options = list(prompt.options().values())
        return {"relations": [r for r in options if "award" not in r and "nationality" not in r][:1] or options[:1]}

    def reflect(prompt):  # type: ignore[no-untyped-def]
        earlier = re.findall(r"^(B\d+)\. ", prompt.request, re.M)
        return {"action": "backtrack", "entities": earlier[:1]} if earlier else {"action": "continue"}

    policy = by_step({**BASE, "pog.relations": relations, "pog.reflect": reflect,
                      "pog.reason": {"sufficient": False, "answers": [], "reason": "not yet"}})
    prediction, _, _, _ = _run(policy, width=1, max_reverse=2, depth=4)
    reflections = [e for e in prediction.trace if e["step"] == "pog.reflect"]
    backs = [e for e in reflections if e["action"] == "backtrack"]
    assert len(backs) == 2  # then no earlier entity is offered any more
    assert all(e["action"] == "continue" for e in reflections[reflections.index(backs[-1]) + 1:])
    assert backs[0]["entities"] == ["m.nolan"]  # back to the topic, which then explores anew
    rounds = [e for e in prediction.trace if e["step"] == "pog.round"]
    assert rounds[1]["frontier"] == ["m.nolan"]
    assert len(rounds) == 4  # going back takes no round beyond the depth, as PoG's code
    assert rounds[1]["selected"] == rounds[0]["selected"]  # a node seen before may be chosen again
    assert prediction.grounding is Grounding.PARAMETRIC


def _hub_kg(path: Path, films: int = 100):  # type: ignore[no-untyped-def]
    builder = EmbeddedKGBuilder(schema="freebase")
    builder.add_name("m.hub", "Prolific Director")
    for i in range(films):
        builder.add_triple("m.hub", "film.director.film", f"m.f{i}")
        builder.add_name(f"m.f{i}", f"Film number {i}")
    return builder.build(path)


def test_entity_pruning_above_70_candidates_sees_the_70_closest_first(tmp_path: Path) -> None:
    kg = _hub_kg(tmp_path / "kg")
    policy = by_step({**BASE, "pog.relations": {"relations": ["film.director.film"]},
                      "pog.reason": {"sufficient": True, "answers": ["Film number 7"], "reason": "it is"}})
    prediction, model, _, _ = _run(policy, text="Which film number 7 did the Prolific Director make?",
                                   topic=("m.hub", "Prolific Director"), kg=kg)
    shown = model.prompts("pog.entities")[0].options()
    assert len(shown) == 70
    assert "Film number 7" in shown.values()  # the closest by embedding is among those shown
    round_event = next(e for e in prediction.trace if e["step"] == "pog.round")
    assert round_event["candidates"] == 100 and round_event["prefiltered"] == 70
    assert prediction.answers[0].id == "m.f7" and prediction.grounding is Grounding.SYNTHESIS


def test_at_or_below_70_candidates_all_are_shown(tmp_path: Path) -> None:
    kg = _hub_kg(tmp_path / "kg", films=70)
    policy = by_step({**BASE, "pog.relations": {"relations": ["film.director.film"]},
                      "pog.reason": {"sufficient": True, "answers": ["Film number 7"], "reason": "it is"}})
    prediction, model, _, _ = _run(policy, topic=("m.hub", "Prolific Director"), kg=kg)
    assert len(model.prompts("pog.entities")[0].options()) == 70
    assert next(e for e in prediction.trace if e["step"] == "pog.round")["prefiltered"] is None


def test_the_depth_limit_ends_exploration_and_the_llm_answers_alone() -> None:
    def relations(prompt):  # type: ignore[no-untyped-def]
        options = list(prompt.options().values())
        return {"relations": [r for r in options if "award" not in r and "nationality" not in r][:2] or options[:1]}

    policy = by_step({**BASE, "pog.relations": relations, "pog.reflect": {"action": "continue"},
                      "pog.reason": {"sufficient": False, "answers": [], "reason": "not yet"}})
    prediction, _, recorder, _ = _run(policy, depth=2, width=2)
    assert recorder.by_step()["pog.reason"].calls <= 2
    fallback = next(e for e in prediction.trace if e["step"] == "fallback")
    assert "exhausted" in fallback["cause"] or "no candidate" in fallback["cause"]
    assert prediction.names == ["Guess"] and prediction.grounding is Grounding.PARAMETRIC


def test_unreadable_memory_and_reflection_replies_keep_the_search_going() -> None:
    def relations(prompt):  # type: ignore[no-untyped-def]
        entity = _entity_of(prompt)
        return {"relations": ["film.director.film" if entity == "Christopher Nolan" else "film.film.initial_release_date"]}

    def reason(prompt):  # type: ignore[no-untyped-def]
        if "initial_release_date" in prompt.request:
            return {"sufficient": True, "answers": ["2014"], "reason": "a year"}
        return {"sufficient": False, "answers": []}

    policy = by_step({**BASE, "pog.relations": relations, "pog.memory": unreadable(), "pog.reflect": unreadable(),
                      "pog.reason": reason})
    prediction, _, _, _ = _run(policy, width=1)
    memory = [e for e in prediction.trace if e["step"] == "pog.memory"]
    assert memory and all(e.get("failure") for e in memory)
    reflect = next(e for e in prediction.trace if e["step"] == "pog.reflect")
    assert reflect["action"] == "continue" and reflect["failure"]
    assert prediction.names == ["2014"] and prediction.grounding is Grounding.SYNTHESIS
    assert prediction.answers[0].id is None  # a literal: answered by value


@pytest.mark.parametrize("model_name", ["local:smollm2", "openai:gpt-4.1-mini", "oracle"])
def test_the_embedder_is_loaded_with_any_model(model_name: str) -> None:
    """It ranks relation lists over the prompt's budget and groups over 70 candidates, whatever scores them."""
    assert get_method("pog").needs(model_name).embedder is True  # type: ignore[attr-defined]
    assert get_method("pog", relation_pruner="llm", entity_pruner="bm25").needs(model_name).embedder is True  # type: ignore[attr-defined]


def test_each_entity_relation_group_is_pruned_on_its_own() -> None:
    """PoG selects entities per (entity, relation): Nolan's films reached by two relations are two groups of three,
    each pruned by its own call (one pooled call before), and each keeps its own best."""
    def both(prompt):  # type: ignore[no-untyped-def]
        return {"relations": [r for r in prompt.options().values() if "director.film" in r or "directed_by" in r]}

    policy = by_step({**BASE, "pog.relations": both, "pog.reason": {"sufficient": False, "answers": []},
                      "pog.reflect": {"action": "stop"}})
    prediction, _, recorder, _ = _run(policy, width=2, depth=1)
    first_round = next(e for e in prediction.trace if e["step"] == "pog.round")
    assert first_round["candidates"] == 3  # the same three films, reached twice
    assert recorder.by_step()["pog.entities"].calls == 2
    assert 2 <= len(first_round["selected"]) <= 4
