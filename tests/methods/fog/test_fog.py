"""FoG on the kit's movie KG with a real (tiny) foresight scorer trained in the test: the memory manager's rules (copied
triples absorbed, the rest masked for good, invented triples dropped and counted, answers copied from memory or dropped),
its call budget and its fallback; graph mode without any LLM; a bad scorer directory.

Only the LLM is scripted (a :class:`PolicyModel` reading the rendered prompts). The scorer is trained for a second on
five kit questions with the hashing embedder: it is not meant to be good, so the memory tests show the manager every
expanded triple (``tau_e = tau_p = 0``) and read which ones it was shown from the prompts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from kgqa.cli import main
from kgqa.errors import ConfigError
from kgqa.kg.embedded import EmbeddedKG
from kgqa.methods import solve
from kgqa.methods.fog import FoG
from kgqa.steps.foresight.model import ForesightNet, NetSpec
from kgqa.steps.foresight.scorer import ForesightScorer
from kgqa.testing import Prompt, by_step, context, offline_embedder, question, shared_movie_kg

ENCODER = "hash:64"
NOLAN = ("m.nolan", "Christopher Nolan")
FILMS_OF_NOLAN = "Which films did Christopher Nolan direct?"
INVENTED = "(Nobody, directed_by, Noone)"
# every triple one hop from m.nolan, as the memory manager is shown them
NOLAN_HOP1 = {
    "(Christopher Nolan, film.director.film, Inception)", "(Christopher Nolan, film.director.film, Interstellar)",
    "(Christopher Nolan, film.director.film, Memento)", "(Inception, film.film.directed_by, Christopher Nolan)",
    "(Interstellar, film.film.directed_by, Christopher Nolan)", "(Memento, film.film.directed_by, Christopher Nolan)",
    "(Christopher Nolan, people.person.nationality, United Kingdom)",
    "(Christopher Nolan, award.award_winner.awards_won, m.cvt_award)",
}


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny tensors: one thread is fastest, and spares a busy machine the threads' spin-waits."""
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


def film_of(line: str) -> str:
    """The film of a shown (Nolan, directed, film) triple, either way round."""
    h, _, t = (part.strip() for part in line.strip("()").split(", "))
    return t if h == NOLAN[1] else h


def events(prediction, step: str) -> list[dict]:
    return [e for e in prediction.trace if e.get("step") == step]


def test_memory_manager_absorbs_copied_triples_masks_the_rest_and_answers_from_memory(kg: EmbeddedKG,
                                                                                    scorer_dir: Path) -> None:
    picked: list[str] = []

    def memory(prompt: Prompt) -> dict:
        held, shown = sections(prompt)
        if not held:  # round 1: copy one shown film triple exactly, invent one, no answer yet, ask on
            picked.append(next(line for line in shown if "film.director.film" in line or "directed_by" in line))
            return {"selected_triplets": [picked[0], INVENTED], "predict_answer": [],
                    "subsequent_question": ["Which of those films came out in 2010?"]}
        assert held == picked  # round 2: the memory holds what was selected, and only it
        return {"selected_triplets": [], "predict_answer": [film_of(held[0])], "subsequent_question": []}

    policy = by_step({"fog.decompose": {"sub_questions": [FILMS_OF_NOLAN]}, "fog.memory": memory})
    ctx, model, recorder = context(kg, policy, embedder=offline_embedder(64))
    method = FoG(mode="llm", scorer=str(scorer_dir), hops=1, tau_e=0.0, tau_p=0.0, max_potential=4, rounds=2, selection="copy")
    pred = solve(method, question(FILMS_OF_NOLAN, NOLAN), ctx)

    assert not model.policy_errors, model.policy_errors
    assert model.steps() == ["fog.decompose", "fog.memory", "fog.memory"]
    assert model.calls <= method.config.rounds + 1
    assert recorder.by_step()["fog.memory"].calls == 2
    first, second = (sections(p)[1] for p in model.prompts("fog.memory"))
    assert len(first) == len(second) == 4
    assert set(first) <= NOLAN_HOP1 and set(second) <= NOLAN_HOP1
    # masked for good: nothing shown in round 1 (the selected triple is in memory, the rest rejected) is shown again
    assert not set(first) & set(second)
    assert set(first) | set(second) == NOLAN_HOP1
    rounds = events(pred, "fog.memory")
    assert [(r["round"], r["shown"], r["selected"], r["invented"], r["memory"], r["rejected"]) for r in rounds] == \
        [(1, 4, 1, 1, 1, 3), (2, 4, 0, 0, 1, 7)]
    assert rounds[0]["answers"] == [] and rounds[0]["next"] == ["Which of those films came out in 2010?"]
    # the next round's expansion is guided by the subsequent question and skips the masked (shown, not selected)
    # triples and the absorbed one (in memory: not expanded again, not shown again)
    expansions = events(pred, "fog.expand")
    assert "Which of those films came out in 2010?" in expansions[1]["sub_questions"]
    assert expansions[1]["cut"]["masked_triples"] == 3 and expansions[1]["cut"]["absorbed_triples"] == 1
    film = film_of(picked[0])
    assert pred.names == [film]
    assert pred.grounding == "synthesis"
    assert len(pred.evidence) == 1 and film in {n for n in (kg.names(pred.evidence[0][::2]).values())}
    answer = events(pred, "fog.answer")[0]
    assert answer["mode"] == "llm" and answer["source"] == "memory manager, round 2" and answer["paths"] == picked
    lines = method.explain(pred).lines
    assert "memory round 1: 4 shown, 1 selected, 1 invented, answers -, next: ['Which of those films came out in " \
           "2010?']" in lines


