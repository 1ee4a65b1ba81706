"""The packaged MetaQA questions in kgqa's own wordings (src/kgqa/data/metaqa_reworded): they load with no data
directory, none of them is worded with one of MetaQA's templates, and their answers are what the gold chains give."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgqa.core import Question
from kgqa.datasets import dataset_info, dataset_names, load_dataset
from kgqa.datasets.metaqa_chains import QTYPES, iter_metaqa_questions, run_metaqa_chain
from kgqa.kg.embedded import EmbeddedKG
from kgqa.normalize import wording_key

HOPS = (1, 2, 3)
CHECKED_PER_HOP = 20

def _load(hops: int) -> list[Question]:
    return load_dataset(f"metaqa-reworded-{hops}hop")


@pytest.mark.parametrize("hops", HOPS)
def test_loads_100_questions_without_a_data_dir(monkeypatch: pytest.MonkeyPatch, hops: int) -> None:
    monkeypatch.delenv("KGQA_DATA_DIR", raising=False)
    name = f"metaqa-reworded-{hops}hop"
    assert name in dataset_names()
    info = dataset_info(name)
    assert info.kg == "metaqa" and set(info.splits) == {"test", "dev", "dev2"}
    questions = _load(hops)
    assert len(questions) == 100 == info.sizes["test"]
    assert len({q.id for q in questions}) == 100
    for q in questions:
        assert len(q.topic_entities) == 1, q.id
        assert q.metadata["qtype"] in QTYPES[hops], q.id
        assert q.metadata["hops"] == hops
        assert 1 <= len(q.answers) <= 200, q.id
        assert "[" not in q.text and q.topic_entities[0].name in q.text
    # Stratified: every type of the MetaQA test split is there (1-hop test has no imdb questions).
    types = {q.metadata["qtype"] for q in questions}
    assert len(types) == (11 if hops == 1 else len(QTYPES[hops]))
    assert len(load_dataset(f"metaqa-reworded-{hops}hop", limit=7)) == 7


def _load_dev_split(metaqa_dir: Path, hops: int, split: str) -> list[Question]:
    """A dev split of the packaged sets, checked: 200 questions, every MetaQA dev type, topics from MetaQA dev."""
    questions = load_dataset(f"metaqa-reworded-{hops}hop", split=split)
    assert len(questions) == 200 == dataset_info(f"metaqa-reworded-{hops}hop").sizes[split]
    dev = list(iter_metaqa_questions(metaqa_dir, hops, "dev"))
    assert {q.metadata["qtype"] for q in questions} == {item["qtype"] for item in dev}
    dev_topics = {item["topic"] for item in dev}
    assert all(q.topic_entities[0].name in dev_topics for q in questions)
    return questions


@pytest.mark.parametrize("hops", HOPS)
def test_the_dev_split_has_200_questions_in_other_wordings_over_dev_topics(monkeypatch: pytest.MonkeyPatch,
                                                                           metaqa_dir: Path, hops: int) -> None:
    monkeypatch.delenv("KGQA_DATA_DIR", raising=False)
    dev = _load_dev_split(metaqa_dir, hops, "dev")
    test_wordings = {wording_key(q.metadata["raw_text"]) for h in HOPS for q in _load(h)}
    metaqa_wordings = {wording_key(item["question"]) for h in HOPS for split in ("dev", "test")
                       for item in iter_metaqa_questions(metaqa_dir, h, split)}
    for q in dev:
        assert wording_key(q.metadata["raw_text"]) not in test_wordings | metaqa_wordings, q.metadata["raw_text"]


@pytest.mark.parametrize("hops", HOPS)
def test_the_second_dev_split_shares_no_wording_with_anything_kgqa_trains_or_measures_on(
        monkeypatch: pytest.MonkeyPatch, metaqa_dir: Path, hops: int) -> None:
    """dev2 (a third author's wordings) is for choosing what should read new wordings: none of its wordings may be
    one of MetaQA's, of the other reworded splits, or of the templates kgqa's scorers train with."""
    from kgqa.methods.fog.wordings.templates import ChainTemplates

    monkeypatch.delenv("KGQA_DATA_DIR", raising=False)
    dev2 = _load_dev_split(metaqa_dir, hops, "dev2")
    known = {wording_key(q.metadata["raw_text"]) for h in HOPS for split in ("test", "dev")
             for q in load_dataset(f"metaqa-reworded-{h}hop", split=split)}
    known |= {wording_key(item["question"]) for h in HOPS for split in ("dev", "test")
              for item in iter_metaqa_questions(metaqa_dir, h, split)}
    known |= {wording_key(t) for name in ("metaqa", "metaqa_many", "metaqa_many2")
              for t in ChainTemplates.load(name).wordings()}
    for q in dev2:
        assert wording_key(q.metadata["raw_text"]) not in known, q.metadata["raw_text"]


def test_no_question_uses_a_metaqa_wording(metaqa_dir: Path) -> None:
    theirs = {wording_key(item["question"]) for hops in HOPS for item in iter_metaqa_questions(metaqa_dir, hops, "test")}
    ours = {hops: [wording_key(q.metadata["raw_text"]) for q in _load(hops)] for hops in HOPS}
    assert all(w.count("{topic}") == 1 for texts in ours.values() for w in texts)
    clashes = sorted({w for texts in ours.values() for w in texts} & theirs)
    assert not clashes, f"worded like MetaQA: {clashes}"
    raw_theirs = {item["question"] for hops in HOPS for item in iter_metaqa_questions(metaqa_dir, hops, "test")}
    assert not {q.metadata["raw_text"] for hops in HOPS for q in _load(hops)} & raw_theirs
    # Several wordings per hop, not one template per type.
    for hops in HOPS:
        assert len(set(ours[hops])) > len({q.metadata["qtype"] for q in _load(hops)})


@pytest.mark.parametrize("hops", HOPS)
def test_answers_are_the_gold_chain(metaqa_kg: EmbeddedKG, hops: int) -> None:
    for q in _load(hops)[:CHECKED_PER_HOP]:
        reached, truncated = run_metaqa_chain(metaqa_kg, q.topic_entities[0].id, q.metadata["qtype"])
        assert not truncated
        assert {a.id for a in q.answers} == reached, q.id
