"""Loaders: every format on small files written here, bad lines, hostile content, and the real shared data."""

from __future__ import annotations

import gzip
import os
import re
from pathlib import Path

import pytest

from kgqa.errors import ConfigError, DataError
from kgqa.kg.base import Direction, Hop, is_literal, make_literal, parse_chain, parse_literal
from kgqa.kg.embedded import EmbeddedKG, EmbeddedKGBuilder
from kgqa.kg.loaders import (
    FORMATS,
    fb15k_mid,
    fb15k_relation,
    guess_format,
    load_fb15k237,
    load_freebase_pieces,
    load_into,
    load_metaqa,
    load_rdf,
    load_tsv,
    synthetic_cvt,
)
from kgqa.kg.schema import FREEBASE_NS, RDFS_LABEL, FreebaseSchema

REPO = Path(__file__).resolve().parents[2]
XSD = "http://www.w3.org/2001/XMLSchema#"
HOSTILE = 'He said "hi" \\ then\nleft; } ; DROP ALL ; {\ttab'


def find_data_dir() -> Path | None:
    path = Path(os.environ.get("KGQA_DATA_DIR", REPO / ".." / "shared" / "data"))
    if path.is_dir():
        return path.resolve()
    if os.environ.get("CI") == "true":
        pytest.fail(f"data dir {path} is missing (set KGQA_DATA_DIR); CI must run the data tests")
    return None


@pytest.fixture(scope="session")
def loader_data() -> Path:
    path = find_data_dir()
    if path is None:
        pytest.skip("shared data dir not found (set KGQA_DATA_DIR)")
    return path


@pytest.fixture(scope="session")
def metaqa_store(loader_data: Path, tmp_path_factory: pytest.TempPathFactory) -> EmbeddedKG:
    builder = EmbeddedKGBuilder(schema="generic")
    report = load_into(builder, loader_data / "metaqa" / "kb.txt", "metaqa")
    assert report.skipped == 0
    return builder.build(tmp_path_factory.mktemp("metaqa-kg") / "kg")


@pytest.fixture(scope="session")
def freebase_store(loader_data: Path, tmp_path_factory: pytest.TempPathFactory) -> EmbeddedKG:
    builder = EmbeddedKGBuilder(schema="freebase")
    load_freebase_pieces(loader_data / "freebase", builder)
    return builder.build(tmp_path_factory.mktemp("freebase-kg") / "kg")


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def build(builder: EmbeddedKGBuilder, tmp_path: Path) -> EmbeddedKG:
    return builder.build(tmp_path / "kg")


# ---------------------------------------------------------------------------------------------------------------------
# MetaQA


def test_metaqa_small_file(tmp_path: Path) -> None:
    src = write(tmp_path / "kb.txt", "Kismet|directed_by|William Dieterle\nKismet|release_year|1944\n\n"
                                     "Kismet|directed_by|William Dieterle\nDodge City|starred_actors|Errol Flynn\n")
    builder = EmbeddedKGBuilder()
    report = load_metaqa(builder, src)
    assert (report.lines, report.triples, report.skipped) == (5, 4, 0)
    assert report.names == 5  # one per distinct label
    kg = build(builder, tmp_path)
    assert set(kg.iter_triples()) == {("Kismet", "directed_by", "William Dieterle"), ("Kismet", "release_year", "1944"),
                                      ("Dodge City", "starred_actors", "Errol Flynn")}
    assert dict(kg.iter_names())["Errol Flynn"] == "Errol Flynn"
    assert kg.run_chain(["William Dieterle"], parse_chain("^directed_by,release_year")).entities == ["1944"]
    assert [m.id for m in kg.search("kismet")] == ["Kismet"]


