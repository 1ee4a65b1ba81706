"""Oxigraph (``pip install oxigraph``): ``oxigraph load`` into ``DIR/store`` (RocksDB), served by
``oxigraph serve-read-only``. A store cannot be written while a server reads it, so files are loaded with the server
stopped; Oxigraph sizes its own caches."""

from __future__ import annotations

import fcntl
import gzip
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kgqa.errors import KGError
from kgqa.kg.servers.engine import ServerEngine, url_host
from kgqa.kg.servers.process import ServerProcess, find_executable

__all__ = ["OxigraphEngine"]


def _executable() -> str:
    return find_executable("oxigraph", "install it with `pip install oxigraph`")


def _ignore_loader(_pid: int | None) -> None:
    pass


class OxigraphEngine(ServerEngine):
    """An Oxigraph server on ``DIR/store``. ``query_timeout_s`` is the server's own query timeout; ``on_loader`` is told
    the pid of each ``oxigraph load`` when it starts (and None when it ends), so that an owner that records it can end
    a loader its killed command left behind (:meth:`end_orphaned_loader`)."""

    name = "oxigraph"
    customary_port = 7878
    loads_while_running = False

    def __init__(self, directory: str | Path, *, query_timeout_s: int | None = None,
                 on_loader: Callable[[int | None], None] = _ignore_loader, **options: Any) -> None:
        super().__init__(directory, **options)
        self.query_timeout_s = query_timeout_s
        self.on_loader = on_loader

    @property
    def url(self) -> str:
        return f"http://{url_host(self.host)}:{self.port}/query" if self.port else ""

    @property
    def store_dir(self) -> Path:
        return self.dir / "store"

    def _prepare(self) -> list[str]:
        self.store_dir.mkdir(parents=True, exist_ok=True)
        argv = [_executable(), "serve-read-only", "--location", str(self.store_dir), "--bind", f"{self.host}:{self.port}"]
        if self.query_timeout_s:
            argv += ["--timeout-s", str(self.query_timeout_s)]
        return argv

    def load(self, path: Path, *, slot: int, resume: bool = False) -> int | None:
        """``oxigraph load`` one file, relaying its progress lines. Oxigraph commits a file whole or not at all, so an
        interrupted load is simply run again (``slot`` and ``resume`` change nothing)."""
        self.store_dir.mkdir(parents=True, exist_ok=True)
        argv = [_executable(), "load", "--location", str(self.store_dir), "--file", str(path)]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                text=True, errors="replace")
        assert proc.stdout is not None
        self.on_loader(proc.pid)
        loaded: int | None = None
        tail: list[str] = []
        with self.log.open("a", encoding="utf-8") as log:
            for line in proc.stdout:
                log.write(line)
                tail = [*tail[-20:], line.rstrip()]
                found = re.search(r"(\d+) triples loaded", line)
                if found:
                    loaded = int(found.group(1))
                    self.progress(f"  {line.strip()}")
        code = proc.wait()
        self.on_loader(None)
        if code != 0:
            raise KGError(f"oxigraph load of {path} failed (code {code}):\n" + "\n".join(tail))
        # oxigraph reports counts only on its progress ticks (about once a second), so a quick load may say nothing.
        return loaded

    def count_added(self, path: Path, before: int) -> int:
        """The triples in ``path``, parsed by pyoxigraph (a load adds the whole file; said only of files small enough
        to load within a progress tick, about a second)."""
        import pyoxigraph

        fmt = pyoxigraph.RdfFormat.TURTLE if ".ttl" in path.name.lower() else pyoxigraph.RdfFormat.N_TRIPLES
        opener = gzip.open if path.name.lower().endswith(".gz") else open
        with opener(path, "rb") as fh:
            return sum(1 for _ in pyoxigraph.parse(fh, format=fmt))

    def end_orphaned_loader(self, pid: int) -> None:
        """End an ``oxigraph load`` that a killed command left running (it holds the store's lock); its file is loaded
        again, since Oxigraph commits a file only when it is complete."""
        loader = ServerProcess(pid, marker=str(self.dir))
        if not loader.running:
            return
        self.progress(f"ending the loader (pid {pid}) an interrupted start left running")
        # The loader runs in the killed command's process group, which may hold other processes: signal it alone. The
        # wait is for the process itself to be gone: an exiting process drops its command line (its memory) before it
        # closes its files, so an empty command line does not mean the store's lock is free yet.
        loader.terminate(timeout=30.0, group=False)
        _wait_unlocked(self.store_dir / "LOCK", timeout=10.0)


def _wait_unlocked(lock: Path, *, timeout: float) -> None:
    """Wait until no process holds the POSIX lock on ``lock`` (RocksDB's store lock), at most ``timeout`` seconds."""
    if not lock.exists():
        return
    deadline = time.monotonic() + timeout
    while True:
        try:
            with lock.open("r+b") as handle:
                fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.lockf(handle, fcntl.LOCK_UN)
            return
        except OSError:
            if time.monotonic() >= deadline:
                return  # the load that follows reports the lock in its own words
            time.sleep(0.1)
