"""Synthetic training questions (kgqa.datasets.synthetic): made from a KG alone, seeded, covering every relation and
direction the KG allows, with answers that are the chain executed on the KG, CVTs passed through, no dataset text, and
an optional paraphrase by a model (scripted here: the only fake is at the LLM boundary). Every KG is a real embedded
store: the packaged demo KG, a handful of triples, or MetaQA's kb.txt when KGQA_DATA_DIR has it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kgqa.datasets import load_dataset
from kgqa.datasets.gold_chains import TrainingQuestion
from kgqa.datasets.synthetic import (
    SyntheticSet,
    SyntheticSettings,
    chain_answers,
    parse_hop_mix,
    start_index,
    synthetic_questions,
)
from kgqa.errors import ConfigError
from kgqa.kg import open_kg
from kgqa.kg.base import Chain, Direction, Hop, KnowledgeGraph, format_chain, is_literal, parse_chain
from kgqa.kg.embedded import EmbeddedKG, EmbeddedKGBuilder
from kgqa.llm.scripted import ScriptedModel, last_user_message
from kgqa.steps.paraphrase import paraphrase_all, paraphrase_check
from kgqa.testing import small_kg

DEMO_QUESTIONS = 240


@pytest.fixture(scope="module")
def demo_kg() -> KnowledgeGraph:
    return open_kg("demo")


@pytest.fixture(scope="module")
def demo_set(demo_kg: KnowledgeGraph) -> SyntheticSet:
    return synthetic_questions(demo_kg, SyntheticSettings(questions=DEMO_QUESTIONS, seed=0))


def _signature(question: TrainingQuestion) -> tuple:
    return question.text, question.topics, format_chain(question.chain), tuple(sorted(question.answers)), question.mentions


def _paths_answers(kg: KnowledgeGraph, topic: str, chain: Chain) -> set[str]:
    """The answers by the rules, recomputed here from every path run_chain binds: no topic again, no step straight
    back to the node just left, no nameless end."""
    result = kg.run_chain([topic], chain, bindings=True, max_paths=100_000)
    assert not result.truncated
    ends = {p[-1] for p in result.paths or () if topic not in p[1:]
            and all(p[i + 1] != p[i - 1] for i in range(1, len(p) - 1))}
    names = kg.names(sorted(ends))
    return {e for e in ends if names[e] or is_literal(e)}


def test_the_same_seed_makes_the_same_questions_and_another_seed_others(demo_kg: KnowledgeGraph, demo_set: SyntheticSet) -> None:
    again = synthetic_questions(demo_kg, SyntheticSettings(questions=DEMO_QUESTIONS, seed=0))
    assert [_signature(q) for q in again.questions] == [_signature(q) for q in demo_set.questions]
    assert [q.source for q in again.questions] == [f"synthetic-{i:06d}" for i in range(DEMO_QUESTIONS)]
    other = synthetic_questions(demo_kg, SyntheticSettings(questions=DEMO_QUESTIONS, seed=1))
    assert len(other.questions) == DEMO_QUESTIONS
    shared = {_signature(q) for q in other.questions} & {_signature(q) for q in demo_set.questions}
    assert len(shared) < DEMO_QUESTIONS // 4, f"seed 1 repeats {len(shared)} questions of seed 0"
    # and in another process, whose string hashes are salted otherwise: nothing rests on set order
    script = ("import json; from kgqa.kg import open_kg; from kgqa.datasets.synthetic import SyntheticSettings, "
              "synthetic_questions; from kgqa.kg.base import format_chain; "
              f"s = synthetic_questions(open_kg('demo'), SyntheticSettings(questions={DEMO_QUESTIONS}, seed=0)); "
              "print(json.dumps([[q.text, format_chain(q.chain), sorted(q.answers)] for q in s.questions]))")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True).stdout
    assert json.loads(out) == [[q.text, format_chain(q.chain), sorted(q.answers)] for q in demo_set.questions]


def _coverable(kg: KnowledgeGraph, key: tuple[str, Direction], index: dict) -> bool:
    """Whether some question of at most 3 relations could follow ``key`` (brute force around the key's start nodes:
    the key first from a named start, or after one or two relations from a named topic), answers 1 to 100."""
    hop = Hop(*key)

    def ok(topic: str, chain: Chain) -> bool:
        answers, why = chain_answers(kg, topic, chain, max_paths=100_000)
        names = kg.names([topic])
        return why is None and 1 <= len(answers) <= 100 and bool(names[topic]) and not is_literal(topic)

    def ends_named(chain: Chain, topic: str) -> bool:
        return ok(topic, chain)

    def hops_of(node: str) -> list[Hop]:
        return [Hop(r, d) for d in Direction for r in kg.relations(node, d)]

    for start in index.get(key, []):
        tails = [hop] + [(hop, h2) for n in kg.neighbors(start, *key, limit=50) for h2 in hops_of(n)]
        for tail in tails:
            tail_chain = (tail,) if isinstance(tail, Hop) else tail
            if ends_named(tail_chain, start):
                return True
            for back in hops_of(start):
                for before in kg.neighbors(start, back.relation, back.direction, limit=50):
                    chain = (back.reversed(), *tail_chain)
                    if len(chain) <= 3 and ends_named(chain, before):
                        return True
                    for back2 in hops_of(before):
                        for first in kg.neighbors(before, back2.relation, back2.direction, limit=20):
                            longer = (back2.reversed(), *chain)
                            if len(longer) <= 3 and ends_named(longer, first):
                                return True
    return False


def test_every_relation_and_direction_the_demo_kg_allows_is_covered(demo_kg: KnowledgeGraph, demo_set: SyntheticSet) -> None:
    index = start_index(demo_kg, seed=0, per_key=10_000)
    keys = {(r, d) for r, d in index}
    covered = {(h.relation, h.direction) for q in demo_set.questions for h in q.chain}
    vocabulary = {r for r in demo_kg.vocabulary() if not demo_kg.schema.is_noise_relation(r)}
    assert {r for r, _ in keys} == vocabulary  # every relation is a key, both ways
    assert demo_set.keys == len(keys) == 2 * len(vocabulary)
    assert demo_set.covered == len(covered & keys) and covered <= keys
    missing = keys - covered
    assert len(missing) <= len(keys) // 10, f"{len(missing)} keys uncovered: {sorted(map(str, missing))}"
    for key in sorted(missing):  # what is left out, the KG does not allow (within 3 relations and 100 answers)
        assert not _coverable(demo_kg, key, index), f"{key} could be covered"
    assert sorted(demo_set.uncovered) == sorted((r if d is Direction.OUT else "^" + r) for r, d in missing)


def test_every_answer_set_is_the_chain_executed_on_the_kg(demo_kg: KnowledgeGraph, demo_set: SyntheticSet) -> None:
    for question in demo_set.questions:
        topic, = question.topics
        assert not is_literal(topic) and demo_kg.names([topic])[topic] == question.mentions[0]
        assert question.mentions[0] in question.text
        assert 1 <= len(question.chain) <= 3 and 1 <= len(question.answers) <= 100
        assert topic not in question.answers
        assert set(question.answers) == _paths_answers(demo_kg, topic, question.chain), question.text
        assert set(question.answers) <= set(demo_kg.run_chain([topic], question.chain, limit=100_000).entities)
    per_hops = {int(k): v for k, v in demo_set.describe()["per_hops"].items()}
    assert set(per_hops) == {1, 2, 3} and sum(per_hops.values()) == DEMO_QUESTIONS


def test_chain_answers_never_go_back_to_the_topic_or_straight_back(tmp_path: Path) -> None:
    kg = small_kg(tmp_path / "kg", [("F1", "starring", "X"), ("F1", "starring", "Y"), ("F2", "starring", "X"),
                                    ("F3", "starring", "Y"), ("F3", "starring", "Z")], {n: n for n in
                                                                                        ("F1", "F2", "F3", "X", "Y", "Z")})
    answers, why = chain_answers(kg, "F1", parse_chain("starring,^starring"))
    assert why is None and sorted(answers) == ["F2", "F3"]  # never F1 itself
    # X's films' actors, then their films: F1 -> X -> F2 -> X is a step straight back, F1 -> Y -> F3 -> Z is not
    answers, _ = chain_answers(kg, "X", parse_chain("^starring,starring,^starring"))
    assert sorted(answers) == ["F3"]  # F1 -> Y -> F3 (and X never again)
    answers, _ = chain_answers(kg, "F2", parse_chain("starring,^starring,starring"))
    assert sorted(answers) == ["Y"]  # F2 -> X -> F1 -> Y; back to X is the node just left


def test_cvt_nodes_are_passed_through_never_topics_or_answers(tmp_path: Path) -> None:
    triples = [("film1", "film.film.starring", "cvt1"), ("cvt1", "film.performance.actor", "actor1"),
               ("cvt1", "film.performance.character", "role1"), ("film2", "film.film.starring", "cvt2"),
               ("cvt2", "film.performance.actor", "actor1"), ("cvt2", "film.performance.character", "role2"),
               ("film1", "film.film.directed_by", "dir1"), ("film2", "film.film.directed_by", "dir1")]
    names = {"film1": "Film One", "film2": "Film Two", "actor1": "Ann Actor", "role1": "Role One",
             "role2": "Role Two", "dir1": "Dee Director"}
    kg = small_kg(tmp_path / "kg", triples, names, schema="freebase")
    made = synthetic_questions(kg, SyntheticSettings(questions=40, seed=3))
    assert made.questions
    through = [q for q in made.questions if any(h.relation == "film.film.starring" for h in q.chain)]
    assert through, "no question passes through a performance"
    for question in made.questions:
        assert not question.topics[0].startswith("cvt") and not any(a.startswith("cvt") for a in question.answers)
        if question.chain[0].relation == "film.film.starring":  # film -> cvt -> ...: two relations for one hop
            assert len(question.chain) >= 2 and question.chain[1].relation.startswith("film.performance.")
    keys = {(h.relation, h.direction) for q in made.questions for h in q.chain}
    assert ("film.performance.actor", Direction.OUT) in keys and ("film.performance.actor", Direction.IN) in keys
    one_hop = [q for q in through if len(q.chain) == 2]
    assert one_hop and all(made.describe()["per_hops"]["1"] for _ in one_hop)
    texts = " ".join(q.text for q in through)
    assert "cvt" not in texts.lower()


_WORDS = re.compile(r"[a-z0-9']+")


def _normalised(text: str) -> str:
    return " ".join(_WORDS.findall(text.lower()))


def _assert_no_dataset_text(synthetic: list[str], dataset: list[str]) -> None:
    """No synthetic question equals a dataset question or contains one (word-aligned, case and punctuation aside)."""
    known = {_normalised(t) for t in dataset} - {""}
    longest = max(len(k.split()) for k in known)
    for text in synthetic:
        words = _normalised(text).split()
        spans = {" ".join(words[i:j]) for i in range(len(words)) for j in range(i + 1, min(len(words), i + longest) + 1)}
        assert not spans & known, f"{text!r} contains dataset question {sorted(spans & known)[0]!r}"


def test_no_question_repeats_or_contains_a_demo_question(demo_set: SyntheticSet) -> None:
    demo = [q.text for q in load_dataset("demo", "test")]
    assert demo and "Who directed Inception?" in demo
    _assert_no_dataset_text([q.text for q in demo_set.questions], demo)


@pytest.fixture(scope="module")
def metaqa_kb() -> EmbeddedKG:
    data = os.environ.get("KGQA_DATA_DIR")
    if not data or not (Path(data) / "metaqa" / "kb.txt").is_file():
        pytest.skip("MetaQA data not found (set KGQA_DATA_DIR)")
    from kgqa.kg.loaders import load_into

    builder = EmbeddedKGBuilder(schema="generic")
    load_into(builder, Path(data) / "metaqa" / "kb.txt", "metaqa")
    import tempfile

    return builder.build(Path(tempfile.mkdtemp(prefix="kgqa-synthetic-metaqa-")) / "kg")


@pytest.mark.slow
def test_no_question_made_from_metaqa_repeats_or_contains_a_metaqa_dev_question(metaqa_kb: EmbeddedKG) -> None:
    made = synthetic_questions(metaqa_kb, SyntheticSettings(questions=600, seed=0))
    assert len(made.questions) == 600 and made.covered == made.keys == 18
    dev = [q.text for hops in (1, 2, 3) for q in load_dataset(f"metaqa-{hops}hop", "dev")]
    assert len(dev) > 39_000
    _assert_no_dataset_text([q.text for q in made.questions] + [q.text for q in
                            synthetic_questions(open_kg("demo"), SyntheticSettings(questions=100, seed=0)).questions],
                            dev)


def test_paraphrase_rewords_by_the_model_and_keeps_the_original_on_failure(demo_kg: KnowledgeGraph) -> None:
    made = synthetic_questions(demo_kg, SyntheticSettings(questions=120, seed=0))
    original = {q.source: q for q in made.questions}
    dropped = made.questions[0].mentions[0]  # the model leaves this topic out
    garbled = next(q.mentions[0] for q in made.questions if q.mentions[0] != dropped)  # and answers this one in prose

    def paraphraser(messages: list[dict[str, str]]) -> str:
        user = next(m["content"] for m in messages if m["role"] == "user")  # the ask (a re-ask follows it)
        question = re.search(r"^Question: (.*)$", user, re.M).group(1)  # type: ignore[union-attr]
        topic = re.search(r"^Entity name \(copy it exactly\): (.*)$", user, re.M).group(1)  # type: ignore[union-attr]
        if topic == dropped:
            return json.dumps({"question": "Which one is this about?"})
        if topic == garbled:
            return "I cannot help with that."
        return json.dumps({"question": f"Could you tell me about {topic}: {question.lower()}"})

    model = ScriptedModel(paraphraser)
    paraphrase_all(model, made)
    garbled_count = sum(q.mentions[0] == garbled for q in made.questions)
    assert len(model.history) == len(made.questions) + garbled_count  # one prompt each; an unreadable reply re-asked
    prompt = model.history[0]
    assert prompt[0]["role"] == "system" and "Copy the entity name character for character" in prompt[0]["content"]
    assert format_chain(original[made.questions[0].source].chain).replace(",", " -> ") in prompt[-1]["content"]
    kept = [q for q in made.questions if q.text == original[q.source].text]
    reworded = [q for q in made.questions if q.text != original[q.source].text]
    assert {q.mentions[0] for q in kept} == {dropped, garbled}
    assert made.paraphrased == len(reworded) == len(made.questions) - len(kept)
    assert made.paraphrase_failed == {"topic not named exactly": sum(q.mentions[0] == dropped for q in made.questions),
                                      "unreadable reply": garbled_count}
    for question in reworded:
        before = original[question.source]
        assert question.text == f"Could you tell me about {before.mentions[0]}: {before.text.lower()}"
        assert (question.topics, question.chain, question.answers, question.mentions) == \
            (before.topics, before.chain, before.answers, before.mentions)


def test_a_paraphrase_must_be_a_question_about_the_topic(demo_kg: KnowledgeGraph) -> None:
    # replies a 135M local model gave (SmolLM2): the topic alone, a prompt label echoed; and a fair one
    question = synthetic_questions(demo_kg, SyntheticSettings(questions=5, seed=0)).questions[0]
    topic = question.mentions[0]
    assert paraphrase_check(question, topic, []) == "too short"
    assert paraphrase_check(question, f"{topic} has?", []) == "too short"
    assert paraphrase_check(question, f"Question: what about {topic} then?", []) == "echoes the prompt"
    assert paraphrase_check(question, f"What about {topic}\nand more?", []) == "more than one line"
    assert paraphrase_check(question, f"Tell me more about {topic}, please.", []) is None


def test_a_paraphrase_naming_an_answer_is_refused(demo_kg: KnowledgeGraph) -> None:
    made = synthetic_questions(demo_kg, SyntheticSettings(questions=30, seed=0))
    names = {}
    for question in made.questions:
        named = demo_kg.names(sorted(question.answers))
        names[question.source] = [named[a] or a for a in sorted(question.answers)]

    def leaky(messages: list[dict[str, str]]) -> str:
        user = last_user_message(messages)
        question = re.search(r"^Question: (.*)$", user, re.M).group(1)  # type: ignore[union-attr]
        source = next(q.source for q in made.questions if q.text == question)
        return json.dumps({"question": f"{question} Is it {names[source][0]}?"})

    paraphrase_all(ScriptedModel(leaky), made, answer_names=lambda q: names[q.source])
    assert made.paraphrased == 0 and made.paraphrase_failed["names an answer"] == len(made.questions)


def test_settings_are_checked_and_a_kg_without_triples_is_a_clear_error() -> None:
    assert parse_hop_mix("1:1,2:2, 3") == ((1, 1.0), (2, 2.0), (3, 1.0))
    for bad in ("4:1", "1:x", "", "1:0"):
        with pytest.raises(ConfigError):
            parse_hop_mix(bad)
    with pytest.raises(ConfigError):
        SyntheticSettings(questions=0)

    class Endpoint:  # a KG that answers the protocol but cannot list its triples
        schema = open_kg("demo").schema

    with pytest.raises(ConfigError, match="list its triples"):
        synthetic_questions(Endpoint(), SyntheticSettings(questions=5))  # type: ignore[arg-type]
