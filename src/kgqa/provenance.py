"""Where a result came from: the kgqa source commit, recorded in every run's config.json and every trained model's
card, so a figure can be traced to the code that produced it."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path


@functools.cache
def source_commit() -> str | None:
    """The short git commit of the kgqa source this process runs, with ``+dirty`` when ``src/`` has uncommitted
    changes; None outside a git checkout (an installed wheel) or without git."""
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5,
                              cwd=here)
        if head.returncode != 0 or not head.stdout.strip():
            return None
        status = subprocess.run(["git", "status", "--porcelain", "--", str(here)], capture_output=True, text=True,
                                timeout=5, cwd=here)
    except (OSError, subprocess.SubprocessError):
        return None
    dirty = status.returncode == 0 and bool(status.stdout.strip())
    return head.stdout.strip() + ("+dirty" if dirty else "")
