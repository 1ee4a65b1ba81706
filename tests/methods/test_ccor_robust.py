"""CCoR on the cases a real model on a Freebase-sized KG meets (issue 10): long value and candidate lists, truncated
sets, errors mid-question, counting, two topic entities, chains that reach nothing, and mediator (CVT) nodes.

Relation pruning is the embedding scorer (the deterministic ``hash`` embedder), so the scripted LLM only judges; each
test states what "the LLM" decides, by step, and asserts what CCoR did with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kgqa.errors import QueryTimeout
from kgqa.kg.base import Direction, Hop, make_literal
from kgqa.kg.embedded import EmbeddedKG, EmbeddedKGBuilder
from kgqa.methods import get_method, solve
from kgqa.testing import XSD_GYEAR, by_step, context, fail, offline_embedder, question, shared_movie_kg

STUDIO = ("m.studio", "Big Studio")


@pytest.fixture(scope="module")
def studio_kg(tmp_path_factory: pytest.TempPathFactory) -> EmbeddedKG:
    """One studio with 120 films, released 1900 + i (film 110 in 2010), in KG order unrelated to the year."""
    b = EmbeddedKGBuilder(schema="freebase")
    b.add_name("m.studio", "Big Studio")
    for i in range(120):
        film = f"m.film{i:03d}"
        b.add_triple("m.studio", "film.production_company.films", film)
        b.add_triple(film, "film.film.initial_release_date", make_literal(str(1900 + i), datatype=XSD_GYEAR))
        b.add_name(film, f"Film {i}")
    return b.build(Path(tmp_path_factory.mktemp("studio")) / "kg")


def run(kg: Any, policy: Any, text: str, *topics: tuple[str, str], method: str = "ccor", **settings: Any):
    ctx, model, recorder = context(kg, policy, embedder=offline_embedder())
    with recorder.scope("q"):
        prediction = solve(get_method(method, pruner="embedding", **settings), question(text, *topics), ctx)
    return prediction, model, recorder.totals("q")


def events(prediction, step: str) -> list[dict]:
    return [e for e in prediction.trace if e["step"] == step]


CONSTRAINED = {
    "ccor.reason": {"chain_status": "incomplete", "answer_space_reached": True, "reason": "a year is missing"},
    "ccor.constraint_init": {"constraint_query": "Which of these films came out in 2010?", "source_position": 1},
}


def test_a_constraint_target_past_the_first_values_is_found_by_its_mention(studio_kg: EmbeddedKG) -> None:
    def judge(p):
        return {"chain_correct": True, "target": p.option_number("2010"), "reason": "the year asked"}

    pred, _, _ = run(studio_kg, by_step({**CONSTRAINED, "ccor.constraint_reason": judge}),
                     "Which film by Big Studio came out in 2010?", STUDIO)
    assert pred.names == ["Film 110"] and pred.grounding == "structured"
    (shown,) = events(pred, "ccor.constraint_options")
    assert shown["recalled"] == 120 and shown["shown"] == 30  # 30 of 120 shown, and 2010 among them


def test_global_entity_filtering_ranks_then_says_how_many_it_showed(studio_kg: EmbeddedKG) -> None:
    policy = by_step({"cor.reason": CONSTRAINED["ccor.reason"],
                      "cor.gef": lambda p: {"keep": [p.option_number("Film 117")]}})
    pred, _, _ = run(studio_kg, policy, "Which of Big Studio's films is Film 117?", STUDIO, method="cor")
    assert pred.names == ["Film 117"] and pred.grounding == "synthesis"  # the 118th candidate in KG order
    (fallback,) = events(pred, "fallback")
    assert fallback["candidates"] == 120 and fallback["shown"] == 50 and fallback["kept"] == 1


def test_the_constraint_filters_all_candidates_even_when_e_cand_was_capped(studio_kg: EmbeddedKG) -> None:
    def judge(p):
        return {"chain_correct": True, "target": p.option_number("2010"), "reason": "the year asked"}

    pred, _, _ = run(studio_kg, by_step({**CONSTRAINED, "ccor.constraint_reason": judge}),
                     "Which film by Big Studio came out in 2010?", STUDIO, max_candidates=10)
    assert events(pred, "main.execute")[0]["truncated"] is True  # E_cand held 10 of 120
    assert pred.names == ["Film 110"]  # film 110 was not among them, and is still found


def test_counting_questions_answer_the_count() -> None:
    policy = by_step({"ccor.reason": {"chain_status": "complete", "reason": "the films"}})
    pred, _, usage = run(shared_movie_kg(), policy, "How many films did Christopher Nolan direct?",
                         ("m.nolan", "Christopher Nolan"))
    assert pred.names == ["3"] and pred.grounding == "structured"
    assert events(pred, "aggregate") == [{"step": "aggregate", "kind": "count", "counted": True, "of": 3,
                                          "capped": False}]
    assert usage.calls == 1  # one judgement, nothing else
    listed, _, _ = run(shared_movie_kg(), policy, "Which films did Christopher Nolan direct?",
                       ("m.nolan", "Christopher Nolan"))
    assert sorted(listed.names) == ["Inception", "Interstellar", "Memento"]


class FlakyKG:
    """The movie KG whose ``run_chain`` times out from the ``fail_at``-th call on (an injected fault)."""

    def __init__(self, inner: Any, fail_at: int) -> None:
        self.inner, self.fail_at, self.calls = inner, fail_at, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def run_chain(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls >= self.fail_at:
            raise QueryTimeout("the endpoint did not answer within 30 s")
        return self.inner.run_chain(*args, **kwargs)


def test_kg_timeouts_and_llm_errors_mid_question_go_to_the_second_fallback_layer() -> None:
    policy = by_step({"ccor.reason": {"chain_status": "incomplete", "answer_space_reached": False, "reason": "go on"},
                      "ccor.generate": {"reasoning": "from memory", "answers": ["Inception"]}})
    pred, _, _ = run(FlakyKG(shared_movie_kg(), fail_at=3), policy, "Which films did Christopher Nolan direct?",
                     ("m.nolan", "Christopher Nolan"))
    assert pred.error is None and pred.names == ["Inception"] and pred.grounding == "parametric"
    (fallback,) = events(pred, "fallback")
    assert fallback["layer"] == 2 and "QueryTimeout" in fallback["cause"]

    dead = by_step({"ccor.reason": fail("connection refused"),
                    "ccor.generate": {"reasoning": "", "answers": ["Inception"]}})
    pred, _, _ = run(shared_movie_kg(), dead, "Which films did Christopher Nolan direct?",
                     ("m.nolan", "Christopher Nolan"))
    assert pred.names == ["Inception"] and "LLMError" in events(pred, "fallback")[0]["cause"]


def test_two_topics_chain_from_one_and_the_other_is_the_constraint_target() -> None:
    def judge_main(p):
        chain = next(line for line in p.user.splitlines() if line.startswith("Current main chain:"))
        if chain.endswith("film.director.film"):
            return {"chain_status": "incomplete", "answer_space_reached": True, "reason": "an actor is asked"}
        return {"chain_status": "inconsistent", "reason": "not about films"}

    def judge_constraint(p):
        if p.option_number("Leonardo DiCaprio") == 1:  # the other topic entity is listed first
            return {"chain_correct": True, "target": 1, "reason": "the actor asked"}
        return {"chain_correct": True, "target": None, "reason": "go on"}

    policy = by_step({"ccor.reason": judge_main, "ccor.constraint_reason": judge_constraint,
                      "ccor.constraint_init": {"constraint_query": "Which of these films starred Leonardo DiCaprio?",
                                               "source_position": 1}})
    pred, _, _ = run(shared_movie_kg(), policy, "Which film directed by Christopher Nolan starred Leonardo DiCaprio?",
                     ("m.nolan", "Christopher Nolan"), ("m.dicaprio", "Leonardo DiCaprio"))
    assert pred.names == ["Inception"] and pred.grounding == "structured"
    assert [e["topics"] for e in events(pred, "start")] == [["m.nolan", "m.dicaprio"]]
    assert {e["topic"] for e in events(pred, "main.execute")} == {"m.nolan"}  # chains start from one topic


def test_when_the_first_topic_gives_no_chain_the_next_one_is_tried() -> None:
    def judge(p):
        chain = next(line for line in p.user.splitlines() if line.startswith("Current main chain:"))
        ok = chain.startswith("Current main chain: [Martin Scorsese] -> film.director.film")
        return {"chain_status": "complete" if ok else "inconsistent", "reason": "scripted"}

    pred, _, _ = run(shared_movie_kg(), by_step({"ccor.reason": judge}), "Films by Nolan or Scorsese?",
                     ("m.nolan", "Christopher Nolan"), ("m.scorsese", "Martin Scorsese"))
    assert pred.names == ["Shutter Island"]
    assert [e["topic"] for e in events(pred, "main.execute")] == ["m.scorsese"]


def test_a_chain_that_reaches_nothing_costs_no_model_call() -> None:
    ccor = get_method("ccor", pruner="embedding")
    ctx, model, _ = context(shared_movie_kg(), lambda p: {"chain_status": "complete"}, embedder=offline_embedder())
    judgement = ccor._judge_main(question("?"), ["m.nolan"], ["Christopher Nolan"],  # type: ignore[attr-defined]
                                 (Hop("film.film.directed_by", Direction.OUT),), 0, ctx)
    assert judgement.action.value == "backtrack" and model.calls == 0


def test_mediator_nodes_are_gone_through_never_answered() -> None:
    def judge(p):  # a careless judge: every chain is complete
        return {"chain_status": "complete", "reason": "looks complete"}

    pred, _, _ = run(shared_movie_kg(), by_step({"ccor.reason": judge}), "Who starred in Inception?",
                     ("m.inception", "Inception"), top_k=1)
    assert pred.answers and not any((a.id or "").startswith("m.cvt") for a in pred.answers)
    assert all(a.name for a in pred.answers)
    first, second = events(pred, "main.decision")[:2]
    assert first["chain"] == "film.film.starring" and first["action"] == "forward"  # the judge said complete
    assert "nameless mediator" in first["reason"]
    assert second["chain"].startswith("film.film.starring,film.performance.") and pred.grounding == "structured"


def test_the_iteration_budget_running_out_is_a_main_chain_failure() -> None:
    policy = by_step({"ccor.reason": {"chain_status": "incomplete", "answer_space_reached": False, "reason": "go on"},
                      "ccor.generate": {"reasoning": "", "answers": ["Memento"]}})
    pred, _, usage = run(shared_movie_kg(), policy, "Which films did Christopher Nolan direct?",
                         ("m.nolan", "Christopher Nolan"), max_iterations=2)
    (fallback,) = events(pred, "fallback")
    assert fallback["layer"] == 2 and "iteration budget of 2 spent" in fallback["cause"]
    decisions = events(pred, "main.decision")
    assert len(decisions) == 2 and decisions[1]["reason"] == "the chain leads back to the topic entity"
    assert usage.calls == 2  # one judgement (the walk back was rejected for free) and the direct generation


def test_without_backtracking_one_rejected_branch_ends_the_exploration() -> None:
    policy = by_step({"ccor.reason": {"chain_status": "inconsistent", "reason": "wrong way"},
                      "ccor.generate": {"reasoning": "", "answers": ["Memento"]}})
    pred, _, usage = run(shared_movie_kg(), policy, "Which films did Christopher Nolan direct?",
                         ("m.nolan", "Christopher Nolan"), backtracking=False)
    assert "backtracking is off" in events(pred, "fallback")[0]["cause"] and usage.calls == 2
    _, _, more = run(shared_movie_kg(), policy, "Which films did Christopher Nolan direct?",
                         ("m.nolan", "Christopher Nolan"))
    assert more.calls > usage.calls  # with backtracking every waiting branch is judged before giving up


def test_constraint_call_totals_are_exact(studio_kg: EmbeddedKG) -> None:
    def judge(p):
        return {"chain_correct": True, "target": p.option_number("2010"), "reason": "the year asked"}

    _, _, usage = run(studio_kg, by_step({**CONSTRAINED, "ccor.constraint_reason": judge}),
                      "Which film by Big Studio came out in 2010?", STUDIO)
    assert usage.calls == 3  # main judgement, constraint initialisation, constraint judgement


def test_a_chain_that_walks_back_to_its_topic_costs_no_model_call() -> None:
    ccor = get_method("ccor", pruner="embedding")
    ctx, model, _ = context(shared_movie_kg(), lambda p: {"chain_status": "complete"}, embedder=offline_embedder())
    back = (Hop("film.film.starring", Direction.OUT), Hop("film.film.starring", Direction.IN))  # film -> CVT -> film
    judgement = ccor._judge_main(question("?"), ["m.memento"], ["Memento"], back, 0, ctx)  # type: ignore[attr-defined]
    assert judgement.action.value == "backtrack" and "back to the topic" in judgement.reason and model.calls == 0


def test_the_topic_is_not_its_own_answer_nor_counted() -> None:
    ccor = get_method("ccor", pruner="embedding")
    ctx, _, _ = context(shared_movie_kg(), None)
    co_stars = (Hop("film.performance.actor", Direction.IN), Hop("film.film.starring", Direction.IN),
                Hop("film.film.starring", Direction.OUT), Hop("film.performance.actor", Direction.OUT))
    reached = ["m.dicaprio", "m.page"]  # DiCaprio's films' actors: himself included
    who = ccor._structured(question("Who starred with Leonardo DiCaprio?"), ctx, ["m.dicaprio"], co_stars,  # type: ignore[attr-defined]
                           None, reached)
    assert who.names == ["Elliot Page"]
    many = ccor._structured(question("How many actors starred with Leonardo DiCaprio?"), ctx,  # type: ignore[attr-defined]
                            ["m.dicaprio"], co_stars, None, reached)
    assert many.names == ["1"]
    alone = ccor._structured(question("Who is Leonardo DiCaprio?"), ctx, ["m.dicaprio"], co_stars,  # type: ignore[attr-defined]
                             None, ["m.dicaprio"])
    assert alone.names == ["Leonardo DiCaprio"]  # all it reaches: kept


def test_how_many_over_values_answers_the_values() -> None:
    ccor = get_method("ccor", pruner="embedding")
    ctx, _, _ = context(shared_movie_kg(), None)
    populations = [make_literal("2148000"), make_literal("2,161,000")]
    pred = ccor._structured(question("How many people live in Paris?"), ctx, ["m.paris"],  # type: ignore[attr-defined]
                            (Hop("location.statistical_region.population", Direction.OUT),), None, populations)
    assert pred.names == ["2148000", "2,161,000"]
    (aggregate,) = events_of(ctx.trace, "aggregate")
    assert aggregate["counted"] is False and "2 numeric" in aggregate["reason"]


def events_of(trace: list[dict], step: str) -> list[dict]:
    return [e for e in trace if e["step"] == step]


def test_the_main_judges_verdicts_become_audits_the_harness_scores() -> None:
    """A judge that calls the first chain complete is measured: right when the chain reaches the answer, wrong when not."""
    from kgqa.eval.metrics import score_prediction
    from kgqa.methods import get_method, solve
    from kgqa.testing import by_step, context, question, shared_movie_kg

    policy = by_step({"ccor.prune": {"relations": ["film.director.film"]},
                      "ccor.reason": {"chain_status": "complete", "reason": "done"}})
    ctx, _, _ = context(shared_movie_kg(), policy)
    right = question("Which films did Christopher Nolan direct?", ("m.nolan", "Christopher Nolan"),
                     answers=[("m.inception", "Inception")])
    prediction = solve(get_method("ccor", pruner="llm", top_k=1), right, ctx)
    judged = [e for e in prediction.trace if e["step"] == "main.judge_audit"]
    assert len(prediction.audits) == len(judged) == 1 and isinstance(judged[0]["nodes"], int)
    assert score_prediction(right, prediction).audits["ccor.judge"]["tp"] == 1
    wrong = question("Where was Christopher Nolan born?", ("m.nolan", "Christopher Nolan"),
                     answers=[("m.london", "London")])
    ctx, _, _ = context(shared_movie_kg(), policy)
    assert score_prediction(wrong, solve(get_method("ccor", pruner="llm", top_k=1), wrong, ctx)).audits[
        "ccor.judge"]["fp"] == 1