def test_an_answer_not_in_memory_is_dropped_and_the_graph_is_read_instead(kg: EmbeddedKG, scorer_dir: Path) -> None:
    def memory(prompt: Prompt) -> dict:
        _, shown = sections(prompt)
        film = next(line for line in shown if "film.director.film" in line or "directed_by" in line)
        # the triple copied as a list, loosely (case, spacing); Scorsese is in the KG but not in memory; Nolan is the topic
        h, r, t = (part.strip() for part in film.strip("()").split(", "))
        return {"selected_triplets": [[h.upper(), f" {r} ", t.lower()]],
                "predict_answer": ["Martin Scorsese", "Christopher Nolan"], "subsequent_question": []}

    policy = by_step({"fog.decompose": {"sub_questions": [FILMS_OF_NOLAN]}, "fog.memory": memory})
    ctx, model, _ = context(kg, policy, embedder=offline_embedder(64))
    method = FoG(mode="llm", scorer=str(scorer_dir), hops=1, tau_e=0.0, tau_p=0.0, max_potential=4, rounds=1, selection="copy")
    pred = solve(method, question(FILMS_OF_NOLAN, NOLAN), ctx)

    assert not model.policy_errors, model.policy_errors
    assert model.calls == 2
    (round_,) = events(pred, "fog.memory")
    assert round_["selected"] == 1 and round_["invented"] == 0  # a loose copy of a shown triple still counts
    assert round_["invalid_answers"] == ["Martin Scorsese"]  # not in memory: dropped, whatever the KG holds
    assert round_["answers"] == []  # the topic is never its own answer
    assert pred.grounding == "structured"
    assert "Martin Scorsese" not in pred.names and pred.names  # the graph reading answered
    answer = events(pred, "fog.answer")[0]
    assert answer["mode"] == "graph" and answer["source"] == "graph reading after the memory rounds"
    assert answer["fallback"] == "no answer from the memory manager in 1 rounds (2 calls)"
    assert "fallback: no answer from the memory manager in 1 rounds (2 calls)" in method.explain(pred).lines
    for h, r, t in pred.evidence:
        assert t in kg.neighbors(h, r)


def test_the_fallback_reading_still_sees_what_the_rounds_absorbed_or_masked(kg: EmbeddedKG, scorer_dir: Path) -> None:
    """Round 1 is shown every triple near the topic and keeps one; round 2 is then shown nothing and answers nothing.
    The fallback must still read the graph (one round without an answer does: see the test above)."""

    def keep_one(prompt: Prompt) -> dict:
        shown = sections(prompt)[1]
        return {"selected_triplets": shown[:1], "predict_answer": [], "subsequent_question": []}

    policy = by_step({"fog.decompose": {"sub_questions": [FILMS_OF_NOLAN]}, "fog.memory": keep_one})
    ctx, model, _ = context(kg, policy, embedder=offline_embedder(64))
    method = FoG(mode="llm", scorer=str(scorer_dir), hops=1, tau_e=0.0, tau_p=0.0, max_potential=8, rounds=2, selection="copy")
    pred = solve(method, question(FILMS_OF_NOLAN, NOLAN), ctx)
    assert sections(model.prompts("fog.memory")[1])[1] == []  # round 2: everything was absorbed or masked
    assert pred.grounding == "structured"
    assert pred.answers  # today: none, the fallback read an empty graph


def test_unreadable_replies_stay_within_the_budget_and_fall_back_to_the_graph(kg: EmbeddedKG, scorer_dir: Path) -> None:
    # every reply unreadable: each ask is re-asked once (kgqa's structured-reply rule)
    policy = by_step({"fog.decompose": "not json at all", "fog.memory": "still no json"})
    ctx, model, _ = context(kg, policy, embedder=offline_embedder(64))
    method = FoG(mode="llm", scorer=str(scorer_dir), hops=1, tau_e=0.0, rounds=2)
    pred = solve(method, question(FILMS_OF_NOLAN, NOLAN), ctx)
    asks = [p for p in model.history if p.attempt == 0]
    assert asks[0].step == "fog.decompose" and {p.step for p in asks[1:]} == {"fog.memory"}
    assert len(asks) <= method.config.rounds + 1  # R + 1 asks at most ...
    assert all(p.attempt <= 1 for p in model.history)  # ... each re-asked once at most
    assert [e["ok"] for e in events(pred, "fog.decompose")] == [False]
    assert events(pred, "fog.decompose")[0]["sub_questions"] == [FILMS_OF_NOLAN]  # the question itself guides
    assert {e["ok"] for e in events(pred, "fog.memory")} == {False}
    assert pred.grounding == "structured" and pred.answers and events(pred, "fog.answer")[0]["fallback"]


