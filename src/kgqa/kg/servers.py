"""Real local SPARQL servers for tests, benchmarks and users: Oxigraph and Virtuoso on 127.0.0.1, started in a work dir.

Both are context managers; the process is killed on exit (also when the body raises) and ``.url`` is the SPARQL endpoint::

    with OxigraphServer(["kg.nt"], workdir) as server:
        kg = SparqlKG(server.url, schema="freebase")

:func:`export_ntriples` writes an embedded store as N-Triples with the schema's IRI mapping, so the same data can be loaded
into any SPARQL server.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Protocol

import httpx

from kgqa.errors import ConfigError, KGError
from kgqa.kg.base import is_literal, make_literal, parse_literal
from kgqa.kg.schema import Schema, check_iri

__all__ = ["OxigraphServer", "VirtuosoServer", "VirtuosoSettings", "export_ntriples", "find_executable", "free_port",
           "literal_to_ntriples", "render_virtuoso_ini", "run_isql", "virtuoso_settings"]

_DEFAULT_GRAPH = "http://kgqa.local/graph"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def find_executable(name: str, hint: str) -> str:
    """The path of executable ``name``: on PATH, else beside the running Python (a venv's ``bin`` that is not on PATH,
    where ``pip install oxigraph`` puts its binary), else a ConfigError saying how to install it."""
    path = shutil.which(name)
    if path is not None:
        return path
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    raise ConfigError(f"the {name!r} executable was not found on PATH nor beside {sys.executable}; {hint}")


_binary = find_executable


def _kill(proc: subprocess.Popen[bytes] | None) -> None:
    """Stop a server we started: its whole process group, politely first."""
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def wait_for_sparql(url: str, exited: Callable[[], str | None], log: Path, timeout: float, *,
                    request_timeout: float = 2.0) -> None:
    """Poll the endpoint with ``ASK {}`` until it answers 200; ``exited()`` says how the server process ended (None
    while it runs), which stops the wait with its log. Shared by the tests' servers and ``kgqa kg endpoint``."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        how = exited()
        if how is not None:
            raise KGError(f"SPARQL server for {url} {how} during start-up; log {log}:\n{tail_log(log)}")
        try:
            response = httpx.post(url, data={"query": "ASK {}"},
                                  headers={"Accept": "application/sparql-results+json"}, timeout=request_timeout)
            if response.status_code == 200:
                return
            last = f"HTTP {response.status_code}"
        except httpx.HTTPError as exc:
            last = type(exc).__name__
        time.sleep(0.2)
    raise KGError(f"SPARQL server at {url} not ready after {timeout:.0f}s ({last}); log {log}:\n{tail_log(log)}")


