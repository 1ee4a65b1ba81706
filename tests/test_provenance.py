"""The source commit recorded with every run and trained model, from a checkout and from a ``git archive`` export."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from kgqa.provenance import archive_commit

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("text", "expected"), [
    ("fcfad03\n", "fcfad03"),
    ("813368e0a1b2c3d4e5f60718293a4b5c6d7e8f90", "813368e0a1b2c3d4e5f60718293a4b5c6d7e8f90"),
    ("$Format:%h$\n", None),  # a checkout: git archive did not expand it
    ("", None),
    ("not a commit", None),
])
def test_archive_commit_reads_only_an_expanded_hash(tmp_path: Path, text: str, expected: str | None) -> None:
    path = tmp_path / "ARCHIVE_COMMIT.txt"
    path.write_text(text, encoding="ascii")
    assert archive_commit(path) == expected


def test_archive_commit_of_a_missing_file_is_none(tmp_path: Path) -> None:
    assert archive_commit(tmp_path / "absent.txt") is None


def test_a_run_from_a_git_archive_export_records_the_commit(tmp_path: Path) -> None:
    # At fcfad03 four comparison runs were made from `git archive` of src/ and recorded kgqa_commit null.
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("the tests do not run from a git checkout")
    archive = subprocess.run(["git", "archive", "--format=tar", "HEAD", "src"], cwd=REPO, capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(tmp_path, filter="data")
    probe = "from kgqa.provenance import source_commit; print(source_commit())"
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env={"PYTHONPATH": str(tmp_path / "src")},
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == head.stdout.strip() + "+export"


def test_a_short_commit_keeps_its_dirty_or_export_mark() -> None:
    from kgqa.provenance import short_commit

    assert short_commit("15430e0abcdef+export") == "15430e0+export"
    assert short_commit("f9d5b18123+dirty") == "f9d5b18+dirty"
    assert short_commit("f9d5b18123") == "f9d5b18"
    assert short_commit(None) == "None"