def test_graph_mode_needs_no_llm_and_grounds_its_answers_in_kg_triples(kg: EmbeddedKG, scorer_dir: Path) -> None:
    assert FoG(mode="graph").needs("local:smollm2").llm is False
    assert FoG(mode="graph").needs("openai:gpt-4.1-mini").llm is False
    assert FoG().needs("local:smollm2").llm is False and FoG().needs("openai:gpt-4.1-mini").llm is True
    assert FoG(mode="llm").needs("local:smollm2").llm is True
    assert FoG().needs(None).kg is True

    ctx, model, _ = context(kg, None, embedder=offline_embedder(64))
    assert ctx.llm is None
    # tau_e = 0 keeps every triple: the scorer is barely trained, and this test is about grounding, not accuracy
    method = FoG(mode="graph", scorer=str(scorer_dir), tau_e=0.0)
    pred = solve(method, question("Which actors starred in films directed by Christopher Nolan?", NOLAN), ctx)
    assert pred.error is None and pred.grounding == "structured" and pred.answers
    assert pred.evidence
    for h, r, t in pred.evidence:  # real KG triples
        assert t in kg.neighbors(h, r)
    assert any("m.nolan" in (h, t) for h, _, t in pred.evidence)  # the evidence paths start at the topic
    ends = {x for h, _, t in pred.evidence for x in (h, t)}
    assert {a.id for a in pred.answers} <= ends
    (expansion,) = events(pred, "fog.expand")
    assert expansion["scored"] >= expansion["kept"] > 0 and expansion["layers"] <= 3
    assert events(pred, "fog.answer")[0]["source"] == "graph mode"
    assert method.explain(pred).fields["mode"] == "graph"
    # with a model in the context, graph mode still calls nothing (any call would fail this policy)
    ctx, model, _ = context(kg, by_step({}), embedder=offline_embedder(64))
    again = solve(FoG(mode="graph", scorer=str(scorer_dir), tau_e=0.0), question("Who directed Shutter Island?",
                                                                     ("m.shutter", "Shutter Island")), ctx)
    assert model.calls == 0 and again.grounding == "structured" and again.answers


def test_an_answer_type_model_steers_graph_mode_to_the_pattern_whose_end_it_expects(kg: EmbeddedKG, scorer_dir: Path,
                                                                                     tmp_path: Path) -> None:
    import numpy as np

    from kgqa.steps.foresight.answer_types import AnswerTypes

    # a hand-made model, sure that every question asks for a country: only the nationality pattern ends there
    embedder = offline_embedder(64)
    types = {("people.person.nationality", False): "country", ("film.director.film", False): "film",
             ("film.film.directed_by", True): "film"}
    AnswerTypes(types, ["country", "film"], np.zeros((2, embedder.dim), dtype=np.float32),
                np.array([8.0, 0.0], dtype=np.float32), "hash:64", embedder.name).save(tmp_path / "types")
    ctx, _, _ = context(kg, None, embedder=embedder)
    plain = solve(FoG(mode="graph", scorer=str(scorer_dir), tau_e=0.0), question(FILMS_OF_NOLAN, NOLAN), ctx)
    assert "United Kingdom" not in plain.names and not events(plain, "fog.answer_types")
    typed = FoG(mode="graph", scorer=str(scorer_dir), tau_e=0.0, answer_types=str(tmp_path / "types"),
                answer_type_weight=1.0)
    pred = solve(typed, question(FILMS_OF_NOLAN, NOLAN), ctx)
    assert pred.names == ["United Kingdom"] and pred.grounding == "structured"
    (odds,) = events(pred, "fog.answer_types")
    assert odds["best"] == "country" and odds["p"]["country"] > 0.99
    explained = typed.explain(pred)
    assert explained.fields["answer_type"] == "country"
    assert any(line.startswith("answer type: country (p 1.00;") for line in explained.lines), explained.lines
    # weight 0 switches it off
    ctx, _, _ = context(kg, None, embedder=embedder)
    off = solve(FoG(mode="graph", scorer=str(scorer_dir), tau_e=0.0, answer_types=str(tmp_path / "types"),
                    answer_type_weight=0.0), question(FILMS_OF_NOLAN, NOLAN), ctx)
    assert off.names == plain.names and not events(off, "fog.answer_types")
    assert typed.explain(off).fields["answer_type"] is None


