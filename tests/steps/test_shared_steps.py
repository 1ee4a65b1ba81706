"""The shared steps, each on the real movie KG with a scripted LLM: they say when they failed, never default silently."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgqa.core import AnswerItem
from kgqa.errors import ConfigError
from kgqa.kg.base import Direction, Hop
from kgqa.llm.prompts import PromptBook, Signature
from kgqa.steps.answers import FilterChoice, answer_items, chain_evidence, choose_candidates
from kgqa.steps.entities import Candidate, EntityPruner, EntityScores
from kgqa.steps.explore import Action, Judgement, RelationExplorer
from kgqa.steps.pruning import PruningConfig, RelationChoice, RelationPruner, resolve_pruner
from kgqa.steps.relations import search_relations
from kgqa.steps.reply import StepResult, ask_reply
from kgqa.testing import context, in_turn, offline_embedder, shared_movie_kg, truncated, unreadable

PROMPTS = PromptBook.from_string('''
[pick]
system = "Pick."
user = "Question: {question}\\nCandidates:\\n{candidates}"
[prune_relations]
system = "Score relations."
user = "Question: {question}\\nChain: {chain}\\n{context}\\nCandidates:\\n{candidates}\\nKeep {top_k}."
[prune_entities]
system = "Score entities."
user = "Question: {question}\\nCandidates:\\n{candidates}\\nKeep {top_k}."
''')

DIRECTED = Hop("film.director.film", Direction.OUT)


def signature(prompt: str, reply: type, step: str) -> Signature:
    return Signature(PROMPTS, prompt, reply, step)


ENTITY_SCORES = Signature(PROMPTS, "prune_entities", EntityScores, "prune_entities")


def test_ask_reply_succeeds_after_a_reask_and_fails_with_its_reason() -> None:

    ctx, _, recorder = context(shared_movie_kg(), lambda p: in_turn(truncated({"keep": [2]}), {"keep": [2]}))
    with recorder.scope("q"):
        result = ask_reply(ctx.llm, signature("pick", FilterChoice, "t.pick"), question="?", candidates="1. a")
    assert result.ok and result.value == FilterChoice(keep=[2]) and result.failure is None
    assert recorder.totals("q").calls == 2  # the cut reply, then the re-ask

    ctx, _, _ = context(shared_movie_kg(), lambda p: unreadable())
    failed = ask_reply(ctx.llm, signature("pick", FilterChoice, "t.pick"), question="?", candidates="1. a")
    assert not failed.ok and failed.value is None and "gave no valid FilterChoice for step 't.pick'" in (failed.failure or "")
    with pytest.raises(ValueError, match=r"step failed: .* gave no valid FilterChoice"):
        failed.unwrap()
    assert StepResult.success(3).unwrap() == 3


def test_relation_pruning_reports_an_unreadable_reply_and_what_replaced_it() -> None:
    kg = shared_movie_kg()
    candidates = search_relations(kg, ["m.nolan"], ())
    ctx, _, _ = context(kg, lambda p: unreadable())
    pruner = RelationPruner(PruningConfig(kind="llm", top_k=2), llm=ctx.llm,
                            signature=signature("prune_relations", RelationChoice, "t.prune"))
    result = pruner.prune("what films did Nolan direct?", ["Christopher Nolan"], (), candidates, trace=ctx.trace,
                          context="")
    assert not result.ok and "gave no valid RelationChoice" in (result.failure or "")
    assert result.replaced_by == "lexical"  # no embedder here: the word-overlap scorer, never the KG's order
    assert (result.value or [])[0].hop == DIRECTED
    (event,) = ctx.trace
    assert event["failure"] == result.failure and event["fallback"] == "lexical"

    ctx, _, _ = context(kg, lambda p: {"relations": ["film.director.film"]})
    pruner = RelationPruner(PruningConfig(kind="llm", top_k=1), llm=ctx.llm,
                            signature=signature("prune_relations", RelationChoice, "t.prune"))
    good = pruner.prune("what did Nolan direct?", ["Christopher Nolan"], (), candidates, context="")
    assert good.ok and [s.hop for s in good.value or []] == [DIRECTED]


def test_auto_pruner_is_embedding_for_local_models_only() -> None:
    assert resolve_pruner("auto", "local:smollm2") == "embedding"
    assert resolve_pruner("auto", "openai:gpt-4.1-mini") == "llm"
    assert resolve_pruner("hybrid", "local:smollm2") == "hybrid"
    with pytest.raises(ConfigError, match="not one of auto, llm, embedding, hybrid"):
        resolve_pruner("magic", None)


def test_entity_pruning_keeps_named_candidates_and_reports_nameless_ones() -> None:
    kg = shared_movie_kg()
    ids = ["m.inception", "m.memento", "m.cvt1", "m.interstellar"]
    names = kg.names(ids)
    candidates = [Candidate(i, names.get(i)) for i in ids]
    ctx, _, _ = context(kg, None, embedder=offline_embedder())
    pruner = EntityPruner("embedding", top_k=2, embedder=ctx.embedder)
    result = pruner.prune("Inception", candidates, trace=ctx.trace)
    assert result.ok and [e.id for e in result.value or []][:1] == ["m.inception"] and len(result.value or []) == 2
    assert ctx.trace[0]["nameless"] == 1 and all(k["id"] != "m.cvt1" for k in ctx.trace[0]["kept"])

    ctx, _, _ = context(kg, lambda p: {"scores": [{"id": p.option_number("Memento"), "score": 1.0}]})
    by_llm = EntityPruner("llm", top_k=1, llm=ctx.llm, signature=ENTITY_SCORES).prune("the 2000 one", candidates)
    assert by_llm.ok and [e.name for e in by_llm.value or []] == ["Memento"]

    ctx, _, _ = context(kg, lambda p: unreadable())
    failed = EntityPruner("llm", top_k=1, llm=ctx.llm, signature=ENTITY_SCORES).prune("?", candidates, trace=ctx.trace)
    assert not failed.ok and ctx.trace[-1]["fallback"] == "given order"
    with pytest.raises(ConfigError, match="needs an embedder"):
        EntityPruner("embedding", top_k=1)

    bm25 = EntityPruner("bm25", top_k=3).prune("the film Memento from 2000", candidates, trace=ctx.trace)
    assert bm25.ok and (bm25.value or [])[0].name == "Memento" and (bm25.value or [])[0].score == 1.0
    assert all(e.score == 0.0 for e in (bm25.value or [])[1:])  # no word of the question in the other names

    ctx, model, _ = context(kg, lambda p: {"scores": [{"id": 1, "score": 1.0}]})
    EntityPruner("llm", top_k=1, llm=ctx.llm, signature=ENTITY_SCORES, max_tokens=40, temperature=0.4,
                 seed=7).prune("?", candidates)
    assert model.history[0].params == {"max_tokens": 40, "temperature": 0.4, "seed": 7}


def test_answer_items_evidence_and_candidate_choice() -> None:
    kg = shared_movie_kg()
    chain = (DIRECTED, Hop("film.film.initial_release_date", Direction.OUT))
    years = kg.run_chain(["m.nolan"], chain).entities
    items = answer_items(kg, ["m.inception", *years[:1]])
    assert items[0] == AnswerItem(id="m.inception", name="Inception")
    assert items[1].id is None and items[1].name in {"2010", "2014", "2000"}  # a literal has a value, not an id
    evidence = chain_evidence(kg, ["m.nolan"], (DIRECTED,), ["m.memento"])
    assert evidence == [["m.nolan", "film.director.film", "m.memento"]]

    films = kg.run_chain(["m.nolan"], (DIRECTED,)).entities
    ctx, _, _ = context(kg, lambda p: {"keep": [p.option_number("Memento"), 99]})
    chosen = choose_candidates(ctx.llm, signature("pick", FilterChoice, "t.pick"), "Which one is from 2000?", films,
                               kg.names(films), max_shown=10)
    assert chosen.ok and chosen.value is not None and chosen.value.kept == ["m.memento"]  # 99 is not on the list
    assert chosen.value.shown == chosen.value.offered == 3


def test_explorer_backtracks_then_stops_on_the_chain_the_judge_accepts() -> None:
    kg = shared_movie_kg()
    ctx, _, _ = context(kg, None, embedder=offline_embedder())
    pruner = RelationPruner(PruningConfig(kind="embedding", top_k=3), embedder=ctx.embedder, step="t.prune")
    explorer = RelationExplorer(kg, pruner, topics=["m.nolan"], max_depth=2, max_iterations=10, trace=ctx.trace,
                                label="main")
    judged: list[str] = []

    def judge(chain, waiting):
        judged.append(",".join(str(h) for h in chain))
        return Judgement(Action.STOP if chain == (DIRECTED,) else Action.BACKTRACK, "scripted")

    outcome = explorer.run("which films did Christopher Nolan direct", ["Christopher Nolan"], judge)
    assert outcome.chain == (DIRECTED,) and outcome.failure is None
    assert judged[-1] == "film.director.film"
    assert [e["action"] for e in ctx.trace if e["step"] == "main.decision"][-1] == "stop"

    never = RelationExplorer(kg, pruner, topics=["m.nolan"], max_depth=1, max_iterations=2, trace=ctx.trace,
                             label="main").run("?", ["Christopher Nolan"], lambda c, w: Judgement(Action.BACKTRACK))
    assert never.chain is None and never.failure in ("iteration budget of 2 spent", "every branch was explored or discarded")


def test_a_walk_steps_back_to_siblings_unless_the_kg_names_reverses(tmp_path: Path) -> None:
    from kgqa.steps.walks import WalkPath, back_hop_to_skip, entity_hops, walks_back
    from kgqa.testing.movies import small_kg

    triples = [("memento", "directed_by", "nolan"), ("inception", "directed_by", "nolan")]
    generic = small_kg(tmp_path / "generic", triples)
    freebase = small_kg(tmp_path / "freebase", [("m.memento", "film.film.directed_by", "m.nolan"),
                                                ("m.nolan", "film.director.film", "m.memento")], schema="freebase")
    back = Hop("directed_by", Direction.IN)
    path = WalkPath.start("memento").extend(Hop("directed_by"), "nolan")
    # MetaQA-like: no named reverse, so "films by the same director" needs the step back along directed_by
    assert walks_back(generic, "auto") and back_hop_to_skip(generic, path, "auto") is None
    assert back in entity_hops(generic, "nolan", exclude=back_hop_to_skip(generic, path, "auto"))
    assert back not in entity_hops(generic, "nolan", exclude=back_hop_to_skip(generic, path, "never"))
    # Freebase names the reverse (film.director.film): the step back is dropped, as the reference code drops it
    fb_path = WalkPath.start("m.memento").extend(Hop("film.film.directed_by"), "m.nolan")
    assert not walks_back(freebase, "auto") and walks_back(freebase, "always")
    assert back_hop_to_skip(freebase, fb_path, "auto") == Hop("film.film.directed_by", Direction.IN)
