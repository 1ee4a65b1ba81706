"""FoG's LLM mode after issue 50, on the kit's movie KG with the tiny scorer trained in the test (as test_fog.py):
absorbed triples are not expanded again and the walk goes on from the memory's entities; the model's answer comes
first and the graph reader is a counted fallback (the trace names it, summary.json counts it); the prompts' worked
examples. Only the LLM is scripted (a :class:`PolicyModel` reading the rendered prompts).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from kgqa.kg.embedded import EmbeddedKG
from kgqa.methods import solve
from kgqa.methods.fog import FoG
from kgqa.steps.foresight.scorer import ForesightScorer
from kgqa.testing import Prompt, by_step, context, offline_embedder, question, shared_movie_kg

NOLAN = ("m.nolan", "Christopher Nolan")
FILMS_OF_NOLAN = "Which films did Christopher Nolan direct?"


@pytest.fixture(autouse=True)
def one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def kg() -> EmbeddedKG:
    return shared_movie_kg()


@pytest.fixture(scope="module")
def scorer_dir(kit_scorer_dir: Path) -> Path:
    return kit_scorer_dir


def sections(prompt: Prompt) -> tuple[list[str], list[str]]:
    """The memory and candidate triples a memory-manager prompt showed, one line each."""
    text = prompt.request
    memory = text.split("Memory:\n", 1)[1].split("\nCandidates:\n", 1)[0]
    candidates = text.split("\nCandidates:\n", 1)[1].split("\nReply as", 1)[0]
    return ([] if memory == "(none)" else memory.splitlines()), ([] if candidates == "(none)" else candidates.splitlines())


def numbered(prompt: Prompt) -> dict[int, str]:
    """The numbered candidates of a memory-manager prompt (selection=index): number -> triple as shown."""
    _, lines = sections(prompt)
    return {int(line.split(". ", 1)[0]): line.split(". ", 1)[1] for line in lines}


def film_of(line: str) -> str:
    """The film of a shown (Nolan, directed, film) triple, either way round."""
    h, _, t = (part.strip() for part in line.strip("()").split(", "))
    return t if h == NOLAN[1] else h


def events(prediction, step: str) -> list[dict]:
    return [e for e in prediction.trace if e.get("step") == step]


CAST_OF_NOLAN = "Which actors starred in films directed by Christopher Nolan?"


def test_an_expansion_leaves_absorbed_triples_out_and_walks_on_from_where_they_end(kg: EmbeddedKG,
                                                                                   scorer_dir: Path) -> None:
    from kgqa.steps.foresight.graph import expand
    from kgqa.steps.foresight.scorer import LabelVectors

    scorer = ForesightScorer.load(scorer_dir)
    labels = LabelVectors(kg, offline_embedder(64))
    score = scorer.scorer_for(labels, scorer.questions(labels, [CAST_OF_NOLAN]))
    absorbed = ("m.nolan", "film.director.film", "m.inception")
    masked = ("m.inception", "film.film.directed_by", "m.nolan")  # the other way to Inception, rejected
    onward = ("m.inception", "film.film.starring", "m.cvt1")
    whole = expand(kg, ["m.nolan"], score, hops=3, tau_e=0.0)
    assert absorbed in whole.triples and onward in whole.triples
    # absorbed and masked: neither is scored or kept, and without a start nothing beyond Inception is reached
    cut_off = expand(kg, ["m.nolan"], score, hops=3, tau_e=0.0, skip={masked}, absorbed={absorbed})
    assert absorbed not in cut_off.triples and onward not in cut_off.triples
    assert cut_off.cut["absorbed_triples"] == 1 and cut_off.cut["masked_triples"] == 1
    # the memory's end as a start at the depth it was reached: the walk goes on from it, the absorbed triple unwalked
    resumed = expand(kg, ["m.nolan"], score, hops=3, tau_e=0.0, skip={masked}, absorbed={absorbed},
                     starts={"m.inception": 1})
    assert absorbed not in resumed.triples and onward in resumed.triples
    assert set(cut_off.triples) < set(resumed.triples)  # what the start adds lies beyond Inception
    inception = resumed.find("m.inception", 1)
    assert inception is not None and resumed.node_depth[inception] == 1
    onward_layers = {resumed.edge_layer[e] for e in range(len(resumed)) if resumed.near[e] == inception}
    assert onward_layers == {2}  # the scorer reads Inception's triples at the layer the first round reached them
    # a layer with nothing left to expand does not end the walk while a memory end waits deeper: everything at the
    # topic absorbed or masked, the walk goes on from the performance the memory reached at depth 2
    at_topic = {t for t in whole.triples if "m.nolan" in (t[0], t[2])}
    performance = ("m.inception", "film.film.starring", "m.cvt1")
    deeper = expand(kg, ["m.nolan"], score, hops=3, tau_e=0.0, skip=at_topic - {absorbed},
                    absorbed={absorbed, performance}, starts={"m.cvt1": 2})
    assert {(t, deeper.edge_layer[e]) for e, t in enumerate(deeper.triples)} == {
        (("m.cvt1", "film.performance.actor", "m.dicaprio"), 3), (("m.cvt1", "film.performance.character", "m.cobb"), 3)}


def test_the_memory_manager_does_not_expand_absorbed_triples_again(kg: EmbeddedKG, scorer_dir: Path) -> None:
    kept: list[str] = []

    def memory(prompt: Prompt) -> dict:
        held, _ = sections(prompt)
        shown = numbered(prompt)
        if not held:  # round 1: keep one film triple, ask on
            number = next(n for n, line in shown.items() if "directed_by" in line or "director.film" in line)
            kept.append(shown[number])
            return {"selected_triplets": [number], "predict_answer": [], "subsequent_question": ["Who acted in it?"]}
        assert held == kept and kept[0] not in shown.values()
        return {"selected_triplets": [], "predict_answer": [], "subsequent_question": []}

    policy = by_step({"fog.decompose": {"sub_questions": [CAST_OF_NOLAN]}, "fog.memory": memory})
    ctx, model, _ = context(kg, policy, embedder=offline_embedder(64))
    method = FoG(mode="llm", scorer=str(scorer_dir), hops=3, tau_e=0.0, tau_p=0.0, max_potential=4, rounds=2)
    pred = solve(method, question(CAST_OF_NOLAN, NOLAN), ctx)
    assert not model.policy_errors, model.policy_errors
    first, second, fallback = events(pred, "fog.expand")
    assert "absorbed_triples" not in first["cut"]
    assert second["cut"]["absorbed_triples"] >= 1  # round 2 meets the absorbed triple and leaves it out
    # the film the memory holds is still walked on from: round 2 is shown what lies beyond it
    film = film_of(kept[0])
    shown_second = numbered(model.prompts("fog.memory")[1]).values()
    assert any(line.startswith(f"({film}, ") and "directed_by" not in line for line in shown_second)
    assert "absorbed_triples" not in fallback["cut"]  # the fallback reads a fresh expansion


def test_the_model_answers_and_the_graph_reader_is_a_counted_fallback(kg: EmbeddedKG, scorer_dir: Path) -> None:
    from kgqa.eval.metrics import score_prediction, summarize

    def answer_unselected(prompt: Prompt) -> dict:
        shown = numbered(prompt)
        film = next(film_of(line) for line in shown.values() if "directed_by" in line or "director.film" in line)
        return {"selected_triplets": [], "predict_answer": [f"{film.lower()}."], "subsequent_question": []}

    # the model names an entity of a triple it was shown but did not select (in its own spelling: case and punctuation
    # as labels are matched): a usable answer, the model's
    ctx, model, _ = context(kg, by_step({"fog.decompose": {"sub_questions": [FILMS_OF_NOLAN]},
                                         "fog.memory": answer_unselected}), embedder=offline_embedder(64))
    method = FoG(mode="llm", scorer=str(scorer_dir), hops=1, tau_e=0.0, tau_p=0.0, max_potential=4, rounds=2)
    asked = question(FILMS_OF_NOLAN, NOLAN, answers=[("m.inception", "Inception")])
    answered = solve(method, asked, ctx)
    assert not model.policy_errors, model.policy_errors
    assert model.calls == 2 and answered.grounding == "synthesis" and len(answered.names) == 1
    assert answered.stats == {"graph_fallback": 0.0} and not events(answered, "fog.fallback")
    (round_,) = events(answered, "fog.memory")
    assert round_["answer_triples_unselected"] == 1 and round_["memory"] == 1  # the answer's triple is its evidence
    assert any(answered.names[0] in (h, t) for h, _, t in
               ([kg.names([x]).get(x) for x in triple] for triple in answered.evidence))

    # no usable answer in any round: the graph reader answers, counted and named in the trace
    ctx, _, _ = context(kg, by_step({"fog.decompose": {"sub_questions": [FILMS_OF_NOLAN]},
                                     "fog.memory": {"selected_triplets": [], "predict_answer": ["Nobody"],
                                                    "subsequent_question": []}}), embedder=offline_embedder(64))
    fell_back = solve(method, asked, ctx)
    assert fell_back.grounding == "structured" and fell_back.answers
    assert fell_back.stats == {"graph_fallback": 1.0}
    (event,) = events(fell_back, "fog.fallback")
    assert "graph reading" in event["reader"] and event["cause"].startswith("no answer from the memory manager")
    assert events(fell_back, "fog.answer")[0]["fallback"] == event["cause"]

    # graph mode is no fallback: nothing counted
    graph_only, *_ = context(kg, None, embedder=offline_embedder(64))
    alone = solve(FoG(mode="graph", scorer=str(scorer_dir), hops=1, tau_e=0.0, tau_p=0.0), asked, graph_only)
    assert "graph_fallback" not in alone.stats

    # the run's summary holds the share and how many questions it is over
    summary = summarize([score_prediction(asked, p) for p in (answered, fell_back, alone)])
    assert summary["stats"]["graph_fallback"] == {"mean": 0.5, "n": 2}


def test_fog_prompts_show_three_to_five_worked_examples_in_the_shape_of_their_reply() -> None:
    for signature in FoG.signatures:
        assert 3 <= len(signature.examples) <= 5, signature.prompt
        rendered = signature.messages(question="Q", memory="M", candidates="C", max_sub_questions=3)[0]["content"]
        assert rendered.index("Examples:") < rendered.index(signature.examples[0])
        for example in signature.examples:
            signature.reply.model_validate(json.loads(example.rsplit("\n", 1)[1]))
