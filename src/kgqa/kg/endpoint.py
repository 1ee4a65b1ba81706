"""Private SPARQL endpoints for users: a Virtuoso or Oxigraph server that lives in a directory and outlives the command.

``kgqa kg endpoint start`` (:func:`start_endpoint`) creates the server in DIR, bulk-loads N-Triples / Turtle files
(gzipped too) or any KG spec kgqa opens (``demo``, an embedded directory: exported as N-Triples on the fly), and returns
once the SPARQL URL answers. The server is a detached process in its own session (Ctrl-C or closing the terminal does
not stop it); everything needed to find it again is in ``DIR/endpoint.json``: engine, pid, ports, URL, schema, graph
and every input with its load state. ``stop`` and ``status`` read that file; ``open_kg("endpoint:DIR")`` opens the
endpoint with the schema and graph it was started with.

Why a state file per input: a Freebase-sized load takes hours, so an interrupted ``start`` must resume without loading
finished files again. An input is ``pending``, ``loading`` or ``done``; it becomes ``done`` only after the engine has
made it durable (Oxigraph loads a file atomically; Virtuoso gets a ``checkpoint`` after each file). An input found
``loading`` at the next start was interrupted and is loaded again: RDF is a set, so a partial first attempt adds
nothing twice. A file that changed since it was loaded is refused (its old triples cannot be taken back out).

Engines:

* **oxigraph** (``pip install oxigraph``): ``oxigraph load`` into ``DIR/store`` (RocksDB), then
  ``oxigraph serve-read-only``. Adding files to a running endpoint stops the server, loads, and starts it again on the
  same port (a store cannot be written while another process reads it). Oxigraph sizes its own caches: ``--memory``
  does not apply.
* **virtuoso** (Debian package ``virtuoso-opensource``): ``virtuoso-t`` with ``DIR/virtuoso.ini`` derived from
  ``--memory`` (:func:`kgqa.kg.servers.virtuoso_settings`), the database in ``DIR/db``; files are linked into
  ``DIR/load`` (Virtuoso reads only from ``DirsAllowed``) and bulk-loaded one by one with ``ld_add`` /
  ``rdf_loader_run`` into one named graph, whose literals are indexed for ``bif:contains`` search. The printed URL
  carries ``default-graph-uri`` so any client sees that graph and not Virtuoso's system graphs.

Both listen on 127.0.0.1 unless ``host`` says otherwise; Virtuoso's ISQL port (account ``dba``, default password) is
always loopback-only.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from kgqa.errors import ConfigError, KGError

__all__ = [
    "DEFAULT_GRAPH", "DEFAULT_PORTS", "ENGINES", "STATE_FILE", "EndpointState", "LoadItem", "endpoint_status",
    "load_state", "open_endpoint_kg", "start_endpoint", "stop_endpoint",
]

STATE_FILE = "endpoint.json"
ENGINES = ("virtuoso", "oxigraph")
#: The engines' customary ports, used when free and no --port is given (otherwise the OS picks one).
DEFAULT_PORTS = {"virtuoso": 8890, "oxigraph": 7878}
DEFAULT_GRAPH = "http://kgqa.local/graph"
#: Virtuoso's memory budget when --memory is not given (the smallest row of its sizing table).
DEFAULT_MEMORY_GB = 2.0
_RDF_SUFFIXES = (".nt", ".ttl", ".nt.gz", ".ttl.gz")
_STATE_VERSION = 1

Progress = Callable[[str], None]


def _quiet(_message: str) -> None:
    pass


@dataclass
class LoadItem:
    """One ``--data`` input and how far its load got."""

    source: str
    kind: str  # "file" (an RDF file loaded as it is) or "kg" (a KG spec exported to N-Triples first)
    path: str  # the file the engine loads (the source itself, or the export in DIR/data)
    size: int = 0
    mtime: float = 0.0
    status: str = "pending"  # pending | loading | done
    triples: int | None = None
    seconds: float | None = None

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.source}"


@dataclass
class EndpointState:
    """What ``DIR/endpoint.json`` holds: enough to find, query, stop and restart the server."""

    engine: str
    dir: str
    host: str = "127.0.0.1"
    port: int = 0
    url: str = ""
    pid: int | None = None
    schema: str = "freebase"
    graph: str | None = None
    isql_port: int | None = None
    memory_gb: float | None = None
    query_timeout_s: int | None = None
    fulltext: bool = True
    fulltext_rule: bool = False
    loader_pid: int | None = None
    started_at: str | None = None
    files: list[LoadItem] = field(default_factory=list)
    version: int = _STATE_VERSION

    @property
    def path(self) -> Path:
        return Path(self.dir) / STATE_FILE

    def save(self) -> None:
        """Write the state atomically (a crash leaves the old or the new file, never half of one)."""
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)

    @property
    def triples_loaded(self) -> int:
        return sum(f.triples or 0 for f in self.files if f.status == "done")


def load_state(directory: str | os.PathLike[str]) -> EndpointState:
    """The endpoint state of ``directory``; a ConfigError when it holds no endpoint."""
    path = Path(directory).expanduser().resolve() / STATE_FILE
    if not path.is_file():
        raise ConfigError(f"{Path(directory)} holds no kgqa endpoint (no {STATE_FILE}); create one with "
                          "`kgqa kg endpoint start --engine oxigraph|virtuoso --data FILE --dir DIR`")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        files = [LoadItem(**f) for f in raw.pop("files", [])]
        state = EndpointState(**raw, files=files)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{path} is not a kgqa endpoint state file: {exc}") from None
    if state.engine not in ENGINES:
        raise ConfigError(f"{path}: unknown engine {state.engine!r}")
    state.dir = str(path.parent)
    return state


# ---------------------------------------------------------------------------------------------------------------------
# Processes


#: how long :func:`server_alive` reads an empty command line again before it takes the pid for another process
_CMDLINE_WAIT_S = 1.0


def _proc_cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _reap(pid: int) -> None:
    """Collect ``pid`` if it is our own exited child (a server started by this process), so it is not a zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