def test_metaqa_bad_lines_name_file_and_line(tmp_path: Path) -> None:
    src = write(tmp_path / "kb.txt", 'A|r|B\nonly|two\nC|r|\n"Q"|r|D\nE|has space|F\nG|r|H\n')
    with pytest.raises(DataError, match=re.escape(f"{src}:2") + ".*3 fields"):
        load_metaqa(EmbeddedKGBuilder(), src)
    builder = EmbeddedKGBuilder()
    report = load_metaqa(builder, src, skip_bad=True)
    assert report.skipped == 4 and report.triples == 2 and report.lines == 6
    assert [e.split(": ")[0] for e in report.errors] == [f"{src}:{n}" for n in (2, 3, 4, 5)]
    assert "empty tail" in report.errors[1] and "double quote" in report.errors[2] and "whitespace" in report.errors[3]
    assert set(build(builder, tmp_path).iter_triples()) == {("A", "r", "B"), ("G", "r", "H")}


def test_invalid_utf8_is_a_bad_line(tmp_path: Path) -> None:
    src = tmp_path / "kb.txt"
    src.write_bytes(b"A|r|B\nC|r|\xff\xfe\nD|r|E\n")
    with pytest.raises(DataError, match=re.escape(f"{src}:2") + ".*UTF-8"):
        load_metaqa(EmbeddedKGBuilder(), src)
    report = load_metaqa(EmbeddedKGBuilder(), src, skip_bad=True)
    assert (report.triples, report.skipped) == (2, 1)


# ---------------------------------------------------------------------------------------------------------------------
# TSV


def test_tsv_with_names_and_literals(tmp_path: Path) -> None:
    triples = write(tmp_path / "t.tsv", "m.01\tfilm.film.directed_by\tm.02\tq1;q2\n"
                                        f"m.01\tfilm.film.initial_release_date\t\"1967\"^^<{XSD}gYear>\n"
                                        "m.01\tfilm.film.release_year\t1967\n"
                                        "m.01\tfilm.film.release_date\t1967-05-01\n"
                                        "m.01\tfilm.film.language\tg.1x_y\n")
    names = write(tmp_path / "names.tsv", 'm.01\tThe "Graduate"\nm.02\tMike Nichols\nm.02\tignored second name\n')
    builder = EmbeddedKGBuilder(schema="freebase")
    report = load_into(builder, triples, "tsv", names=names)
    assert (report.triples, report.names, report.skipped, report.lines) == (5, 3, 0, 8)
    kg = build(builder, tmp_path)
    tails = {r: t for _, r, t in kg.iter_triples()}
    assert tails["film.film.initial_release_date"] == f'"1967"^^<{XSD}gYear>'
    # Under the Freebase schema bare numbers and dates are values, not entities.
    assert tails["film.film.release_year"] == '"1967"' and tails["film.film.release_date"] == '"1967-05-01"'
    assert tails["film.film.language"] == "g.1x_y"
    assert kg.names(["m.01", "m.02", "g.1x_y"]) == {"m.01": 'The "Graduate"', "m.02": "Mike Nichols", "g.1x_y": None}


def test_tsv_generic_schema_keeps_bare_values_as_entities(tmp_path: Path) -> None:
    src = write(tmp_path / "t.tsv", "Kismet\trelease_year\t1944\n")
    builder = EmbeddedKGBuilder(schema="generic")
    load_tsv(builder, src)
    assert list(build(builder, tmp_path).iter_triples()) == [("Kismet", "release_year", "1944")]


def test_tsv_bad_lines(tmp_path: Path) -> None:
    src = write(tmp_path / "t.tsv", 'a\tr\tb\nno tabs here\n"lit"\tr\tb\na\tr\t"unterminated\na\t\tb\na\tr\tc\x01d\n'
                                    "c\tr\td\n")
    with pytest.raises(DataError, match=re.escape(f"{src}:2:") + ".*tab-separated"):
        load_tsv(EmbeddedKGBuilder(), src)
    builder = EmbeddedKGBuilder()
    report = load_tsv(builder, src, skip_bad=True)
    assert report.skipped == 5 and report.triples == 2
    problems = " | ".join(report.errors)
    for expected in ("literal; a literal can only be a tail", "not a literal in N-Triples form", "empty relation",
                     "control character"):
        assert expected in problems
    assert [e.split(": ")[0] for e in report.errors] == [f"{src}:{n}" for n in range(2, 7)]


