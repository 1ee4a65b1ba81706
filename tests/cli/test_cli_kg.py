"""`kgqa kg ...` run as a real subprocess: import, info, relations, chain, search, and user errors without tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def run(*args: str, cache: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KGQA_CACHE_DIR": str(cache)}
    proc = subprocess.run([sys.executable, "-m", "kgqa", *args], capture_output=True, text=True, env=env, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"kgqa {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


def test_chain_on_demo_kg_as_json(cache: Path) -> None:
    out = run("kg", "chain", "demo", "--from", "Christopher Nolan", "--path", "film.director.film", "--json", cache=cache)
    payload = json.loads(out.stdout)
    names = {e["name"] for e in payload["entities"]}
    assert {"Inception", "Memento", "Oppenheimer"} <= names
    assert all(set(e) >= {"id", "name"} for e in payload["entities"])
    assert payload["truncated"] is False


def test_chain_with_incoming_hop_and_paths(cache: Path) -> None:
    out = run("kg", "chain", "demo", "--from", "m.0demo_inception", "--path", "film.film.directed_by,^film.film.directed_by",
              "--paths", "--json", cache=cache)
    payload = json.loads(out.stdout)
    assert "m.0demo_the_dark_knight" in {e["id"] for e in payload["entities"]}
    assert all(p[0] == "m.0demo_inception" and p[1] == "m.0demo_christopher_nolan" for p in payload["paths"])


def test_import_info_relations_search_on_a_tsv(tmp_path: Path, cache: Path) -> None:
    triples = tmp_path / "kg.tsv"
    triples.write_text("alice\tknows\tbob\nbob\tknows\tcarol\ncarol\tborn_in\t\"1990\"\n", encoding="utf-8")
    out_dir = tmp_path / "store"
    report = json.loads(run("kg", "import", str(triples), "--format", "tsv", "--out", str(out_dir), "--json",
                            cache=cache).stdout)
    assert report["triples"] == 3 and report["relations"] == 2 and report["literals"] == 1
    info = json.loads(run("kg", "info", str(out_dir), "--json", cache=cache).stdout)
    assert info["vocabulary"] == ["born_in", "knows"]
    rels = json.loads(run("kg", "relations", str(out_dir), "bob", "--json", cache=cache).stdout)
    assert rels["out"] == ["knows"] and rels["in"] == ["knows"]
    chain = json.loads(run("kg", "chain", str(out_dir), "--from", "alice", "--path", "knows,knows,born_in", "--json",
                           cache=cache).stdout)
    assert [e["name"] for e in chain["entities"]] == ["1990"]


def test_bad_line_names_file_and_line_and_skip_bad_counts(tmp_path: Path, cache: Path) -> None:
    triples = tmp_path / "bad.tsv"
    triples.write_text("a\tr\tb\nonly-two\tfields\nc\tr\td\n", encoding="utf-8")
    proc = run("kg", "import", str(triples), "--format", "tsv", "--out", str(tmp_path / "s"), cache=cache, check=False)
    assert proc.returncode == 2
    assert "bad.tsv:2" in proc.stderr and "Traceback" not in proc.stderr
    ok = json.loads(run("kg", "import", str(triples), "--format", "tsv", "--out", str(tmp_path / "s"), "--skip-bad",
                        "--json", cache=cache).stdout)
    assert ok["triples"] == 2 and ok["load"]["skipped"] == 1


@pytest.mark.parametrize("args, message", [
    (("kg", "chain", "demo", "--from", "Nobody At All", "--path", "film.director.film"), "entity 'Nobody At All'"),
    (("kg", "chain", "demo", "--from", "Christopher Nolan", "--path", "film.director.flim"),
     "relation 'film.director.flim' is not in this KG's vocabulary"),
    (("kg", "chain", "demo", "--from", "Christopher Nolan", "--path", "film.director.film,} ; DROP ALL"),
     "not in this KG's vocabulary"),
    (("kg", "info", "/no/such/kg"), "neither 'demo', an embedded KG directory"),
])
def test_user_errors_are_one_line_without_traceback(args: tuple[str, ...], message: str, cache: Path) -> None:
    proc = run(*args, cache=cache, check=False)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_fuzzy_search_finds_a_misspelt_name(cache: Path) -> None:
    payload = json.loads(run("kg", "search", "demo", "cristopher nolan", "--json", cache=cache).stdout)
    assert payload["matches"][0]["id"] == "m.0demo_christopher_nolan"