def _wait_for_sparql(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    wait_for_sparql(url, lambda: None if proc.poll() is None else f"exited with code {proc.returncode}", log, timeout)


def tail_log(path: Path, lines: int = 20) -> str:
    """The last ``lines`` of a server's log, for an error message."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class _Server:
    """Shared lifecycle: a work dir (a temp dir when none is given), a process group, a log file, cleanup on exit."""

    url: str

    def __init__(self, ntriples_files: Sequence[str | os.PathLike[str]], workdir: str | os.PathLike[str] | None,
                 start_timeout: float) -> None:
        self.files = [Path(f).resolve() for f in ntriples_files]
        for f in self.files:
            if not f.is_file():
                raise ConfigError(f"N-Triples file {str(f)!r} does not exist")
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="kgqa-sparql-")
            workdir = self._tmp.name
        self.workdir = Path(workdir).resolve()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = self.workdir / "server.log"

    def _spawn(self, argv: list[str]) -> subprocess.Popen[bytes]:
        with self.log.open("ab") as log:
            # A new session so that the whole server tree can be killed without touching our own group.
            return subprocess.Popen(argv, cwd=self.workdir, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        _kill(self.proc)
        self.proc = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> _Server:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


class OxigraphServer(_Server):
    """``oxigraph load`` the files into ``workdir/store``, then ``oxigraph serve-read-only`` on a free local port."""

    def __init__(self, ntriples_files: Sequence[str | os.PathLike[str]],
                 workdir: str | os.PathLike[str] | None = None, *, start_timeout: float = 60.0,
                 query_timeout_s: int | None = None) -> None:
        super().__init__(ntriples_files, workdir, start_timeout)
        self.query_timeout_s = query_timeout_s
        self.port = 0
        self.url = ""

    def start(self) -> None:
        exe = _binary("oxigraph", "install it with `pip install oxigraph`")
        store = self.workdir / "store"
        if self.files:
            with self.log.open("ab") as log:
                done = subprocess.run([exe, "load", "--location", str(store), "--file", *map(str, self.files)],
                                      stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, check=False)
            if done.returncode != 0:
                raise KGError(f"oxigraph load failed with code {done.returncode}; log {self.log}:\n{tail_log(self.log)}")
        else:
            store.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        argv = [exe, "serve-read-only", "--location", str(store), "--bind", f"127.0.0.1:{self.port}"]
        if self.query_timeout_s:
            argv += ["--timeout-s", str(self.query_timeout_s)]
        self.proc = self._spawn(argv)
        self.url = f"http://127.0.0.1:{self.port}/query"
        _wait_for_sparql(self.url, self.proc, self.log, self.start_timeout)

    def __enter__(self) -> OxigraphServer:
        super().__enter__()
        return self


#: Bytes per Virtuoso buffer in the sizing formula of its RDF performance-tuning guide ("each buffer consisting of 8K
#: bytes"; NumberOfBuffers = free memory * 0.66 / 8000).
_VIRTUOSO_BUFFER_BYTES = 8000
_GIB = 1024 ** 3


@dataclass(frozen=True)
class VirtuosoSettings:
    """The ``virtuoso.ini`` values kgqa derives from a memory budget (see :func:`virtuoso_settings` for the rules)."""

    memory_gb: float
    number_of_buffers: int
    max_dirty_buffers: int
    max_checkpoint_remap: int
    max_query_mem_mb: int
    checkpoint_interval_min: int
    result_set_max_rows: int
    max_query_execution_time_s: int
    max_query_cost_estimation_time_s: int
    threads_per_query: int
    server_threads: int

    def as_dict(self) -> dict[str, float | int]:
        return dict(self.__dict__)


def virtuoso_settings(memory_gb: float, *, cpus: int | None = None, db_bytes: int = 0,
                      result_set_max_rows: int = 1_000_000) -> VirtuosoSettings:
    """Virtuoso settings for a server that may use ``memory_gb`` GiB, following Virtuoso's RDF performance-tuning guide
    (community.openlinksw.com, "Performance Tuning Virtuoso for RDF Queries and Other Use"), so nobody hand-edits them:

    * ``NumberOfBuffers`` = memory * 0.66 / 8000 (its general formula; 2 GB gives about its table's 170,000) and
      ``MaxDirtyBuffers`` = 3/4 of it (its table);
    * ``MaxCheckpointRemap`` = 1/4 of the database size in 8K pages (its advice for large databases): the existing
      database file at a restart, else the buffer pool as the estimate, never below Virtuoso's default 2,000;
    * ``MaxQueryMem`` (per-query working memory, ours): 1/8 of the budget, between 256 MB and 8 GB;
    * ``CheckpointInterval`` 60 minutes (Virtuoso's default); a kgqa bulk load checkpoints after every file itself;
    * ``ResultSetMaxRows`` high (1M) because Virtuoso cuts larger results silently, and kgqa's own caps must decide;
    * ``MaxQueryExecutionTime`` and ``MaxQueryCostEstimationTime`` 0 (off): Virtuoso answers a query past its time with
      partial results and HTTP 200 ("anytime" queries), which a client cannot tell from a complete answer, so timeouts
      are the client's (``SparqlKG(timeout=...)``) and a too-costly query is never refused on an estimate;
    * ``ThreadsPerQuery`` = the CPUs, ``ServerThreads`` = twice the CPUs (at least 8).
    """
    if memory_gb <= 0:
        raise ConfigError(f"--memory must be a positive number of GB, got {memory_gb}")
    cpus = max(1, cpus or os.cpu_count() or 1)
    buffers = max(2000, int(memory_gb * _GIB * 0.66 / _VIRTUOSO_BUFFER_BYTES))
    pages = db_bytes // 8192 if db_bytes else buffers
    return VirtuosoSettings(
        memory_gb=float(memory_gb), number_of_buffers=buffers, max_dirty_buffers=buffers * 3 // 4,
        max_checkpoint_remap=max(2000, pages // 4),
        max_query_mem_mb=int(min(8192, max(256, memory_gb * 1024 / 8))), checkpoint_interval_min=60,
        result_set_max_rows=int(result_set_max_rows), max_query_execution_time_s=0,
        max_query_cost_estimation_time_s=0, threads_per_query=cpus, server_threads=max(8, 2 * cpus))


_VIRTUOSO_INI = """\
; virtuoso.ini written by kgqa ({purpose}). Regenerated at every start; edit --memory rather than this file.
; Memory budget {memory_gb:g} GB -> NumberOfBuffers = memory * 0.66 / 8000, MaxDirtyBuffers = 3/4 of it (Virtuoso's RDF
; performance-tuning guide); MaxCheckpointRemap = 1/4 of the database in 8K pages; MaxQueryMem = 1/8 of the budget.
; Timeouts: MaxQueryExecutionTime = 0 because Virtuoso returns partial results with HTTP 200 when it fires; clients
; (kgqa's SparqlKG) time out instead. Ports listen on {host_note}.
[Database]
DatabaseFile       = {db}/virtuoso.db
ErrorLogFile       = {db}/virtuoso.log
LockFile           = {db}/virtuoso.lck
TransactionFile    = {db}/virtuoso.trx
xa_persistent_file = {db}/virtuoso.pxa
ErrorLogLevel      = 7
FileExtend         = 200
MaxCheckpointRemap = {s.max_checkpoint_remap}
Striping           = 0
TempStorage        = TempDatabase

[TempDatabase]
DatabaseFile       = {db}/virtuoso-temp.db
TransactionFile    = {db}/virtuoso-temp.trx
MaxCheckpointRemap = 2000
Striping           = 0

[Parameters]
ServerPort               = 127.0.0.1:{isql_port}
LiteMode                 = 0
DisableUnixSocket        = 1
DisableTcpSocket         = 0
MaxClientConnections     = {s.server_threads}
CheckpointInterval       = {s.checkpoint_interval_min}
O_DIRECT                 = 0
CaseMode                 = 2
MaxStaticCursorRows      = 5000
AllowOSCalls             = 0
SchedulerInterval        = 10
DirsAllowed              = ., {load_dir}
ThreadCleanupInterval    = 0
ThreadThreshold          = 10
ResourcesCleanupInterval = 0
FreeTextBatchSize        = 100000
SingleCPU                = 0
PrefixResultNames        = 0
RdfFreeTextRulesSize     = 100
IndexTreeMaps            = 64
MaxQueryMem              = {s.max_query_mem_mb}M
VectorSize               = 1000
MaxVectorSize            = 1000000
AdjustVectorSize         = 0
ThreadsPerQuery          = {s.threads_per_query}
AsyncQueueMaxThreads     = {s.threads_per_query}
NumberOfBuffers          = {s.number_of_buffers}
MaxDirtyBuffers          = {s.max_dirty_buffers}

[HTTPServer]
ServerPort                  = {http_host}:{http_port}
ServerRoot                  = {www}
MaxClientConnections        = {s.server_threads}
DavRoot                     = DAV
EnabledDavVSP               = 0
HTTPProxyEnabled            = 0
TempASPXDir                 = 0
ServerThreads               = {s.server_threads}
MaxKeepAlives               = {s.server_threads}
KeepAliveTimeout            = 10
HTTPThreadSize              = 280000
HttpPrintWarningsInOutput   = 0
Charset                     = UTF-8
EnabledGzipContent          = 0

[AutoRepair]
BadParentLinks = 0

[Client]
SQL_PREFETCH_ROWS  = 100
SQL_PREFETCH_BYTES = 16000
SQL_QUERY_TIMEOUT  = 0
SQL_TXN_TIMEOUT    = 0

[SPARQL]
ResultSetMaxRows           = {s.result_set_max_rows}
MaxQueryCostEstimationTime = {s.max_query_cost_estimation_time_s}
MaxQueryExecutionTime      = {s.max_query_execution_time_s}
DeferInferenceRulesInit    = 0
"""


def render_virtuoso_ini(settings: VirtuosoSettings, *, db: Path, load_dir: Path, www: Path, isql_port: int,
                        http_port: int, http_host: str = "127.0.0.1", purpose: str = "a private server") -> str:
    """The text of a ``virtuoso.ini`` for ``settings``: the ISQL port always on 127.0.0.1 (the ``dba`` account keeps its
    default password), the HTTP (SPARQL) port on ``http_host``."""
    host_note = "127.0.0.1 only" if http_host in ("127.0.0.1", "localhost") else \
        f"ISQL 127.0.0.1, HTTP {http_host}"
    return _VIRTUOSO_INI.format(s=settings, db=db, load_dir=load_dir, www=www, isql_port=isql_port,
                                http_port=http_port, http_host=http_host, purpose=purpose,
                                memory_gb=settings.memory_gb, host_note=host_note)


def run_isql(port: int, command: str, *, cwd: str | os.PathLike[str] | None = None, timeout: float = 600.0) -> str:
    """Run ``command`` through ``isql-vt`` on the local ISQL ``port`` as ``dba``; a KGError when it fails (isql exits 0
    on SQL errors, so its output is checked for ``*** Error`` too)."""
    exe = _binary("isql-vt", "install the Debian package virtuoso-opensource")
    done = subprocess.run([exe, str(port), "dba", "dba", f"exec={command}"], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, check=False)
    output = done.stdout + done.stderr
    if done.returncode != 0 or "*** Error" in output:
        raise KGError(f"Virtuoso isql command failed ({command[:120]}...):\n{output.strip()[-2000:]}")
    return output


class VirtuosoServer(_Server):
    """A throw-away Virtuoso (``virtuoso-t``) with its database, ini and load dir inside ``workdir``.

    The N-Triples files are hard-linked (or copied) into ``workdir/load`` (Virtuoso only reads from ``DirsAllowed``) and
    bulk-loaded into ``graph`` with ``ld_dir``/``rdf_loader_run``; with ``fulltext`` the graph's literals are indexed
    for ``bif:contains``. Both ports listen on 127.0.0.1 only and the ``dba`` account keeps its default password: a
    test server, not a deployment. Start-up takes about 8 s (a fresh database is created each time); :meth:`load` adds
    more data to a running server. Queries without a ``default-graph-uri`` see Virtuoso's system graphs as well.
    """

    def __init__(self, ntriples_files: Sequence[str | os.PathLike[str]],
                 workdir: str | os.PathLike[str] | None = None, *, graph: str = _DEFAULT_GRAPH,
                 start_timeout: float = 120.0, buffers: int = 20000, max_rows: int = 1_000_000,
                 fulltext: bool = True) -> None:
        super().__init__(ntriples_files, workdir, start_timeout)
        self.graph = graph
        self.buffers = buffers
        self.max_rows = max_rows
        self.fulltext = fulltext
        self._loads = 0
        self.http_port = 0
        self.isql_port = 0
        self.url = ""

    def _isql(self, command: str, timeout: float = 600.0) -> str:
        return run_isql(self.isql_port, command, cwd=self.workdir, timeout=timeout)

    def _wait_for_isql(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        last = ""
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise KGError(f"virtuoso-t exited with code {self.proc.returncode} during start-up; log "
                              f"{self.log}:\n{tail_log(self.log)}\n{tail_log(self.workdir / 'db' / 'virtuoso.log')}")
            try:
                self._isql("status();", timeout=10)
                return
            except (KGError, subprocess.TimeoutExpired) as exc:
                last = str(exc)[-300:]
            time.sleep(0.3)
        raise KGError(f"Virtuoso not ready on ISQL port {self.isql_port} after {self.start_timeout:.0f}s: {last}")

    def start(self) -> None:
        exe = _binary("virtuoso-t", "install the Debian package virtuoso-opensource")
        _binary("isql-vt", "install the Debian package virtuoso-opensource")
        db = self.workdir / "db"
        www = self.workdir / "www"
        for d in (db, self.load_dir, www):
            d.mkdir(parents=True, exist_ok=True)
        self.isql_port = free_port()
        self.http_port = free_port()
        while self.http_port == self.isql_port:
            self.http_port = free_port()
        ini = self.workdir / "virtuoso.ini"
        settings = replace(virtuoso_settings(1.0, cpus=2, result_set_max_rows=self.max_rows),
                           number_of_buffers=self.buffers, max_dirty_buffers=max(1000, self.buffers * 3 // 4),
                           max_checkpoint_remap=2000, max_query_mem_mb=512, server_threads=8)
        ini.write_text(render_virtuoso_ini(settings, db=db, load_dir=self.load_dir, www=www, isql_port=self.isql_port,
                                           http_port=self.http_port, purpose="a throw-away test server"))
        self.proc = self._spawn([exe, "+foreground", "+configfile", str(ini)])
        self._wait_for_isql()
        if self.files:
            self.load(self.files, self.graph)
        self.url = f"http://127.0.0.1:{self.http_port}/sparql"
        _wait_for_sparql(self.url, self.proc, self.log, self.start_timeout)

    @property
    def load_dir(self) -> Path:
        return self.workdir / "load"

    def load(self, ntriples_files: Sequence[str | os.PathLike[str]], graph: str, *,
             fulltext: bool | None = None) -> None:
        """Bulk-load more N-Triples files into ``graph`` of the running server (each load gets its own directory
        under the allowed load dir, so earlier files are not loaded twice). ``fulltext`` (default: the server's
        setting) indexes the graph's literals for ``bif:contains``; it is the slow part of a load (~3k literals/s)."""
        fulltext = self.fulltext if fulltext is None else fulltext
        if self.proc is None or self.proc.poll() is not None:
            raise KGError("the Virtuoso server is not running")
        check_iri(graph)
        self._loads += 1
        target = self.load_dir / f"batch{self._loads:03d}"
        if "'" in graph or "'" in str(target):
            raise ConfigError(f"graph {graph!r} and load dir {str(target)!r} must not contain a single quote")
        target.mkdir(parents=True, exist_ok=True)
        for i, f in enumerate(ntriples_files):
            source = Path(f)
            if not source.is_file():
                raise ConfigError(f"N-Triples file {str(source)!r} does not exist")
            # Unique names (two inputs may share a basename); a hard link avoids copying a large dump when it can.
            dest = target / f"{i:04d}-{source.stem}.nt"
            try:
                os.link(source.resolve(), dest)
            except OSError:
                shutil.copyfile(source, dest)
        if fulltext:
            # A free-text rule for this graph, set before loading so the loader queues its literals for the index.
            self._isql(f"DB.DBA.RDF_OBJ_FT_RULE_ADD('{graph}', null, 'kgqa_{self._loads}');")
        self._isql(f"ld_dir('{target}', '*.nt', '{graph}'); rdf_loader_run(); checkpoint;")
        errors = self._isql(f"SELECT ll_file, ll_error FROM DB.DBA.LOAD_LIST WHERE ll_error IS NOT NULL "
                            f"AND ll_file LIKE '{target}/%';")
        if "0 Rows" not in errors:
            raise KGError(f"Virtuoso bulk load into {graph} reported errors:\n{errors.strip()[-2000:]}")
        if fulltext:
            self._isql("DB.DBA.VT_INC_INDEX_DB_DBA_RDF_OBJ();")

    def __enter__(self) -> VirtuosoServer:
        super().__enter__()
        return self


# ---------------------------------------------------------------------------------------------------------------------
# Export


class _Exportable(Protocol):
    @property
    def schema(self) -> Schema: ...

    def iter_triples(self) -> Iterable[tuple[str, str, str]]: ...

    def iter_names(self) -> Iterable[tuple[str, str]]: ...


_NT_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r"}


def literal_to_ntriples(node: str) -> str:
    """Re-serialise a literal id so any N-Triples parser (Virtuoso included) reads it: only ``\\``, ``"``, LF, CR
    escaped, everything else as UTF-8."""
    parts = parse_literal(node)
    body = '"' + "".join(_NT_ESCAPES.get(ch, ch) for ch in parts.value) + '"'
    if parts.lang:
        return f"{body}@{parts.lang}"
    if parts.datatype:
        return f"{body}^^<{parts.datatype}>"
    return body


def export_ntriples(kg: _Exportable, path: str | os.PathLike[str]) -> int:
    """Write ``kg`` (an EmbeddedKG) as N-Triples through its schema's IRI mapping; names go out as the schema's first
    name predicate tagged ``@en``. Returns the number of lines written."""
    schema = kg.schema
    if not schema.name_predicates:
        raise ConfigError(f"schema {schema.name!r} has no name predicate to export names with")
    name_iri = schema.name_predicates[0]
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with out.open("w", encoding="utf-8", newline="\n") as fh:
        for head, relation, tail in kg.iter_triples():
            if is_literal(head):
                raise KGError(f"cannot export triple ({head!r}, {relation!r}, {tail!r}): a literal subject")
            obj = literal_to_ntriples(tail) if is_literal(tail) else f"<{schema.entity_iri(tail)}>"
            fh.write(f"<{schema.entity_iri(head)}> <{schema.relation_iri(relation)}> {obj} .\n")
            count += 1
        for entity, name in kg.iter_names():
            if is_literal(entity):
                continue  # a literal's name is its value; nothing to store
            fh.write(f"<{schema.entity_iri(entity)}> <{name_iri}> {literal_to_ntriples(make_literal(name, lang='en'))}"
                     " .\n")
            count += 1
    return count
