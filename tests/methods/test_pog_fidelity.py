"""PoG's exploration as its code runs it (issue 50): every relation listed to the model, which chooses as few as the
question needs (no fixed breadth, no top-up); entities scored zero dropped; only the hop back along the edge a path came
by left out, so a node seen before is reachable again; a dead end answered from the triples gathered; the depth bounds
the rounds, going back included."""

from __future__ import annotations

import re
from pathlib import Path

from kgqa.core import Grounding
from kgqa.kg.embedded import EmbeddedKG, EmbeddedKGBuilder
from kgqa.methods import get_method, solve
from kgqa.testing import by_step, context, question, shared_movie_kg, small_kg

NOLAN = ("m.nolan", "Christopher Nolan")
HUB = ("m.hub", "The Hub")
GOLD = "film.film.music"
#: shares no word with the question, and sorts after every filler: a word-overlap cut at 30 in KG order drops it
QUESTION = "Who wrote the soundtrack of The Hub?"


def wide_kg(path: Path, fillers: int = 40) -> EmbeddedKG:
    """``m.hub`` with ``fillers`` award relations and the gold ``film.film.music`` to Hans Zimmer."""
    builder = EmbeddedKGBuilder(schema="freebase")
    builder.add_name("m.hub", "The Hub")
    for i in range(fillers):
        builder.add_triple("m.hub", f"award.thing.property_{i:03d}", f"m.t{i}")
        builder.add_name(f"m.t{i}", f"Thing {i}")
    builder.add_triple("m.hub", GOLD, "m.zimmer")
    builder.add_name("m.zimmer", "Hans Zimmer")
    return builder.build(path)


def _entity_of(prompt) -> str:  # type: ignore[no-untyped-def]
    return re.search(r"^Entity: (.+)$", prompt.request, re.M).group(1)  # type: ignore[union-attr]


BASE = {
    "pog.decompose": {"subobjectives": ["Find what the question asks"]},
    "pog.memory": {"solved": [], "known": ""},
    "pog.reflect": {"action": "continue", "entities": []},
    "pog.reason": {"sufficient": False, "answers": [], "reason": "not yet"},
    "pog.answer": {"reasoning": "from the triples", "answers": []},
    "pog.generate": {"reasoning": "from memory", "answers": ["Guess"]},
    "pog.entities": lambda p: {"scores": [{"id": n, "score": round(1 - n / 100, 2)} for n in p.options()]},
}


def _run(policy, text, topic, kg=None, embedder="hash", **settings):  # type: ignore[no-untyped-def]
    ctx, model, recorder = context(kg or shared_movie_kg(), by_step({**BASE, **policy}), embedder=embedder)
    method = get_method("pog", relation_pruner="llm", entity_pruner="llm", **settings)
    prediction = solve(method, question(text, topic), ctx, recorder=recorder)
    return prediction, model, recorder


def _events(prediction, step: str) -> list[dict]:  # type: ignore[no-untyped-def]
    return [e for e in prediction.trace if e["step"] == step]


def test_every_relation_of_a_wide_entity_is_listed_to_the_model(tmp_path: Path) -> None:
    policy = {"pog.relations": {"relations": [GOLD]},
              "pog.reason": {"sufficient": True, "answers": ["Hans Zimmer"], "reason": "he scored it"}}
    prediction, model, _ = _run(policy, QUESTION, HUB, kg=wide_kg(tmp_path / "kg"))
    (listed,) = [list(p.options().values()) for p in model.prompts("pog.relations")]
    assert len(listed) == 41 and GOLD in listed  # a cut at 30 by word overlap lost the gold relation
    assert prediction.names == ["Hans Zimmer"]


def test_the_model_chooses_how_many_relations_and_its_choice_is_used_as_it_is() -> None:
    """PoG asks for as few relations as possible: one named is one explored (kgqa topped it up to 3), four named are
    four explored (kgqa cut them to 3)."""
    def kept(reply: dict) -> list[str]:
        prediction, model, _ = _run({"pog.relations": reply}, "Which films did Christopher Nolan direct?", NOLAN,
                                    depth=1)
        prompts.append(model.prompts("pog.relations")[0].request)
        return [k["relation"] for k in _events(prediction, "pog.relations")[0]["kept"]]

    prompts: list[str] = []

    assert kept({"relations": ["film.director.film"]}) == ["film.director.film"]
    four = ["film.director.film", "film.film.directed_by (incoming)", "people.person.nationality",
            "award.award_winner.awards_won"]
    assert kept({"relations": four}) == four
    assert all("as few as possible" in p for p in prompts)


def test_entities_scored_zero_are_not_selected_even_when_there_is_room() -> None:
    def one_film(prompt):  # type: ignore[no-untyped-def]
        return {"scores": [{"id": n, "score": float(name == "Inception")} for n, name in prompt.options().items()]}

    prediction, _, _ = _run({"pog.relations": {"relations": ["film.director.film"]}, "pog.entities": one_film},
                            "Which film by Christopher Nolan came out in 2010?", NOLAN, width=2, depth=1)
    (first,) = _events(prediction, "pog.round")
    assert first["selected"] == ["(Christopher Nolan, film.director.film, Inception)"]  # not a zero-scored second film


