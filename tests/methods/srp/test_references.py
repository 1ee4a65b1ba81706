"""SRP's reference base on the real demo KG and demo questions (and on MetaQA when its data is there): the KG check of
the gold paths, the equal share per k-means cluster, determinism for a seed, the files and their validation, the
nearest references without the question itself, and ``kgqa train srp``."""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from kgqa.cli import main
from kgqa.core import GoldAnswer, Question, TopicEntity
from kgqa.datasets import load_dataset
from kgqa.datasets.gold_chains import answer_keys
from kgqa.errors import ConfigError
from kgqa.kg import open_kg
from kgqa.kg.base import KnowledgeGraph, format_chain, parse_chain
from kgqa.methods.srp.references import (
    CHAIN_MISSES,
    DUPLICATE,
    EMBEDDINGS_FILE,
    META_FILE,
    NO_ANSWER,
    NO_CHAIN,
    NO_TOPIC,
    REFERENCES_FILE,
    RELATION_NOT_IN_KG,
    TOPIC_NOT_IN_KG,
    Reference,
    ReferenceBase,
    check_candidates,
    normalize_question,
    plan_shares,
)
from kgqa.testing import offline_embedder

IN_CI = os.environ.get("CI") == "true"
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def demo_kg() -> KnowledgeGraph:
    return open_kg("demo")


@pytest.fixture(scope="module")
def demo_questions() -> dict[str, Question]:
    return {q.id: q for q in load_dataset("demo", split="test")}


@pytest.fixture(scope="module")
def candidates(demo_kg: KnowledgeGraph, demo_questions: dict[str, Question]) -> list[Reference]:
    kept, dropped = check_candidates(list(demo_questions.values()), demo_kg)
    assert dropped == Counter()  # every demo question's chain reaches its answers (tests/kg/test_demo_kg.py)
    assert len(kept) == len(demo_questions) == 61
    return kept


@pytest.fixture(scope="module")
def base(candidates: list[Reference]) -> ReferenceBase:
    return ReferenceBase.build(candidates, offline_embedder(), size=12, clusters=3, seed=0)


def reaches_an_answer(kg: KnowledgeGraph, question: Question, reference: Reference) -> bool:
    """The reference's path, run from the question's topics, reaches a gold answer, and its answers are reached ones."""
    reached = set(kg.run_chain(question.topic_ids, parse_chain(reference.path), limit=100_000).entities)
    names = {name for key, name in answer_keys(question).items() if key in reached}
    return bool(names) and set(reference.answers) <= names


# -- the check on the KG ---------------------------------------------------------------------------------------------


def test_every_candidate_path_reaches_one_of_its_gold_answers_on_the_kg(
        candidates: list[Reference], demo_kg: KnowledgeGraph, demo_questions: dict[str, Question]) -> None:
    for ref in candidates:
        question = demo_questions[ref.id]
        assert ref.question == question.text
        assert ref.topics == [t.name for t in question.topic_entities]
        assert parse_chain(ref.path) == parse_chain(question.metadata["chain"])
        assert format_chain(parse_chain(ref.path)) == ref.path  # the path reads back as written
        assert 1 <= len(ref.answers) <= 5 and set(ref.answers) <= set(question.gold_names)
        assert reaches_an_answer(demo_kg, question, ref), ref