def test_names_tsv_bad_line(tmp_path: Path) -> None:
    triples = write(tmp_path / "t.tsv", "a\tr\tb\n")
    names = write(tmp_path / "n.tsv", "a\tAlpha\nb\n")
    with pytest.raises(DataError, match=re.escape(f"{names}:2") + ".*id<TAB>name"):
        load_into(EmbeddedKGBuilder(), triples, "tsv", names=names)
    report = load_into(EmbeddedKGBuilder(), triples, "tsv", names=names, skip_bad=True)
    assert (report.names, report.skipped) == (1, 1)


# ---------------------------------------------------------------------------------------------------------------------
# RDF


def nt_literal(value: str) -> str:
    """An N-Triples literal written the way a producer would (escapes per the N-Triples grammar)."""
    return make_literal(value)


def test_ntriples_freebase_schema(tmp_path: Path) -> None:
    ns = FREEBASE_NS
    src = write(tmp_path / "x.nt", "\n".join([
        "# a comment line",
        f"<{ns}m.01> <{ns}film.film.directed_by> <{ns}m.02> .",
        f'<{ns}m.01> <{ns}type.object.name> "Le Lauréat"@fr .',
        f'<{ns}m.01> <{ns}type.object.name> "The Graduate"@en .',
        f'<{ns}m.02> <{ns}type.object.name> "Mike Nichols" .',
        f'<{ns}m.02> <{ns}type.object.name> "Michel"@fr .',
        f'<{ns}m.03> <{ns}type.object.name> "Nur Deutsch"@de .',
        f"<{ns}m.01> <{ns}film.film.starring> _:perf .",
        f"_:perf <{ns}film.performance.actor> <{ns}m.03> .",
        f'<{ns}m.01> <{ns}film.film.initial_release_date> "1967-12-22"^^<{XSD}date> .',
        f'<{ns}m.01> <{ns}common.topic.alias> "plain"^^<{XSD}string> .',
        f"<{ns}m.01> <{ns}common.topic.description> {nt_literal(HOSTILE)} .",
        f"<http://example.org/x> <{ns}film.film.directed_by> <{ns}m.02> .",
    ]) + "\n")
    builder = EmbeddedKGBuilder(schema="freebase")
    report = load_rdf(builder, src, "nt")
    assert (report.lines, report.triples, report.names, report.skipped) == (13, 7, 3, 0)
    kg = build(builder, tmp_path)
    triples = set(kg.iter_triples())
    assert ("m.01", "film.film.directed_by", "m.02") in triples
    assert ("http://example.org/x", "film.film.directed_by", "m.02") in triples
    assert ("m.01", "film.film.initial_release_date", f'"1967-12-22"^^<{XSD}date>') in triples
    assert ("m.01", "common.topic.alias", '"plain"') in triples  # xsd:string is written plain
    # Names prefer the schema language, then no language; another language only when nothing better exists.
    assert kg.names(["m.01", "m.02", "m.03"]) == {"m.01": "The Graduate", "m.02": "Mike Nichols", "m.03": "Nur Deutsch"}
    # The blank node is a nameless mediator (CVT-like) and the chain runs through it.
    cvt = next(t for h, r, t in triples if r == "film.film.starring")
    assert cvt.startswith("_:b") and kg.names([cvt])[cvt] is None
    assert kg.run_chain(["m.01"], parse_chain("film.film.starring,film.performance.actor")).entities == ["m.03"]
    # Hostile text survives as a literal, byte for byte.
    desc = next(t for h, r, t in triples if r == "common.topic.description")
    assert is_literal(desc) and parse_literal(desc).value == HOSTILE and "\n" not in desc


