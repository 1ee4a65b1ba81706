"""The relation pruner's token budget (ToG, PoG): the whole list is shown while its listing fits the budget, the
embedder's best-first prefix that fits above it, the whole list when there is no embedder (word overlap never cuts a
budgeted list); ``fill`` and ``replace_failed`` off use the model's choice as it is; zero-scored candidates dropped."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgqa.errors import ConfigError
from kgqa.kg.base import Direction, Hop
from kgqa.kg.embedded import EmbeddedKG, EmbeddedKGBuilder
from kgqa.llm.prompts import PromptBook, Signature
from kgqa.steps.pruning import (
    PruningConfig,
    RelationChoice,
    RelationPruner,
    drop_zero_scored,
    listing_tokens,
)
from kgqa.steps.relations import search_relations
from kgqa.testing import Prompt, context, unreadable

QUESTION = "Which rivers flow through Vienna?"
RELEVANT = ["geography.city.rivers", "location.location.river_flows", "geography.river_crossing.river"]
TOG_PRUNE = Signature(PromptBook.for_package("kgqa.methods.tog"), "prune_relations", RelationChoice, "t.prune")


@pytest.fixture(scope="module")
def candidates(tmp_path_factory: pytest.TempPathFactory) -> list[Hop]:
    """200 outgoing relations of ``m.vienna``: 197 fillers and the three of :data:`RELEVANT`, last."""
    builder = EmbeddedKGBuilder(schema="freebase")
    fillers = [f"base.thing.property_{i:03d}" for i in range(197)]
    for i, relation in enumerate([*fillers, *RELEVANT]):
        builder.add_triple("m.vienna", relation, f"m.t{i}")
    builder.add_name("m.vienna", "Vienna")
    kg: EmbeddedKG = builder.build(Path(tmp_path_factory.mktemp("wide")) / "kg")
    hops = search_relations(kg, ["m.vienna"], ())
    assert len(hops) == 200
    return hops


def _listed(model) -> list[str]:  # type: ignore[no-untyped-def]
    (prompt,) = model.prompts("t.prune")
    return list(prompt.options().values())


def _prune(candidates: list[Hop], embedder: str | None, policy, **config: object):  # type: ignore[no-untyped-def]
    ctx, model, _ = context(None, policy, embedder=embedder)
    pruner = RelationPruner(PruningConfig(**config), llm=ctx.llm, embedder=ctx.embedder,  # type: ignore[arg-type]
                            signature=TOG_PRUNE)
    result = pruner.prune(QUESTION, ["Vienna"], (), candidates, trace=ctx.trace, entity="Vienna")
    (event,) = ctx.trace
    return result, event, model


def _first(p: Prompt) -> dict:
    return {"relations": [p.options()[1]]}


def test_a_list_that_fits_the_budget_is_shown_whole_where_the_count_cap_cut_it(candidates: list[Hop]) -> None:
    assert 2000 < listing_tokens(candidates) < 4000  # about 13 tokens a relation
    _, event, model = _prune(candidates, "hash", _first, budget=4000)
    assert len(_listed(model)) == 200 and "prefilter" not in event and event["budget"] == 4000
    _, event, model = _prune(candidates, "hash", _first)  # no budget: the count cap, as CCoR, CoR, SRP, VoG
    assert len(_listed(model)) == 30 and event["prefilter"] == "embedding"


def test_over_the_budget_the_embedders_best_first_prefix_that_fits_is_shown(candidates: list[Hop]) -> None:
    _, event, model = _prune(candidates, "hash", _first, budget=300, top_k=3)
    listed = _listed(model)
    assert 3 <= len(listed) < 200 and event["prefilter"] == "embedding" and event["shown"] == len(listed)
    shown = [h for h in candidates if h.relation in set(listed)]
    assert listing_tokens(shown) <= 300 < listing_tokens(candidates)
    # a budget too small for even k relations still shows k
    _, _, model = _prune(candidates, "hash", _first, budget=5, top_k=3)
    assert len(_listed(model)) == 3


def test_without_an_embedder_a_list_over_the_budget_is_shown_whole_never_cut_by_word_overlap(
        candidates: list[Hop]) -> None:
    _, event, model = _prune(candidates, None, _first, budget=300)
    assert len(_listed(model)) == 200
    assert event["over_budget"] == listing_tokens(candidates) and "prefilter" not in event


def test_under_a_budget_without_an_embedder_nothing_stands_in_for_the_model(candidates: list[Hop]) -> None:
    """Word overlap never fills or replaces a budgeted pruner's reply (it did before, standing in for the embedder)."""
    one = {"relations": ["geography.city.rivers"]}
    result, event, _ = _prune(candidates, None, lambda p: one, budget=4000)
    assert [s.hop for s in result.value or []] == [Hop("geography.city.rivers", Direction.OUT)] and "filled" not in event
    result, event, _ = _prune(candidates, None, lambda p: {"relations": []}, budget=4000)
    assert result.ok and result.value == [] and event["none_named"] and "fallback" not in event
    result, event, _ = _prune(candidates, "hash", lambda p: {"relations": []}, budget=4000)
    assert not result.ok and result.replaced_by == "embedding" and len(result.value or []) == 3


def test_without_fill_and_replacement_the_models_choice_is_used_as_it_is(candidates: list[Hop]) -> None:
    one = {"relations": ["geography.city.rivers"]}
    result, event, _ = _prune(candidates, "hash", lambda p: one, budget=4000, fill=False, replace_failed=False)
    assert [s.hop for s in result.value or []] == [Hop("geography.city.rivers", Direction.OUT)]
    assert result.ok and "filled" not in event
    result, event, _ = _prune(candidates, "hash", lambda p: {"relations": ["no.such.relation"]}, budget=4000,
                              fill=False, replace_failed=False)
    assert result.ok and result.value == [] and event["none_named"] and "fallback" not in event
    result, event, _ = _prune(candidates, "hash", lambda p: unreadable(), budget=4000, fill=False,
                              replace_failed=False)
    assert not result.ok and result.value == [] and result.replaced_by is None
    assert event["kept"] == [] and "no relation kept" in event["failure"]
    # the default still tops up and replaces (CCoR keeps k branches)
    result, event, _ = _prune(candidates, "hash", lambda p: one)
    assert len(result.value or []) == 3 and event["filled"] == 2


def test_a_budget_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="budget"):
        PruningConfig(budget=0)


def test_zero_scored_candidates_are_dropped_in_order() -> None:
    items = [("m.a", 0.5), ("m.b", 0.0), ("m.c", 0.2), ("m.d", 0.0)]
    assert drop_zero_scored("t.zero", items, score=lambda x: x[1], node=lambda x: x[0]) == [("m.a", 0.5), ("m.c", 0.2)]
