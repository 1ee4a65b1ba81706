"""Virtuoso (Debian package ``virtuoso-opensource``): ``virtuoso-t`` with a ``virtuoso.ini`` derived from a memory
budget (:func:`virtuoso_settings`), the database in ``DIR/db``, RDF files linked into ``DIR/load`` (Virtuoso reads only
from ``DirsAllowed``) and bulk-loaded one at a time with ``ld_add`` / ``rdf_loader_run`` into a named graph, whose literals
are indexed for ``bif:contains`` search. The ISQL port (account ``dba``, default password) is always loopback-only.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgqa.errors import ConfigError, KGError
from kgqa.kg.schema import check_iri
from kgqa.kg.servers.engine import ServerEngine, url_host
from kgqa.kg.servers.process import ServerProcess, choose_port, find_executable, free_port

__all__ = ["DEFAULT_GRAPH", "DEFAULT_MEMORY_GB", "VirtuosoEngine", "VirtuosoSettings", "render_virtuoso_ini", "run_isql",
           "virtuoso_settings"]

#: The named graph files are loaded into unless told otherwise.
DEFAULT_GRAPH = "http://kgqa.local/graph"
#: The memory budget when none is given (the smallest row of Virtuoso's sizing table).
DEFAULT_MEMORY_GB = 2.0
_INSTALL = "install the Debian package virtuoso-opensource"

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
    exe = find_executable("isql-vt", _INSTALL)
    done = subprocess.run([exe, str(port), "dba", "dba", f"exec={command}"], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, check=False)
    output = done.stdout + done.stderr
    if done.returncode != 0 or "*** Error" in output:
        raise KGError(f"Virtuoso isql command failed ({command[:120]}...):\n{output.strip()[-2000:]}")
    return output


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


class VirtuosoEngine(ServerEngine):
    """A Virtuoso server in ``DIR``: ``DIR/virtuoso.ini`` (regenerated at every start from ``settings``, by default
    :func:`virtuoso_settings` of ``memory_gb`` and the database's size), the database in ``DIR/db``.

    Files are bulk-loaded into ``graph``; with ``fulltext`` its literals are indexed for ``bif:contains`` (the slow part
    of a load, ~3k literals/s). ``fulltext_graphs`` are graphs given their free-text rule by an earlier load.
    ``isql_port`` is the ISQL port to listen on if free (127.0.0.1 only); ``purpose`` is said in the ini's first line.
    The ``dba`` account keeps its default password: the ports are for this machine.
    """

    name = "virtuoso"
    customary_port = 8890
    customary_isql_port = 1111
    loads_while_running = True

    def __init__(self, directory: str | Path, *, graph: str = DEFAULT_GRAPH, memory_gb: float = DEFAULT_MEMORY_GB,
                 settings: VirtuosoSettings | None = None, isql_port: int = 0, fulltext: bool = True,
                 fulltext_graphs: Iterable[str] = (), purpose: str = "a private server", **options: Any) -> None:
        super().__init__(directory, **options)
        self.graph = check_iri(graph)
        self.memory_gb = memory_gb
        self.settings = settings
        self.isql_port = isql_port
        self.fulltext = fulltext
        self.fulltext_graphs = set(fulltext_graphs)
        self.purpose = purpose

    @property
    def url(self) -> str:
        return f"http://{url_host(self.host)}:{self.port}/sparql" if self.port else ""

    @property
    def store_dir(self) -> Path:
        return self.dir / "db"

    @property
    def config_file(self) -> Path:
        return self.dir / "virtuoso.ini"

    @property
    def load_dir(self) -> Path:
        return self.dir / "load"

    @property
    def logs(self) -> list[Path]:
        return [self.log, self.store_dir / "virtuoso.log"]

    def _isql(self, command: str, timeout: float = 24 * 3600.0) -> str:
        return run_isql(self.isql_port, command, cwd=self.dir, timeout=timeout)

    def _prepare(self) -> list[str]:
        exe = find_executable("virtuoso-t", _INSTALL)
        find_executable("isql-vt", _INSTALL)
        www = self.dir / "www"
        for d in (self.store_dir, www, self.load_dir):
            d.mkdir(parents=True, exist_ok=True)
        self.isql_port = choose_port("127.0.0.1", self.isql_port,
                                     self.customary_isql_port if self.customary_ports else None)
        while self.isql_port == self.port:
            self.isql_port = free_port()
        db_file = self.store_dir / "virtuoso.db"
        settings = self.settings or virtuoso_settings(self.memory_gb,
                                                      db_bytes=db_file.stat().st_size if db_file.exists() else 0)
        self.config_file.write_text(render_virtuoso_ini(settings, db=self.store_dir, load_dir=self.load_dir, www=www,
                                                        isql_port=self.isql_port, http_port=self.port,
                                                        http_host=self.host, purpose=self.purpose), encoding="utf-8")
        return [exe, "+foreground", "+configfile", str(self.config_file)]

    def _wait_until_ready(self, process: ServerProcess) -> None:
        # The ISQL port answers first; the SPARQL port after it.
        self._wait_until(process, f"virtuoso server on ISQL port {self.isql_port}", self._isql_problem)
        super()._wait_until_ready(process)

    def _isql_problem(self) -> str | None:
        try:
            self._isql("status();", timeout=10)
        except (KGError, subprocess.TimeoutExpired) as exc:
            return str(exc)[-300:]
        return None

    def _shut_down(self, process: ServerProcess) -> None:
        """``shutdown`` through ISQL (a checkpoint, then exit); SIGTERM/SIGKILL if that does not end it."""
        with contextlib.suppress(KGError, subprocess.TimeoutExpired, ConfigError):
            self._isql("shutdown;", timeout=120)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not process.exited:
            time.sleep(0.2)
        if not process.exited:
            process.terminate()

    def load(self, path: Path, *, slot: int, resume: bool = False, graph: str | None = None,
             fulltext: bool | None = None) -> int | None:
        """Link the file into the load dir as ``slot``, ``ld_add`` it, ``rdf_loader_run()`` (heartbeats while it runs),
        check the load list for its error, index its literals and ``checkpoint`` so that the load is durable. Loads into
        ``graph`` (default: the engine's) with ``fulltext`` (default: the engine's setting); returns None (the graph is
        counted by :meth:`count_added`).

        With ``resume`` (a killed command left this input loading), a load still running inside the server (the loader
        runs in Virtuoso, not in kgqa) is waited for rather than started twice, and one it finished is kept; one it
        lost (a crash before the checkpoint) or failed is loaded again."""
        if self.process is None or self.process.exited:
            raise KGError("the Virtuoso server is not running")
        graph = check_iri(graph or self.graph)
        fulltext = self.fulltext if fulltext is None else fulltext
        name = path.name.lower()
        link = self.load_dir / f"{slot:05d}{'.ttl' if '.ttl' in name else '.nt'}{'.gz' if name.endswith('.gz') else ''}"
        if "'" in str(link) or "'" in graph:
            raise ConfigError(f"paths and graph must not contain a single quote: {link}, {graph}")
        if not (resume and link.exists() and self._finished_in_server(link, path.name)):
            _link(path, link)
            if fulltext and graph not in self.fulltext_graphs:
                # A free-text rule for the graph, set before loading so the loader queues its literals for the index.
                self._isql(f"DB.DBA.RDF_OBJ_FT_RULE_ADD('{graph}', null, 'kgqa');")
                self.fulltext_graphs.add(graph)
            self._isql(f"DELETE FROM DB.DBA.LOAD_LIST WHERE ll_file = '{link}';")
            self._isql(f"ld_add('{link}', '{graph}');")
            self._run_with_heartbeat("rdf_loader_run();", path.name)
        _ll_state, error = self._load_list_state(link)
        if error:
            raise KGError(f"Virtuoso could not load {path}: {error[:1500]}")
        if fulltext:
            self._isql("DB.DBA.VT_INC_INDEX_DB_DBA_RDF_OBJ();")
        self._isql("checkpoint;")
        return None

    def count_added(self, path: Path, before: int) -> int:
        """What the engine's graph holds beyond the ``before`` triples loaded until then."""
        return self.stored_triples(graph=self.graph, timeout=3600.0) - before

    def _load_list_state(self, link: Path) -> tuple[int | None, str | None]:
        """The load list's state of ``link`` (0 waiting, 1 loading, 2 done; None: not listed) and its error."""
        rows = _isql_rows(self._isql(f"SELECT ll_state, ll_error FROM DB.DBA.LOAD_LIST WHERE ll_file = '{link}';",
                                     timeout=60))
        if not rows:
            return None, None
        ll_state, _, error = rows[0].partition(" ")
        error = error.strip()
        return int(ll_state), (None if error in ("", "NULL") else error)

    def _finished_in_server(self, link: Path, name: str) -> bool:
        """Whether the server has loaded ``link`` without an error, waiting while it is still loading it."""
        ll_state, error = self._load_list_state(link)
        if ll_state == 1:
            self.progress(f"  {name} is still loading in the server (a killed command started it); waiting for it")
            started = time.monotonic()
            while ll_state == 1:
                time.sleep(2.0)
                ll_state, error = self._load_list_state(link)
                if time.monotonic() - started > 10:
                    self.progress(f"  still loading {name}: {time.monotonic() - started:.0f} s")
                    started = time.monotonic()
        return ll_state == 2 and error is None

    def _run_with_heartbeat(self, command: str, name: str) -> None:
        """Run a long ISQL command, saying every 10 s that ``name`` is still loading."""
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
            self.progress(f"  still loading {name}: {time.monotonic() - started:.0f} s")
        thread.join()
        if errors:
            raise errors[0]


def _link(source: Path, link: Path) -> None:
    """Make ``link`` name ``source``: a hard link (a large dump is not copied), else a symbolic one."""
    if link.exists() or link.is_symlink():
        link.unlink()
    try:
        os.link(source, link)
    except OSError:
        os.symlink(source.resolve(), link)
