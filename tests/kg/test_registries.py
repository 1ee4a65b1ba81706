"""Schemas and KG backends found by name (kgqa.registry), from kgqa itself, from code, and from a third-party package's
entry points; the one Freebase id grammar; the one relation verbaliser."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from kgqa.errors import ConfigError
from kgqa.kg import KG_BACKENDS, open_kg
from kgqa.kg.embedded import EmbeddedKG
from kgqa.kg.schema import (
    FREEBASE_ID_RE,
    SCHEMAS,
    FreebaseSchema,
    Schema,
    WikidataSchema,
    get_schema,
    is_freebase_id,
    register_schema,
    relation_words,
    schema_names,
)

SRC = Path(__file__).resolve().parents[2] / "src" / "kgqa"

# ---------------------------------------------------------------------------------------------------------------------
# One relation verbaliser


@pytest.mark.parametrize(("relation", "words"), [
    ("film.film.directed_by", "film film directed by"),
    ("people.person.place_of_birth", "people person place of birth"),
    ("birthPlace", "birth place"),
    ("dbo:birthPlace", "dbo birth place"),
    ("wdt:P57", "wdt p57"),
    ("http://example.org/onto#hasDirector", "http example org onto has director"),
    ("directed_by", "directed by"),
    ("XMLHttpRequest", "xmlhttp request"),
    ("a__b..c", "a b c"),
    ("", ""),
])
def test_relation_words(relation: str, words: str) -> None:
    assert relation_words(relation) == words


# ---------------------------------------------------------------------------------------------------------------------
# One id grammar per schema


def test_the_freebase_id_grammar_is_the_schemas() -> None:
    assert FreebaseSchema().entity_pattern is FREEBASE_ID_RE
    for good in ("m.0abc", "g.11b6_x", "m.cvt_0123456789abcdef"):
        assert is_freebase_id(good) and FreebaseSchema().is_valid_entity(good)
    for bad in ("m.", "m.0ABC", "x.0abc", "m.0abc ", "ns:m.0abc", "m.0-abc", "Q42", ""):
        assert not is_freebase_id(bad) and not FreebaseSchema().is_valid_entity(bad)


def test_answer_scoring_and_datasets_use_the_schemas_grammar() -> None:
    from kgqa.datasets import records
    from kgqa.eval import matching

    assert matching._MID_RE is FREEBASE_ID_RE
    for value in ("m.0abc", "g.11b6_x", "m.", "m.0ABC", "financier", "g.", "m.0 abc"):
        assert records.is_mid(value) is is_freebase_id(value)


def test_the_freebase_mid_pattern_is_written_once() -> None:
    """No module of kgqa writes the mid pattern again (the demo data builder is the packaged data's own script)."""
    pattern = re.compile(r"\[mg\]\\\\?\.")
    writers = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if pattern.search(p.read_text(encoding="utf-8")))
    assert set(writers) - {"data/demo/build_demo.py"} == {"kg/schema.py"}


# ---------------------------------------------------------------------------------------------------------------------
# Schemas


def test_schemas_by_name() -> None:
    assert {"generic", "freebase", "wikidata"} <= set(schema_names())
    assert isinstance(get_schema("freebase"), FreebaseSchema)
    assert isinstance(get_schema(" WikiData "), WikidataSchema)
    assert get_schema(None).name == "generic"
    custom = Schema(name="mine")
    assert get_schema(custom) is custom
    with pytest.raises(ConfigError, match=r"unknown KG schema 'nope'; known KG schemas: .*freebase.*generic"):
        get_schema("nope")


def test_a_registered_schema_is_found_by_name() -> None:
    class MovieSchema(Schema):
        def __init__(self) -> None:
            super().__init__(name="movies", entity_base="http://movies.example/e/")

    with SCHEMAS.restored():
        register_schema("Movies", MovieSchema)
        assert "movies" in schema_names()
        assert get_schema("movies").entity_base == "http://movies.example/e/"
        register_schema("movies", lambda: Schema(name="movies2"))  # a later registration replaces it
        assert get_schema("MOVIES").name == "movies2"
        SCHEMAS.add("broken", lambda: "not a schema")  # type: ignore[arg-type, return-value]
        with pytest.raises(ConfigError, match="not a Schema"):
            get_schema("broken")
    assert "movies" not in schema_names()


# ---------------------------------------------------------------------------------------------------------------------
# KG backends