def test_ntriples_bad_line_and_skip(tmp_path: Path) -> None:
    src = write(tmp_path / "bad.nt", '<http://a/x> <http://a/p> "ok" .\n'
                                     '<http://a/y> <http://a/p> "broken .\n'
                                     '<http://a/z> <http://a/p> _:b1 .\n'
                                     '<http://a/w> <http://a/p> <not an iri> .\n'
                                     '<http://a/v> <http://a/p> "fine"@en .\n')
    with pytest.raises(DataError, match=re.escape(f"{src}:2:")):
        load_rdf(EmbeddedKGBuilder(), src, "nt")
    builder = EmbeddedKGBuilder()
    report = load_rdf(builder, src, "nt", skip_bad=True)
    assert (report.lines, report.skipped, report.triples) == (5, 2, 3)
    assert [e.split(": ")[0] for e in report.errors] == [f"{src}:2", f"{src}:4"]
    # The good lines right after a bad one survive (pyoxigraph's own recovery would lose line 3).
    heads = {h for h, _, _ in build(builder, tmp_path).iter_triples()}
    assert heads == {"http://a/x", "http://a/z", "http://a/v"}


def test_turtle_generic_schema(tmp_path: Path) -> None:
    src = write(tmp_path / "x.ttl", f"""@prefix e: <http://kgqa.local/entity/> .
@prefix r: <http://kgqa.local/relation/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
e:Kismet r:directed_by e:William%20Dieterle , e:Other ;
    rdfs:label "Kismet" ;
    r:note \"\"\"a "quoted"
multi-line note\"\"\" ;
    r:award [ r:award_name "Oscar" ; r:year "1945"^^<{XSD}gYear> ] .
e:William%20Dieterle rdfs:label "William Dieterle"@en .
<relative> r:directed_by e:Other .
""")
    builder = EmbeddedKGBuilder(schema="generic")
    report = load_into(builder, src, "ttl")
    assert (report.triples, report.names, report.skipped) == (7, 2, 0)
    assert report.lines == 10
    kg = build(builder, tmp_path)
    triples = set(kg.iter_triples())
    assert ("Kismet", "directed_by", "William Dieterle") in triples  # base IRIs stripped, percent-decoding undone
    note = next(t for h, r, t in triples if r == "note")
    assert parse_literal(note).value == 'a "quoted"\nmulti-line note'
    assert kg.run_chain(["Kismet"], parse_chain("award,year")).entities == [f'"1945"^^<{XSD}gYear>']
    assert kg.names(["Kismet", "William Dieterle"]) == {"Kismet": "Kismet", "William Dieterle": "William Dieterle"}
    relative = (tmp_path / "relative").resolve().as_uri()
    assert (relative, "directed_by", "Other") in triples  # relative IRIs resolve against the file


def test_turtle_bad_statement(tmp_path: Path) -> None:
    src = write(tmp_path / "bad.ttl", "@prefix a: <http://a/> .\na:x a:p \"one\" .\na:y a:p  .\n"
                                      "a:k a:p \"lost with the bad one\" .\na:k2 a:p \"after\" .\n")
    with pytest.raises(DataError, match=re.escape(f"{src}:3:") + ".*not a valid RDF object"):
        load_rdf(EmbeddedKGBuilder(), src, "ttl")
    builder = EmbeddedKGBuilder()
    report = load_rdf(builder, src, "ttl", skip_bad=True)
    assert report.skipped == 1 and report.errors[0].startswith(f"{src}:3: ")
    heads = {h for h, _, _ in build(builder, tmp_path).iter_triples()}
    assert {"http://a/x", "http://a/k2"} <= heads and "http://a/y" not in heads


def test_nquads_and_trig_merge_graphs(tmp_path: Path) -> None:
    nq = write(tmp_path / "x.nq", '<http://a/x> <http://a/p> "in graph" <http://g/1> .\n'
                                  '<http://a/x> <http://a/p> "default" .\n')
    trig = write(tmp_path / "x.trig", '@prefix a: <http://a/> .\n<http://g/2> { a:y a:p a:z . }\na:z a:p "d" .\n')
    builder = EmbeddedKGBuilder()
    assert load_into(builder, nq, guess_format(nq)).triples == 2
    assert load_into(builder, trig, guess_format(trig)).triples == 2
    kg = build(builder, tmp_path)
    assert kg.run_chain(["http://a/y"], (Hop("http://a/p"), Hop("http://a/p"))).entities == ['"d"']
    assert set(kg.neighbors("http://a/x", "http://a/p", Direction.OUT)) == {'"in graph"', '"default"'}


