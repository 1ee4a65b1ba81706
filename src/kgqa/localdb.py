"""A SQLite file of kgqa's own (the LLM cache, the embedding store): where it lives, and how it is opened.

WAL journal and a busy timeout make one file safe for several processes at once (parallel runs sharing a cache); each
thread and each process opens its own connection, because a connection must not cross a thread or a fork.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

from kgqa.errors import ConfigError

#: How long opening a file retries "database is locked" (another process switching it to WAL at the same moment).
OPEN_PATIENCE_S = 30.0


class LocalSQLite:
    """``path`` is a file, a folder (existing, or a path without an extension) that gets ``file_name``, or ``None`` for
    ``default_dir / file_name``. ``schema`` runs on every new connection; ``what`` names the file in errors."""

    def __init__(self, path: str | os.PathLike[str] | None, default_dir: Path, file_name: str, schema: str,
                 what: str) -> None:
        if path is None:
            file = default_dir / file_name
        else:
            file = Path(path).expanduser()
            if file.is_dir() or not file.suffix:
                file = file / file_name
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"{what} location {file.parent} cannot be created: {exc}") from None
        self.path = file
        self._schema = schema
        self._what = what
        self._local = threading.local()
        self.connect()  # fail early, with a clear error, if the file is unusable

    def connect(self) -> sqlite3.Connection:
        """This thread's connection (opened on first use, and again after a fork)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            return conn
        deadline = time.monotonic() + OPEN_PATIENCE_S
        pause = 0.02
        while True:
            conn = None
            try:
                conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute("PRAGMA busy_timeout=30000")
                conn.execute(self._schema)
                break
            except sqlite3.DatabaseError as exc:
                if conn is not None:
                    conn.close()
                # Processes opening a new file together race to switch it to WAL; SQLite answers the loser "locked"
                # at once, without waiting on the busy timeout. Opening again shortly after succeeds.
                transient = isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)
                if not transient or time.monotonic() + pause > deadline:
                    raise ConfigError(f"{self._what} {self.path} cannot be opened as SQLite: {exc}") from None
                time.sleep(pause)
                pause = min(pause * 2, 0.5)
        self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    def close(self) -> None:
        """Close this thread's connection (others close with their threads)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