def test_questions_that_cannot_be_references_are_counted_by_reason(demo_kg: KnowledgeGraph) -> None:
    inception = [TopicEntity(id="m.0demo_inception", name="Inception")]
    nolan = [GoldAnswer(id="m.0demo_christopher_nolan", name="Christopher Nolan")]

    def q(qid: str, text: str, topics: list[TopicEntity], answers: list[GoldAnswer], chain: str | None) -> Question:
        return Question(id=qid, text=text, topic_entities=topics, answers=answers,
                        metadata={"chain": chain, "dataset": "made-up"})

    questions = [
        q("ok", "Who directed Inception?", inception, nolan, "film.film.directed_by"),
        q("no-chain", "Who directed Inception, really?", inception, nolan, None),
        q("no-topic", "Who directed it?", [], nolan, "film.film.directed_by"),
        q("no-answer", "Who directed Inception then?", inception, [], "film.film.directed_by"),
        q("not-in-kg", "Who directed Nowhere?", [TopicEntity(id="m.0demo_nowhere", name="Nowhere")], nolan,
          "film.film.directed_by"),
        q("bad-relation", "Who shot Inception?", inception, nolan, "film.film.shot_by"),
        q("misses", "Who wrote Inception's music?", inception,
          [GoldAnswer(id="m.0demo_hans_zimmer", name="Hans Zimmer")], "film.film.directed_by"),
        q("again", "  who DIRECTED inception? ", inception, nolan, "film.film.directed_by"),
    ]
    kept, dropped = check_candidates(questions, demo_kg)
    assert [r.id for r in kept] == ["ok"]
    assert kept[0] == Reference(id="ok", question="Who directed Inception?", topics=["Inception"],
                                path="film.film.directed_by", answers=["Christopher Nolan"], dataset="made-up")
    assert dropped == {NO_CHAIN: 1, NO_TOPIC: 1, NO_ANSWER: 1, TOPIC_NOT_IN_KG: 1, RELATION_NOT_IN_KG: 1,
                       CHAIN_MISSES: 1, DUPLICATE: 1}


# -- drawing the base ------------------------------------------------------------------------------------------------


def test_shares_are_equal_and_small_clusters_are_topped_up_from_the_largest() -> None:
    assert plan_shares([27, 24, 10], 12) == [4, 4, 4]
    assert plan_shares([11, 11, 10, 7, 5, 5, 4, 3, 3, 2], 30) == [4, 3, 3, 3, 3, 3, 3, 3, 3, 2]
    assert plan_shares([2, 9, 1], 9) == [2, 6, 1]
    assert plan_shares([3, 3, 3], 10) == [3, 3, 3]  # never more than there is
    assert plan_shares([5, 5], 3) == [2, 1]  # the remainder to the larger, then the lower number


def test_the_base_takes_an_equal_share_of_each_cluster(base: ReferenceBase, candidates: list[Reference]) -> None:
    assert len(base) == 12
    assert base.info["clusters"] == 3 and len(base.info["cluster_sizes"]) == 3
    assert sum(base.info["cluster_sizes"]) == len(candidates)
    assert min(base.info["cluster_sizes"]) >= 4  # so the equal share is possible everywhere
    assert base.info["cluster_shares"] == [4, 4, 4]
    assert Counter(r.cluster for r in base.references) == {0: 4, 1: 4, 2: 4}
    # clusters numbered largest first, references in cluster order
    assert base.info["cluster_sizes"] == sorted(base.info["cluster_sizes"], reverse=True)
    assert [r.cluster for r in base.references] == sorted(r.cluster for r in base.references)
    by_id = {c.id: c for c in candidates}
    for ref in base.references:
        assert ref == Reference(**{**by_id[ref.id].to_dict(), "cluster": ref.cluster})
    assert base.embeddings.dtype == np.float32 and base.embeddings.shape == (12, 256)
    np.testing.assert_allclose(np.linalg.norm(base.embeddings, axis=1), 1.0, rtol=1e-5)
    assert base.embedder_spec == "hash:256"


def test_the_same_seed_gives_the_same_base_and_another_seed_another(base: ReferenceBase,
                                                                      candidates: list[Reference]) -> None:
    again = ReferenceBase.build(candidates, offline_embedder(), size=12, clusters=3, seed=0)
    assert again.references == base.references
    assert np.array_equal(again.embeddings, base.embeddings)
    other = ReferenceBase.build(candidates, offline_embedder(), size=12, clusters=3, seed=1)
    assert [r.id for r in other.references] != [r.id for r in base.references]
    assert len(other) == 12


def test_fewer_candidates_than_the_size_keeps_them_all(candidates: list[Reference]) -> None:
    small = ReferenceBase.build(candidates[:7], offline_embedder(), size=100, clusters=10, seed=0)
    assert sorted(r.id for r in small.references) == sorted(c.id for c in candidates[:7])
    assert small.info["clusters"] == 7 and small.info["requested_clusters"] == 10
    assert small.info["requested_size"] == 100 and small.info["size"] == 7