def server_alive(state: EndpointState) -> bool:
    """Whether the state's pid is still the server of this directory (its command line names the directory, so a
    recycled pid is not mistaken for it)."""
    if not state.pid:
        return False
    _reap(state.pid)
    try:
        os.kill(state.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    if _is_zombie(state.pid):
        return False
    cmdline = _proc_cmdline(state.pid)
    deadline = time.monotonic() + _CMDLINE_WAIT_S
    while not cmdline and time.monotonic() < deadline and not _is_zombie(state.pid):
        # Right after posix_spawn returns, the new program's arguments may not be mapped yet and the kernel shows an
        # empty command line (a start-up check once took a starting Virtuoso for dead): read again, briefly.
        time.sleep(0.01)
        cmdline = _proc_cmdline(state.pid)
    return bool(cmdline) and state.dir in cmdline


def _spawn_detached(argv: list[str], log: Path) -> int:
    """Start a server in its own session, output to ``log``, and return its pid without keeping a handle: the server
    must outlive this command (``posix_spawn`` rather than ``Popen``, whose object would warn when dropped)."""
    log_fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        file_actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                        (os.POSIX_SPAWN_DUP2, log_fd, 1), (os.POSIX_SPAWN_DUP2, log_fd, 2)]
        return os.posix_spawn(argv[0], argv, dict(os.environ), file_actions=file_actions, setsid=True)
    finally:
        os.close(log_fd)


def _terminate(pid: int, timeout: float = 60.0) -> None:
    """SIGTERM the server's process group, then SIGKILL if it has not exited within ``timeout``."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            _reap(pid)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            if _is_zombie(pid):
                _reap(pid)
                return
            time.sleep(0.1)


def _port_free(host: str, port: int) -> bool:
    """Whether a server could listen on ``host:port`` now. SO_REUSEADDR as the servers set it, so a port in TIME_WAIT
    after a stop still counts as free (a restarted endpoint keeps its URL)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _choose_port(host: str, wanted: int | None, previous: int | None, default: int, what: str) -> int:
    """``wanted`` (must be free), else the previous port or the engine's customary one if free, else one the OS
    picks: an endpoint restarted from DIR keeps its URL when it can."""
    from kgqa.kg.servers import free_port

    if wanted:
        if not _port_free(host, wanted):
            raise ConfigError(f"{what} port {wanted} on {host} is already in use; choose another with --port")
        return wanted
    for candidate in (previous, default):
        if candidate and _port_free(host, candidate):
            return candidate
    return free_port()


def _wait_http(url: str, pid: int, log: Path, timeout: float) -> None:
    from kgqa.kg.servers import wait_for_sparql

    def exited() -> str | None:
        _reap(pid)
        return None if _running(pid) else "exited"

    wait_for_sparql(url, exited, log, timeout, request_timeout=5.0)


