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

Engines (:mod:`kgqa.kg.servers`: the same engine objects run the tests' throw-away servers; this module keeps the
directory's bookkeeping):

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
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from kgqa.errors import ConfigError, KGError
from kgqa.kg.servers import OxigraphEngine, ServerEngine, ServerProcess, VirtuosoEngine, export_ntriples
from kgqa.kg.servers.engine import Progress, quiet
from kgqa.kg.servers.process import port_free
from kgqa.kg.servers.virtuoso import DEFAULT_GRAPH, DEFAULT_MEMORY_GB

__all__ = [
    "DEFAULT_GRAPH", "DEFAULT_MEMORY_GB", "DEFAULT_PORTS", "ENGINES", "STATE_FILE", "EndpointState", "LoadItem",
    "endpoint_status", "load_state", "open_endpoint_kg", "server_alive", "start_endpoint", "stop_endpoint",
]

STATE_FILE = "endpoint.json"
_ENGINE_TYPES: dict[str, type[ServerEngine]] = {engine.name: engine for engine in (VirtuosoEngine, OxigraphEngine)}
ENGINES = tuple(_ENGINE_TYPES)
#: The engines' customary ports, used when free and no --port is given (otherwise the OS picks one).
DEFAULT_PORTS = {name: engine.customary_port for name, engine in _ENGINE_TYPES.items()}
_RDF_SUFFIXES = (".nt", ".ttl", ".nt.gz", ".ttl.gz")
_STATE_VERSION = 1


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


def server_alive(state: EndpointState) -> bool:
    """Whether the state's pid is still the server of this directory (its command line names the directory, so a
    recycled pid is not mistaken for it)."""
    return bool(state.pid) and ServerProcess(state.pid, marker=state.dir).running


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


def _engine(state: EndpointState, say: Progress, start_timeout: float) -> ServerEngine:
    """The engine of the endpoint in ``state``, with the server recorded there (if any) to find again."""
    common: dict[str, Any] = {"host": state.host, "port": state.port, "pid": state.pid, "customary_ports": True,
                              "start_timeout": start_timeout, "progress": say}
    if state.engine == "virtuoso":
        return VirtuosoEngine(state.dir, graph=state.graph or DEFAULT_GRAPH,
                              memory_gb=state.memory_gb or DEFAULT_MEMORY_GB, isql_port=state.isql_port or 0,
                              fulltext=state.fulltext, fulltext_graphs=[state.graph] if state.fulltext_rule else [],
                              purpose=f"kgqa kg endpoint, {state.dir}", **common)

    def record_loader(pid: int | None) -> None:
        # Recorded so that a later start can end a loader this command left behind when it was killed.
        state.loader_pid = pid
        state.save()

    return OxigraphEngine(state.dir, query_timeout_s=state.query_timeout_s, on_loader=record_loader, **common)


def _record(engine: ServerEngine, state: EndpointState) -> None:
    """Write what the engine chose or started (ports, pid, URL) into the state, and save it."""
    state.port = engine.port
    state.pid = engine.process.pid if engine.process is not None else None
    state.url = engine.url
    if isinstance(engine, VirtuosoEngine):
        state.isql_port = engine.isql_port
        state.graph = engine.graph
        state.fulltext_rule = engine.graph in engine.fulltext_graphs
        # Users' clients see the loaded graph by default, not Virtuoso's system graphs.
        state.url += f"?default-graph-uri={quote(engine.graph, safe='')}"
    state.save()


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
    say = progress or quiet
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
        server = _engine(state, say, start_timeout)
        if state.loader_pid:
            server.end_orphaned_loader(state.loader_pid)
            state.loader_pid = None
        alive = server.running
        if alive and port and port != state.port:
            raise ConfigError(f"the endpoint in {root} is running on port {state.port}; stop it first to change --port")
        pending = [f for f in state.files if f.status != "done"]
        if alive and not pending:
            say(f"already running: {state.url}")
            return state
        if port and not alive:
            if not port_free(state.host, port):
                raise ConfigError(f"HTTP port {port} on {state.host} is already in use; choose another with --port")
            server.port = state.port = port
        if pending and not server.loads_while_running and alive:
            say(f"stopping the server to load {len(pending)} more input(s)")
            server.stop()
            _record(server, state)
            alive = False
        if not alive and server.loads_while_running:
            say(f"starting {state.engine} in {root}")
            _start(server, state)
        _load_pending(server, state, say, schema_given=schema is not None)
        if not server.running:
            say(f"starting {state.engine} in {root}")
            _start(server, state)
        state.started_at = state.started_at or _now()
        state.save()
        say(f"ready: {state.url} ({state.triples_loaded:,} triples loaded; schema {state.schema})")
        return state


def _start(server: ServerEngine, state: EndpointState) -> None:
    try:
        server.start()
    finally:
        _record(server, state)
    state.started_at = _now()
    state.save()


def _load_pending(server: ServerEngine, state: EndpointState, say: Progress, *, schema_given: bool) -> None:
    items = state.files
    done_before = sum(1 for f in items if f.status == "done")
    if done_before:
        say(f"{done_before} input(s) already loaded, skipped: "
            + ", ".join(Path(f.source).name or f.source for f in items if f.status == "done"))
    todo = [f for f in items if f.status != "done"]
    total_started = time.perf_counter()
    total_triples = 0
    for number, item in enumerate(todo, start=1):
        interrupted = item.status == "loading"
        if interrupted:
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
        before = state.triples_loaded
        triples = server.load(path, slot=items.index(item), resume=interrupted)
        if triples is None:
            triples = server.count_added(path, before)
        seconds = time.perf_counter() - started
        item.status, item.triples, item.seconds = "done", triples, round(seconds, 2)
        _record(server, state)
        total_triples += triples
        say(f"{step} done: {triples:,} triples in {seconds:.1f} s ({triples / max(seconds, 1e-9):,.0f} triples/s)")
    if todo:
        seconds = time.perf_counter() - total_started
        say(f"loaded {len(todo)} input(s), {total_triples:,} triples in {seconds:.1f} s"
            + (f" ({total_triples / seconds:,.0f} triples/s)" if seconds > 0 and total_triples else ""))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def stop_endpoint(directory: str | os.PathLike[str], progress: Progress | None = None) -> EndpointState:
    """Stop the server of ``directory`` (the store stays; ``start --dir DIR`` brings it back)."""
    say = progress or quiet
    state = load_state(directory)
    with _dir_lock(Path(state.dir)):
        server = _engine(state, say, 60.0)
        was_running = server.running
        server.stop()
        _record(server, state)
        say(f"stopped the {state.engine} endpoint in {state.dir}" if was_running
            else f"not running ({state.engine} endpoint in {state.dir})")
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
    server = _engine(state, quiet, 60.0)
    alive = server.running
    answering = alive and server.answering()
    counted: int | None = None
    if answering:
        with contextlib.suppress(KGError):
            counted = server.stored_triples(graph=state.graph, timeout=count_timeout)
    root = Path(state.dir)
    return {
        "dir": state.dir, "engine": state.engine, "running": alive, "answering": answering,
        "url": state.url, "pid": state.pid if alive else None, "port": state.port, "host": state.host,
        "schema": state.schema, "graph": state.graph, "kg_spec": f"endpoint:{state.dir}",
        "triples": counted if counted is not None else state.triples_loaded, "triples_counted": counted is not None,
        "triples_loaded": state.triples_loaded, "disk_bytes": _du(server.store_dir),
        "dir_bytes": _du(root, frozenset({"load"})),
        "memory_bytes": _rss_bytes(state.pid) if alive and state.pid else None,
        "memory_gb": state.memory_gb, "config": str(server.config_file) if server.config_file else None,
        "log": str(server.log), "started_at": state.started_at,
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