def test_a_bad_candidate_or_setting_is_a_clear_error(candidates: list[Reference]) -> None:
    with pytest.raises(ConfigError, match="appears twice"):
        ReferenceBase.build([candidates[0], candidates[0]], offline_embedder())
    with pytest.raises(ConfigError, match="size must be at least 1"):
        ReferenceBase.build(candidates, offline_embedder(), size=0)
    with pytest.raises(ConfigError, match="no candidate references"):
        ReferenceBase.build([], offline_embedder())


# -- files -----------------------------------------------------------------------------------------------------------


def test_save_and_load_round_trip(base: ReferenceBase, tmp_path: Path) -> None:
    base.save(tmp_path / "refs")
    assert sorted(p.name for p in (tmp_path / "refs").iterdir()) == [
        "README.md", EMBEDDINGS_FILE, META_FILE, REFERENCES_FILE]
    rows = [json.loads(line) for line in (tmp_path / "refs" / REFERENCES_FILE).read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in rows] == [r.id for r in base.references]
    assert np.load(tmp_path / "refs" / EMBEDDINGS_FILE).dtype == np.float32
    loaded = ReferenceBase.load(tmp_path / "refs")
    assert loaded.references == base.references
    assert np.array_equal(loaded.embeddings, base.embeddings)
    assert loaded.info == base.info
    assert "k-means with 3 clusters" in (tmp_path / "refs" / "README.md").read_text(encoding="utf-8")


def _break_count(root: Path) -> None:
    lines = (root / REFERENCES_FILE).read_text(encoding="utf-8").splitlines()
    (root / REFERENCES_FILE).write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")