def _tail(path: Path) -> str:
    from kgqa.kg.servers import tail_log

    return tail_log(path, 15)


@contextlib.contextmanager
def _dir_lock(directory: Path) -> Iterator[None]:
    """One kgqa command at a time per endpoint directory (two loads into one store would corrupt the bookkeeping)."""
    with (directory / ".lock").open("a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(f"another kgqa command is working on {directory} (its .lock is held)") from None
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _sparql_count(url: str, graph: str | None, timeout: float = 30.0) -> int | None:
    import httpx

    source = f"FROM <{graph}> " if graph else ""
    try:
        response = httpx.post(url, data={"query": f"SELECT (COUNT(*) AS ?n) {source}WHERE {{ ?s ?p ?o }}"},
                              headers={"Accept": "application/sparql-results+json"}, timeout=timeout)
        response.raise_for_status()
        return int(response.json()["results"]["bindings"][0]["n"]["value"])
    except (httpx.HTTPError, KeyError, IndexError, ValueError):
        return None


# ---------------------------------------------------------------------------------------------------------------------
# Inputs


def _is_rdf_file(path: Path) -> bool:
    return path.name.lower().endswith(_RDF_SUFFIXES)


def _resolve_inputs(data: Sequence[str], directory: Path) -> list[LoadItem]:
    """Each ``--data`` value as a LoadItem: an existing .nt/.ttl(.gz) file, or a KG spec (``demo``, an embedded
    directory, ``NAME:REST``) to export; anything else is a ConfigError naming what is accepted."""
    items: list[LoadItem] = []
    for spec in data:
        path = Path(spec).expanduser()
        if path.is_file():
            if not _is_rdf_file(path):
                raise ConfigError(f"--data {spec}: only N-Triples or Turtle files are loaded (.nt, .ttl, optionally "
                                  ".gz); import other formats with `kgqa kg import` and pass the directory")
            stat = path.stat()
            real = path.resolve()
            items.append(LoadItem(source=str(real), kind="file", path=str(real), size=stat.st_size,
                                  mtime=stat.st_mtime))
        elif spec.strip() == "demo" or path.is_dir() or re.match(r"^[A-Za-z][A-Za-z0-9_.+-]*:(?!//)", spec):
            source = str(path.resolve()) if path.is_dir() else spec.strip()
            slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", source.strip("/"))[-80:] or "kg"
            items.append(LoadItem(source=source, kind="kg", path=str(directory / "data" / f"{slug}.nt")))
        elif spec.startswith(("http://", "https://")):
            raise ConfigError(f"--data {spec}: a SPARQL endpoint cannot be exported; pass files or a local KG")
        else:
            raise ConfigError(f"--data {spec}: neither an RDF file (.nt, .ttl, optionally .gz) nor a KG kgqa opens "
                              "('demo' or an embedded KG directory)")
    keys = [i.key for i in items]
    if len(keys) != len(set(keys)):
        raise ConfigError("the same --data input is given twice")
    return items


def _merge_inputs(state: EndpointState, items: list[LoadItem]) -> None:
    """Add new inputs to the state; an input loaded before keeps its status, unless it is a file that changed."""
    known = {f.key: f for f in state.files}
    for item in items:
        old = known.get(item.key)
        if old is None:
            state.files.append(item)
            continue
        if item.kind == "file" and old.status == "done" and (old.size, old.mtime) != (item.size, item.mtime):
            raise ConfigError(f"{item.source} changed since it was loaded into {state.dir} (size or time differ); "
                              "its old triples cannot be taken back out: start a fresh --dir")
        # A file whose load failed or was interrupted may be fixed before the next start: Oxigraph loaded none of
        # it; Virtuoso keeps what it read before the error (a set, so reading the fixed file again adds the rest).
        old.size, old.mtime = item.size, item.mtime


def _export(item: LoadItem, progress: Progress) -> str | None:
    """Write a KG spec as N-Triples at ``item.path``; returns the KG's schema name."""
    from kgqa.kg import open_kg
    from kgqa.kg.servers import export_ntriples

    kg = open_kg(item.source)
    try:
        if not hasattr(kg, "iter_triples") or not hasattr(kg, "iter_names"):
            raise ConfigError(f"--data {item.source}: this KG ({type(kg).__name__}) cannot be exported to N-Triples; "
                              "pass an embedded KG or files")
        progress(f"exporting {item.source} as N-Triples to {item.path}")
        started = time.perf_counter()
        lines = export_ntriples(kg, item.path)  # type: ignore[arg-type]
        progress(f"exported {lines:,} triples in {time.perf_counter() - started:.1f} s")
        return kg.schema.name
    finally:
        close = getattr(kg, "close", None)
        if callable(close):
            close()


# ---------------------------------------------------------------------------------------------------------------------
# Engines


class _Engine:
    """Start, load and stop one engine's server for an EndpointState."""

    name = ""

    def __init__(self, state: EndpointState, progress: Progress, start_timeout: float) -> None:
        self.state = state
        self.dir = Path(state.dir)
        self.progress = progress
        self.start_timeout = start_timeout
        self.log = self.dir / "server.log"

    def start_server(self) -> None:
        raise NotImplementedError

    def load(self, item: LoadItem) -> int | None:
        raise NotImplementedError

    def stop_server(self) -> None:
        if self.state.pid and server_alive(self.state):
            _terminate(self.state.pid)
        self.state.pid = None

    @property
    def needs_stop_to_load(self) -> bool:
        return False


class _Oxigraph(_Engine):
    name = "oxigraph"

    @property
    def store(self) -> Path:
        return self.dir / "store"

    @property
    def needs_stop_to_load(self) -> bool:
        return True

    def _exe(self) -> str:
        from kgqa.kg.servers import find_executable

        return find_executable("oxigraph", "install it with `pip install oxigraph`")

    def load(self, item: LoadItem) -> int | None:
        """``oxigraph load`` one file (atomic: all or nothing), relaying its progress lines."""
        self.store.mkdir(parents=True, exist_ok=True)
        argv = [self._exe(), "load", "--location", str(self.store), "--file", item.path]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                text=True, errors="replace")
        assert proc.stdout is not None
        # Recorded so that a later start can end a loader this command left behind when it was killed.
        self.state.loader_pid = proc.pid
        self.state.save()
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
        self.state.loader_pid = None
        if code != 0:
            raise KGError(f"oxigraph load of {item.path} failed (code {proc.returncode}):\n" + "\n".join(tail))
        # oxigraph reports counts only on its progress ticks (about once a second), so a quick load says nothing.
        return loaded if loaded is not None else _count_file_triples(Path(item.path))

    def start_server(self) -> None:
        state = self.state
        self.store.mkdir(parents=True, exist_ok=True)
        state.port = _choose_port(state.host, None, state.port, DEFAULT_PORTS["oxigraph"], "HTTP")
        argv = [self._exe(), "serve-read-only", "--location", str(self.store), "--bind", f"{state.host}:{state.port}"]
        if state.query_timeout_s:
            argv += ["--timeout-s", str(state.query_timeout_s)]
        state.pid = _spawn_detached(argv, self.log)
        state.url = f"http://{_url_host(state.host)}:{state.port}/query"
        _wait_http(state.url, state.pid, self.log, self.start_timeout)


