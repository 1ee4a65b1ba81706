"""Dataset loaders: real files from the shared data directory (counts against its README) and malformed copies."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kgqa.core import Question
from kgqa.datasets import DATA_DIR_ENV, dataset_info, dataset_names, load_dataset, resolve_data_dir
from kgqa.errors import ConfigError, DataError

IN_CI = os.environ.get("CI", "").lower() == "true"

# Question counts stated in the data README (../shared/data/README.md).
README_COUNTS = {
    ("metaqa-1hop", "dev"): 9_992, ("metaqa-2hop", "dev"): 14_872, ("metaqa-3hop", "dev"): 14_274,
    ("metaqa-1hop", "test"): 9_947, ("metaqa-2hop", "test"): 14_872, ("metaqa-3hop", "test"): 14_274,
    ("cwq", "test"): 3_531, ("webqsp", "test"): 1_639, ("webqsp-gog", "test"): 1_000, ("grailqa", "test"): 1_000,
    ("cwq-gog", "test"): 1_000,
    ("qald10-en", "test"): 333, ("webquestions", "test"): 2_032, ("simplequestions", "test"): 1_000,
}


def _shared_data() -> Path:
    default = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
    return Path(os.environ.get(DATA_DIR_ENV) or default)


@pytest.fixture(scope="module")
def data() -> Path:
    path = _shared_data()
    if not (path / "metaqa").is_dir() or not (path / "questions").is_dir():
        if IN_CI:
            pytest.fail(f"benchmark data {path} is missing (CI=true, so this is an error)")
        pytest.skip(f"benchmark data {path} is missing")
    return path


_cache: dict[tuple[str, str], list[Question]] = {}


def _load(data: Path, name: str, split: str = "test") -> list[Question]:
    key = (name, split)
    if key not in _cache:
        _cache[key] = load_dataset(name, split, data_dir=data)
    return _cache[key]


# ---------------------------------------------------------------------------------------------------------------------
# Real data


def test_registry_lists_every_dataset() -> None:
    packaged = {"demo", "metaqa-reworded-1hop", "metaqa-reworded-2hop", "metaqa-reworded-3hop"}  # ship inside kgqa
    assert set(dataset_names()) == {n for n, _ in README_COUNTS} | packaged
    assert dataset_info("metaqa-2hop").splits == ("dev", "test")
    assert dataset_info("cwq").splits == ("test",)
    assert dataset_info("qald10-en").kg == "wikidata"


@pytest.mark.parametrize(("name", "split"), sorted(README_COUNTS))
def test_counts_match_the_data_readme(data: Path, name: str, split: str) -> None:
    questions = _load(data, name, split)
    assert len(questions) == README_COUNTS[(name, split)] == dataset_info(name).sizes[split]
    ids = [q.id for q in questions]
    assert len(set(ids)) == len(ids), "question ids must be unique within a split"
    assert all(q.text.strip() for q in questions)
    assert all(q.metadata["dataset"] == name and q.metadata["split"] == split for q in questions)


def test_metaqa_topic_entity_is_the_bracketed_label(data: Path) -> None:
    questions = _load(data, "metaqa-2hop", "dev")
    first = questions[0]
    # Line 1 of 2-hop/qa_dev.txt and of qa_dev_qtype.txt.
    assert first.id == "metaqa-2hop-dev-1"
    assert first.text == "what are the languages spoken in the films directed by Joel Zwick"
    assert [(t.id, t.name) for t in first.topic_entities] == [("Joel Zwick", "Joel Zwick")]
    assert [(a.id, a.name) for a in first.answers] == [("Greek", "Greek")]
    assert first.metadata["hops"] == 2
    assert first.metadata["qtype"] == "director_to_movie_to_language"
    assert first.metadata["raw_text"].endswith("[Joel Zwick]")
    assert all("[" not in q.text and len(q.topic_entities) == 1 for q in questions)
    # The question-type file is aligned line by line.
    qtypes = (data / "metaqa/2-hop/qa_dev_qtype.txt").read_text(encoding="utf-8").splitlines()
    assert [q.metadata["qtype"] for q in questions] == qtypes


def test_metaqa_answers_and_accents(data: Path) -> None:
    questions = _load(data, "metaqa-1hop", "test")
    line1 = questions[0]
    assert line1.topic_entities[0].id == "Grégoire Colin"
    assert line1.gold_names == ["Before the Rain"]
    three = _load(data, "metaqa-3hop", "test")
    assert three[0].gold_names == ["German", "Polish", "Mende", "Japanese"]
    assert three[0].metadata["qtype"] and three[0].metadata["hops"] == 3


def test_cwq_joins_official_mids_with_pog_names(data: Path) -> None:
    questions = {q.id: q for q in _load(data, "cwq")}
    first = questions["WebQTest-832_c334509bb5e02cacae1ba2e80c176499"]
    assert [(a.id, a.name) for a in first.answers] == [("m.0117q3yz", "2014 World Series")]
    assert [(t.id, t.name) for t in first.topic_entities] == [("m.03_dwn", "Lou Seal")]
    assert first.metadata["compositionality"] == "composition"
    assert "ns:sports.sports_team.team_mascot" in first.metadata["sparql"]
    assert first.metadata["webqsp_id"] == "WebQTest-832"
    # A multi-answer question: names are position-aligned with the official MIDs.
    anthem = next(q for q in questions.values() if q.text.startswith("The national anthem Afghan National Anthem"))
    assert {a.name for a in anthem.answers} == {"Sunni Islam", "Shia Islam"}
    assert all(a.id and a.id.startswith(("m.", "g.")) for a in anthem.answers)
    # Literal answers (no MID in the official file) keep their value as name and have no id.
    literal = [a for q in questions.values() for a in q.answers if a.id is None]
    assert {a.name for a in literal} >= {"financier", "steel"}
    assert {q.metadata["compositionality"] for q in questions.values()} == {
        "composition", "conjunction", "comparative", "superlative"}
    total = sum(len(q.answers) for q in questions.values())
    assert total == 6_931  # the official file's answer count (no duplicates)


def test_cwq_gog_is_the_same_join_over_gogs_thousand(data: Path) -> None:
    gog, everything = _load(data, "cwq-gog"), _load(data, "cwq")
    # GoG's file holds ToG's first 1,000 records, so the join gives the first 1,000 cwq questions, field for field.
    assert [q.id for q in gog] == [q.id for q in everything[:1_000]]
    for mine, theirs in zip(gog, everything, strict=False):
        assert mine.text == theirs.text and mine.answers == theirs.answers
        assert mine.topic_entities == theirs.topic_entities
        assert mine.metadata == {**theirs.metadata, "dataset": "cwq-gog"}
    assert all(q.metadata["max_depth"] == 4 and q.metadata["sparql"] for q in gog)
    assert {q.metadata["compositionality"] for q in gog} == {"composition", "conjunction", "comparative", "superlative"}
    assert dataset_info("cwq-gog").files["test"][1:] == dataset_info("cwq").files["test"][1:]


def test_webqsp_compact_keeps_names_and_flags_lost_literals(data: Path) -> None:
    questions = {q.id: q for q in _load(data, "webqsp")}
    first = questions["WebQTest-1198"]
    assert first.text == "who influenced samuel taylor coleridge?"
    assert first.topic_entities[0].id == "m.078w2"
    assert "Immanuel Kant" in first.gold_names and all(a.id is None for a in first.answers)
    aud = questions["WebQTest-32"]  # "what is the australian dollar called?": the compact file has a null answer
    assert aud.answers == [] and aud.metadata["missing_gold"] == 1


def test_webqsp_gog_has_parses_chains_and_constraints(data: Path) -> None:
    questions = _load(data, "webqsp-gog")
    first = questions[0]
    assert first.id == "WebQTest-1198"
    assert first.metadata["hops"] == 1
    assert first.metadata["inferential_chain"] == ["influence.influence_node.influenced_by"]
    assert ("m.03sbs", "Immanuel Kant") in [(a.id, a.name) for a in first.answers]
    assert first.metadata["constrained"] is False
    constrained = [q for q in questions if q.metadata["constrained"]]
    assert constrained and all(
        q.metadata["constraints"] or q.metadata["time"] or q.metadata["order"] for q in constrained)
    # Value answers are literals: no id, the value as name.
    values = {a.name for q in questions for a in q.answers if a.id is None}
    assert {"AUD", "2005"} <= values
    # Gold = union over parses; each parse's answer set is kept.
    multi = [q for q in questions if "parse_answers" in q.metadata]
    assert multi and all(len(q.metadata["parse_answers"]) > 1 for q in multi)
    assert {q.metadata["hops"] for q in questions} == {None, 1, 2}


def test_grailqa_qald_webquestions_simplequestions(data: Path) -> None:
    grail = _load(data, "grailqa")
    assert grail[0].id == "2101960008000"
    assert [(a.id, a.name) for a in grail[0].answers] == [("m.0yrltsn", "The Illusion")]
    assert grail[0].metadata["level"] == "i.i.d." and grail[0].metadata["function"] == "none"
    assert grail[0].metadata["s_expression"].startswith("(AND theater.play")
    assert any(a.id is None and a.name == "1" for q in grail for a in q.answers)  # a Value (count) answer

    qald = _load(data, "qald10-en")
    assert [(a.id, a.name) for a in qald[0].answers] == [("Q42299", "Bernhard Riemann")]
    assert [(t.id, t.name) for t in qald[0].topic_entities] == [("Q761383", "Riemannian geometry")]
    literals = [a for q in qald for a in q.answers if a.id is None]
    assert any(a.name == "0" for a in literals)
    assert sum(1 for q in qald if not q.answers) == 1  # the file has one question with an empty answer set

    webq = _load(data, "webquestions")
    assert webq[0].gold_names == ["Jamaican Creole English Language", "Jamaican English"]
    assert webq[0].topic_entities[0].id == "m.03_r3"
    assert webq[0].metadata["wikidata_topic_entities"] == [{"id": "Q766", "name": "Jamaica"}]

    simple = _load(data, "simplequestions")
    assert simple[0].gold_names == ["United States of America"]
    assert simple[0].metadata["relation"] == "country" and simple[0].metadata["hops"] == 1


def test_freebase_ids_have_no_ns_prefix(data: Path) -> None:
    for name in ("cwq", "webqsp", "webqsp-gog", "grailqa", "webquestions", "simplequestions"):
        for q in _load(data, name):
            ids = [t.id for t in q.topic_entities] + [a.id for a in q.answers if a.id]
            assert not any(i.startswith(("ns:", "http")) for i in ids), (name, q.id, ids)


def test_limit(data: Path) -> None:
    assert [q.id for q in load_dataset("metaqa-1hop", "dev", data_dir=data, limit=3)] == [
        "metaqa-1hop-dev-1", "metaqa-1hop-dev-2", "metaqa-1hop-dev-3"]
    assert len(load_dataset("cwq", data_dir=data, limit=5)) == 5
    assert load_dataset("webqsp", data_dir=data, limit=0) == []
    with pytest.raises(ConfigError, match="limit"):
        load_dataset("webqsp", data_dir=data, limit=-1)


def test_data_dir_from_environment(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DATA_DIR_ENV, str(data))
    assert resolve_data_dir() == data
    assert len(load_dataset("qald10-en")) == 333


# ---------------------------------------------------------------------------------------------------------------------
# Bad input: names, directories, files


def test_unknown_dataset_and_split(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown dataset 'metaqa'.*metaqa-1hop"):
        load_dataset("metaqa", data_dir=tmp_path)
    with pytest.raises(ConfigError, match=r"no split 'dev'.*test"):
        load_dataset("cwq", "dev", data_dir=tmp_path)


def test_no_data_dir_is_a_clear_config_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    with pytest.raises(ConfigError, match=r"--data-dir.*KGQA_DATA_DIR.*docs/datasets.md"):
        load_dataset("metaqa-1hop")
    with pytest.raises(ConfigError, match="does not exist"):
        load_dataset("metaqa-1hop", data_dir=tmp_path / "nowhere")
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "also-nowhere"))
    with pytest.raises(ConfigError, match=r"also-nowhere.*\$KGQA_DATA_DIR"):
        load_dataset("metaqa-1hop")


def test_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"metaqa/1-hop/qa_test\.txt not found.*github\.com/yuyuz/MetaQA"):
        load_dataset("metaqa-1hop", data_dir=tmp_path)
    (tmp_path / "questions/tog").mkdir(parents=True)
    (tmp_path / "questions/tog/cwq.json").write_text("[]", encoding="utf-8")
    with pytest.raises(DataError, match=r"ComplexWebQuestions_test\.json not found"):
        load_dataset("cwq", data_dir=tmp_path)


def _write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_metaqa_malformed_lines(tmp_path: Path) -> None:
    good = "what movies did [Tom Hanks] act in\tBig|Cast Away|Big\n"
    _write(tmp_path, "metaqa/1-hop/qa_test.txt", good + "a line without a tab\n")
    with pytest.raises(DataError, match=r"qa_test\.txt: line 2: expected 'question<TAB>"):
        load_dataset("metaqa-1hop", data_dir=tmp_path)
    _write(tmp_path, "metaqa/1-hop/qa_test.txt", good + "who directed Heat\tMichael Mann\n")
    with pytest.raises(DataError, match=r"line 2: no \[topic entity\]"):
        load_dataset("metaqa-1hop", data_dir=tmp_path)
    _write(tmp_path, "metaqa/1-hop/qa_test.txt", good + "who directed [Heat]\t \n")
    with pytest.raises(DataError, match="line 2: no answers"):
        load_dataset("metaqa-1hop", data_dir=tmp_path)
    _write(tmp_path, "metaqa/1-hop/qa_test.txt", good)
    _write(tmp_path, "metaqa/1-hop/qa_test_qtype.txt", "actor_to_movie\nmovie_to_actor\n")
    with pytest.raises(DataError, match=r"qa_test_qtype\.txt: has 2 lines but"):
        load_dataset("metaqa-1hop", data_dir=tmp_path)


def test_metaqa_small_file_parses_and_dedupes(tmp_path: Path) -> None:
    _write(tmp_path, "metaqa/1-hop/qa_test.txt",
           "what movies did [Tom Hanks] act in\tBig|Cast Away|Big\n\nwho directed [Amélie]\tJean-Pierre Jeunet\n")
    questions = load_dataset("metaqa-1hop", data_dir=tmp_path)  # no qtype file: optional
    assert [q.id for q in questions] == ["metaqa-1hop-test-1", "metaqa-1hop-test-3"]
    assert questions[0].gold_names == ["Big", "Cast Away"]
    assert "qtype" not in questions[0].metadata
    assert questions[1].topic_entities[0].name == "Amélie" and questions[1].text == "who directed Amélie"


def test_json_malformed_files(tmp_path: Path) -> None:
    _write(tmp_path, "questions/tog/SimpleQA.json", '[{"question": "q", "answer": "a"},\n  {"question": ')
    with pytest.raises(DataError, match=r"SimpleQA\.json: not valid JSON \(line 2"):
        load_dataset("simplequestions", data_dir=tmp_path)
    _write(tmp_path, "questions/tog/SimpleQA.json", json.dumps({"question": "q"}))
    with pytest.raises(DataError, match="expected a JSON list"):
        load_dataset("simplequestions", data_dir=tmp_path)
    records = [{"question": "where is x", "answer": "y", "topic_entity": {"m.1": "x"}},
               {"question": "no answer field", "topic_entity": {}}]
    _write(tmp_path, "questions/tog/SimpleQA.json", json.dumps(records))
    with pytest.raises(DataError, match=r"SimpleQA\.json: record 1: missing field 'answer'"):
        load_dataset("simplequestions", data_dir=tmp_path)
    records[1] = {"question": "q", "answer": ["not", "a", "string"], "topic_entity": {}}
    _write(tmp_path, "questions/tog/SimpleQA.json", json.dumps(records))
    with pytest.raises(DataError, match=r"record 1: malformed \(answer should be a string"):
        load_dataset("simplequestions", data_dir=tmp_path)
    records[1] = {"question": "q", "answer": "a", "topic_entity": ["m.1"]}
    _write(tmp_path, "questions/tog/SimpleQA.json", json.dumps(records))
    with pytest.raises(DataError, match=r"record 1: malformed \(topic_entity should be an object"):
        load_dataset("simplequestions", data_dir=tmp_path)


def test_cwq_join_requires_every_id(tmp_path: Path) -> None:
    tog = [{"ID": "q1", "question": "Q one?", "answer": "A", "topic_entity": {"ns:m.0t": "T"},
            "compositionality_type": "composition"},
           {"ID": "q2", "question": "Q two?", "answer": "B", "topic_entity": {}}]
    official = [{"ID": "q1", "answer": ["m.0a", "1987"]}]
    _write(tmp_path, "questions/tog/cwq.json", json.dumps(tog))
    _write(tmp_path, "questions/chatkbqa/CWQ/ComplexWebQuestions_test.json", json.dumps(official))
    _write(tmp_path, "questions/pog/cope_alias/cwq_aname_dict.json", json.dumps({"Q one?": ["A", "1987"]}))
    with pytest.raises(DataError, match=r"cwq\.json: record 1: ID 'q2' is not in .*ComplexWebQuestions_test\.json"):
        load_dataset("cwq", data_dir=tmp_path)
    questions = load_dataset("cwq", data_dir=tmp_path, limit=1)
    assert [(a.id, a.name) for a in questions[0].answers] == [("m.0a", "A"), (None, "1987")]
    assert questions[0].topic_entities[0].id == "m.0t"  # "ns:" prefix removed


def test_grailqa_accepts_tog_misspelt_file_name(tmp_path: Path) -> None:
    record = {"qid": 7, "question": "q?", "answer": [{"answer_type": "Entity", "answer_argument": "m.1",
                                                      "entity_name": "One"}], "topic_entity": {}}
    _write(tmp_path, "questions/tog/graliqa.json", json.dumps([record]))
    questions = load_dataset("grailqa", data_dir=tmp_path)
    assert questions[0].id == "7" and questions[0].answers[0].id == "m.1"
