"""A long field at import (issue 16, finding 7): refused by default as a bad line naming file:line, imported once the
limit is raised, and hashed into the store without a loop over every byte position of the longest string; the table
hash itself is unchanged, so stores written before keep opening and finding their ids."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from kgqa import config
from kgqa.cli import main
from kgqa.errors import ConfigError, DataError
from kgqa.kg.embedded import EmbeddedKG, EmbeddedKGBuilder, _hash_packed, _key_hash, _packed
from kgqa.kg.embedded.arrays import _int_share
from kgqa.kg.loaders import DEFAULT_MAX_FIELD_CHARS, load_into, max_field_chars

BIG = 3_000_000  # characters: the 3 MB field of the issue


@pytest.fixture(autouse=True)
def _no_user_limit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Neither the environment nor a user's config file may set the limit these tests read."""
    monkeypatch.delenv("KGQA_MAX_FIELD_CHARS", raising=False)
    empty = tmp_path / "empty-config.toml"
    empty.write_text("", encoding="utf-8")
    monkeypatch.setenv("KGQA_CONFIG", str(empty))
    config._file_values.cache_clear()
    yield
    config._file_values.cache_clear()


def _tsv(path: Path, long_line: int = 3, big: int = BIG) -> Path:
    lines = [f"e{i}\trel\te{i + 1}" for i in range(5)]
    lines.insert(long_line - 1, "e0\trel\t" + "x" * big)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------------------------------
# The limit


def test_a_field_over_the_limit_is_a_bad_line_naming_file_and_line(tmp_path: Path) -> None:
    source = _tsv(tmp_path / "kg.tsv")
    with pytest.raises(DataError) as info:
        load_into(EmbeddedKGBuilder(), source, "tsv")
    message = str(info.value)
    assert f"{source}:3: field 3 is {BIG:,} characters long, over the limit of {DEFAULT_MAX_FIELD_CHARS:,}" in message
    assert "KGQA_MAX_FIELD_CHARS" in message and "--skip-bad" in message
    # With skip_bad the line is counted and skipped; every other line is imported.
    builder = EmbeddedKGBuilder()
    report = load_into(builder, source, "tsv", skip_bad=True)
    assert (report.lines, report.triples, report.skipped) == (6, 5, 1)
    assert f"{source}:3: field 3" in report.errors[0]
    kg = builder.build(tmp_path / "kg")
    assert kg.stats().triples == 5 and not kg.has_entity("x" * BIG)


@pytest.mark.parametrize("fmt", ["metaqa", "names", "nt", "ttl"])
def test_every_format_refuses_an_over_long_field(tmp_path: Path, fmt: str) -> None:
    big = "y" * BIG
    if fmt == "metaqa":
        source = tmp_path / "kb.txt"
        source.write_text(f"a|rel|b\na|rel|{big}\n", encoding="utf-8")
        expected = f"{source}:2: field 3 is {BIG:,} characters long"
    elif fmt == "names":
        source = tmp_path / "kg.tsv"
        source.write_text("a\trel\tb\n", encoding="utf-8")
        names = tmp_path / "names.tsv"
        names.write_text(f"a\tAlpha\nb\t{big}\n", encoding="utf-8")
        expected = f"{names}:2: field 2 is {BIG:,} characters long"
    elif fmt == "nt":
        source = tmp_path / "kg.nt"
        source.write_text(f'<http://a.org/s> <http://a.org/p> <http://a.org/o> .\n'
                          f'<http://a.org/s> <http://a.org/p> "{big}" .\n', encoding="utf-8")
        expected = f"{source}:2: the object is {BIG + 2:,} characters long"  # the literal's N-Triples form: quotes too
    else:
        source = tmp_path / "kg.ttl"
        label = "<http://www.w3.org/2000/01/rdf-schema#label>"
        source.write_text(f'@prefix a: <http://a.org/> .\na:s a:p a:o .\na:s {label} "{big}" .\n', encoding="utf-8")
        expected = f"the name is {BIG:,} characters long"
    with pytest.raises(DataError, match="over the limit") as info:
        load_into(EmbeddedKGBuilder(), source, "tsv" if fmt == "names" else fmt,
                  names=names if fmt == "names" else None)
    assert expected in str(info.value)


