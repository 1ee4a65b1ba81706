"""kgqa.testing: the movie KG is the real store the CCoR tests use, the policy model scripts good and bad replies through
the real structured-output path, and the accounting per step is exact."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path

import numpy as np
import pytest
from pydantic import BaseModel

from kgqa.core import MethodContext, Prediction, Question
from kgqa.kg import parse_chain
from kgqa.kg.base import Direction, make_literal
from kgqa.kg.embedded import EmbeddedKG
from kgqa.llm import LLMError, RecordedModel, Recorder
from kgqa.llm.structured import StructuredOutputError, ask_json, extract_json
from kgqa.llm.tokens import approx_prompt_tokens, approx_tokens
from kgqa.testing import (
    XSD_GYEAR,
    PolicyError,
    PolicyModel,
    Prompt,
    by_step,
    context,
    fail,
    fenced,
    in_turn,
    movie_kg,
    offline_embedder,
    question,
    script,
    shared_movie_kg,
    truncated,
    unreadable,
)


class Pick(BaseModel):
    relation: str


def ask(text: str = "Pick a relation.", system: str = "You pick relations.") -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": text}]


# -- the movie KG ------------------------------------------------------------------------------------------------------


def test_movie_kg_is_a_real_store_with_cvts_literals_and_a_distractor(tmp_path: Path) -> None:
    kg = movie_kg(tmp_path / "kg")
    assert isinstance(kg, EmbeddedKG)
    actors = kg.run_chain(["m.nolan"], parse_chain("film.director.film,film.film.starring,film.performance.actor"))
    assert sorted(kg.names(actors.entities).values()) == [
        "Elliot Page", "Guy Pearce", "Leonardo DiCaprio", "Matthew McConaughey"]
    assert kg.names(["m.cvt1", "m.inception"]) == {"m.cvt1": None, "m.inception": "Inception"}  # CVTs are nameless
    assert kg.neighbors("m.shutter", "film.film.initial_release_date") == [make_literal("2010", datatype=XSD_GYEAR)]
    assert kg.relations("m.nolan", Direction.OUT) == [
        "award.award_winner.awards_won", "film.director.film", "people.person.nationality"]
    assert kg.neighbors("m.cvt_award", "award.award_honor.year") == [make_literal("2024", datatype=XSD_GYEAR)]
    assert kg.neighbors("m.dicaprio", "people.person.nationality") == ["m.us"]


def test_shared_movie_kg_is_built_once_per_process() -> None:
    kg = shared_movie_kg()
    assert kg is shared_movie_kg()
    assert kg.has_entity("m.scorsese") and kg.stats().triples == movie_kg_triples()


def movie_kg_triples() -> int:
    # 4 directed_by pairs (8) + 4 years + 5 performances (15) + 3 nationalities + 2 award triples
    return 8 + 4 + 15 + 3 + 2


# -- the prompt a policy sees ------------------------------------------------------------------------------------------


def test_the_prompt_shows_messages_step_schema_and_options() -> None:
    seen: list[Prompt] = []

    def policy(p: Prompt) -> dict:
        seen.append(p)
        return {"relation": p.options()[2]}

    model = PolicyModel(policy)
    listing = "Which relation leads to the films?\n1. people.person.nationality\n2. film.director.film"
    result = ask_json(model, ask(listing), Pick, step="prune", temperature=0.2)
    assert result == Pick(relation="film.director.film")
    p = seen[0]
    assert p.step == "prune" and p.index == 0 and p.attempt == 0
    assert p.schema is not None and p.schema_name == "Pick" and "relation" in p.schema["properties"]
    assert p.system.startswith("You pick relations.") and "JSON schema" in p.system  # ask_json's instruction
    assert p.user == listing and p.options() == {1: "people.person.nationality", 2: "film.director.film"}
    assert p.option_number("film.director.film") == 2 and p.option_number("nope") is None
    assert "Which relation" in p and "not there" not in p
    assert p.params["temperature"] == 0.2 and "step" not in p.params
    assert model.history == [p] and model.replies == ['{"relation": "film.director.film"}']


def test_the_step_comes_from_the_call_or_the_enclosing_recorder_step() -> None:
    recorder = Recorder()
    model = PolicyModel("ok")
    llm = RecordedModel(model, recorder)
    llm.chat(ask(), step="explicit")
    with recorder.step("enclosing"):
        llm.chat(ask())
        llm.chat(ask(), step="wins")  # a call's own step wins, as in the recorder
    llm.chat(ask())
    asyncio.run(llm.achat(ask(), step="async"))
    assert model.steps() == ["explicit", "enclosing", "wins", None, "async"]
    assert [r.step for r in recorder.calls()] == model.steps()
    assert [p.index for p in model.prompts()] == [0, 1, 2, 3, 4] and model.calls == 5


def test_replies_of_every_kind_become_text() -> None:
    model = PolicyModel(script("plain", {"a": [1, "é"]}, [1, 2], Pick(relation="r"), 3, fenced({"relation": "x"})))
    texts = [model.chat(ask()).text for _ in range(6)]
    assert texts[:5] == ["plain", '{"a": [1, "é"]}', "[1, 2]", '{"relation": "r"}', "3"]
    assert extract_json(texts[5]) == {"relation": "x"} and texts[5].startswith("Here is my answer:\n```json")
    # with a schema asked for, the completion carries the parsed JSON as a JSON-mode backend's does
    assert PolicyModel({"relation": "r"}).chat(ask(), schema=Pick).json == {"relation": "r"}
    assert PolicyModel("not json").chat(ask(), schema=Pick).json is None


# -- bad replies through the real structured-output path ---------------------------------------------------------------


@pytest.mark.parametrize("bad", [unreadable(), truncated({"relation": "film.director.film"})],
                         ids=["unreadable", "truncated"])
def test_ask_json_reasks_after_a_bad_reply_and_succeeds_on_the_second(bad: str) -> None:
    with pytest.raises(StructuredOutputError):
        extract_json(bad)
    ctx, model, recorder = context(None, lambda p: in_turn(bad, {"relation": "film.director.film"}))
    assert ask_json(ctx.llm, ask(), Pick, step="pick") == Pick(relation="film.director.film")
    first, second = model.prompts("pick")
    assert (first.attempt, second.attempt) == (0, 1)
    assert second.messages[-2] == {"role": "assistant", "content": bad}  # the bad reply is shown back
    assert second.user.startswith("That reply was not valid:") and second.request == first.user == first.request
    totals = recorder.by_step()["pick"]
    assert totals.calls == 2 and totals.retries == 0
    assert totals.prompt_tokens == approx_prompt_tokens(first.messages) + approx_prompt_tokens(second.messages)
    assert totals.completion_tokens == approx_tokens(bad) + approx_tokens('{"relation": "film.director.film"}')


def test_two_bad_replies_exhaust_the_reask() -> None:
    ctx, model, recorder = context(None, in_turn(unreadable(), truncated({"relation": "r"}, keep=0.3)))
    with pytest.raises(StructuredOutputError, match="after one re-ask"):
        ask_json(ctx.llm, ask(), Pick, step="pick")
    assert recorder.by_step()["pick"].calls == 2 and model.replies[1] == '{"rel'


def test_truncated_cuts_strictly_inside_and_is_checked() -> None:
    text = json.dumps({"relation": "film.director.film"})
    assert truncated({"relation": "film.director.film"}) == text[:len(text) // 2]
    assert truncated("abcd", keep=0.99) == "abc" and truncated(Pick(relation="r"), keep=0.5) == '{"relati'
    with pytest.raises(ValueError):
        truncated("x")
    with pytest.raises(ValueError):
        truncated("abc", keep=1.0)
    with pytest.raises(ValueError, match="no JSON"):
        unreadable('{"a": 1}')


def test_fail_raises_the_llm_error_of_a_dead_backend_and_is_recorded() -> None:
    refused = ConnectionError("connection refused")
    ctx, model, recorder = context(None, script({"relation": "r"}, fail(refused, retries=3), fail("HTTP 503")))
    assert ask_json(ctx.llm, ask(), Pick, step="first") == Pick(relation="r")
    with pytest.raises(LLMError, match="ConnectionError: connection refused") as caught:
        ask_json(ctx.llm, ask(), Pick, step="second")
    assert caught.value.__cause__ is refused and caught.value.retries == 3
    with pytest.raises(LLMError, match="HTTP 503"):
        ctx.llm.chat(ask(), step="third")
    failed = recorder.calls()[1]
    assert (failed.step, failed.prompt_tokens, failed.completion_tokens, failed.retries) == ("second", 0, 0, 3)
    assert failed.error is not None and "connection refused" in failed.error
    assert recorder.totals().calls == 3 and isinstance(model.replies[1], LLMError)
    assert fail(caught.value) is caught.value


# -- whole policies ----------------------------------------------------------------------------------------------------


def test_script_serves_in_call_order_and_says_when_it_runs_out() -> None:
    model = PolicyModel(script("a", "b"))
    assert [model.chat(ask()).text for _ in range(2)] == ["a", "b"]
    with pytest.raises(PolicyError, match="the script has 2 replies; call 3"):
        model.chat(ask(), step="late")
    assert len(model.policy_errors) == 1
    repeating = PolicyModel(script("a", "b", repeat_last=True))
    assert [repeating.chat(ask()).text for _ in range(3)] == ["a", "b", "b"]


def test_by_step_dispatches_on_the_label_with_sub_policies() -> None:
    policy = by_step({"prune": {"scores": []}, "judge": lambda p: {"ok": "Inception" in p}}, default="fallback")
    model = PolicyModel(policy)
    assert model.chat(ask(), step="prune").text == '{"scores": []}'
    assert model.chat(ask("Is Inception right?"), step="judge").text == '{"ok": true}'
    assert model.chat(ask(), step="other").text == "fallback"
    strict = PolicyModel(by_step({"prune": "x"}))
    with pytest.raises(PolicyError, match="no reply for step 'judge'"):
        strict.chat(ask(), step="judge")


def test_a_policy_that_returns_nothing_or_asserts_is_a_policy_error_even_if_swallowed() -> None:
    def careless(p: Prompt) -> None:
        assert "expected" in p.user, "unexpected prompt"

    model = PolicyModel(careless)
    with pytest.raises(PolicyError, match="returned NoneType for step 's'"):
        model.chat(ask("expected"), step="s")
    with contextlib.suppress(Exception):  # a method that swallows every exception still leaves the evidence
        model.chat(ask("surprise"))
    assert [type(e) for e in model.policy_errors] == [PolicyError, AssertionError]


# -- the context -------------------------------------------------------------------------------------------------------


def test_context_wires_kg_recorded_model_and_offline_embedder() -> None:
    kg = shared_movie_kg()
    ctx, model, recorder = context(kg, "fine", embedder="hash", seed=7)
    assert isinstance(ctx, MethodContext) and ctx.kg is kg and ctx.seed == 7 and ctx.recorder is recorder
    assert isinstance(ctx.llm, RecordedModel) and ctx.llm.inner is model
    assert ctx.embedder is not None and ctx.embedder.name == offline_embedder().name == "hash256"
    a, b = ctx.embedder.embed(["Christopher Nolan"]), offline_embedder().embed(["Christopher Nolan"])
    assert np.array_equal(a, b)  # deterministic, no model download
    ctx.llm.chat(ask(), step="x")
    assert recorder.by_step()["x"].calls == 1 and model.calls == 1
    graph_only, unused, _ = context(kg, None)
    assert graph_only.llm is None and graph_only.embedder is None
    with pytest.raises(PolicyError, match="gave no policy"):
        unused.chat(ask())
    shared = PolicyModel("same")
    assert context(kg, shared)[1] is shared


def test_question_builds_topics_and_answers() -> None:
    q = question("Who directed Inception?", ("m.inception", "Inception"), answers=["Christopher Nolan",
                 ("m.nolan", "Christopher Nolan")], qid="q7", hops=1)
    assert isinstance(q, Question) and q.id == "q7" and q.topic_ids == ["m.inception"]
    assert q.gold_names == ["Christopher Nolan", "Christopher Nolan"] and q.answers[1].id == "m.nolan"
    assert q.metadata == {"hops": 1}


# -- a new method's test, in about ten lines ---------------------------------------------------------------------------


class OneHop:
    """A throwaway method: the LLM picks one relation out of the topic (via ask_json); the KG answers."""

    name = "one-hop"

    def answer(self, q: Question, ctx: MethodContext) -> Prediction:
        topic = q.topic_ids[0]
        options = ctx.kg.relations(topic)
        listing = "\n".join(f"{i}. {r}" for i, r in enumerate(options, start=1))
        pick = ask_json(ctx.llm, ask(f"Question: {q.text}\n{listing}"), Pick, step="one-hop.pick")
        ctx.trace.add("pick", relation=pick.relation)
        found = ctx.kg.run_chain([topic], parse_chain(pick.relation)).entities
        names = ctx.kg.names(found)
        return Prediction(answers=[(e, names[e] or e) for e in found], grounding="structured")


def test_a_new_method_test_is_about_ten_lines() -> None:
    def policy(p: Prompt) -> object:
        assert p.step == "one-hop.pick" and p.option_number("film.director.film") is not None
        return in_turn(truncated({"relation": "film.director.film"}), {"relation": "film.director.film"})

    ctx, model, recorder = context(shared_movie_kg(), policy, embedder="hash")
    pred = OneHop().answer(question("What did Christopher Nolan direct?", ("m.nolan", "Christopher Nolan")), ctx)
    assert sorted(pred.names) == ["Inception", "Interstellar", "Memento"] and pred.grounding == "structured"
    assert recorder.by_step()["one-hop.pick"].calls == 2 and model.prompts()[1].attempt == 1
    assert ctx.trace.steps() == ["pick"] and not model.policy_errors