def test_gzip_ntriples(tmp_path: Path) -> None:
    src = tmp_path / "x.nt.gz"
    with gzip.open(src, "wt", encoding="utf-8") as fh:
        fh.write('<http://a/x> <http://a/p> "zipped" .\n')
    assert guess_format(src) == "nt"
    builder = EmbeddedKGBuilder()
    assert load_into(builder, src, "nt").triples == 1


def test_blank_nodes_of_two_files_stay_apart(tmp_path: Path) -> None:
    one = write(tmp_path / "1.nt", "<http://a/x> <http://a/p> _:n .\n")
    two = write(tmp_path / "2.nt", "<http://a/y> <http://a/p> _:n .\n")
    builder = EmbeddedKGBuilder()
    load_rdf(builder, one, "nt")
    load_rdf(builder, two, "nt")
    tails = {h: t for h, _, t in build(builder, tmp_path).iter_triples()}
    assert tails["http://a/x"] != tails["http://a/y"]
    assert {tails["http://a/x"], tails["http://a/y"]} == {"_:b0", "_:b1"}


def test_hostile_content_round_trips_through_every_text_format(tmp_path: Path) -> None:
    # TSV cannot hold a newline or tab in a field, so the TSV literal carries them escaped (N-Triples form).
    literal = make_literal(HOSTILE)
    tsv = write(tmp_path / "h.tsv", f"e1\tsays\t{literal}\n")
    names = write(tmp_path / "n.tsv", "e1\tO'Brien \"the {boss}\" ; DROP\n")
    nt = write(tmp_path / "h.nt", f"<http://a/e2> <http://a/says> {literal} .\n"
                                  f'<http://a/e2> <{RDFS_LABEL}> {make_literal("x } ; DROP")} .\n')
    builder = EmbeddedKGBuilder()
    load_into(builder, tsv, "tsv", names=names)
    load_into(builder, nt, "nt")
    kg = build(builder, tmp_path)
    reopened = EmbeddedKG.open(tmp_path / "kg")
    values = [parse_literal(t).value for _, _, t in reopened.iter_triples()]
    assert values == [HOSTILE, HOSTILE]
    assert dict(kg.iter_names()) == {"e1": "O'Brien \"the {boss}\" ; DROP", "http://a/e2": "x } ; DROP"}


# ---------------------------------------------------------------------------------------------------------------------
# Registry


def test_guess_format_and_registry_errors(tmp_path: Path) -> None:
    assert guess_format(write(tmp_path / "kb.txt", "\nA|r|B\n")) == "metaqa"
    assert guess_format(write(tmp_path / "t.txt", "a\tr\tb\n")) == "tsv"
    assert guess_format(tmp_path / "x.ttl") == "ttl" and guess_format(tmp_path / "x.TriG") == "trig"
    fb = tmp_path / "fb"
    fb.mkdir()
    write(fb / "goldpath_triples.tsv", "")
    assert guess_format(fb) == "freebase-pieces"
    with pytest.raises(ConfigError, match="cannot guess the format"):
        guess_format(write(tmp_path / "x.json", "{}"))
    with pytest.raises(ConfigError, match="unknown KG file format 'csv'"):
        load_into(EmbeddedKGBuilder(), tmp_path / "kb.txt", "csv")
    with pytest.raises(DataError, match="no such file"):
        load_into(EmbeddedKGBuilder(), tmp_path / "missing.nt", "nt")
    assert set(FORMATS) == {"metaqa", "tsv", "nt", "ttl", "nq", "trig", "freebase-pieces"}


# ---------------------------------------------------------------------------------------------------------------------
# Freebase pieces