def _break_line(root: Path) -> None:
    lines = (root / REFERENCES_FILE).read_text(encoding="utf-8").splitlines()
    lines[2] = '{"id": "x", "question": "q"'
    (root / REFERENCES_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")


def _break_field(root: Path) -> None:
    lines = (root / REFERENCES_FILE).read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[1])
    del row["path"]
    lines[1] = json.dumps(row)
    (root / REFERENCES_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")


def _scale_rows(root: Path) -> None:
    np.save(root / EMBEDDINGS_FILE, np.load(root / EMBEDDINGS_FILE) * 2)


def _change_version(root: Path) -> None:
    info = json.loads((root / META_FILE).read_text(encoding="utf-8"))
    info["format_version"] = 99
    (root / META_FILE).write_text(json.dumps(info), encoding="utf-8")


@pytest.mark.parametrize(("damage", "message"), [
    (lambda root: (root / EMBEDDINGS_FILE).unlink(), f"{EMBEDDINGS_FILE}: missing"),
    (lambda root: (root / REFERENCES_FILE).unlink(), f"{REFERENCES_FILE}: missing"),
    (lambda root: (root / META_FILE).unlink(), f"{META_FILE}: missing"),
    (lambda root: (root / META_FILE).write_text("{not json", encoding="utf-8"), f"{META_FILE}: not valid JSON"),
    (_change_version, f"{META_FILE}: format version 99"),
    (_break_count, f"{REFERENCES_FILE} has 11 rows but {EMBEDDINGS_FILE} has 12"),
    (_break_line, f"{REFERENCES_FILE}: line 3: not valid JSON"),
    (_break_field, f"{REFERENCES_FILE}: line 2: missing path"),
    (lambda root: np.save(root / EMBEDDINGS_FILE, np.zeros((12, 256))), f"{EMBEDDINGS_FILE}: expected a 2-D float32"),
    (_scale_rows, f"{EMBEDDINGS_FILE} row 1 is not unit length"),
])
def test_load_names_the_bad_file(base: ReferenceBase, tmp_path: Path, damage, message: str) -> None:
    root = base.save(tmp_path / "refs")
    damage(root)
    with pytest.raises(ConfigError) as caught:
        ReferenceBase.load(root)
    assert message in str(caught.value)


def test_load_of_a_missing_directory_says_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a directory"):
        ReferenceBase.load(tmp_path / "nothing")


# -- retrieval -------------------------------------------------------------------------------------------------------


def test_nearest_is_deterministic_returns_k_and_never_the_question_itself(base: ReferenceBase) -> None:
    embedder = offline_embedder()
    own = base.references[5]
    first = base.nearest(own.question, embedder, k=4)
    assert len(first) == 4 and first[0] == own  # a question is its own nearest neighbour ...
    assert base.nearest(own.question, embedder, k=4) == first
    by_id = base.nearest(own.question, embedder, k=4, exclude_ids=[own.id])
    by_text = base.nearest(own.question, embedder, k=4, exclude_text=f"  {own.question.upper()}\t")
    assert own not in by_id and own not in by_text  # ... so it is left out, by id or by its text
    assert len(by_id) == len(by_text) == 4
    assert by_id == by_text == first[1:] + base.nearest(own.question, embedder, k=5)[4:]
    # the ranking is by cosine
    scores = [float(base.embeddings[base.references.index(r)] @ embedder.embed([own.question])[0]) for r in by_id]
    assert scores == sorted(scores, reverse=True)
    assert base.nearest(own.question, embedder, k=0) == []
    assert len(base.nearest(own.question, embedder, k=50)) == len(base)


def test_nearest_breaks_ties_by_file_order() -> None:
    embedder = offline_embedder()
    refs = [Reference(id=f"r{i}", question=text, topics=["X"], path="film.film.directed_by", answers=["Y"], cluster=0)
            for i, text in enumerate(["who directed X", "what did X write", "who directed X", "who directed X"])]
    vectors = embedder.embed([r.question for r in refs])
    tied = ReferenceBase(refs, vectors, {"embedder": {"spec": "hash", "name": embedder.name, "dim": embedder.dim}})
    assert [r.id for r in tied.nearest("who directed X", embedder, k=3)] == ["r0", "r2", "r3"]
    assert [r.id for r in tied.nearest("who directed X", embedder, k=3, exclude_ids={"r2"})] == ["r0", "r3", "r1"]
    assert [r.id for r in tied.nearest("who directed X", embedder, k=3, exclude_text="Who directed X")] == ["r1"]
    assert normalize_question(" Who  DIRECTED x ") == "who directed x"


def test_nearest_refuses_an_embedder_of_another_dimension(base: ReferenceBase) -> None:
    with pytest.raises(ConfigError, match=r"embedded with hash256 \(256 dimensions\).*hash128 \(128 dimensions\)"):
        base.nearest("Who directed Inception?", offline_embedder(128))


# -- kgqa train srp ----------------------------------------------------------------------------------------------------


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["train", "srp", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_train_srp_writes_a_base_and_prints_the_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "refs"
    code, stdout, stderr = run_cli(capsys, "--dataset", "demo", "--split", "test", "--kg", "demo", "--out", str(out),
                                   "--embedder", "hash", "--size", "12", "--clusters", "3", "--seed", "0")
    assert code == 0, stderr
    lines = stdout.splitlines()
    assert "questions: 61 in demo (test)" in lines
    assert "kept: 61 candidates (the gold chain reaches a gold answer on the KG)" in lines
    assert "dropped: none" in lines
    assert any(line.startswith("clusters: 3 (asked for 3); candidates per cluster: ") for line in lines)
    assert "references per cluster: 4 4 4 (total 12, asked for 12)" in lines
    assert lines[-1].startswith(f"wrote {out} ")
    loaded = ReferenceBase.load(out)
    assert len(loaded) == 12
    info = json.loads((out / META_FILE).read_text(encoding="utf-8"))
    assert (info["datasets"], info["split"], info["kg"], info["seed"], info["clusters"]) == (["demo"], "test", "demo", 0, 3)
    assert info["embedder"] == {"spec": "hash", "name": "hash256", "dim": 256}
    assert info["counts_by_reason"] == {} and info["questions"] == 61
    assert "train srp" in info["command"]
    # the CLI draws what the Python API draws
    kept, _ = check_candidates(load_dataset("demo", split="test"), open_kg("demo"))
    assert loaded.references == ReferenceBase.build(kept, offline_embedder(), size=12, clusters=3, seed=0).references


@pytest.mark.parametrize(("args", "message"), [
    (["--dataset", "no-such-set", "--kg", "demo"], "unknown dataset 'no-such-set'"),
    (["--dataset", "demo", "--split", "dev", "--kg", "demo"], "dataset 'demo' has no split 'dev'"),
    (["--dataset", "demo", "--split", "test", "--kg", "demo", "--size", "0"], "--size must be at least 1"),
    (["--dataset", "demo", "--split", "test", "--kg", "demo", "--size", "5", "--clusters", "6"], "--clusters must be"),
])
def test_train_srp_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                         message: str) -> None:
    code, stdout, stderr = run_cli(capsys, *args, "--out", str(tmp_path / "refs"), "--embedder", "hash")
    assert code == 2 and stdout == ""
    assert stderr.strip().splitlines()[-1].startswith("kgqa: error: ")
    assert message in stderr and "Traceback" not in stderr
    assert not (tmp_path / "refs").exists()


def test_train_srp_refuses_a_non_empty_out(tmp_path: Path, capsys: pytest.CaptureFixture[str], base: ReferenceBase) -> None:
    args = ["--dataset", "demo", "--split", "test", "--kg", "demo", "--embedder", "hash", "--size", "12"]
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "notes.txt").write_text("mine", encoding="utf-8")
    code, _, stderr = run_cli(capsys, *args, "--out", str(stray))
    assert code == 2 and stderr.strip() == f"kgqa: error: --out {stray}: the directory exists and is not empty " \
                                           "(choose a new one)"
    previous = base.save(tmp_path / "previous")
    before = (previous / REFERENCES_FILE).read_bytes()
    code, _, stderr = run_cli(capsys, *args, "--out", str(previous))
    assert code == 2 and len(stderr.strip().splitlines()) == 1
    assert "holds a reference base already; remove it first" in stderr
    assert (previous / REFERENCES_FILE).read_bytes() == before


