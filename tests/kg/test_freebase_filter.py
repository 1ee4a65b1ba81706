"""`kgqa kg freebase-filter` on a synthetic dump in the format Google released Freebase in (gzipped N-Triples, tab
separated, ``\\t.`` at the end): real facts and names from ../shared/data/freebase (gold-path triples with their CVT
nodes) plus generated noise (names, aliases and descriptions in other languages, keys, web links, review bookkeeping,
rdf:type / rdfs:label duplicates). The kept triples must be exactly the expected set, and memory must stay flat when
the input grows tenfold.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from kgqa.kg.freebase_filter import FilterRules, filter_freebase

NS = "http://rdf.freebase.com/ns/"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
REPO = Path(__file__).resolve().parents[2]

Triple = tuple[str, str, str]


def _iri(local: str) -> str:
    return f"<{NS}{local}>"


def _lit(text: str, lang: str | None = None) -> str:
    body = '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return f"{body}@{lang}" if lang else body


def write_dump(path: Path, facts: list[tuple[str, str, str]], names: dict[str, str], *, copies: int = 1,
               ) -> tuple[set[Triple], int]:
    """Write a Freebase-format dump of ``facts`` and ``names`` with noise, ``copies`` times over with renamed ids (so
    ten copies are ten times the input, not the same lines). Returns the triples that must be kept and the lines
    written."""
    keep: set[Triple] = set()
    lines = 0
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=1) as fh:
        def emit(s: str, p: str, o: str, kept: bool) -> None:
            nonlocal lines
            fh.write(f"{s}\t{p}\t{o}\t.\n")
            lines += 1
            if kept:
                keep.add((s, p, o))

        for copy in range(copies):
            def mid(m: str, copy: int = copy) -> str:
                return m if copy == 0 else f"{m}_{copy}"

            for head, rel, tail in facts:
                emit(_iri(mid(head)), _iri(rel), _iri(mid(tail)), True)  # facts and CVT structure stay
            for entity, name in names.items():
                s = _iri(mid(entity))
                emit(s, _iri("type.object.name"), _lit(name, "en"), True)
                emit(s, _iri("type.object.name"), _lit(name + " (fr)", "fr"), False)
                emit(s, _iri("type.object.name"), _lit(name + " (zh)", "zh-Hant"), False)
                emit(s, _iri("common.topic.alias"), _lit(name.upper(), "en-GB"), True)  # a regional English tag
                emit(s, _iri("common.topic.alias"), _lit(name.lower(), "es"), False)
                emit(s, _iri("common.topic.description"), _lit(f'About "{name}"\nsecond line', "en"), True)
                emit(s, _iri("common.topic.description"), _lit(f"Über {name}", "de"), False)
                emit(s, _iri("type.object.type"), _iri("common.topic"), True)
                emit(s, f"<{RDF_TYPE}>", _iri("common.topic"), False)
                emit(s, f"<{RDFS_LABEL}>", _lit(name, "en"), False)
                emit(s, _iri("type.object.key"), _lit(f"/wikipedia/en_id/{abs(hash(entity)) % 10**7}"), False)
                emit(s, _iri("common.topic.topic_equivalent_webpage"),
                     f"<http://en.wikipedia.org/wiki/{entity.replace('.', '_')}>", False)
                emit(s, _iri("freebase.valuenotation.is_reviewed"), _iri("people.person.date_of_birth"), False)
                emit(s, _iri("dataworld.gardening_hint.last_referenced_by"), _iri(mid("m.0gardener")), False)
                emit(s, _iri("people.person.height_meters"),
                     '"1.80"^^<http://www.w3.org/2001/XMLSchema#float>', True)  # typed literals stay
    return keep, lines


def read_ntriples(path: Path) -> list[Triple]:
    opener = gzip.open if path.name.endswith(".gz") else open
    out: list[Triple] = []
    with opener(path, "rt", encoding="utf-8") as fh:  # type: ignore[operator]
        for line in fh:
            assert line.endswith(" .\n"), line
            s, p, o = line[:-3].split(" ", 2)
            out.append((s, p, o))
    return out


@pytest.fixture(scope="module")
def pieces(shared_data: Callable[..., Path]) -> tuple[list[tuple[str, str, str]], dict[str, str]]:
    """2,000 gold-path triples (with their CVT nodes) and the names of their entities."""
    rows = shared_data("freebase", "goldpath_triples.tsv").read_text(encoding="utf-8").splitlines()[:2000]
    facts = [(h, r, t) for h, r, t, _q in (row.split("\t") for row in rows)]
    entities = {e for h, _r, t in facts for e in (h, t)}
    names = {}
    for row in shared_data("freebase", "names.tsv").read_text(encoding="utf-8").splitlines():
        mid, _, name = row.partition("\t")
        if mid in entities:
            names[mid] = name
    return facts, names


def test_kept_triples_are_exactly_the_expected_set(pieces: tuple[list[tuple[str, str, str]], dict[str, str]],
                                                  tmp_path: Path) -> None:
    facts, names = pieces
    nameless = {e for h, _r, t in facts for e in (h, t)} - set(names)  # CVT mediators among them
    assert len(names) > 500 and len(nameless) > 50
    dump = tmp_path / "freebase-rdf-sample.gz"
    expected, written = write_dump(dump, facts, names)
    out = tmp_path / "filtered.nt.gz"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run([sys.executable, "-m", "kgqa", "kg", "freebase-filter", str(dump), "--out", str(out),
                           "--json", "--no-progress"], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    kept = read_ntriples(out)
    assert len(kept) == len(set(kept))
    assert set(kept) == expected
    assert report["read"] == written and report["kept"] == len(expected)
    n = len(names)
    assert report["dropped"] == {
        "literal in another language": 4 * n, "predicate outside ns:": 2 * n, "predicate type.object.key": n,
        "predicate common.topic.topic_equivalent_webpage": n, "predicate freebase.valuenotation.": n,
        "predicate dataworld.": n}
    # CVT structure intact: every gold-path triple is there, mediator nodes included.
    assert {(_iri(h), _iri(r), _iri(t)) for h, r, t in facts} <= set(kept)


def test_default_rules_keep_every_gold_path_triple(shared_data: Callable[..., Path], tmp_path: Path) -> None:
    """The subset KGQA work uses: no triple on the gold reasoning paths of ~1,000 WebQSP and ~1,000 CWQ questions is
    dropped by the default rules (a few use user.* domains, common.topic.image, dataworld.gardening_hint.split_to)."""
    rows = shared_data("freebase", "goldpath_triples.tsv").read_text(encoding="utf-8").splitlines()
    dump = tmp_path / "gold.nt.gz"
    with gzip.open(dump, "wt", encoding="utf-8") as fh:
        for row in rows:
            h, r, t, _q = row.split("\t")
            fh.write(f"{_iri(h)}\t{_iri(r)}\t{_iri(t)}\t.\n")
    report = filter_freebase(dump, tmp_path / "kept.nt", progress=False)
    assert report.read == len(rows) == 8_823 and report.kept == len(rows), report.dropped
    assert not (tmp_path / "filtered.nt.gz.part").exists()


def test_keep_drop_and_language_options(pieces: tuple[list[tuple[str, str, str]], dict[str, str]],
                                        tmp_path: Path) -> None:
    facts, names = pieces
    small = dict(list(names.items())[:50])
    dump = tmp_path / "dump.gz"
    write_dump(dump, facts[:100], small)
    out = tmp_path / "out.nt"
    rules = FilterRules.default(languages=("en", "fr"), drops=("common.topic.description",),
                                keeps=("type.object.key", RDF_TYPE))
    report = filter_freebase(dump, out, rules, progress=False)
    kept = read_ntriples(out)
    predicates = {p for _s, p, _o in kept}
    assert _iri("type.object.key") in predicates and f"<{RDF_TYPE}>" in predicates  # kept on request
    assert _iri("common.topic.description") not in predicates  # dropped on request
    assert f"<{RDFS_LABEL}>" not in predicates
    languages = {o.rsplit("@", 1)[1] for _s, _p, o in kept if o.startswith('"') and '"@' in o}
    assert languages == {"en", "fr", "en-GB"}
    assert report.dropped["predicate common.topic.description"] == 100  # in English and German
    # --no-default-drops with foreign predicates kept: only the language rule is left.
    everything = filter_freebase(dump, tmp_path / "all.nt", FilterRules.default(default_drops=False, keep_foreign=True),
                                 progress=False)
    assert set(everything.dropped) == {"literal in another language"}


def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    from kgqa.cli import main

    broken = tmp_path / "broken.gz"
    payload = "".join(f"<{NS}m.{i:x}> <{NS}r.r.r> \"{i * 7919 % 100_003}\" .\n" for i in range(5000)).encode()
    broken.write_bytes(gzip.compress(payload)[:2000])  # a truncated gzip stream
    assert main(["kg", "freebase-filter", str(broken), "--out", str(tmp_path / "x.nt"), "--no-progress"]) == 2
    assert not (tmp_path / "x.nt").exists() and not (tmp_path / "x.nt.part").exists()
    assert main(["kg", "freebase-filter", str(tmp_path / "missing.gz"), "--out", str(tmp_path / "y.nt")]) == 2


_MEASURE = """
import sys, tracemalloc
from kgqa.kg.freebase_filter import filter_freebase
if sys.argv[3] == "heap":
    tracemalloc.start()  # its own bookkeeping inflates RSS, so the RSS is measured in a run without it