def test_a_long_field_imports_once_the_limit_is_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = _tsv(tmp_path / "kg.tsv")
    long_id = "x" * BIG
    names = tmp_path / "names.tsv"
    names.write_text(f"e1\t{'A long name ' * 300_000}\n", encoding="utf-8")
    monkeypatch.setenv("KGQA_MAX_FIELD_CHARS", str(4_000_000))
    builder = EmbeddedKGBuilder()
    report = load_into(builder, source, "tsv", names=names)
    assert (report.triples, report.names, report.skipped) == (6, 1, 0)
    kg = builder.build(tmp_path / "kg")
    # The reader finds the id again by hashing it in Python: the table was ordered by the same hash.
    reopened = EmbeddedKG.open(kg.directory)
    assert reopened.has_entity(long_id)
    assert set(reopened.neighbors("e0", "rel")) == {"e1", long_id}
    assert reopened.neighbors(long_id, "rel", "in") == ["e0"]
    assert reopened.names(["e1"])["e1"].startswith("A long name")
    # The argument beats the environment; the environment beats the default.
    with pytest.raises(DataError, match="over the limit of 1,000"):
        load_into(EmbeddedKGBuilder(), source, "tsv", max_field_chars=1000)


@pytest.mark.parametrize("value", ["abc", "0", "-5", "1.5", "true"])
def test_a_malformed_limit_names_where_it_came_from(value: str, monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    monkeypatch.setenv("KGQA_MAX_FIELD_CHARS", value)
    with pytest.raises(ConfigError, match=r"max_field_chars from \$KGQA_MAX_FIELD_CHARS must be a positive whole"):
        load_into(EmbeddedKGBuilder(), _tsv(tmp_path / "kg.tsv", big=10), "tsv")


def test_the_limit_comes_from_the_config_file_below_the_environment(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    assert max_field_chars() == DEFAULT_MAX_FIELD_CHARS == 1 << 20
    config_file = tmp_path / "kgqa.toml"
    config_file.write_text("max_field_chars = 2000\n", encoding="utf-8")
    monkeypatch.setenv("KGQA_CONFIG", str(config_file))
    config._file_values.cache_clear()
    assert max_field_chars() == 2000
    monkeypatch.setenv("KGQA_MAX_FIELD_CHARS", "3_000")
    assert max_field_chars() == 3000
    assert max_field_chars(50) == 50


def test_kg_import_reports_the_long_field_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGQA_CACHE_DIR", str(tmp_path / "cache"))
    source = _tsv(tmp_path / "kg.tsv", long_line=4)
    code = main(["kg", "import", str(source), "--format", "tsv", "--out", str(tmp_path / "kg")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"{source}:4: field 3 is {BIG:,} characters long" in err
    assert not (tmp_path / "kg").exists()


# ---------------------------------------------------------------------------------------------------------------------
# The table hash


# The hash of the store's format 2, pinned: the reader hashes a query string in Python and looks for it in tables the
# builder ordered, possibly with an older kgqa, so these values must never change without a new format version.
PINNED = {"m.0abc": 1599527399748014819, "Q42": 2948643077339802704, "": 0, "é": 17714422555194069009,
          "Joel Zwick": 863145936900395759,
          '"1967"^^<http://www.w3.org/2001/XMLSchema#gYear>': 5604177234412939813,
          "x" * 1000: 9538446861743235330}


def _table_hashes(strings: list[str]) -> list[int]:
    data, offsets = _packed(pa.array(strings, type=pa.large_string()))
    return _hash_packed(data, offsets).tolist()


def test_the_table_hash_is_the_stores_format_2_hash() -> None:
    assert _table_hashes(list(PINNED)) == list(PINNED.values())
    assert [_key_hash(k.encode()) for k in PINNED] == list(PINNED.values())


def test_long_and_short_strings_hash_alike_one_at_a_time_and_in_bulk() -> None:
    rng = np.random.default_rng(0)
    strings = [f"m.0{x:x}" for x in rng.integers(0, 2**40, 5000)]
    strings += ["é" * int(n) for n in rng.integers(0, 400, 300)]  # multi-byte characters, lengths across the split
    strings += ["z" * 100_000, "w" * (BIG // 3), "v" * 70_000, "u" * 70_000]
    rng.shuffle(strings)
    assert _table_hashes(strings) == [_key_hash(s.encode()) for s in strings]


def test_a_lone_long_string_is_hashed_on_its_own_not_by_the_position_loop() -> None:
    # The cause of the slow import: the vectorised loop ran once per byte position of the batch's longest string.
    lengths = np.array([BIG] + [12] * 100_000, dtype=np.int64)
    assert _int_share(lengths) == 1
    # Millions of short ids stay in the loop (one at a time is slower for them); so does an empty batch.
    assert _int_share(np.full(2_000_000, 13, dtype=np.int64)) == 0
    assert _int_share(np.empty(0, dtype=np.int64)) == 0
    # A thousand long strings go one at a time too: their bytes dominate, whatever their number.
    many = np.array([200_000] * 1000 + [10] * 10_000, dtype=np.int64)
    assert _int_share(many) == 1000