def test_an_answer_type_model_reading_the_focus_phrase_reads_it_beside_the_question(kg: EmbeddedKG, scorer_dir: Path,
                                                                                   tmp_path: Path) -> None:
    import numpy as np

    from kgqa.steps.foresight.answer_types import AnswerTypes

    # only the focus half of the weights is set: "country" when the focus phrase is this question's, "film" otherwise
    embedder = offline_embedder(64)
    focus = embedder.embed(["Which films did X"])[0]
    weight = np.zeros((2, 2 * embedder.dim), dtype=np.float32)
    weight[0, embedder.dim:] = 100 * focus  # the two phrases' hashed vectors are 0.74 alike: 100 against 74
    types = {("people.person.nationality", False): "country", ("film.director.film", False): "film",
             ("film.film.directed_by", True): "film"}
    AnswerTypes(types, ["country", "film"], weight, np.array([0.0, 87.0], dtype=np.float32), "hash:64",
                embedder.name, features=("sentence", "focus")).save(tmp_path / "types")
    method = FoG(mode="graph", scorer=str(scorer_dir), tau_e=0.0, answer_types=str(tmp_path / "types"))
    ctx, _, _ = context(kg, None, embedder=embedder)
    pred = solve(method, question(FILMS_OF_NOLAN, NOLAN), ctx)
    (odds,) = events(pred, "fog.answer_types")
    assert odds["focus"] == "Which films did X" and odds["best"] == "country"
    assert pred.names == ["United Kingdom"]
    assert any(line == 'focus phrase: "Which films did X" (read beside the whole question)'
               for line in method.explain(pred).lines)
    ctx, _, _ = context(kg, None, embedder=embedder)
    other = solve(method, question("Christopher Nolan directed which films?", NOLAN), ctx)
    (odds,) = events(other, "fog.answer_types")
    assert odds["focus"] == "which films" and odds["best"] == "film" and "United Kingdom" not in other.names


def test_junctions_and_the_topic_head_of_an_answer_type_model_weigh_patterns_and_can_be_switched_off(
        kg: EmbeddedKG, scorer_dir: Path, tmp_path: Path) -> None:
    import numpy as np

    from kgqa.steps.foresight.answer_types import AnswerTypes

    # every end of the kit KG typed, the answer head sure of a country; the kit scorer reads Inception's actors'
    # nationality, so a model that has measured actors never leaving by a nationality reads the director's instead
    person, film, country = "person", "film", "country"
    types = {("people.person.nationality", False): country, ("people.person.nationality", True): person,
             ("film.film.directed_by", False): person, ("film.film.directed_by", True): film,
             ("film.director.film", False): film, ("film.director.film", True): person,
             ("film.performance.actor", False): person, ("film.performance.actor", True): "performance",
             ("film.film.starring", False): "performance", ("film.film.starring", True): film,
             ("film.film.initial_release_date", False): "year", ("film.film.initial_release_date", True): film,
             ("award.award_winner.awards_won", False): "award", ("award.award_winner.awards_won", True): person,
             ("award.award_honor.year", False): "year", ("award.award_honor.year", True): "award",
             ("film.performance.character", False): "character", ("film.performance.character", True): "performance"}
    embedder = offline_embedder(64)
    zeros = np.zeros((3, embedder.dim), dtype=np.float32)
    AnswerTypes(types, [country, film, person], zeros, np.array([8.0, 0.0, 0.0], dtype=np.float32), "hash:64",
                embedder.name, topic_classes=[country, film, person], topic_weight=zeros,
                topic_bias=np.array([0.0, 8.0, 0.0], dtype=np.float32),
                junctions={(("film.performance.actor", False), ("people.person.nationality", False)): 0.0}
                ).save(tmp_path / "types")
    inception = question("Where is the director of Inception from?", ("m.inception", "Inception"))
    settings = {"mode": "graph", "scorer": str(scorer_dir), "tau_e": 0.0, "answer_types": str(tmp_path / "types"),
                "typed_retry": False}
    ctx, _, _ = context(kg, None, embedder=embedder)
    method = FoG(**settings)
    pred = solve(method, inception, ctx)
    assert pred.names == ["United Kingdom"]
    assert events(pred, "fog.answer")[0]["pattern"] == "^film.director.film -> people.person.nationality"
    (odds,) = events(pred, "fog.answer_types")
    assert odds["junctions"] is True and odds["topic"] == film and odds["topic_p"][film] > 0.99
    explained = method.explain(pred)
    assert explained.fields["topic_type"] == film
    assert any(line.startswith("topic type: film (p 1.00;") for line in explained.lines), explained.lines
    # without the junctions the actors' nationality stands; without the topic head the trace has no topic
    ctx, _, _ = context(kg, None, embedder=embedder)
    plain = solve(FoG(**settings, answer_type_junctions=False, answer_type_topic=False), inception, ctx)
    assert plain.names == ["United States"]
    (odds,) = events(plain, "fog.answer_types")
    assert odds["junctions"] is False and "topic" not in odds


