"""Where a result came from: the kgqa source commit, recorded in every run's config.json and every trained model's
card, so a figure can be traced to the code that produced it."""

from __future__ import annotations

import functools
import os
import re
import subprocess
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent
#: ``git archive`` writes the commit into this file (``export-subst`` in .gitattributes); in a checkout it holds the
#: unexpanded ``$Format:%h$``.
ARCHIVE_COMMIT_FILE = _PACKAGE_DIR / "ARCHIVE_COMMIT.txt"


def archive_commit(path: Path = ARCHIVE_COMMIT_FILE) -> str | None:
    """The short commit ``git archive`` wrote into ``path``; None in a checkout (unexpanded) or when it is absent."""
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if re.fullmatch(r"[0-9a-f]{7,40}", text) else None


@functools.cache
def source_commit() -> str | None:
    """The short git commit of the kgqa source this process runs, with ``+dirty`` when ``src/`` has uncommitted
    changes, or with ``+export`` when it runs from a ``git archive`` export (which may have been edited since);
    None outside both (an installed wheel) or without git."""
    exported = archive_commit()
    if exported is not None:
        # checked first: an export unpacked inside some other checkout would otherwise report that checkout's HEAD
        return exported + "+export"
    return checkout_commit(_PACKAGE_DIR)


def checkout_commit(directory: Path) -> str | None:
    """The short commit of the git checkout holding ``directory``, with ``+dirty`` when files under ``directory``
    have uncommitted changes; None outside a checkout or without git.

    Read without taking any lock: ``git status`` would otherwise refresh the index and write it back under
    ``.git/index.lock`` (an "optional lock"), so every ``kgqa eval`` would take the checkout's index lock and a
    ``git commit`` running at that moment would fail on it. ``--no-optional-locks`` (and ``GIT_OPTIONAL_LOCKS=0``,
    for any git command git itself starts) only reads.
    """
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    git = ["git", "--no-optional-locks"]
    try:
        head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5,
                              cwd=directory, env=env)
        if head.returncode != 0 or not head.stdout.strip():
            return None
        status = subprocess.run([*git, "status", "--porcelain", "--", str(directory)], capture_output=True, text=True,
                                timeout=5, cwd=directory, env=env)
    except (OSError, subprocess.SubprocessError):
        return None
    dirty = status.returncode == 0 and bool(status.stdout.strip())
    return head.stdout.strip() + ("+dirty" if dirty else "")


def short_commit(commit: object, width: int = 7) -> str:
    """A recorded commit for a table column: the hash cut to ``width`` characters, its ``+dirty`` or ``+export``
    mark kept (cutting the whole string would drop the mark that says the figure is not from that commit alone)."""
    text = str(commit)
    digest, plus, mark = text.partition("+")
    return digest[:width] + plus + mark
