"""``chains`` on the kit's movie KG with the tiny scorer trained in tests/methods/conftest.py: the scorer steers and
stops the main chain without a model call, a failed verification backtracks through the memory stack, the call budget
holds when a constraint needs the LLM, and the LLM options fall back to CCoR's pruner and judge.

Only the LLM is scripted (a :class:`PolicyModel`); the KG is a real store and the scorer a real trained network.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kgqa.methods import get_method, solve
from kgqa.testing import by_step, context, offline_embedder, question, shared_movie_kg

NOLAN = ("m.nolan", "Christopher Nolan")
NOLANS_FILMS = {"film.director.film", "^film.film.directed_by"}


@pytest.fixture(autouse=True)
def one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def chains(scorer: Path, **settings: object):
    # The policy model is not a local model, so decompose=auto would ask it for sub-goals: off unless a test asks.
    settings.setdefault("decompose", "off")
    return get_method("chains", scorer=str(scorer), **settings)


def events(prediction, step: str) -> list[dict]:
    return [e for e in prediction.trace if e.get("step") == step]


def test_the_scorer_prunes_and_stops_the_main_chain_without_a_model_call(kit_scorer_dir: Path) -> None:
    kg = shared_movie_kg()
    ctx, model, recorder = context(kg, by_step({}), embedder=offline_embedder(64))  # any call would fail the policy
    pred = solve(chains(kit_scorer_dir), question("Which films did Christopher Nolan direct?", NOLAN), ctx)
    assert pred.error is None and pred.grounding == "structured"
    assert sorted(pred.names) == ["Inception", "Interstellar", "Memento"]
    assert model.calls == 0 and recorder.totals().calls == 0
    (prune, *_) = events(pred, "chains.prune")
    # the kit KG holds both directions of directing: either relation is the director's films
    assert prune["scorer"] == "foresight"
    assert prune["kept"][0]["relation"] in {"film.director.film", "film.film.directed_by (incoming)"}
    hops = events(pred, "chains.hop")
    assert hops[-1]["chain"] in NOLANS_FILMS and hops[-1]["action"] == "stop"
    assert hops[-1]["here"] >= hops[-1]["beyond"]
    for h, r, t in pred.evidence:  # the answers' chain triples are KG triples
        assert t in kg.neighbors(h, r)
    explanation = get_method("chains", scorer=str(kit_scorer_dir)).explain(pred)
    assert explanation.fields["main_chain"] == hops[-1]["chain"]
    assert any(line.startswith(f"hop {hops[-1]['chain']}: arrival") for line in explanation.lines)


def test_a_failed_verification_backtracks_to_the_next_chain_on_the_stack(kit_scorer_dir: Path) -> None:
    kg = shared_movie_kg()
    policy = by_step({"chains.generate": {"reasoning": "from memory", "answers": ["Inception"]}})
    ctx, model, _ = context(kg, policy, embedder=offline_embedder(64))
    # No hop can score 1.0 against its sub-goal: every judged chain fails verification and is dropped
    pred = solve(chains(kit_scorer_dir, verify_threshold=1.0), question("Which films did Christopher Nolan direct?",
                                                                         NOLAN), ctx)
    hops = events(pred, "chains.hop")
    decisions = events(pred, "main.decision")
    assert len(hops) >= 2 and all(h["action"] == "backtrack" for h in hops)
    assert all(d["reason"].startswith("verification:") for d in decisions)
    assert [d["chain"] for d in decisions] == [h["chain"] for h in hops]  # each popped from the memory stack in turn
    assert decisions[0]["waiting"] >= 1  # the first mismatch left other chains waiting, and they were judged next
    (fallback,) = events(pred, "fallback")
    assert fallback["layer"] == 2 and "every branch was explored or discarded" in fallback["cause"]
    assert pred.grounding == "parametric" and pred.names == ["Inception"] and model.calls == 1
    # the same question with verification off answers from the KG
    ctx, _, _ = context(kg, by_step({}), embedder=offline_embedder(64))
    assert solve(chains(kit_scorer_dir, verify=False), question("Which films did Christopher Nolan direct?", NOLAN),
                 ctx).grounding == "structured"


def test_a_sub_goal_from_the_decomposition_is_what_each_hop_is_verified_against(kit_scorer_dir: Path) -> None:
    kg = shared_movie_kg()
    goals = ["Which films did Christopher Nolan direct?"]
    ctx, model, _ = context(kg, by_step({"chains.decompose": {"sub_questions": goals}}), embedder=offline_embedder(64))
    pred = solve(chains(kit_scorer_dir, decompose="on"), question("Which films did Christopher Nolan direct?", NOLAN),
                 ctx)
    assert model.calls == 1
    assert events(pred, "chains.decompose")[0]["sub_goals"] == goals
    assert all(h["sub_goal"] == goals[0] for h in events(pred, "chains.hop"))


def test_a_second_topic_makes_a_constraint_and_the_call_budget_holds(kit_scorer_dir: Path) -> None:
    kg = shared_movie_kg()
    text = "Which films directed by Christopher Nolan star Leonardo DiCaprio?"
    # The constraint chain needs the LLM; it may spend only one call here, then the main chain's candidates answer.
    policy = by_step({"chains.constraint_init": {"constraint_query": "Which of these films star Leonardo DiCaprio?",
                                                 "source_position": 1}})
    ctx, model, _ = context(kg, policy, embedder=offline_embedder(64))
    pred = solve(chains(kit_scorer_dir, max_calls=1, mention_constraint=False),
                 question(text, NOLAN, ("m.dicaprio", "Leonardo DiCaprio")), ctx)
    assert model.calls == 1
    assert any(h["action"] == "constraint" for h in events(pred, "chains.hop"))
    assert events(pred, "chains.constraint_unchecked")
    assert pred.grounding == "structured" and "Inception" in pred.names


def test_a_plain_question_is_never_sent_to_the_constraint_chain(kit_scorer_dir: Path) -> None:
    kg = shared_movie_kg()
    ctx, model, _ = context(kg, by_step({}), embedder=offline_embedder(64))
    pred = solve(chains(kit_scorer_dir), question("Who directed Shutter Island?", ("m.shutter", "Shutter Island")), ctx)
    assert model.calls == 0 and pred.names == ["Martin Scorsese"]
    assert all(h["action"] != "constraint" for h in events(pred, "chains.hop"))


def test_the_llm_options_use_ccors_pruner_and_judge(kit_scorer_dir: Path) -> None:
    kg = shared_movie_kg()
    policy = by_step({"chains.prune": {"relations": ["film.director.film"]},
                      "chains.reason": {"chain_status": "complete", "answer_space_reached": None, "reason": "films"}})
    ctx, _, recorder = context(kg, policy, embedder=offline_embedder(64))
    pred = solve(chains(kit_scorer_dir, steering="llm", judge="llm", pruner="llm"),
                 question("Which films did Christopher Nolan direct?", NOLAN), ctx)
    assert sorted(pred.names) == ["Inception", "Interstellar", "Memento"]
    steps = recorder.by_step()
    assert steps["chains.prune"].calls == 1 and steps["chains.reason"].calls == 1
    assert not events(pred, "chains.hop")  # the scorer judged nothing


def test_a_second_topic_is_checked_on_the_graph_before_the_llm_is_asked(kit_scorer_dir: Path) -> None:
    kg = shared_movie_kg()
    ctx, model, _ = context(kg, by_step({}), embedder=offline_embedder(64))  # any call would fail the policy
    pred = solve(chains(kit_scorer_dir), question("Which films directed by Christopher Nolan star Leonardo DiCaprio?",
                                                  NOLAN, ("m.dicaprio", "Leonardo DiCaprio")), ctx)
    assert model.calls == 0
    (check,) = events(pred, "chains.mention_constraint")
    assert check["kept"] < check["of"]
    assert pred.grounding == "structured" and pred.names == ["Inception"]


def test_every_chains_prompt_shows_worked_examples_and_its_judges_reason_first() -> None:
    import json

    from kgqa.methods.chains.method import Chains

    for signature in Chains.signatures:
        assert 3 <= len(signature.examples) <= 5, signature.prompt
        for example in signature.examples:
            last = example.strip().splitlines()[-1]
            reply = json.loads(last[last.index("{"):])
            signature.reply.model_validate(reply)
            if signature.prompt in ("main_reasoning", "constraint_reasoning"):
                assert next(iter(reply)) == "reason"


def test_answer_types_must_name_a_model_directory(tmp_path: Path) -> None:
    from kgqa.errors import ConfigError
    from kgqa.steps.foresight.answer_types import bundled_model

    with pytest.raises((ConfigError, ValueError), match="not an answer-type model directory"):
        get_method("chains", answer_types=str(tmp_path))
    assert bundled_model(tmp_path) is None and bundled_model(None) is None
    (tmp_path / "answer_types").mkdir()
    (tmp_path / "answer_types" / "answer_types.json").write_text("{}")
    assert bundled_model(tmp_path) == tmp_path / "answer_types"


def test_a_local_model_is_not_asked_for_an_answer_from_memory(kit_scorer_dir: Path) -> None:
    """direct_generation=auto: the last fallback runs with a remote model only; a local one's remembered answers are
    invented names, so the question ends with none and the trace says why."""
    from kgqa.testing import PolicyModel

    kg = shared_movie_kg()
    model = PolicyModel(by_step({"chains.generate": {"reasoning": "from memory", "answers": ["Inception"]}}))
    model.name = "local:smollm2"
    ctx, _, _ = context(kg, model, embedder=offline_embedder(64))
    pred = solve(chains(kit_scorer_dir, verify_threshold=1.0), question("Which films did Christopher Nolan direct?",
                                                                         NOLAN), ctx)
    (fallback,) = events(pred, "fallback")
    assert fallback["stage"] == "direct_generation" and "skipped: direct_generation=auto" in fallback["cause"]
    assert pred.names == [] and model.calls == 0
    # asked for, it runs with the local model too
    ctx, _, _ = context(kg, model, embedder=offline_embedder(64))
    pred = solve(chains(kit_scorer_dir, verify_threshold=1.0, direct_generation="on"),
                 question("Which films did Christopher Nolan direct?", NOLAN), ctx)
    assert pred.names == ["Inception"] and model.calls == 1
