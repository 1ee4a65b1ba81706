"""ToG's relation exploration as its code runs it (issue 50): the model is shown every relation of an entity (the
embedder ranks a list only above the prompt's token budget, word overlap never cuts it) and its choice is used as it
is (no top-up to the width); a reply that names no listed relation is replaced by the embedder's best, never by word
overlap."""

from __future__ import annotations

from pathlib import Path

from kgqa.kg.embedded import EmbeddedKG, EmbeddedKGBuilder
from kgqa.methods import get_method, solve
from kgqa.testing import by_step, context, question, shared_movie_kg

HUB = ("m.hub", "The Hub")
GOLD = "film.film.music"
#: shares no word with the question, and sorts after every filler: a word-overlap cut at 30 in KG order drops it
QUESTION = "Who wrote the soundtrack of The Hub?"
NOLAN = ("m.nolan", "Christopher Nolan")


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


def _listed(model) -> list[list[str]]:  # type: ignore[no-untyped-def]
    return [list(p.options().values()) for p in model.prompts("tog.relations")]


ZIMMER = by_step({
    "tog.relations": lambda p: {"relations": [GOLD if GOLD in p.options().values() else p.options()[1]]},
    "tog.reason": {"sufficient": True, "answers": ["Hans Zimmer"], "reason": "he scored it"},
})


def test_every_relation_of_a_wide_entity_is_listed_to_the_model(tmp_path: Path) -> None:
    ctx, model, _ = context(wide_kg(tmp_path / "kg"), ZIMMER, embedder="hash")
    prediction = solve(get_method("tog", relation_pruner="llm", entity_pruner="llm"), question(QUESTION, HUB), ctx)
    (listed,) = _listed(model)
    assert len(listed) == 41 and GOLD in listed  # a cut at 30 by word overlap lost the gold relation
    assert prediction.names == ["Hans Zimmer"]
    event = next(e for e in prediction.trace if e["step"] == "tog.relations")
    assert "prefilter" not in event and event["budget"] == 2000


def test_over_the_budget_the_embedder_ranks_the_list_and_cuts_it_to_what_fits(tmp_path: Path) -> None:
    ctx, model, _ = context(wide_kg(tmp_path / "kg"), ZIMMER, embedder="hash")
    method = get_method("tog", relation_pruner="llm", entity_pruner="llm", relation_budget=100)
    prediction = solve(method, question(QUESTION, HUB), ctx)
    (listed,) = _listed(model)
    assert 3 <= len(listed) < 41
    event = next(e for e in prediction.trace if e["step"] == "tog.relations")
    assert event["prefilter"] == "embedding" and event["shown"] == len(listed)


def test_without_an_embedder_a_list_over_the_budget_is_shown_whole_never_cut_by_word_overlap(tmp_path: Path) -> None:
    ctx, model, _ = context(wide_kg(tmp_path / "kg"), ZIMMER, embedder=None)
    method = get_method("tog", relation_pruner="llm", entity_pruner="llm", relation_budget=100)
    prediction = solve(method, question(QUESTION, HUB), ctx)
    (listed,) = _listed(model)
    assert len(listed) == 41 and GOLD in listed
    event = next(e for e in prediction.trace if e["step"] == "tog.relations")
    assert event["over_budget"] > 100 and "prefilter" not in event


def _films_only_policy(reply: dict) -> object:
    return by_step({
        "tog.relations": reply,
        "tog.entities": lambda p: {"scores": [{"id": n, "score": 0.5} for n in p.options()]},
        "tog.reason": {"sufficient": False, "answers": [], "reason": "not yet"},
        "tog.answer": {"reasoning": "from the triples", "answers": []},
        "tog.generate": {"reasoning": "from memory", "answers": ["Somebody"]},
    })


def test_fewer_relations_named_than_the_width_are_used_as_they_are() -> None:
    """ToG's code explores the relations the model names; kgqa used to top them up to the width by similarity."""
    ctx, _, _ = context(shared_movie_kg(), _films_only_policy({"relations": ["film.director.film"]}), embedder="hash")
    prediction = solve(get_method("tog", relation_pruner="llm", entity_pruner="llm", width=3, depth=1),
                       question("Which films did Christopher Nolan direct?", NOLAN), ctx)
    event = next(e for e in prediction.trace if e["step"] == "tog.relations")
    assert [k["relation"] for k in event["kept"]] == ["film.director.film"] and "filled" not in event
    assert {e["relation"] for e in prediction.trace if e["step"] == "tog.neighbours"} == {"film.director.film"}


def test_a_reply_that_names_no_listed_relation_is_replaced_by_the_embedder_never_by_word_overlap() -> None:
    """ToG's code keeps no relation there; kgqa lets the embedder's best stand in (a named departure), and without an
    embedder the entity opens no branch, as in ToG's code (word overlap, which stood in before, never does)."""
    def run(embedder: str | None):  # type: ignore[no-untyped-def]
        ctx, _, recorder = context(shared_movie_kg(), _films_only_policy({"relations": ["film.film.sequel"]}),
                                   embedder=embedder)
        prediction = solve(get_method("tog", relation_pruner="llm", entity_pruner="llm", depth=1),
                           question("Which films did Christopher Nolan direct?", NOLAN), ctx, recorder=recorder)
        return prediction, next(e for e in prediction.trace if e["step"] == "tog.relations"), recorder

    prediction, event, _ = run("hash")
    assert event["fallback"] == "embedding" and len(event["kept"]) == 3
    assert [e for e in prediction.trace if e["step"] == "tog.neighbours"]
    prediction, event, recorder = run(None)
    assert event["kept"] == [] and event["none_named"] and "fallback" not in event
    assert not [e for e in prediction.trace if e["step"] == "tog.neighbours"]
    assert recorder.by_step()["tog.relations"].calls == 1 and "tog.entities" not in recorder.by_step()
    assert prediction.names == ["Somebody"]  # no triple gathered: the model answers alone
