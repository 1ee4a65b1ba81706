"""Throw-away SPARQL servers for tests and benchmarks: an engine in a work dir (a temporary one when none is given),
loaded with N-Triples files at the start, on 127.0.0.1, stopped on exit (also when the body raises)::

    with OxigraphServer(["kg.nt"], workdir) as server:
        kg = SparqlKG(server.url, schema="freebase")
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Self

from kgqa.errors import ConfigError
from kgqa.kg.servers.engine import ServerEngine
from kgqa.kg.servers.oxigraph import OxigraphEngine
from kgqa.kg.servers.process import ServerProcess
from kgqa.kg.servers.virtuoso import DEFAULT_GRAPH, VirtuosoEngine, virtuoso_settings

__all__ = ["OxigraphServer", "VirtuosoServer"]


def _existing_files(files: Sequence[str | os.PathLike[str]]) -> list[Path]:
    paths = [Path(f).resolve() for f in files]
    for path in paths:
        if not path.is_file():
            raise ConfigError(f"N-Triples file {str(path)!r} does not exist")
    return paths


class _LocalServer:
    """What both throw-away servers share: the work dir, the engine's life as a context manager, numbered loads."""

    engine: ServerEngine

    def __init__(self, ntriples_files: Sequence[str | os.PathLike[str]],
                 workdir: str | os.PathLike[str] | None) -> None:
        self.files = _existing_files(ntriples_files)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="kgqa-sparql-")
            workdir = self._tmp.name
        self.workdir = Path(workdir).resolve()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._loads = 0

    @property
    def url(self) -> str:
        """The SPARQL endpoint."""
        return self.engine.url

    @property
    def proc(self) -> ServerProcess | None:
        """The server process while it runs."""
        return self.engine.process

    @property
    def log(self) -> Path:
        """The server's log file."""
        return self.engine.log

    def _next_slot(self) -> int:
        """A new slot for each file loaded, so that no load takes the place of an earlier one."""
        self._loads += 1
        return self._loads

    def start(self) -> None:
        """Load the files and start the server (the order is the engine's)."""
        raise NotImplementedError

    def stop(self) -> None:
        """Stop the server; a temporary work dir goes with it."""
        self.engine.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


class OxigraphServer(_LocalServer):
    """``oxigraph load`` the files into ``workdir/store``, then ``oxigraph serve-read-only`` on a free local port."""

    def __init__(self, ntriples_files: Sequence[str | os.PathLike[str]],
                 workdir: str | os.PathLike[str] | None = None, *, start_timeout: float = 60.0,
                 query_timeout_s: int | None = None) -> None:
        super().__init__(ntriples_files, workdir)
        self.engine = OxigraphEngine(self.workdir, query_timeout_s=query_timeout_s, start_timeout=start_timeout)

    def start(self) -> None:
        for path in self.files:
            self.engine.load(path, slot=self._next_slot())
        self.engine.start()


class VirtuosoServer(_LocalServer):
    """A throw-away Virtuoso (``virtuoso-t``) with its database, ini and load dir inside ``workdir``.

    The N-Triples files are bulk-loaded into ``graph``; with ``fulltext`` the graph's literals are indexed for
    ``bif:contains``. Both ports listen on 127.0.0.1 only and the ``dba`` account keeps its default password: a test
    server, not a deployment. Start-up takes about 8 s (a fresh database is created each time); :meth:`load` adds more
    data to a running server. Queries without a ``default-graph-uri`` see Virtuoso's system graphs as well.
    """

    def __init__(self, ntriples_files: Sequence[str | os.PathLike[str]],
                 workdir: str | os.PathLike[str] | None = None, *, graph: str = DEFAULT_GRAPH,
                 start_timeout: float = 120.0, buffers: int = 20000, max_rows: int = 1_000_000,
                 fulltext: bool = True) -> None:
        super().__init__(ntriples_files, workdir)
        # Sized for a test machine rather than from a memory budget: few buffers, few threads.
        settings = replace(virtuoso_settings(1.0, cpus=2, result_set_max_rows=max_rows),
                           number_of_buffers=buffers, max_dirty_buffers=max(1000, buffers * 3 // 4),
                           max_checkpoint_remap=2000, max_query_mem_mb=512, server_threads=8)
        self.engine = VirtuosoEngine(self.workdir, graph=graph, settings=settings, fulltext=fulltext,
                                     purpose="a throw-away test server", start_timeout=start_timeout)

    @property
    def graph(self) -> str:
        """The graph the files given at the start are loaded into."""
        return self.engine.graph

    def start(self) -> None:
        self.engine.start()
        self.load(self.files, self.graph)

    def load(self, ntriples_files: Sequence[str | os.PathLike[str]], graph: str, *,
             fulltext: bool | None = None) -> None:
        """Bulk-load more N-Triples files into ``graph`` of the running server. ``fulltext`` (default: the server's
        setting) indexes the graph's literals for ``bif:contains``; it is the slow part of a load (~3k literals/s)."""
        for path in _existing_files(ntriples_files):
            self.engine.load(path, slot=self._next_slot(), graph=graph, fulltext=fulltext)