def test_the_typed_retry_finds_the_expected_type_the_expansion_cut_and_stands_aside_otherwise(
        kg: EmbeddedKG, scorer_dir: Path, tmp_path: Path) -> None:
    import numpy as np

    from kgqa.steps.foresight.answer_types import AnswerTypes

    # the same hand-made model, sure every question asks for a country; tau_e = 1 cuts every triple, so the seed
    # floor keeps one relation at the topic, and its pattern does not end on a country
    embedder = offline_embedder(64)
    types = {("people.person.nationality", False): "country", ("film.director.film", False): "film",
             ("film.film.directed_by", True): "film", ("award.award_winner.awards_won", False): "film"}
    AnswerTypes(types, ["country", "film"], np.zeros((2, embedder.dim), dtype=np.float32),
                np.array([8.0, 0.0], dtype=np.float32), "hash:64", embedder.name).save(tmp_path / "types")
    settings = {"mode": "graph", "scorer": str(scorer_dir), "tau_e": 1.0, "answer_types": str(tmp_path / "types")}
    ctx, _, _ = context(kg, None, embedder=embedder)
    without = solve(FoG(**settings, typed_retry=False), question(FILMS_OF_NOLAN, NOLAN), ctx)
    assert without.answers and "United Kingdom" not in without.names and not events(without, "fog.typed_retry")
    method = FoG(**settings)
    ctx, _, _ = context(kg, None, embedder=embedder)
    pred = solve(method, question(FILMS_OF_NOLAN, NOLAN), ctx)
    assert pred.names == ["United Kingdom"] and pred.grounding == "structured"
    assert pred.evidence == [["m.nolan", "people.person.nationality", "m.uk"]]
    (retry,) = events(pred, "fog.typed_retry")
    assert retry["used"] is True and retry["after"] == "people.person.nationality" and retry["p_before"] < 0.5
    first, second = events(pred, "fog.expand")
    assert first["typed"] is False and second["typed"] is True and second["cut"]["typed_floor"] == 1
    explained = method.explain(pred)
    assert explained.fields["typed_retry"] is True
    assert any(line.startswith("typed retry: ") and line.endswith(", read") for line in explained.lines)
    # only the last hop is re-read: from Inception the country lies two hops out, behind the director the first
    # reading answered with, and a retry may not walk on past that reading's answer
    types[("film.director.film", True)] = "person"
    types[("film.film.directed_by", False)] = "person"
    AnswerTypes(types, ["country", "film", "person"], np.zeros((3, embedder.dim), dtype=np.float32),
                np.array([8.0, 0.0, 0.0], dtype=np.float32), "hash:64", embedder.name).save(tmp_path / "types")
    ctx, _, _ = context(kg, None, embedder=embedder)
    inception = question("Where is the director of Inception from?", ("m.inception", "Inception"))
    kept = solve(FoG(**settings), inception, ctx)
    (retry,) = events(kept, "fog.typed_retry")
    assert retry["used"] is False and retry["before"] in {"^film.director.film", "film.film.directed_by"}
    assert events(kept, "fog.expand")[1]["cut"]["typed_floor"] >= 1  # the nationality was there to walk to
    assert kept.names == ["Christopher Nolan"]
    # unless the retry may expand a second time (typed_retry_tau_e): then any pattern ending on a country is read
    ctx, _, _ = context(kg, None, embedder=embedder)
    deep = solve(FoG(**settings, typed_retry_tau_e=0.0), inception, ctx)
    (retry,) = events(deep, "fog.typed_retry")
    assert retry["used"] is True and retry["deep_tau_e"] == 0.0
    assert retry["after"].endswith("people.person.nationality") and retry["p_after"] > 0.99
    assert [e.get("tau_e") for e in events(deep, "fog.expand")] == [None, None, 0.0]
    assert deep.names and set(deep.names) <= {"United Kingdom", "United States"}
    assert all(kg.neighbors(h, r) and t in kg.neighbors(h, r) for h, r, t in deep.evidence)
    # at tau_e itself (1: every triple cut) the second expansion keeps the best group at each layer that kept nothing
    ctx, _, _ = context(kg, None, embedder=embedder)
    floored = solve(FoG(**settings, typed_retry_tau_e=1.0), inception, ctx)
    third = events(floored, "fog.expand")[2]
    assert third["tau_e"] == 1.0 and third["cut"]["seed_floor"] >= 1 and third["cut"]["layer_floor"] >= 1
    assert floored.names == ["United Kingdom"] and events(floored, "fog.typed_retry")[0]["used"] is True
    # a reading that already ends on the expected type is left alone: no second expansion
    ctx, _, _ = context(kg, None, embedder=embedder)
    settled = solve(FoG(**{**settings, "tau_e": 0.0}), question(FILMS_OF_NOLAN, NOLAN), ctx)
    assert settled.names == ["United Kingdom"] and not events(settled, "fog.typed_retry")
    assert len(events(settled, "fog.expand")) == 1