def test_open_kg_specs(embedded_kg: EmbeddedKG, sparql_kg: object) -> None:
    store = str(embedded_kg.directory)
    for spec in (store, f"embedded:{store}", f"  embedded:{store}  "):
        kg = open_kg(spec)
        assert isinstance(kg, EmbeddedKG) and kg.relations("m.e001") == embedded_kg.relations("m.e001")
    url = sparql_kg.endpoint  # type: ignore[attr-defined]
    for spec in (url, f"sparql:{url}"):
        remote = open_kg(spec, schema="freebase", default_graph=sparql_kg.default_graph)  # type: ignore[attr-defined]
        try:
            assert remote.relations("m.e001") == embedded_kg.relations("m.e001")
        finally:
            remote.close()


def test_open_kg_demo() -> None:
    for spec in ("demo", "demo:"):
        kg = open_kg(spec)
        assert kg.stats().triples and kg.schema.name == "freebase"
    with pytest.raises(ConfigError, match="takes no argument"):
        open_kg("demo:extra")


def test_open_kg_refuses_unknown_specs(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown KG backend 'nope'; known KG backends: demo, embedded, endpoint, sparql"):
        open_kg("nope:anything")
    with pytest.raises(ConfigError, match="neither 'demo', an embedded KG directory"):
        open_kg("/no/such/kg")
    with pytest.raises(ConfigError, match="neither 'demo'"):
        open_kg("ftp://example.org/sparql")
    with pytest.raises(ConfigError, match="is not a directory"):
        open_kg(f"embedded:{tmp_path / 'missing'}")
    with pytest.raises(ConfigError, match="not an http"):
        open_kg("sparql:localhost:8890/sparql")


def test_a_directory_whose_name_looks_like_a_spec_is_still_a_store(embedded_kg: EmbeddedKG, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    shutil.copytree(embedded_kg.directory, tmp_path / "kgs:v1")
    monkeypatch.chdir(tmp_path)
    assert isinstance(open_kg("kgs:v1"), EmbeddedKG)


def test_a_backend_registered_in_code_opens_name_specs(embedded_kg: EmbeddedKG) -> None:
    seen: list[tuple[str, object, dict[str, object]]] = []

    def open_named(rest: str, schema: object = None, **options: object) -> EmbeddedKG:
        seen.append((rest, schema, options))
        return EmbeddedKG.open(embedded_kg.directory)

    with KG_BACKENDS.restored():
        KG_BACKENDS.add("stores", open_named)
        kg = open_kg("stores:main/v2", schema="freebase", max_frontier=7)
        assert isinstance(kg, EmbeddedKG)
        assert seen == [("main/v2", "freebase", {"max_frontier": 7})]
        assert "stores" in KG_BACKENDS.names()
    with pytest.raises(ConfigError, match="unknown KG backend 'stores'"):
        open_kg("stores:main/v2")


def test_a_third_party_package_adds_a_backend_and_a_schema_by_entry_point(tmp_path: Path, embedded_kg: EmbeddedKG,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A real (unpacked) distribution on sys.path with ``kgqa.kg_backends`` and ``kgqa.schemas`` entry points."""
    (tmp_path / "kgqa_plugin_demo.py").write_text(textwrap.dedent('''
        from kgqa.kg.embedded import EmbeddedKG
        from kgqa.kg.schema import Schema


        class PluginSchema(Schema):
            def __init__(self):
                super().__init__(name="plugin", entity_base="http://plugin.example/e/")


        def open_plugin(rest, schema=None, **options):
            return EmbeddedKG.open(rest)
    '''), encoding="utf-8")
    dist = tmp_path / "kgqa_plugin_demo-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: kgqa-plugin-demo\nVersion: 0.1\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text("[kgqa.kg_backends]\nplugkg = kgqa_plugin_demo:open_plugin\n\n"
                                           "[kgqa.schemas]\nplugin = kgqa_plugin_demo:PluginSchema\n"
                                           "brokenplugin = kgqa_plugin_demo:NoSuchThing\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    with KG_BACKENDS.restored(), SCHEMAS.restored():
        KG_BACKENDS.discover(force=True)
        SCHEMAS.discover(force=True)
        kg = open_kg(f"plugkg:{embedded_kg.directory}")
        assert isinstance(kg, EmbeddedKG) and kg.relations("m.e001") == embedded_kg.relations("m.e001")
        assert get_schema("plugin").entity_base == "http://plugin.example/e/"
        with pytest.raises(ConfigError, match="brokenplugin' could not be loaded"):
            get_schema("brokenplugin")
        assert get_schema("freebase").name == "freebase"  # one broken plugin hides nothing else
