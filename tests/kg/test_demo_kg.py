"""The shipped demo KG (src/kgqa/data/demo): well-formed files, in sync with build_demo.py, and every demo question's
gold chain (plus constraint) returns exactly its gold answers on the real embedded store."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from kgqa.kg import ConstraintChain, Direction, parse_chain
from kgqa.kg.base import is_literal, literal_value
from kgqa.kg.embedded import EmbeddedKG, EmbeddedKGBuilder

DEMO = Path(__file__).resolve().parents[2] / "src" / "kgqa" / "data" / "demo"
FREEBASE_ID = re.compile(r"^[mg]\.[0-9a-z_]+$")
CVT_PREFIX = "m.0demo_cvt_"
NOISE = ("type.object.type", "common.topic.notable_types", "common.topic.alias")


def read_triples() -> list[tuple[str, str, str]]:
    rows = []
    for line in (DEMO / "triples.tsv").read_text(encoding="utf-8").splitlines():
        head, relation, tail = line.split("\t")
        rows.append((head, relation, tail))
    return rows


def read_names() -> dict[str, str]:
    names = {}
    for line in (DEMO / "names.tsv").read_text(encoding="utf-8").splitlines():
        entity, name = line.split("\t")
        assert entity not in names, f"{entity} named twice"
        names[entity] = name
    return names


def read_questions() -> list[dict]:
    lines = (DEMO / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


QUESTIONS = read_questions()


@pytest.fixture(scope="module")
def kg(tmp_path_factory: pytest.TempPathFactory) -> EmbeddedKG:
    builder = EmbeddedKGBuilder(schema="freebase")
    for head, relation, tail in read_triples():
        builder.add_triple(head, relation, tail)  # a tail starting with '"' is a literal id, kept as is
    for entity, name in read_names().items():
        builder.add_name(entity, name)
    return builder.build(tmp_path_factory.mktemp("demo") / "kg")


# -- the files -------------------------------------------------------------------------------------------------------


def test_triples_are_freebase_style_and_within_size() -> None:
    triples = read_triples()
    assert 2000 <= len(triples) <= 4000
    assert len(set(triples)) == len(triples)
    for head, relation, tail in triples:
        assert FREEBASE_ID.match(head), head
        assert re.fullmatch(r"[a-z0-9_]+(\.[a-z0-9_]+){2,}", relation), relation
        assert FREEBASE_ID.match(tail) or is_literal(tail), tail
        if is_literal(tail):
            literal_value(tail)  # parses as an N-Triples literal
    relations = {r for _, r, _ in triples}
    # the relations the methods rely on, both directions where Freebase stores both
    for relation in ("film.film.directed_by", "film.director.film", "film.film.starring", "film.performance.film",
                     "film.performance.actor", "film.actor.film", "film.performance.character",
                     "film.film_character.portrayed_in_films", "people.person.place_of_birth",
                     "location.location.people_born_here", "location.location.containedby",
                     "location.location.contains", "award.award_winner.awards_won", "award.award_honor.award_winner",
                     "people.person.spouse_s", "people.marriage.spouse", "people.person.date_of_birth",
                     "film.film.initial_release_date", "award.award_honor.year", "location.country.capital"):
        assert relation in relations, relation


def test_every_entity_but_the_cvts_is_named() -> None:
    triples, names = read_triples(), read_names()
    nodes = {h for h, _, _ in triples} | {t for _, _, t in triples if not is_literal(t)}
    cvts = {n for n in nodes if n.startswith(CVT_PREFIX)}
    assert len(cvts) > 200
    assert not cvts & names.keys()
    assert nodes - cvts == names.keys()
    # the CVTs really are mediators: each links at least two named things
    degree = Counter(h for h, _, _ in triples if h in cvts)
    assert min(degree[c] for c in cvts) >= 2


def test_shipped_files_match_the_build_script() -> None:
    spec = importlib.util.spec_from_file_location("kgqa_demo_build", DEMO / "build_demo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    builder = module.build()
    files = module.render(builder, module.check(builder))
    for file_name, text in files.items():
        assert (DEMO / file_name).read_text(encoding="utf-8") == text, f"{file_name} is stale: run build_demo.py"


def test_questions_are_well_formed() -> None:
    names = read_names()
    assert 45 <= len(QUESTIONS) <= 70
    assert len({q["id"] for q in QUESTIONS}) == len(QUESTIONS)
    kinds = Counter(q["type"] for q in QUESTIONS)
    assert set(kinds) == {"one-hop", "multi-hop", "constraint"}
    assert min(kinds.values()) >= 12
    for q in QUESTIONS:
        assert q["question"].endswith("?")
        assert q["hops"] == len(parse_chain(q["chain"]))
        if q["type"] == "one-hop":
            assert q["hops"] == 1 and q["constraint"] is None
        elif q["type"] == "multi-hop":
            assert q["hops"] >= 2 and q["constraint"] is None
        else:
            assert q["constraint"] is not None
        assert q["topic_entities"] and q["answers"]
        for item in q["topic_entities"] + q["answers"]:
            expected = literal_value(item["id"]) if is_literal(item["id"]) else names[item["id"]]
            assert item["name"] == expected
    assert any(q["hops"] >= 3 for q in QUESTIONS)
    assert any(q["constraint"] and q["constraint"]["source"] == 0 for q in QUESTIONS)
    assert any(q["constraint"] and is_literal(q["constraint"]["target"]) for q in QUESTIONS)
    assert any("film.performance" in q["chain"] for q in QUESTIONS)  # through a CVT


# -- the questions on the real store -----------------------------------------------------------------------------------


@pytest.mark.parametrize("question", QUESTIONS, ids=[q["id"] for q in QUESTIONS])
def test_gold_chain_returns_exactly_the_gold_answers(kg: EmbeddedKG, question: dict) -> None:
    topics = [t["id"] for t in question["topic_entities"]]
    main = parse_chain(question["chain"])
    if question["constraint"] is None:
        result = kg.run_chain(topics, main)
    else:
        c = question["constraint"]
        constraint = ConstraintChain(c["source"], parse_chain(c["chain"]), c["target"])
        result = kg.filter_by_constraint(topics, main, constraint)
        # the constraint must matter: without it the main chain reaches more
        assert set(kg.run_chain(topics, main).entities) > set(result.entities)
    assert not result.truncated
    assert set(result.entities) == {a["id"] for a in question["answers"]}


def test_a_literal_constraint_matches_on_the_lexical_value(kg: EmbeddedKG) -> None:
    typed = '"1993"^^<http://www.w3.org/2001/XMLSchema#gYear>'
    for target in ('"1993"', typed):
        result = kg.filter_by_constraint(["m.0demo_steven_spielberg"], parse_chain("film.director.film"),
                                         ConstraintChain(1, parse_chain("film.film.initial_release_date"), target))
        assert set(result.entities) == {"m.0demo_jurassic_park", "m.0demo_schindlers_list"}


def test_noise_relations_are_hidden_but_in_the_vocabulary(kg: EmbeddedKG) -> None:
    vocabulary = set(kg.vocabulary())
    assert set(NOISE) <= vocabulary
    film_relations = kg.relations("m.0demo_se7en", Direction.OUT)
    assert "film.film.directed_by" in film_relations
    assert not set(NOISE) & set(film_relations)
    assert "type.object.type" not in kg.relations("m.0demo_usa", Direction.OUT)
    assert "location.country.capital" in kg.relations("m.0demo_usa", Direction.OUT)
    marriage = "m.0demo_cvt_marriage_christopher_nolan_emma_thomas"
    assert kg.relations(marriage, Direction.OUT) == ["people.marriage.from", "people.marriage.spouse"]
    assert kg.neighbors("m.0demo_se7en", "type.object.type") == []  # films carry notable_types only
    assert kg.neighbors("m.0demo_se7en", "common.topic.notable_types") == ["m.0demo_type_film_film"]


def test_cvt_nodes_have_no_name_and_entities_do(kg: EmbeddedKG) -> None:
    cvts = ["m.0demo_cvt_perf_inception_1", "m.0demo_cvt_marriage_christopher_nolan_emma_thomas",
            "m.0demo_cvt_honor_best_director_2024", "m.0demo_cvt_sibling_joel_coen_ethan_coen"]
    assert all(kg.has_entity(c) for c in cvts)
    names = kg.names([*cvts, "m.0demo_inception", "m.0demo_alejandro_gonzalez_inarritu"])
    assert all(names[c] is None for c in cvts)
    assert names["m.0demo_inception"] == "Inception"
    assert names["m.0demo_alejandro_gonzalez_inarritu"] == "Alejandro González Iñárritu"
    # a performance CVT joins a film, an actor and a character
    assert kg.neighbors(cvts[0], "film.performance.actor") == ["m.0demo_leonardo_dicaprio"]
    assert kg.neighbors(cvts[0], "film.performance.film") == ["m.0demo_inception"]


def test_label_search_finds_ambiguous_names(kg: EmbeddedKG) -> None:
    assert {m.id for m in kg.search("London")} == {"m.0demo_london", "m.0demo_london_ontario"}
    assert {m.id for m in kg.search("dune")} == {"m.0demo_dune_2021", "m.0demo_dune_1984"}
    assert [m.id for m in kg.search("Alejandro Gonzalez Inarritu")] == ["m.0demo_alejandro_gonzalez_inarritu"]


# -- the cached copy that `open_kg("demo")` opens (issue 16: its rebuild was untested) --------------------------------


@pytest.fixture
def demo_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache directory of this test's own, and no user config file."""
    from kgqa import config

    empty = tmp_path / "empty.toml"
    empty.write_text("", encoding="utf-8")
    monkeypatch.setenv("KGQA_CONFIG", str(empty))
    monkeypatch.setenv("KGQA_CACHE_DIR", str(tmp_path / "cache"))
    config._file_values.cache_clear()
    yield tmp_path / "cache"
    config._file_values.cache_clear()