def _zimmer_kg(path: Path):  # type: ignore[no-untyped-def]
    triples = [("m.nolan", "film.director.film", "m.tdk"), ("m.tdk", "film.film.directed_by", "m.nolan"),
               ("m.nolan", "people.person.collaborator", "m.zimmer"), ("m.tdk", "film.film.music", "m.zimmer"),
               ("m.tdk", "film.film.initial_release_date", "m.y2008")]
    names = {"m.nolan": "Christopher Nolan", "m.tdk": "The Dark Knight", "m.zimmer": "Hans Zimmer", "m.y2008": "2008"}
    return small_kg(path, tuple(triples), names, schema="freebase")


def test_a_node_seen_before_is_reached_again_and_only_the_hop_back_is_left_out(tmp_path: Path) -> None:
    """Round 1 selects Hans Zimmer (a collaborator) and The Dark Knight; round 2 reaches Hans Zimmer again from the
    film. PoG's code leaves out only the relation a path came by; kgqa left out every node seen."""
    offered: dict[str, list[str]] = {}

    def relations(prompt):  # type: ignore[no-untyped-def]
        entity = _entity_of(prompt)
        offered[entity] = list(prompt.options().values())
        if entity == "Christopher Nolan":
            return {"relations": ["film.director.film", "people.person.collaborator"]}
        return {"relations": ["film.film.music"]} if entity == "The Dark Knight" else {"relations": []}

    def reason(prompt):  # type: ignore[no-untyped-def]
        if "(The Dark Knight, film.film.music, Hans Zimmer)" in prompt.request:
            return {"sufficient": True, "answers": ["Hans Zimmer"], "reason": "he scored the film"}
        return {"sufficient": False, "answers": [], "reason": "the film's composer is not known yet"}

    prediction, _, _ = _run({"pog.relations": relations, "pog.reason": reason},
                            "Who composed the music of a film Christopher Nolan directed?", NOLAN,
                            kg=_zimmer_kg(tmp_path / "kg"), embedder=None)  # no stand-in for Hans Zimmer's empty choice
    rounds = _events(prediction, "pog.round")
    assert "(Christopher Nolan, people.person.collaborator, Hans Zimmer)" in rounds[0]["selected"]
    assert rounds[1]["selected"] == ["(The Dark Knight, film.film.music, Hans Zimmer)"]
    assert prediction.names == ["Hans Zimmer"] and prediction.grounding is Grounding.SYNTHESIS
    # At the film, every relation but the one it was reached by, backwards (Freebase names its reverse instead).
    assert "film.director.film (incoming)" not in offered["The Dark Knight"]
    assert {"film.film.music", "film.film.directed_by", "film.film.initial_release_date"} <= set(
        offered["The Dark Knight"])


def test_a_dead_end_is_answered_from_the_triples_gathered() -> None:
    """Round 1 reaches Memento's release year; a year opens no hop, so round 2 has nothing to explore: PoG's half stop
    asks for the answer with the triples gathered (kgqa went back and then answered without them)."""
    policy = {"pog.relations": {"relations": ["film.film.initial_release_date"]},
              "pog.answer": {"reasoning": "Memento came out in 2000.", "answers": ["2000"]}}
    prediction, model, recorder = _run(policy, "When did Memento come out?", ("m.memento", "Memento"))
    assert [e["round"] for e in _events(prediction, "pog.dead_end")] == [2]
    assert "(Memento, film.film.initial_release_date, 2000)" in model.prompts("pog.answer")[0].request
    assert prediction.names == ["2000"] and prediction.grounding is Grounding.SYNTHESIS
    assert "pog.generate" not in recorder.by_step()
    assert _events(prediction, "pog.answer")[0]["cause"] == "no candidate entity left in round 2"


def test_the_depth_bounds_the_rounds_and_going_back_takes_none_beyond_it() -> None:
    def relations(prompt):  # type: ignore[no-untyped-def]
        return {"relations": ["film.director.film"] if _entity_of(prompt) == "Christopher Nolan" else
                ["film.film.starring"]}

    def back(prompt):  # type: ignore[no-untyped-def]
        earlier = re.findall(r"^(B\d+)\. ", prompt.request, re.M)
        return {"action": "backtrack", "entities": earlier[:1]} if earlier else {"action": "continue"}

    prediction, _, recorder = _run({"pog.relations": relations, "pog.reflect": back},
                                   "Who starred in films by Christopher Nolan?", NOLAN, depth=2, width=1)
    assert len(_events(prediction, "pog.round")) == 2  # a backtrack once sent kgqa on for up to 8 rounds
    assert recorder.by_step()["pog.reflect"].calls == 1  # none after the last round: its choice could not be explored
    fallback = _events(prediction, "fallback")
    assert fallback and fallback[0]["cause"] == "depth 2 exhausted without sufficient knowledge"