report = filter_freebase(sys.argv[1], sys.argv[2], progress=False)
if sys.argv[3] == "heap":
    peak = tracemalloc.get_traced_memory()[1]
else:  # VmHWM: this process's own peak RSS (ru_maxrss would carry the parent's peak over the fork)
    hwm = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")][0]
    peak = int(hwm.split()[1]) * 1024
print(report.read, peak)
"""


def _measure(dump: Path, out: Path, what: str) -> tuple[int, int]:
    proc = subprocess.run([sys.executable, "-c", _MEASURE, str(dump), str(out), what], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert proc.returncode == 0, proc.stderr
    read, peak = map(int, proc.stdout.split())
    return read, peak


def test_memory_stays_flat_when_the_input_grows_tenfold(pieces: tuple[list[tuple[str, str, str]], dict[str, str]],
                                                        tmp_path: Path) -> None:
    facts, names = pieces
    measured = {}
    for copies in (1, 10):
        dump = tmp_path / f"dump{copies}.gz"
        _keep, lines = write_dump(dump, facts, names, copies=copies)
        read, heap = _measure(dump, tmp_path / f"out{copies}.nt.gz", "heap")
        read_again, rss = _measure(dump, tmp_path / f"out{copies}.nt.gz", "rss")
        assert read == read_again == lines
        measured[copies] = (lines, heap, rss)
    (small, heap_small, rss_small), (big, heap_big, rss_big) = measured[1], measured[10]
    assert big == 10 * small
    print(f"\nlines {small:,} -> {big:,}; Python heap peak {heap_small / 1e6:.2f} -> {heap_big / 1e6:.2f} MB; "
          f"peak RSS {rss_small / 1e6:.1f} -> {rss_big / 1e6:.1f} MB")
    # Tenfold input, the same buffers: the peaks may wobble a little, never grow with the input.
    assert heap_big <= heap_small * 1.25 + 256 * 1024
    assert rss_big <= rss_small + 4 * 1024 * 1024
