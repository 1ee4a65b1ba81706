"""Where a build is written before it is renamed into place: ``.kgqa-build-PID@HOST.XXXXXXXX`` beside ``--out``, and
the clean-up of such directories left by builds that were killed.

A build writes its store into a staging directory next to the output and renames it into place when it is complete,
so a reader never sees half a store. A build that is killed (SIGKILL, a crash, the machine going down) cannot remove
its staging directory, so every import first removes the stale ones (:func:`clean_stale_builds`). A staging directory
is stale when

* its name says it was made on this host by a process that is no longer alive (the common case: a killed import), or
* nothing in it has changed for :data:`STALE_AFTER_S` (24 hours): a staging directory of an older kgqa (whose names
  carry no process id), of another host sharing the file system, or one whose process id has since been reused. A live
  build writes its files phase after phase, and its whole write phase is short (17 s for 10M triples,
  benchmarks/results/kg_bench.md; linear in the triples, so under an hour even 100 times larger): a day of silence
  cannot be a build at work, and a shorter threshold would gain nothing, since the common case is caught by the pid.

A directory of a live process on this host is never touched, however old.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
import time
from pathlib import Path

__all__ = ["STAGING_PREFIX", "STALE_AFTER_S", "clean_stale_builds", "is_stale", "staging_dir"]

#: The name every staging directory starts with.
STAGING_PREFIX = ".kgqa-build-"
#: A staging directory in which nothing changed for this long is stale whoever made it (see the module docstring).
STALE_AFTER_S = 24 * 3600.0
_OWNED_RE = re.compile(re.escape(STAGING_PREFIX) + r"(?P<pid>\d+)@(?P<host>[A-Za-z0-9._-]+)\.[A-Za-z0-9_]+$")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname())[:64] or "host"


def staging_dir(parent: Path) -> Path:
    """A new, empty staging directory in ``parent`` whose name says which process on which host owns it."""
    return Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}@{_host()}.", dir=parent))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    except OSError:
        return True  # cannot tell: keep its directory
    return True


def _last_change(path: Path) -> float:
    """The newest modification time of ``path`` and everything in it."""
    newest = path.lstat().st_mtime
    for item in path.rglob("*"):
        try:
            newest = max(newest, item.lstat().st_mtime)
        except OSError:
            continue
    return newest


def is_stale(path: Path, *, now: float | None = None) -> bool:
    """Whether the staging directory ``path`` was left by a build that is no longer running (module docstring)."""
    owned = _OWNED_RE.match(path.name)
    if owned is not None and owned.group("host") == _host():
        pid = int(owned.group("pid"))
        return pid != os.getpid() and not _alive(pid)  # a live build's directory is never touched
    try:
        return (time.time() if now is None else now) - _last_change(path) > STALE_AFTER_S
    except OSError:
        return False


def clean_stale_builds(parent: Path) -> list[Path]:
    """Remove the stale staging directories in ``parent``; returns those removed (none when ``parent`` is missing)."""
    try:
        candidates = [p for p in parent.iterdir() if p.name.startswith(STAGING_PREFIX) and p.is_dir()
                      and not p.is_symlink()]
    except OSError:
        return []
    removed = []
    for path in sorted(candidates):
        if is_stale(path):
            shutil.rmtree(path, ignore_errors=True)
            if not path.exists():
                removed.append(path)
    return removed