class _Virtuoso(_Engine):
    name = "virtuoso"

    @property
    def load_dir(self) -> Path:
        return self.dir / "load"

    def _isql(self, command: str, timeout: float = 24 * 3600.0) -> str:
        from kgqa.kg.servers import run_isql

        assert self.state.isql_port is not None
        return run_isql(self.state.isql_port, command, cwd=self.dir, timeout=timeout)

    def start_server(self) -> None:
        from kgqa.kg.servers import find_executable, render_virtuoso_ini, virtuoso_settings

        state = self.state
        exe = find_executable("virtuoso-t", "install the Debian package virtuoso-opensource")
        find_executable("isql-vt", "install the Debian package virtuoso-opensource")
        db, www = self.dir / "db", self.dir / "www"
        for d in (db, www, self.load_dir):
            d.mkdir(parents=True, exist_ok=True)
        state.port = _choose_port(state.host, None, state.port, DEFAULT_PORTS["virtuoso"], "HTTP")
        state.isql_port = _choose_port("127.0.0.1", None, state.isql_port, 1111, "ISQL")
        if state.isql_port == state.port:
            state.isql_port = _choose_port("127.0.0.1", None, None, 0, "ISQL")
        db_file = db / "virtuoso.db"
        settings = virtuoso_settings(state.memory_gb or DEFAULT_MEMORY_GB,
                                     db_bytes=db_file.stat().st_size if db_file.exists() else 0)
        ini = self.dir / "virtuoso.ini"
        ini.write_text(render_virtuoso_ini(settings, db=db, load_dir=self.load_dir, www=www,
                                           isql_port=state.isql_port, http_port=state.port, http_host=state.host,
                                           purpose=f"kgqa kg endpoint, {self.dir}"), encoding="utf-8")
        state.pid = _spawn_detached([exe, "+foreground", "+configfile", str(ini)], self.log)
        self._wait_isql()
        state.graph = state.graph or DEFAULT_GRAPH
        state.url = (f"http://{_url_host(state.host)}:{state.port}/sparql?default-graph-uri="
                     f"{quote(state.graph, safe='')}")
        _wait_http(state.url, state.pid, self.log, self.start_timeout)

    def _wait_isql(self) -> None:
        assert self.state.pid is not None
        deadline = time.monotonic() + self.start_timeout
        last = ""
        while time.monotonic() < deadline:
            if not server_alive(self.state):
                raise KGError(f"virtuoso-t exited during start-up; log {self.log}:\n{_tail(self.log)}\n"
                              f"{_tail(self.dir / 'db' / 'virtuoso.log')}")
            try:
                self._isql("status();", timeout=10)
                return
            except (KGError, subprocess.TimeoutExpired) as exc:
                last = str(exc)[-300:]
            time.sleep(0.3)
        raise KGError(f"Virtuoso not ready on ISQL port {self.state.isql_port} after {self.start_timeout:.0f}s: {last}")

    def _count(self) -> int:
        rows = _isql_rows(self._isql(f"SPARQL SELECT COUNT(*) FROM <{self.state.graph}> WHERE {{ ?s ?p ?o }};",
                                     timeout=3600))
        return int(rows[0]) if rows and rows[0].isdigit() else 0

    def _load_list_state(self, link: Path) -> tuple[int | None, str | None]:
        out = self._isql(f"SELECT ll_state, ll_error FROM DB.DBA.LOAD_LIST WHERE ll_file = '{link}';", timeout=60)
        rows = _isql_rows(out)
        if not rows:
            return None, None
        ll_state, _, error = rows[0].partition(" ")
        error = error.strip()
        return int(ll_state), (None if error in ("", "NULL") else error)

    def load(self, item: LoadItem) -> int | None:
        """Link the file into the allowed load dir, ``ld_add`` it, ``rdf_loader_run()`` (heartbeats while it runs),
        check the load list for its error, ``checkpoint`` so the load is durable, and count what the graph gained.

        An input left ``loading`` by a killed command may still be loading inside the server (the loader runs in
        Virtuoso, not in kgqa): it is waited for rather than started twice; one the server lost (a crash before the
        checkpoint) is loaded again."""
        state = self.state
        assert state.graph is not None
        source = Path(item.path)
        suffix = ".ttl" if ".ttl" in source.name.lower() else ".nt"
        suffix += ".gz" if source.name.lower().endswith(".gz") else ""
        link = self.load_dir / f"{state.files.index(item):05d}{suffix}"
        if "'" in str(link) or "'" in state.graph:
            raise ConfigError(f"paths and graph must not contain a single quote: {link}, {state.graph}")
        previous = sum(f.triples or 0 for f in state.files if f.status == "done")
        if item.status == "loading" and link.exists():
            ll_state, _error = self._load_list_state(link)
            if ll_state == 1:
                self.progress(f"  {source.name} is still loading in the server (a killed command started it); "
                              "waiting for it")
                started = time.monotonic()
                while ll_state == 1:
                    time.sleep(2.0)
                    ll_state, _error = self._load_list_state(link)
                    if time.monotonic() - started > 10:
                        self.progress(f"  still loading {source.name}: {time.monotonic() - started:.0f} s")
                        started = time.monotonic()
            if ll_state == 2:
                return self._finish(item, link, previous)
        if link.exists() or link.is_symlink():
            link.unlink()
        try:
            os.link(source, link)
        except OSError:
            os.symlink(source, link)
        if state.fulltext and not state.fulltext_rule:
            # A free-text rule for the graph, set before loading so the loader queues its literals for the index.
            self._isql(f"DB.DBA.RDF_OBJ_FT_RULE_ADD('{state.graph}', null, 'kgqa_endpoint');")
            state.fulltext_rule = True
            state.save()
        self._isql(f"DELETE FROM DB.DBA.LOAD_LIST WHERE ll_file = '{link}';")
        self._isql(f"ld_add('{link}', '{state.graph}');")
        self._run_with_heartbeat("rdf_loader_run();", item)
        return self._finish(item, link, previous)

    def _finish(self, item: LoadItem, link: Path, previous: int) -> int:
        _ll_state, error = self._load_list_state(link)
        if error:
            raise KGError(f"Virtuoso could not load {item.path}: {error[:1500]}")
        if self.state.fulltext:
            self._isql("DB.DBA.VT_INC_INDEX_DB_DBA_RDF_OBJ();")
        self._isql("checkpoint;")
        return self._count() - previous

    def _run_with_heartbeat(self, command: str, item: LoadItem) -> None:
        done = threading.Event()
        errors: list[BaseException] = []

        def work() -> None:
            try:
                self._isql(command)
            except BaseException as exc:
                errors.append(exc)
            finally:
                done.set()

        started = time.monotonic()
        thread = threading.Thread(target=work, daemon=True)
        thread.start()
        while not done.wait(10.0):
            self.progress(f"  still loading {Path(item.path).name}: {time.monotonic() - started:.0f} s")
        thread.join()
        if errors:
            raise errors[0]

    def stop_server(self) -> None:
        """``shutdown`` through ISQL (a checkpoint, then exit), SIGTERM/SIGKILL if that does not end it."""
        state = self.state
        if state.pid and server_alive(state):
            with contextlib.suppress(KGError, subprocess.TimeoutExpired, ConfigError):
                self._isql("shutdown;", timeout=120)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and server_alive(state):
                time.sleep(0.2)
            if server_alive(state):
                _terminate(state.pid)
        state.pid = None