# -- MetaQA ------------------------------------------------------------------------------------------------------------


def _metaqa_data() -> Path:
    path = Path(os.environ.get("KGQA_DATA_DIR") or REPO / ".." / "shared" / "data")
    if not (path / "metaqa" / "kb.txt").is_file() or not (path / "metaqa" / "2-hop" / "qa_dev.txt").is_file():
        if IN_CI:
            pytest.fail(f"MetaQA data missing at {path} (CI=true, so this is an error; set KGQA_DATA_DIR)")
        pytest.skip(f"MetaQA data missing at {path} (set KGQA_DATA_DIR)")
    return path.resolve()


@pytest.mark.slow
def test_metaqa_2hop_dev_reference_base(tmp_path: Path) -> None:
    from kgqa.kg.embedded import EmbeddedKGBuilder
    from kgqa.kg.loaders import load_into

    data = _metaqa_data()
    builder = EmbeddedKGBuilder(schema="generic")
    load_into(builder, data / "metaqa" / "kb.txt", "metaqa")
    kg = builder.build(tmp_path / "kg")
    try:
        questions = load_dataset("metaqa-2hop", split="dev", data_dir=data)
        kept, dropped = check_candidates(questions, kg)
        assert len(questions) == 14_872
        assert len(kept) + sum(dropped.values()) == len(questions)
        assert len(kept) >= 0.99 * len(questions)  # MetaQA's question-type chains reach the answers (measured: all)
        base = ReferenceBase.build(kept, offline_embedder(), size=20, clusters=10, seed=0)
        assert len(base) == 20 and base.info["cluster_shares"] == [2] * 10
        by_id = {q.id: q for q in questions}
        for ref in base.references:
            question = by_id[ref.id]
            assert ref.dataset == "metaqa-2hop" and len(parse_chain(ref.path)) == 2
            assert reaches_an_answer(kg, question, ref), ref
        probe = by_id[base.references[0].id]
        near = base.nearest(probe.text, offline_embedder(), k=4, exclude_ids=[probe.id], exclude_text=probe.text)
        assert len(near) == 4 and probe.id not in {r.id for r in near}
        assert all(normalize_question(r.question) != normalize_question(probe.text) for r in near)
    finally:
        kg.close()
        shutil.rmtree(tmp_path / "kg", ignore_errors=True)
