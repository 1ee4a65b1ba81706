"""The server-engine abstraction: one SPARQL server of one engine, living in a directory.

:class:`ServerEngine` starts the server on its store, waits until it answers, tells whether it runs, loads RDF files
into its store and stops it. Its subclasses (:class:`~kgqa.kg.servers.oxigraph.OxigraphEngine`,
:class:`~kgqa.kg.servers.virtuoso.VirtuosoEngine`) say only what differs: the command line, the URL, how a file is
loaded and how the server is best stopped. The same engine object serves the throw-away servers of tests and
benchmarks (:mod:`kgqa.kg.servers.local`) and the detached endpoints of ``kgqa kg endpoint`` (:mod:`kgqa.kg.endpoint`),
which builds one from its state file to find a running server again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from kgqa.errors import KGError
from kgqa.kg.servers.process import ServerProcess, choose_port, tail_log

__all__ = ["Progress", "ServerEngine", "quiet", "url_host"]

Progress = Callable[[str], None]


def quiet(_message: str) -> None:
    """A progress callback that says nothing."""


def url_host(host: str) -> str:
    """``host`` as it stands in a URL that clients use: a wildcard address means this machine, IPv6 goes in brackets."""
    return "127.0.0.1" if host in ("0.0.0.0", "") else (f"[{host}]" if ":" in host else host)


class ServerEngine:
    """One engine's SPARQL server in ``directory`` (store, settings and ``server.log`` live there).

    ``host`` is where the SPARQL port listens; ``port`` is the one to listen on if it is free at the start (0: any),
    with ``customary_ports`` the engine's customary one after it, before one the OS picks. ``pid`` is a server started
    earlier (by another command) to find again; ``progress`` receives one line per step of a long load.
    """

    name: ClassVar[str]
    #: The port the engine listens on by default (7878, 8890), used when free and ``customary_ports`` is set.
    customary_port: ClassVar[int]
    #: Whether files can be loaded while the server runs (Oxigraph's store cannot be written while a server reads it).
    loads_while_running: ClassVar[bool]

    def __init__(self, directory: str | Path, *, host: str = "127.0.0.1", port: int = 0, pid: int | None = None,
                 customary_ports: bool = False, start_timeout: float = 60.0, progress: Progress = quiet) -> None:
        self.dir = Path(directory)
        self.host = host
        self.port = port
        self.customary_ports = customary_ports
        self.start_timeout = start_timeout
        self.progress = progress
        self.log = self.dir / "server.log"
        self.process = ServerProcess(pid, marker=str(self.dir)) if pid else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.dir)!r}, url={self.url!r})"

    # -- what each engine says -----------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The SPARQL endpoint (empty until a port is chosen)."""
        raise NotImplementedError

    @property
    def store_dir(self) -> Path:
        """Where the engine keeps its data."""
        raise NotImplementedError

    @property
    def config_file(self) -> Path | None:
        """The settings file kgqa writes for the engine, if it takes one."""
        return None

    @property
    def logs(self) -> list[Path]:
        """The logs whose ends explain a failed start."""
        return [self.log]

    def _prepare(self) -> list[str]:
        """Write what the server needs in the directory and return its command line (``self.port`` is chosen)."""
        raise NotImplementedError

    def _wait_until_ready(self, process: ServerProcess) -> None:
        """Return once the started server answers queries."""
        self._wait_until(process, f"{self.name} server at {self.url}", self._answer_problem)

    def _shut_down(self, process: ServerProcess) -> None:
        """Stop the running server ``process``; by default SIGTERM to its group, SIGKILL if that does not end it."""
        process.terminate()

    def load(self, path: Path, *, slot: int, resume: bool = False) -> int | None:
        """Load the RDF file ``path`` into the store; returns the triples it added when the engine said so, else None
        (:meth:`count_added` counts them). ``slot`` numbers the input among all the store ever loaded (the same one
        each time it is loaded again); ``resume`` says an earlier load of it was interrupted."""
        raise NotImplementedError

    def count_added(self, path: Path, before: int) -> int:
        """The triples the load of ``path`` added, counted (``before``: the triples loaded until then)."""
        raise NotImplementedError

    def end_orphaned_loader(self, pid: int) -> None:
        """End a loader process that a killed command left running. Only an engine that loads through a process of its
        own has one; the others have nothing to end."""

    # -- shared life cycle ---------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the server on its store and return once it answers; a server that fails to start is stopped, and the
        error shows the end of its logs."""
        self.port = choose_port(self.host, self.port, self.customary_port if self.customary_ports else None)
        process = ServerProcess.spawn(self._prepare(), self.log, marker=str(self.dir))
        self.process = process
        try:
            self._wait_until_ready(process)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the server if it runs (the store stays)."""
        if self.process is not None and self.process.running:
            self._shut_down(self.process)
        self.process = None

    @property
    def running(self) -> bool:
        """Whether the server process runs (whether it answers is :meth:`answering`)."""
        return self.process is not None and self.process.running

    def answering(self, timeout: float = 10.0) -> bool:
        """Whether the SPARQL URL answers ``ASK {}`` now."""
        return self._answer_problem(timeout) is None

    def _answer_problem(self, timeout: float = 5.0) -> str | None:
        """Why the SPARQL URL does not answer ``ASK {}`` with 200 now; None when it does."""
        import httpx  # here, not at the top: `kgqa kg` imports the engines to list them, and needs no HTTP for that

        try:
            response = httpx.post(self.url, data={"query": "ASK {}"},
                                  headers={"Accept": "application/sparql-results+json"}, timeout=timeout)
        except httpx.HTTPError as exc:
            return type(exc).__name__
        return None if response.status_code == 200 else f"HTTP {response.status_code}"

    def _wait_until(self, process: ServerProcess, what: str, problem: Callable[[], str | None]) -> None:
        """Ask ``problem()`` (None: ready; else why not) until the server is ready. A KGError, with the end of the logs,
        when the process ends first or ``start_timeout`` passes: the one start-up wait of every engine."""
        deadline = time.monotonic() + self.start_timeout
        last = "no answer"
        while time.monotonic() < deadline:
            if process.exited:
                raise KGError(f"{what} {process.how_it_ended()} during start-up; {self._log_tails()}")
            found = problem()
            if found is None:
                return
            last = found
            time.sleep(0.2)
        raise KGError(f"{what} not ready after {self.start_timeout:.0f}s ({last}); {self._log_tails()}")

    def _log_tails(self) -> str:
        return "\n".join(f"log {log}:\n{tail_log(log)}" for log in self.logs)

    def stored_triples(self, *, graph: str | None = None, timeout: float = 30.0) -> int:
        """The triples the running server holds (in ``graph`` when given), counted by a SPARQL query."""
        import httpx

        source = f"FROM <{graph}> " if graph else ""
        try:
            response = httpx.post(self.url, data={"query": f"SELECT (COUNT(*) AS ?n) {source}WHERE {{ ?s ?p ?o }}"},
                                  headers={"Accept": "application/sparql-results+json"}, timeout=timeout)
            response.raise_for_status()
            return int(response.json()["results"]["bindings"][0]["n"]["value"])
        except (httpx.HTTPError, KeyError, IndexError, ValueError) as exc:
            raise KGError(f"could not count the triples of {self.url}: {type(exc).__name__}: {exc}") from None
