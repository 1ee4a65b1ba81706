"""Issue 52 on `kgqa kg import`: a file starting with a UTF-8 byte order mark is read as the data it holds (item 11),
and the staging directories of imports that were killed are cleaned by the next import (item 8)."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kgqa.cli import main
from kgqa.kg.embedded import EmbeddedKG, EmbeddedKGBuilder
from kgqa.kg.embedded.staging import STALE_AFTER_S, clean_stale_builds, is_stale, staging_dir
from kgqa.kg.loaders import load_into

BOM = b"\xef\xbb\xbf"
NT = b'<http://ex.org/Titanic> <http://ex.org/directed_by> <http://ex.org/James_Cameron> .\n' \
     b'<http://ex.org/Titanic> <http://www.w3.org/2000/01/rdf-schema#label> "Titanic"@en .\n'
SOURCES = {
    "nt": ("kb.nt", NT),
    "nq": ("kb.nq", NT),
    "ttl": ("kb.ttl", b"@prefix ex: <http://ex.org/> .\nex:Titanic ex:directed_by ex:James_Cameron .\n"),
    "trig": ("kb.trig", b"@prefix ex: <http://ex.org/> .\n{ ex:Titanic ex:directed_by ex:James_Cameron . }\n"),
    "tsv": ("kb.tsv", b"Titanic\tdirected_by\tJames_Cameron\n"),
    "metaqa": ("kb.txt", b"Titanic|directed_by|James Cameron\n"),
}


@pytest.mark.parametrize("fmt", sorted(SOURCES))
@pytest.mark.parametrize("gzipped", [False, True])
def test_a_file_starting_with_a_byte_order_mark_is_read_as_its_data(fmt: str, gzipped: bool, tmp_path: Path) -> None:
    # At 9cf0ed4 a valid N-Triples file that began with a BOM was refused at line 1; TSV kept it in the first id.
    name, body = SOURCES[fmt]
    path = tmp_path / (name + (".gz" if gzipped else ""))
    path.write_bytes(gzip.compress(BOM + body) if gzipped else BOM + body)
    builder = EmbeddedKGBuilder(schema="generic")
    report = load_into(builder, path, fmt)
    assert report.triples == 1 and report.skipped == 0
    kg = builder.build(tmp_path / "kg")
    subject = "http://ex.org/Titanic" if fmt in ("nt", "nq", "ttl", "trig") else "Titanic"
    assert kg.has_entity(subject)  # not "\ufeffTitanic"
    assert not any("\ufeff" in entity for entity, _ in kg.iter_names())


def test_kg_import_of_an_n_triples_file_with_a_bom(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "kb.nt"
    source.write_bytes(BOM + NT)
    assert main(["kg", "import", str(source), "--out", str(tmp_path / "kg")]) == 0, capsys.readouterr().err
    kg = EmbeddedKG.open(tmp_path / "kg")
    assert kg.stats().triples == 1 and kg.names(["http://ex.org/Titanic"]) == {"http://ex.org/Titanic": "Titanic"}


# -- staging directories of killed imports ----------------------------------------------------------------------------


def _killed_owner(parent: Path) -> Path:
    """A staging directory made by a real process that was then killed with SIGKILL (as a killed import leaves one)."""
    code = ("import os, sys, signal\nfrom pathlib import Path\nfrom kgqa.kg.embedded.staging import staging_dir\n"
            "print(staging_dir(Path(sys.argv[1])), flush=True)\nos.kill(os.getpid(), signal.SIGKILL)\n")
    done = subprocess.run([sys.executable, "-c", code, str(parent)], capture_output=True, text=True, timeout=120)
    assert done.returncode == -9, done.stderr
    left = Path(done.stdout.strip())
    assert left.is_dir() and left.parent == parent
    return left


def test_the_next_import_removes_what_a_killed_import_left(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    left = _killed_owner(tmp_path)
    legacy_old = tmp_path / ".kgqa-build-k2j4h1x9"  # named by an older kgqa (no pid), untouched for two days
    legacy_old.mkdir()
    (legacy_old / "nodes.bin").write_bytes(b"x")
    two_days_ago = time.time() - 2 * 86400
    for path in (legacy_old / "nodes.bin", legacy_old):
        os.utime(path, (two_days_ago, two_days_ago))
    legacy_new = tmp_path / ".kgqa-build-a8b7c6d5"  # as old a name, but written to a minute ago: maybe a build at work
    legacy_new.mkdir()
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]) as live:
        try:
            (tmp_path / "probe").mkdir()
            host = staging_dir(tmp_path / "probe").name.split("@", 1)[1].rsplit(".", 1)[0]  # this host, as named
            ours = tmp_path / f".kgqa-build-{live.pid}@{host}.abcd1234"
            ours.mkdir()  # owned by a live process of this host: never touched, however old
            os.utime(ours, (two_days_ago, two_days_ago))
            source = tmp_path / "probe" / "kb.txt"
            source.write_text("Titanic|directed_by|James Cameron\n", encoding="utf-8")
            assert main(["kg", "import", str(source), "--out", str(tmp_path / "kg")]) == 0
            err = capsys.readouterr().err
            assert not left.exists() and not legacy_old.exists()
            assert legacy_new.is_dir() and ours.is_dir()
            assert f"removed {left}, left by an import that did not finish" in err and str(legacy_old) in err
            assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".kgqa-build-")) == sorted(
                [legacy_new.name, ours.name])  # and the import's own staging directory is gone (renamed into place)
        finally:
            live.kill()


def test_staleness_is_by_owner_first_then_by_a_day_without_change(tmp_path: Path) -> None:
    mine = staging_dir(tmp_path)
    assert mine.name.startswith(f".kgqa-build-{os.getpid()}@")
    assert not is_stale(mine) and not is_stale(mine, now=time.time() + 10 * STALE_AFTER_S)  # this process: alive
    other_host = tmp_path / ".kgqa-build-1@another-host.abcd1234"
    other_host.mkdir()
    assert not is_stale(other_host)  # its owner cannot be asked: only a day without change makes it stale
    assert is_stale(other_host, now=time.time() + STALE_AFTER_S + 60)
    assert clean_stale_builds(tmp_path / "missing") == []
    assert clean_stale_builds(tmp_path) == []