def _answers_the_demo(kg: EmbeddedKG) -> None:
    assert kg.stats().triples == len(set(read_triples()))
    assert kg.run_chain(["m.0demo_inception"], parse_chain("film.film.directed_by")).entities == \
        ["m.0demo_christopher_nolan"]
    assert kg.names(["m.0demo_christopher_nolan"]) == {"m.0demo_christopher_nolan": "Christopher Nolan"}


def test_the_demo_kg_is_built_once_into_the_cache_and_then_reused(demo_cache: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from kgqa.kg import demo, open_kg

    target = demo.demo_kg_dir()
    assert target.parent == demo_cache and not target.exists()
    _answers_the_demo(demo.open_demo_kg())
    assert (target / "kgqa-embedded.json").is_file()
    written = {p.name: p.stat().st_mtime_ns for p in target.iterdir()}

    def no_rebuild(out_dir: Path) -> EmbeddedKG:
        raise AssertionError(f"rebuilt a sound cached demo KG in {out_dir}")

    monkeypatch.setattr(demo, "build_demo_kg", no_rebuild)
    reopened = open_kg("demo")
    assert demo.is_demo_kg(reopened)
    _answers_the_demo(reopened)
    assert {p.name: p.stat().st_mtime_ns for p in target.iterdir()} == written


def _damage(target: Path, how: str) -> None:
    meta = target / "kgqa-embedded.json"
    if how == "no metadata":  # a build cut short before its last file
        meta.unlink()
    elif how == "metadata not JSON":
        meta.write_text("{ half a file", encoding="utf-8")
    elif how == "another format":
        payload = json.loads(meta.read_text(encoding="utf-8"))
        payload["format_version"] = -1
        meta.write_text(json.dumps(payload), encoding="utf-8")
    elif how == "array missing":
        (target / "out.pair_key.npy").unlink()
    elif how == "array damaged":
        (target / "nodes.hash.npy").write_bytes(b"\x93NUMPY garbage")
    elif how == "names lost":
        (target / "names.off.npy").write_bytes((target / "names.off.npy").read_bytes()[:200])
    elif how == "empty directory":
        shutil.rmtree(target)
        target.mkdir()


@pytest.mark.parametrize("how", ["no metadata", "metadata not JSON", "another format", "array missing",
                                 "array damaged", "names lost", "empty directory"])
def test_a_damaged_cached_demo_kg_is_rebuilt(demo_cache: Path, how: str) -> None:
    from kgqa.kg import demo, open_kg

    target = demo.open_demo_kg().directory
    _damage(target, how)
    rebuilt = open_kg("demo")
    assert rebuilt.directory == target
    _answers_the_demo(rebuilt)
    assert json.loads((target / "kgqa-embedded.json").read_text())["format_version"] == demo.FORMAT_VERSION


def test_a_new_store_format_or_new_demo_data_builds_a_fresh_copy(demo_cache: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from kgqa.kg import demo

    first = demo.open_demo_kg().directory
    monkeypatch.setattr(demo, "FORMAT_VERSION", demo.FORMAT_VERSION + 1)
    assert demo.demo_kg_dir() != first  # a kgqa writing another format never opens the old copy
    monkeypatch.setattr(demo, "FORMAT_VERSION", demo.FORMAT_VERSION - 1)
    # Demo files that changed (a new kgqa release) build their own copy, with the new triple in it.
    edited = tmp_path / "demo"
    edited.mkdir()
    for name in ("triples.tsv", "names.tsv", "questions.jsonl"):
        (edited / name).write_bytes((DEMO / name).read_bytes())
    with (edited / "triples.tsv").open("a", encoding="utf-8") as fh:
        fh.write("m.0demo_inception\tfilm.film.edited_by\tm.0demo_christopher_nolan\n")
    files = {"triples": edited / "triples.tsv", "names": edited / "names.tsv", "questions": edited / "questions.jsonl"}
    monkeypatch.setattr(demo, "demo_files", lambda: files)
    fresh = demo.open_demo_kg()
    assert fresh.directory != first and first.is_dir()
    assert fresh.run_chain(["m.0demo_inception"], parse_chain("film.film.edited_by")).entities == \
        ["m.0demo_christopher_nolan"]