def test_fb15k_normalisation() -> None:
    assert fb15k_mid("/m/0abc") == "m.0abc" and fb15k_mid("m.0abc") == "m.0abc"
    assert fb15k_relation("/music/artist/origin") == ("music.artist.origin",)
    assert fb15k_relation("/film/actor/film./film/performance/film") == ("film.actor.film", "film.performance.film")
    cvt = synthetic_cvt("m.01", "film.actor.film|film.actor.film.film.performance.film", "m.02")
    assert FreebaseSchema().is_valid_entity(cvt) and cvt.startswith("m.cvt_")
    assert cvt == synthetic_cvt("m.01", "film.actor.film|film.actor.film.film.performance.film", "m.02")
    assert cvt != synthetic_cvt("m.01", "film.actor.film|film.actor.film.film.performance.film", "m.03")


def write_openke(directory: Path, triples: str, *, count: int | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    write(directory / "entity2id.txt", "3\n/m/0a\t0\n/m/0b\t1\n/m/0c\t2\n")
    write(directory / "relation2id.txt", "2\n/music/artist/origin\t0\n/film/actor/film./film/performance/film\t1\n")
    lines = [ln for ln in triples.splitlines() if ln]
    write(directory / "train2id.txt", f"{len(lines) if count is None else count}\n" + triples)
    write(directory / "valid2id.txt", "0\n")
    write(directory / "test2id.txt", "1\n1 2 0\n")
    write(directory / "FB15k_mid2name.txt", "/m/0a\tJeremy_Irons\n/m/0b\tDead_Ringers\n/m/0zzz\tNot_Loaded\n")
    return directory


def test_fb15k237_compound_relations_become_cvt_paths(tmp_path: Path) -> None:
    fb = write_openke(tmp_path / "fb15k237", "0 1 1\n0 2 0\n")
    builder = EmbeddedKGBuilder(schema="freebase")
    report = load_fb15k237(builder, fb)
    assert (report.triples, report.synthetic_cvts) == (4, 1)
    kg = build(builder, tmp_path)
    assert kg.run_chain(["m.0a"], parse_chain("film.actor.film,film.performance.film")).entities == ["m.0b"]
    cvt = kg.neighbors("m.0a", "film.actor.film")[0]
    assert re.fullmatch(r"m\.cvt_[0-9a-f]{16}", cvt) and kg.names([cvt])[cvt] is None
    assert ("m.0b", "music.artist.origin", "m.0c") in set(kg.iter_triples())


def test_fb15k237_bad_lines(tmp_path: Path) -> None:
    fb = write_openke(tmp_path / "fb15k237", "0 1 1\n0 9 0\n0 1\n")
    with pytest.raises(DataError, match=re.escape(f"{fb / 'train2id.txt'}:3") + ".*entity id 9"):
        load_fb15k237(EmbeddedKGBuilder(schema="freebase"), fb)
    report = load_fb15k237(EmbeddedKGBuilder(schema="freebase"), fb, skip_bad=True)
    assert report.skipped == 2 and report.triples == 3
    wrong_count = write_openke(tmp_path / "other", "0 1 0\n", count=5)
    with pytest.raises(DataError, match="count line says 5 triples but 1"):
        load_fb15k237(EmbeddedKGBuilder(schema="freebase"), wrong_count)


def test_freebase_pieces_small(tmp_path: Path) -> None:
    write(tmp_path / "goldpath_triples.tsv", "m.0a\tfilm.actor.film\tm.0cvt1\tWebQTest-1\n"
                                             "m.0cvt1\tfilm.performance.film\tm.0b\tWebQTest-1\n")
    write(tmp_path / "names.tsv", 'm.0a\tJeremy "JI" \\"Irons\\"\nm.0q\tNot in any triple\n')
    write_openke(tmp_path / "fb15k237", "0 1 1\n")
    builder = EmbeddedKGBuilder(schema="freebase")
    report = load_into(builder, tmp_path, "freebase-pieces")
    assert report.skipped == 0 and report.synthetic_cvts == 1
    kg = build(builder, tmp_path / "out")
    # names.tsv wins over mid2name; FB15k underscores read as spaces; \" read as "; unused names are not loaded.
    assert kg.names(["m.0a", "m.0b", "m.0cvt1"]) == {"m.0a": 'Jeremy "JI" "Irons"', "m.0b": "Dead Ringers",
                                                     "m.0cvt1": None}
    assert not kg.has_entity("m.0q") and not kg.has_entity("m.0zzz")
    assert set(kg.run_chain(["m.0a"], parse_chain("film.actor.film,film.performance.film")).entities) == {"m.0b"}
    no_fb = EmbeddedKGBuilder(schema="freebase")
    assert load_freebase_pieces(tmp_path, no_fb, include_fb15k=False).triples == 2


# ---------------------------------------------------------------------------------------------------------------------
# Real shared data


def test_real_metaqa_counts(metaqa_store: EmbeddedKG) -> None:
    stats = metaqa_store.stats()
    assert (stats.triples, stats.entities, stats.relations) == (133_582, 43_234, 9)
    assert set(metaqa_store.vocabulary()) == {"directed_by", "written_by", "starred_actors", "release_year", "in_language",
                                           "has_tags", "has_genre", "has_imdb_votes", "has_imdb_rating"}
    assert "William Dieterle" in metaqa_store.neighbors("Kismet", "directed_by")
    # kb.txt lists each film as a block; remakes share a title, so the store merges them and counts what both assert:
    # the 1940 and 2011 "The Well-Digger's Daughter" were both written by Pagnol and are both dramas
    title = "The Well-Digger's Daughter"
    assert metaqa_store.statement_counts([(title, "written_by", "Marcel Pagnol"), (title, "written_by", "Daniel Auteuil"),
                                          (title, "has_genre", "Drama"), (title, "has_genre", "Comedy"),
                                          (title, "has_genre", "Horror")]) == [2, 1, 2, 1, 0]
    assert stats.extra["repeated_triples"] == 999


def test_real_freebase_pieces(freebase_store: EmbeddedKG, loader_data: Path) -> None:
    kg = freebase_store
    # A CVT path from the gold-path triples: film -> performance (CVT) -> actor.
    path = parse_chain("film.film.starring,film.performance.actor")
    result = kg.run_chain(["g.11b6v7j7y9"], path, bindings=True)
    assert "m.06wm0z" in result.entities
    assert ("g.11b6v7j7y9", "g.11b76t4_r4", "m.06wm0z") in (result.paths or [])
    names = kg.names(["g.11b6v7j7y9", "g.11b76t4_r4"])
    assert names == {"g.11b6v7j7y9": "Mike and Dave Need Wedding Dates", "g.11b76t4_r4": None}
    # FB15k-237: the first compound triple of train2id walks through its synthetic CVT.
    fb = loader_data / "freebase" / "fb15k237"
    ents = dict(line.split("\t") for line in (fb / "entity2id.txt").read_text().splitlines()[1:])
    mids = {int(i): m for m, i in ents.items()}
    rels = {int(i): r for r, i in (ln.split("\t") for ln in (fb / "relation2id.txt").read_text().splitlines()[1:])}
    with (fb / "train2id.txt").open() as fh:
        next(fh)
        h, t, r = next((h, t, r) for h, t, r in (map(int, ln.split()) for ln in fh) if "./" in rels[r])
    chain = tuple(Hop(rel) for rel in fb15k_relation(rels[r]))
    head = fb15k_mid(mids[h])
    assert fb15k_mid(mids[t]) in kg.run_chain([head], chain, limit=10_000).entities
    cvts = kg.run_chain([head], chain[:1], limit=10_000).entities
    assert cvts and all(FreebaseSchema().is_valid_entity(c) and kg.names([c])[c] is None for c in cvts)
    assert kg.names(["m.0c94fn"])["m.0c94fn"] == "Gary Rydstrom"
    stats = kg.stats()
    assert stats.triples is not None and stats.triples > 500_000 and stats.relations is not None