def _count_file_triples(path: Path) -> int:
    """Triples in an RDF file, parsed by pyoxigraph (used for files small enough to load in about a second)."""
    import gzip

    import pyoxigraph

    fmt = pyoxigraph.RdfFormat.TURTLE if ".ttl" in path.name.lower() else pyoxigraph.RdfFormat.N_TRIPLES
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rb") as fh:
        return sum(1 for _ in pyoxigraph.parse(fh, format=fmt))


def _isql_rows(output: str) -> list[str]:
    """The result rows of one isql SELECT: the lines between the ``____`` rule under the header and the blank line
    before ``N Rows.``."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("_____"):
            rows = []
            for row in lines[i + 1:]:
                if re.match(r"^\d+ Rows\.", row.strip()):
                    break
                if row.strip():
                    rows.append(row.strip())
            return rows
    return []


def _url_host(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "") else (f"[{host}]" if ":" in host else host)


_ENGINES: dict[str, type[_Engine]] = {"oxigraph": _Oxigraph, "virtuoso": _Virtuoso}


# ---------------------------------------------------------------------------------------------------------------------
# Public operations


def start_endpoint(directory: str | os.PathLike[str], *, engine: str | None = None, data: Sequence[str] = (),
                   port: int | None = None, memory_gb: float | None = None, schema: str | None = None,
                   host: str | None = None, query_timeout_s: int | None = None, progress: Progress | None = None,
                   start_timeout: float = 180.0) -> EndpointState:
    """Create (or restart, or add data to) the endpoint in ``directory`` and return its state once the URL answers.

    A new directory needs ``engine`` and ``data``. An existing one is found again from its state file: a stopped
    server is started again on its store (same port if free), inputs not yet ``done`` are loaded, finished ones are
    skipped. ``host`` (default 127.0.0.1, or the one DIR was started with) is where the SPARQL port listens.
    ``progress`` receives one human-readable line per step.
    """
    say = progress or _quiet
    root = Path(directory).expanduser().resolve()
    if engine is not None and engine not in ENGINES:
        raise ConfigError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
    if port is not None and not 0 < port < 65536:
        raise ConfigError(f"--port {port} is not a TCP port")
    if memory_gb is not None and memory_gb <= 0:
        raise ConfigError(f"--memory must be a positive number of GB, got {memory_gb}")
    if schema is not None:
        from kgqa.kg.schema import get_schema

        schema = get_schema(schema).name
    existing = (root / STATE_FILE).is_file()
    if not existing:
        if engine is None:
            raise ConfigError(f"{root} holds no endpoint yet: say which engine (--engine virtuoso|oxigraph)")
        if not data:
            raise ConfigError(f"{root} holds no endpoint yet: give the data to load (--data FILE or KG)")
        if root.exists() and (not root.is_dir() or any(p.name != ".lock" for p in root.iterdir())):
            raise ConfigError(f"--dir {root} exists and is not an endpoint directory; give a new or empty directory")
    root.mkdir(parents=True, exist_ok=True)
    with _dir_lock(root):
        if existing:
            state = load_state(root)
            if engine is not None and engine != state.engine:
                raise ConfigError(f"{root} holds a {state.engine} endpoint, not {engine}")
            if host is not None and host != state.host:
                if server_alive(state):
                    raise ConfigError(f"the endpoint in {root} listens on {state.host}; stop it first to change --host")
                state.host = host
        else:
            assert engine is not None
            state = EndpointState(engine=engine, dir=str(root), host=host or "127.0.0.1",
                                  graph=DEFAULT_GRAPH if engine == "virtuoso" else None)
        if memory_gb is not None:
            state.memory_gb = memory_gb
        if query_timeout_s is not None:
            state.query_timeout_s = query_timeout_s
        if state.engine == "oxigraph" and memory_gb is not None:
            say("note: --memory sizes Virtuoso only; Oxigraph (RocksDB) manages its own caches")
        if state.engine == "virtuoso" and state.memory_gb is None:
            state.memory_gb = DEFAULT_MEMORY_GB
        _merge_inputs(state, _resolve_inputs(data, root))
        if schema is not None:
            state.schema = schema
        state.save()
        runner = _ENGINES[state.engine](state, say, start_timeout)
        _end_stale_loader(state, say)
        alive = server_alive(state)
        if alive and port and port != state.port:
            raise ConfigError(f"the endpoint in {root} is running on port {state.port}; stop it first to change --port")
        pending = [f for f in state.files if f.status != "done"]
        if alive and not pending:
            say(f"already running: {state.url}")
            return state
        if port:
            if alive:
                pass
            elif not _port_free(state.host, port):
                raise ConfigError(f"HTTP port {port} on {state.host} is already in use; choose another with --port")
            state.port = port
        if pending and runner.needs_stop_to_load and alive:
            say(f"stopping the server to load {len(pending)} more input(s)")
            runner.stop_server()
            state.save()
            alive = False
        if not alive and not runner.needs_stop_to_load:
            say(f"starting {state.engine} in {root}")
            _start(runner, state)
        _load_pending(runner, state, say, schema_given=schema is not None)
        if not server_alive(state):
            say(f"starting {state.engine} in {root}")
            _start(runner, state)
        state.started_at = state.started_at or _now()
        state.save()
        say(f"ready: {state.url} ({state.triples_loaded:,} triples loaded; schema {state.schema})")
        return state


def _end_stale_loader(state: EndpointState, say: Progress) -> None:
    """End an ``oxigraph load`` that a killed ``start`` left running (it holds the store's lock); its file is loaded
    again, since Oxigraph commits a file only when it is complete."""
    pid = state.loader_pid
    if pid and state.dir in _proc_cmdline(pid) and not _is_zombie(pid):
        say(f"ending the loader (pid {pid}) an interrupted start left running")
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
        # Wait for the process itself to be gone: an exiting process drops its command line (its memory) before it
        # closes its files, so an empty cmdline does not mean the store's lock is free yet.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _running(pid):
            _reap(pid)
            time.sleep(0.1)
        if _running(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            while time.monotonic() < deadline + 10 and _running(pid):
                time.sleep(0.1)
        _reap(pid)
        _wait_unlocked(Path(state.dir) / "store" / "LOCK", timeout=10.0)
    state.loader_pid = None


def _running(pid: int) -> bool:
    """Whether ``pid`` still exists and has not exited (a zombie has released its files)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _is_zombie(pid)


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


def _start(runner: _Engine, state: EndpointState) -> None:
    try:
        runner.start_server()
    except BaseException:
        with contextlib.suppress(Exception):
            runner.stop_server()
        state.save()
        raise
    state.started_at = _now()
    state.save()


def _load_pending(runner: _Engine, state: EndpointState, say: Progress, *, schema_given: bool) -> None:
    items = state.files
    done_before = sum(1 for f in items if f.status == "done")
    if done_before:
        say(f"{done_before} input(s) already loaded, skipped: "
            + ", ".join(Path(f.source).name or f.source for f in items if f.status == "done"))
    todo = [f for f in items if f.status != "done"]
    total_started = time.perf_counter()
    total_triples = 0
    for number, item in enumerate(todo, start=1):
        if item.status == "loading":
            say(f"{item.source}: its last load was interrupted; loading it again")
        item.status = "loading"
        state.save()
        if item.kind == "kg":
            kg_schema = _export(item, say)
            if kg_schema and not schema_given:
                state.schema = kg_schema  # the exported KG's conventions are the endpoint's
        path = Path(item.path)
        if not path.is_file():
            raise ConfigError(f"{item.path} no longer exists; it was given as --data")
        step = f"[{done_before + number}/{len(items)}]"
        say(f"{step} loading {path.name} ({path.stat().st_size / 1e6:,.1f} MB) into {state.engine}")
        started = time.perf_counter()
        triples = runner.load(item)
        seconds = time.perf_counter() - started
        item.status, item.triples, item.seconds = "done", triples, round(seconds, 2)
        state.save()
        total_triples += triples or 0
        if triples is None:
            say(f"{step} done in {seconds:.1f} s")
        else:
            say(f"{step} done: {triples:,} triples in {seconds:.1f} s ({triples / max(seconds, 1e-9):,.0f} triples/s)")
    if todo:
        seconds = time.perf_counter() - total_started
        say(f"loaded {len(todo)} input(s), {total_triples:,} triples in {seconds:.1f} s"
            + (f" ({total_triples / seconds:,.0f} triples/s)" if seconds > 0 and total_triples else ""))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def stop_endpoint(directory: str | os.PathLike[str], progress: Progress | None = None) -> EndpointState:
    """Stop the server of ``directory`` (the store stays; ``start --dir DIR`` brings it back)."""
    say = progress or _quiet
    state = load_state(directory)
    with _dir_lock(Path(state.dir)):
        if not server_alive(state):
            say(f"not running ({state.engine} endpoint in {state.dir})")
            state.pid = None
            state.save()
            return state
        runner = _ENGINES[state.engine](state, say, 60.0)
        runner.stop_server()
        state.save()
        say(f"stopped the {state.engine} endpoint in {state.dir}")
        return state


def _du(path: Path, skip: frozenset[str] = frozenset()) -> int:
    """Bytes on disk under ``path`` (blocks, so sparse files count what they use), leaving out top-level ``skip``."""
    total = 0
    for root, dirs, files in os.walk(path):
        if Path(root) == path:
            dirs[:] = [d for d in dirs if d not in skip]
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total


def _rss_bytes(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def endpoint_status(directory: str | os.PathLike[str], *, count_timeout: float = 30.0) -> dict[str, Any]:
    """What ``kgqa kg endpoint status`` shows: running or not, URL, triples (counted by the server when it runs, else
    the loaded total), disk of the store, memory (RSS) of the server, and every input with its load state."""
    state = load_state(directory)
    alive = server_alive(state)
    answering = False
    counted: int | None = None
    if alive:
        import httpx

        try:
            answering = httpx.post(state.url, data={"query": "ASK {}"}, timeout=10.0,
                                   headers={"Accept": "application/sparql-results+json"}).status_code == 200
        except httpx.HTTPError:
            answering = False
        if answering:
            counted = _sparql_count(state.url, state.graph, timeout=count_timeout)
    root = Path(state.dir)
    store = root / ("store" if state.engine == "oxigraph" else "db")
    return {
        "dir": state.dir, "engine": state.engine, "running": alive, "answering": answering,
        "url": state.url, "pid": state.pid if alive else None, "port": state.port, "host": state.host,
        "schema": state.schema, "graph": state.graph, "kg_spec": f"endpoint:{state.dir}",
        "triples": counted if counted is not None else state.triples_loaded, "triples_counted": counted is not None,
        "triples_loaded": state.triples_loaded, "disk_bytes": _du(store), "dir_bytes": _du(root, frozenset({"load"})),
        "memory_bytes": _rss_bytes(state.pid) if alive and state.pid else None,
        "memory_gb": state.memory_gb, "config": str(root / "virtuoso.ini") if state.engine == "virtuoso" else None,
        "log": str(root / "server.log"), "started_at": state.started_at,
        "files": [asdict(f) for f in state.files],
    }


def open_endpoint_kg(rest: str, schema: Any = None, **options: Any) -> Any:
    """``open_kg("endpoint:DIR")``: the SPARQL endpoint of DIR with the schema it was started with (``schema``
    overrides it) and, for Virtuoso, its graph as the default graph."""
    from kgqa.kg.sparql import SparqlKG

    state = load_state(rest.strip())
    if not server_alive(state):
        raise KGError(f"the {state.engine} endpoint in {state.dir} is not running; start it with "
                      f"`kgqa kg endpoint start --dir {state.dir}`")
    base_url = state.url.split("?", 1)[0]
    if state.graph:
        options.setdefault("default_graph", state.graph)
    return SparqlKG(base_url, schema=schema or state.schema, **options)