def test_a_bad_scorer_directory_is_a_config_error_naming_it(kg: EmbeddedKG, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    ctx, _, _ = context(kg, None, embedder=offline_embedder(64))
    missing = tmp_path / "no-such-scorer"
    # refused when the method is configured, before any question
    with pytest.raises(ConfigError, match=re.escape(f"scorer={str(missing)!r}: Value error, {str(missing)!r} is not "
                                                    "a FoG scorer directory")):
        FoG(mode="graph", scorer=str(missing))
    with pytest.raises(ConfigError, match="fog needs a trained scorer for this KG"):
        FoG(mode="graph").answer(question(FILMS_OF_NOLAN, NOLAN), ctx)
    # from the command line: a one-line error, exit code 2, no traceback
    assert main(ask_args(kg, missing)) == 2
    err = capsys.readouterr().err
    assert err.startswith("kgqa: error: bad configuration for method 'fog'") and "not a FoG scorer directory" in err
    assert "Traceback" not in err
    # a scorer.json beside weights of another shape
    mismatched = tmp_path / "mismatched"
    ForesightScorer(ForesightNet(NetSpec(input_dim=64, hidden=32, heads=2, self_blocks=1)), {"encoder": ENCODER}) \
        .save(mismatched)
    meta = json.loads((mismatched / "scorer.json").read_text())
    (mismatched / "scorer.json").write_text(json.dumps({**meta, "net": {**meta["net"], "hidden": 16}}))
    with pytest.raises(ConfigError, match=re.escape(f"scorer={str(mismatched)!r}: cannot be loaded (RuntimeError")):
        ForesightScorer.load(mismatched)


def ask_args(kg: EmbeddedKG, scorer: Path) -> list[str]:
    return ["ask", FILMS_OF_NOLAN, "--kg", str(kg.directory), "--topic", "m.nolan", "--method", "fog",
            "--method-config", "mode=graph", "--method-config", f"scorer={scorer}"]


def test_kgqa_ask_gives_the_scorer_the_question_without_the_topic_brackets(kg: EmbeddedKG, scorer_dir: Path,
                                                                           tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    args = ["ask", "Which films did [Christopher Nolan] direct?", "--kg", str(kg.directory), "--method", "fog",
            "--method-config", "mode=graph", "--method-config", f"scorer={scorer_dir}", "--trace", str(trace)]
    assert main(args) == 0
    written = json.loads(trace.read_text())
    assert [t["id"] for t in written["topics"]] == ["m.nolan"]  # the brackets still mark the mention for linking
    (expansion,) = [e for e in written["trace"] if e["step"] == "fog.expand"]
    assert expansion["sub_questions"] == [FILMS_OF_NOLAN]


def test_a_scorer_directory_with_unreadable_weights_is_a_config_error(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "scorer.json").write_text(json.dumps({"encoder": ENCODER, "net": {"input_dim": 64, "hidden": 16}}))
    (broken / "weights.pt").write_bytes(b"not a torch file")
    with pytest.raises(ConfigError, match=re.escape(f"scorer={str(broken)!r}: cannot be loaded")):
        ForesightScorer.load(broken)


def test_a_saved_scorer_loads_with_its_shape_and_encoder(scorer_dir: Path) -> None:
    scorer = ForesightScorer.load(scorer_dir)
    assert scorer.encoder == ENCODER and scorer.net.spec.hidden == 16 and scorer.meta["trained_on"] == "five kit questions"
    assert not scorer.net.training



def test_an_ensemble_scores_and_propagates_as_the_mean_of_its_members(kg: EmbeddedKG, scorer_dir: Path,
                                                                       kit_scorer_dir_seed1: Path,
                                                                       tmp_path: Path) -> None:
    import numpy as np

    from kgqa.steps.foresight.graph import expand
    from kgqa.steps.foresight.scorer import LabelVectors, ScorerEnsemble, load_scorer

    assert main(["train", "ensemble", "--member", str(scorer_dir), "--member", str(kit_scorer_dir_seed1),
                 "--out", str(tmp_path / "ens")]) == 0
    ensemble = load_scorer(tmp_path / "ens")
    assert isinstance(ensemble, ScorerEnsemble) and ensemble.encoder == ENCODER and len(ensemble.members) == 2
    labels = LabelVectors(kg, offline_embedder(64))
    texts = ["Which actors starred in films directed by Christopher Nolan?"]
    graphs = {}
    for name, scorer in (("ensemble", ensemble), *((f"member{k}", m) for k, m in enumerate(ensemble.members))):
        graph = expand(kg, ["m.nolan"], scorer.scorer_for(labels, scorer.questions(labels, texts)), hops=3, tau_e=0.0)
        initial = list(graph.initial)
        scorer.propagate(graph)
        graphs[name] = (graph, initial)
    ens, ens_initial = graphs["ensemble"]
    first, first_initial = graphs["member0"]
    second, second_initial = graphs["member1"]
    assert ens.triples == first.triples == second.triples  # tau_e 0: the same subgraph whatever the scores
    assert np.allclose(ens_initial, (np.array(first_initial) + np.array(second_initial)) / 2, atol=1e-6)
    assert np.allclose(ens.scores, (np.array(first.scores) + np.array(second.scores)) / 2, atol=1e-6)
    assert not np.allclose(first.scores, second.scores)  # two seeds, two different scorers
    assert all(p.dim() == 3 for p, _ in ens.payloads if len(p))  # triples x members x hidden, restored after use


def test_members_sharing_a_triple_encoder_encode_once_and_score_as_if_alone(kg: EmbeddedKG, scorer_dir: Path,
                                                                             kit_scorer_dir_seed1: Path,
                                                                             tmp_path: Path) -> None:
    """Propagations trained on one scorer phase (``--reuse-scorer-phase``) differ only in the propagation-phase
    parameters: the ensemble groups them by their encoder and scores exactly as the members alone would."""
    import numpy as np

    from kgqa.steps.foresight.graph import expand
    from kgqa.steps.foresight.model import PROPAGATION_PHASE_PARAMETERS
    from kgqa.steps.foresight.scorer import LabelVectors, ScorerEnsemble

    base = ForesightScorer.load(scorer_dir)
    other = ForesightScorer.load(scorer_dir)
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():  # another propagation of the same scorer phase
        for name, parameter in other.net.named_parameters():
            if name.startswith(PROPAGATION_PHASE_PARAMETERS):
                parameter.add_(0.3 * torch.randn(parameter.shape, generator=generator))
    other.save(tmp_path / "other")
    other = ForesightScorer.load(tmp_path / "other")
    seed1 = ForesightScorer.load(kit_scorer_dir_seed1)
    assert base.net.encoder_fingerprint() == other.net.encoder_fingerprint() != seed1.net.encoder_fingerprint()
    ensemble = ScorerEnsemble([base, seed1, other])
    assert ensemble.encoder_groups == [[0, 2], [1]]

    labels = LabelVectors(kg, offline_embedder(64))
    texts = ["Which actors starred in films directed by Christopher Nolan?"]
    alone = []
    for scorer in (base, seed1, other):
        graph = expand(kg, ["m.nolan"], scorer.scorer_for(labels, scorer.questions(labels, texts)), hops=3, tau_e=0.0)
        initial = list(graph.initial)
        scorer.propagate(graph)
        alone.append((np.array(initial), np.array(graph.scores)))
    graph = expand(kg, ["m.nolan"], ensemble.scorer_for(labels, ensemble.questions(labels, texts)), hops=3, tau_e=0.0)
    initial = np.array(graph.initial)
    ensemble.propagate(graph)
    assert not np.allclose(alone[0][1], alone[2][1])  # the two propagations re-score differently
    assert np.allclose(initial, sum(a[0] for a in alone) / 3, atol=1e-6)
    assert np.allclose(graph.scores, sum(a[1] for a in alone) / 3, atol=1e-6)


def test_fog_reads_with_an_ensemble_directory_and_bad_ensembles_are_one_line_errors(
        kg: EmbeddedKG, scorer_dir: Path, kit_scorer_dir_seed1: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    ens = tmp_path / "ens"
    ens.mkdir()
    (ens / "ensemble.json").write_text(json.dumps({"members": [str(scorer_dir), str(kit_scorer_dir_seed1)]}))
    ctx, _, _ = context(kg, None, embedder=offline_embedder(64))
    pred = solve(FoG(mode="graph", scorer=str(ens), tau_e=0.0), question("Who directed Shutter Island?",
                                                                        ("m.shutter", "Shutter Island")), ctx)
    assert pred.error is None and pred.grounding == "structured" and pred.answers and pred.evidence
    # a member that is not a scorer; an unreadable ensemble.json; too few members; an existing --out
    (ens / "ensemble.json").write_text(json.dumps({"members": [str(scorer_dir), str(tmp_path / "gone")]}))
    assert main(ask_args(kg, ens)) == 2
    assert "not a FoG scorer directory" in capsys.readouterr().err
    (ens / "ensemble.json").write_text("{not json")
    assert main(ask_args(kg, ens)) == 2
    err = capsys.readouterr().err
    assert "ensemble.json cannot be read" in err and "Traceback" not in err
    assert main(["train", "ensemble", "--member", str(scorer_dir), "--out", str(tmp_path / "one")]) == 2
    assert "at least two --member" in capsys.readouterr().err
    assert main(["train", "ensemble", "--member", str(scorer_dir), "--member", str(kit_scorer_dir_seed1),
                 "--out", str(ens)]) == 2
    assert "not empty" in capsys.readouterr().err


def numbered(prompt: Prompt) -> dict[int, str]:
    """The numbered candidates of a memory-manager prompt (selection=index): number -> triple as shown."""
    _, lines = sections(prompt)
    return {int(line.split(". ", 1)[0]): line.split(". ", 1)[1] for line in lines}


def test_index_selection_absorbs_numbered_triples_and_counts_numbers_out_of_range_as_invented(
        kg: EmbeddedKG, scorer_dir: Path) -> None:
    chosen: list[str] = []

    def memory(prompt: Prompt) -> dict:
        held, _ = sections(prompt)
        shown = numbered(prompt)
        if not held:
            number = next(n for n, line in shown.items() if "directed_by" in line or "director.film" in line)
            chosen.append(shown[number])
            return {"selected_triplets": [number, str(len(shown) + 5)], "subsequent_question": []}
        assert held == chosen  # memory shows the absorbed triple as written, unnumbered
        return {"selected_triplets": [], "predict_answer": [film_of(held[0])]}

    policy = by_step({"fog.decompose": {"sub_questions": [FILMS_OF_NOLAN]}, "fog.memory": memory})
    ctx, model, _ = context(kg, policy, embedder=offline_embedder(64))
    method = FoG(mode="llm", scorer=str(scorer_dir), hops=1, tau_e=0.0, tau_p=0.0, max_potential=4, rounds=2)
    assert method.config.selection == "index"
    pred = solve(method, question(FILMS_OF_NOLAN, NOLAN), ctx)

    assert not model.policy_errors, model.policy_errors
    first = model.prompts("fog.memory")[0]
    assert sorted(numbered(first)) == [1, 2, 3, 4] and set(numbered(first).values()) <= NOLAN_HOP1
    rounds = events(pred, "fog.memory")
    assert [(r["selected"], r["invented"], r["memory"], r["rejected"]) for r in rounds] == [(1, 1, 1, 3), (0, 0, 1, 7)]
    assert pred.names == [film_of(chosen[0])] and pred.grounding == "synthesis"


def test_a_memory_reply_cut_off_in_its_numbers_is_read_as_far_as_it_got(kg: EmbeddedKG, scorer_dir: Path) -> None:
    # a small model counts past the candidates until its budget ends the reply: no re-ask, the numbers it finished
    # that name candidates are selected, the rest counted as invented (the reply fills its 20-token budget)
    policy = by_step({"fog.decompose": {"sub_questions": [FILMS_OF_NOLAN]},
                      "fog.memory": '{"selected_triplets": [1, 2, 3, 4, 5, 6, 7, 8, 9, 1'})
    ctx, model, _ = context(kg, policy, embedder=offline_embedder(64))
    method = FoG(mode="llm", scorer=str(scorer_dir), hops=1, tau_e=0.0, tau_p=0.0, max_potential=4, rounds=1,
                 memory_tokens=20)
    pred = solve(method, question(FILMS_OF_NOLAN, NOLAN), ctx)
    assert [p.attempt for p in model.history] == [0, 0]
    (round_,) = events(pred, "fog.memory")
    assert round_["ok"] and (round_["selected"], round_["invented"]) == (4, 5)
    assert pred.grounding == "structured" and pred.answers  # no answer from memory: the graph reading answered


def test_echoed_placeholder_and_repeated_sub_questions_are_dropped_and_the_fallback_reads_the_question_alone(
        kg: EmbeddedKG, scorer_dir: Path) -> None:
    echo = "Who wrote the screenplay of Chinatown?"  # one of the decomposition prompt's own examples
    cut = ('{"sub_questions": ["...", "' + echo + '", "Which films did Nolan make?", "which films did nolan make?", '
           '"Which films did Nolan ma')
    policy = by_step({"fog.decompose": cut, "fog.memory": {"selected_triplets": [], "predict_answer": [],
                                                           "subsequent_question": ["(Titanic, film.film.directed_by, "
                                                                                   "James Cameron)", "ok"]}})
    ctx, model, _ = context(kg, policy, embedder=offline_embedder(64))
    # the cut reply fills its budget, as a reply the budget cut off does
    method = FoG(mode="llm", scorer=str(scorer_dir), hops=1, tau_e=0.0, tau_p=0.0, rounds=2, decompose_tokens=48)
    pred = solve(method, question(FILMS_OF_NOLAN, NOLAN), ctx)
    assert not model.policy_errors, model.policy_errors
    (decomposed,) = events(pred, "fog.decompose")
    assert decomposed["ok"] and decomposed["sub_questions"] == ["Which films did Nolan make?"]
    assert decomposed["dropped"] == ["...", echo]
    assert [p.attempt for p in model.history if p.step == "fog.decompose"] == [0]  # read as far as it got
    assert all(r["next"] == [] for r in events(pred, "fog.memory"))  # the example triple and a one-word question
    expansions = events(pred, "fog.expand")
    assert "Which films did Nolan make?" in expansions[0]["sub_questions"]
    assert expansions[-1]["sub_questions"] == [FILMS_OF_NOLAN]  # graph mode's own reading
    graph_only, *_ = context(kg, None, embedder=offline_embedder(64))
    alone = solve(FoG(mode="graph", scorer=str(scorer_dir), hops=1, tau_e=0.0, tau_p=0.0),
                  question(FILMS_OF_NOLAN, NOLAN), graph_only)
    assert pred.names == alone.names and pred.grounding == "structured"

