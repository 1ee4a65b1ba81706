"""Relation pruning on long lists: the LLM names its top k from a capped list, unreadable replies are replaced by a
similarity scorer (never the KG's alphabetical order), reply budgets reach the model.

The long list is a generated embedded KG: one entity with 200 relations, of which three are about the question and sort
late alphabetically, so "the first k by name" and "the k most similar to the question" differ.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kgqa.errors import ConfigError
from kgqa.kg.base import Direction, Hop
from kgqa.kg.embedded import EmbeddedKG, EmbeddedKGBuilder
from kgqa.llm.prompts import PromptBook, Signature
from kgqa.llm.tokens import approx_tokens
from kgqa.steps.pruning import (
    PruningConfig,
    RelationChoice,
    RelationPruner,
    default_prune_tokens,
    lexical_scores,
)
from kgqa.steps.relations import describe_hop, search_relations
from kgqa.testing import Prompt, budget_cut, context, in_turn, offline_embedder, shared_movie_kg, truncated, unreadable

QUESTION = "Which rivers flow through Vienna?"
RELEVANT = ["geography.city.rivers", "location.location.river_flows", "geography.river_crossing.river"]
STEP = "t.prune"
#: CCoR's relation-pruning prompt, as the steps below are asked it
CCOR_PRUNE = Signature(PromptBook.for_package("kgqa.methods.ccor"), "prune_relations", RelationChoice, STEP)
PROMPT_BUDGET = 1200


def _fillers(n: int) -> list[str]:
    domains = ["aviation", "base", "book", "business", "travel", "education", "film", "music", "people", "sports"]
    kinds = ["thing", "record", "entry"]
    return [f"{domains[i % len(domains)]}.{kinds[i % len(kinds)]}.property_{i:03d}" for i in range(n)]


@pytest.fixture(scope="module")
def wide_kg(tmp_path_factory: pytest.TempPathFactory) -> EmbeddedKG:
    """``m.vienna`` with 200 outgoing relations: 197 fillers and the three of :data:`RELEVANT`."""
    builder = EmbeddedKGBuilder(schema="freebase")
    for i, relation in enumerate([*_fillers(197), *RELEVANT]):
        builder.add_triple("m.vienna", relation, f"m.t{i}")
    builder.add_name("m.vienna", "Vienna")
    return builder.build(Path(tmp_path_factory.mktemp("wide")) / "kg")


@pytest.fixture(scope="module")
def candidates(wide_kg: EmbeddedKG) -> list[Hop]:
    hops = search_relations(wide_kg, ["m.vienna"], ())
    assert len(hops) == 200
    return hops


def relevant_hops() -> set[Hop]:
    return {Hop(r, Direction.OUT) for r in RELEVANT}


def pruner(ctx, **config: object) -> RelationPruner:
    return RelationPruner(PruningConfig(**config), llm=ctx.llm, embedder=ctx.embedder,  # type: ignore[arg-type]
                          signature=CCOR_PRUNE)


def prune(p: RelationPruner, candidates: list[Hop], ctx):
    return p.prune(QUESTION, ["Vienna"], (), candidates, trace=ctx.trace, context="")


def test_the_fixture_separates_alphabetical_from_relevant(candidates: list[Hop]) -> None:
    first_by_name = set(sorted(candidates, key=lambda h: h.relation)[:3])
    assert not first_by_name & relevant_hops()
    scores = lexical_scores(QUESTION, [h.relation for h in candidates])
    top = sorted(range(len(candidates)), key=lambda i: -scores[i])[:3]
    assert {candidates[i] for i in top} == relevant_hops()


@pytest.mark.parametrize("embedder", [None, "hash"])
def test_a_long_list_is_cut_to_the_cap_and_the_named_relations_are_kept_in_order(
        candidates: list[Hop], embedder: str | None) -> None:
    order = ["geography.river_crossing.river", "location.location.river_flows", "geography.city.rivers"]

    def policy(p: Prompt) -> dict:
        listed = set(p.options().values())
        assert len(listed) <= 30 and set(order) <= listed  # the cap, and the prefilter kept the relevant ones
        return {"relations": order}

    ctx, model, _ = context(None, policy, embedder=embedder)
    result = prune(pruner(ctx), candidates, ctx)
    assert not model.policy_errors
    assert result.ok and result.replaced_by is None
    assert [describe_hop(s.hop) for s in result.value or []] == order
    assert [s.score for s in result.value or []] == sorted((s.score for s in result.value or []), reverse=True)
    (event,) = ctx.trace
    assert event["candidates"] == 200 and event["shown"] == 30
    assert event["prefilter"] == ("embedding" if embedder else "lexical")
    assert [k["relation"] for k in event["kept"]] == order


@pytest.mark.parametrize(("embedder", "scorer"), [(None, "lexical"), ("hash", "embedding")])
def test_an_unreadable_reply_twice_fails_and_the_similarity_scorer_replaces_it(
        candidates: list[Hop], embedder: str | None, scorer: str) -> None:
    ctx, _, recorder = context(None, lambda p: in_turn(unreadable(), truncated({"relations": []}, keep=0.3)),
                                   embedder=embedder)
    result = prune(pruner(ctx), candidates, ctx)
    assert recorder.by_step()[STEP].calls == 2  # the prose reply, then the re-ask (cut before anything completed)
    assert not result.ok and result.replaced_by == scorer
    assert "gave no valid RelationChoice" in (result.failure or "") and f"replaced by the {scorer} scorer" in (
        result.failure or "")
    kept = [s.hop for s in result.value or []]
    assert set(kept) == relevant_hops()  # the similarity top 3 ...
    assert kept != sorted(candidates, key=lambda h: h.relation)[:3] and kept != candidates[:3]  # ... not the first by name
    (event,) = ctx.trace
    assert event["failure"] == result.failure and event["fallback"] == scorer
    assert [k["relation"] for k in event["kept"]] == [describe_hop(h) for h in kept]


def test_names_not_on_the_list_are_ignored_and_a_short_choice_is_topped_up(candidates: list[Hop]) -> None:
    hidden = "aviation.thing.property_190"  # a real candidate, but prefiltered away: not on the list shown

    def policy(p: Prompt) -> dict:
        assert hidden not in p.options().values()
        return {"relations": ["film.film.made_up", hidden, "location.location.river_flows", "location.location.river_flows"]}

    ctx, _, _ = context(None, policy)
    result = prune(pruner(ctx), candidates, ctx)
    assert result.ok
    kept = [s.hop.relation for s in result.value or []]
    assert kept[0] == "location.location.river_flows" and len(kept) == 3 and set(kept) == set(RELEVANT)
    (event,) = ctx.trace
    assert event["ignored"] == ["film.film.made_up", hidden]
    assert event["filled"] == 2 and event["filled_by"] == "lexical"

    ctx, _, _ = context(None, {"relations": ["film.film.made_up", hidden]})  # names nothing listed: a failure
    failed = prune(pruner(ctx), candidates, ctx)
    assert not failed.ok and failed.replaced_by == "lexical" and "named none of the 30 listed" in (failed.failure or "")
    assert {s.hop for s in failed.value or []} == relevant_hops()


def test_bare_names_and_list_numbers_are_read_on_the_movie_kg() -> None:
    kg = shared_movie_kg()
    hops = search_relations(kg, ["m.inception"], ())
    # film.director.film is listed only as incoming from a film: the bare name stands for it.
    assert Hop("film.director.film", Direction.IN) in hops and Hop("film.director.film", Direction.OUT) not in hops

    def policy(p: Prompt) -> dict:
        return {"relations": ["film.director.film", str(p.option_number("film.film.starring")), "99"]}

    ctx, _, _ = context(kg, policy)
    p = RelationPruner(PruningConfig(kind="llm", top_k=2), llm=ctx.llm, signature=CCOR_PRUNE)
    result = p.prune("Who directed Inception?", ["Inception"], (), hops, trace=ctx.trace, context="")
    assert result.ok and [s.hop for s in result.value or []] == [Hop("film.director.film", Direction.IN),
                                                                Hop("film.film.starring", Direction.OUT)]
    assert "prefilter" not in ctx.trace[0] and ctx.trace[0]["shown"] == len(hops)  # a short list is shown whole


def test_the_reply_budget_reaches_the_model(candidates: list[Hop]) -> None:
    ctx, model, _ = context(None, lambda p: in_turn(unreadable(), {"relations": RELEVANT}))
    assert prune(pruner(ctx), candidates, ctx).ok
    assert [p.params["max_tokens"] for p in model.history] == [default_prune_tokens(3)] * 2 == [88, 88]

    ctx, model, _ = context(None, {"relations": RELEVANT})
    assert prune(pruner(ctx, max_tokens=40, top_k=2), candidates, ctx).ok
    assert model.history[0].params["max_tokens"] == 40


def test_the_prompt_for_200_candidates_fits_a_small_budget(candidates: list[Hop]) -> None:
    ctx, model, recorder = context(None, {"relations": RELEVANT})
    assert prune(pruner(ctx), candidates, ctx).ok
    tokens = recorder.by_step()[STEP].prompt_tokens
    # The CCoR prompt with its three examples, the JSON schema and 30 listed relations: about 1,100 (approximate)
    # tokens, well inside the 2,048-token context of the smallest local models; listing all 200 would cost more than
    # that for the list alone.
    assert tokens <= PROMPT_BUDGET, tokens
    whole_list = "\n".join(f"{i}. {describe_hop(h)}" for i, h in enumerate(candidates, start=1))
    assert approx_tokens(whole_list) > 1.5 * PROMPT_BUDGET
    assert approx_tokens(model.replies[0]) <= default_prune_tokens(3)  # the reply is short whatever the list length


def test_hybrid_orders_by_the_embedder_and_embedding_asks_no_model(candidates: list[Hop]) -> None:
    ctx, model, _ = context(None, {"relations": RELEVANT[:1]}, embedder=offline_embedder())
    result = prune(pruner(ctx, kind="hybrid", prefilter=5), candidates, ctx)
    assert result.ok and len(model.history[0].options()) == 5 and ctx.trace[0]["prefilter"] == "embedding"

    ctx, _, _ = context(None, None, embedder=offline_embedder())
    by_embedding = RelationPruner(PruningConfig(kind="embedding"), embedder=ctx.embedder, step=STEP)
    ranked = by_embedding.prune(QUESTION, ["Vienna"], (), candidates, trace=ctx.trace)
    assert ranked.ok and {s.hop for s in ranked.value or []} == relevant_hops()


def test_pruning_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="fewer than top_k"):
        PruningConfig(top_k=5, prefilter=3)
    with pytest.raises(ConfigError, match="max_tokens >= 1"):
        PruningConfig(max_tokens=0)
    assert PruningConfig().prefilter == 30 and PruningConfig().reply_tokens == 88


def test_a_reply_cut_off_by_its_budget_keeps_the_relations_it_completed_without_a_re_ask(
        candidates: list[Hop]) -> None:
    cut = budget_cut('{"relations": ["' + '", "'.join(RELEVANT[:2]) + '", "geography.riv')  # finish_reason "length"
    ctx, _, recorder = context(None, lambda p: in_turn(cut, unreadable()), embedder=None)
    result = prune(pruner(ctx), candidates, ctx)
    assert recorder.by_step()[STEP].calls == 1
    assert result.ok and result.replaced_by is None
    assert [describe_hop(s.hop) for s in result.value or []][:2] == RELEVANT[:2]  # the model's, in its order
