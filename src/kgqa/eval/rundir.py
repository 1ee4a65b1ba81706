"""The run directory on disk: its files, the durable results writer, reading results back, and the run lock.

A run directory (``kgqa eval --out RUNDIR``, :func:`kgqa.eval.runner.run_eval`) holds:

``config.json``
    The full configuration (dataset, split, method, the settings the user gave ``method_config`` and the method's
    resolved config ``method_config_resolved``, LLM / KG / embedder specs, seed, shuffle, limit, workers, kgqa
    version, start time), plus one entry per ``--resume``. Written atomically (:func:`write_json`).
``results.jsonl``
    One JSON line per finished question, appended as it finishes: the whole line in one ``write`` under a lock (so a
    killed process leaves at most a torn last line), then fsynced (see :class:`ResultsWriter`; ``fsync="line"``
    waits for each fsync, the default ``"group"`` lets a background thread do it). Fields: ``id``, ``question``,
    ``answers`` (ranked names), ``answer_ids``, ``gold``, ``gold_ids``, ``hit1``, ``hit``, ``precision``,
    ``recall``, ``f1``, the ``legacy_*`` scores, ``grounding``, ``kgr``, ``llm_calls``, ``prompt_tokens``,
    ``completion_tokens``, ``latency_s`` (wall time of the question), ``llm_latency_s``, ``kg_time_s`` and
    ``kg_calls`` (time inside KG calls), ``error``, ``groups`` (breakdown values) and ``hops`` / ``qtype`` where the
    data has them. A row is a :meth:`~kgqa.eval.metrics.QuestionScore.to_dict` plus those extras.
``traces.jsonl``
    The step trace, evidence, the topic entities the method started from (``topics``), its typed account of the answer
    (``details``, read by its ``explain()``) and (for failures) the traceback of each question, kept apart so results
    stay small.
    Each trace line is written before its result line; a resume drops trace lines without a result
    (:func:`compact_traces`). Traces are not fsynced (a power loss may cost trace lines, never result lines).
``summary.json``, ``report.md``, ``*.png``
    Written by :func:`kgqa.eval.summary.summarize_run` and :mod:`kgqa.eval.report`.
``.lock``
    Held (``flock``) by the process writing the run (:func:`run_dir_lock`).

This module knows files only: it imports nothing of the runner, the summary or the report, which all build on it.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from kgqa.errors import ConfigError, DataError

__all__ = [
    "CONFIG_FILE",
    "LOCK_FILE",
    "REPORT_FILE",
    "RESULTS_FILE",
    "SUMMARY_FILE",
    "TRACES_FILE",
    "ResultsWriter",
    "RunDirError",
    "compact_traces",
    "parse_lines",
    "read_config",
    "read_results",
    "refuse_non_empty",
    "rewrite_lines",
    "run_dir_lock",
    "write_json",
]

RESULTS_FILE = "results.jsonl"
TRACES_FILE = "traces.jsonl"
CONFIG_FILE = "config.json"
SUMMARY_FILE = "summary.json"
REPORT_FILE = "report.md"
LOCK_FILE = ".lock"


class RunDirError(ConfigError):
    """The run directory cannot be used as asked (holds another run, is locked, or its results file is damaged)."""


# ---------------------------------------------------------------------------------------------------------------------
# JSON


def json_default(value: Any) -> Any:
    """How values JSON has no type for are written: sets sorted, pydantic models and ``to_dict`` objects as dicts."""
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    return str(value)


def dumps_line(row: Mapping[str, Any]) -> str:
    """One compact JSON line (no newline)."""
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"), default=json_default)


def write_json(path: Path, value: Any) -> None:
    """Write JSON atomically (temporary file, fsync, rename), so a crash never leaves half a config or summary."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(value, handle, ensure_ascii=False, indent=2, default=json_default)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def read_config(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """RUNDIR/config.json, or ``{}`` when it is missing or not valid JSON (for readers that only show it)."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.is_file():
        return {}
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


# ---------------------------------------------------------------------------------------------------------------------
# Appending results


class _Syncer(threading.Thread):
    """fsyncs a file descriptor after writes, in the background: a write never waits for the disk, and one fsync
    covers every line written since the previous one (group commit). Between two fsyncs it pauses ``interval``
    seconds, so a fast run pays a few dozen fsyncs (and thread wake-ups) per second, not one per line."""

    def __init__(self, fd: int, name: str, interval: float = 0.02) -> None:
        super().__init__(name=f"kgqa-fsync-{name}", daemon=True)
        self.fd = fd
        self.interval = interval
        self._cond = threading.Condition()
        self._stopping = threading.Event()
        self._dirty = False
        self.syncs = 0
        self.error: OSError | None = None

    def mark(self) -> None:
        with self._cond:
            if not self._dirty:
                self._dirty = True
                self._cond.notify()

    def run(self) -> None:
        while True:
            with self._cond:
                while not self._dirty and not self._stopping.is_set():
                    self._cond.wait()
                if not self._dirty:
                    return
                self._dirty = False
            try:
                os.fsync(self.fd)
                self.syncs += 1
            except OSError as exc:  # the lines are still in the OS page cache; close() fsyncs again
                self.error = exc
            self._stopping.wait(self.interval)

    def stop(self) -> None:
        with self._cond:
            self._stopping.set()
            self._cond.notify()
        self.join()


class ResultsWriter:
    """Appends JSON lines to a file, each line in one ``os.write`` (``O_APPEND``) under a lock.

    Once ``write`` returns, the line is in the kernel: a killed process (SIGKILL included) cannot lose or tear it, and
    a crash in the middle of a write leaves at most one torn line, at the end. ``fsync`` makes it durable against a
    power loss too: ``"group"`` (default) fsyncs every line from a background thread within a few tens of
    milliseconds, one fsync covering all lines written meanwhile, so the run never waits for the disk; ``"line"``
    fsyncs each line before ``write`` returns; ``"none"`` leaves it to the OS. ``close`` always ends with an fsync
    (unless ``"none"``).
    """

    MODES = ("group", "line", "none")

    def __init__(self, path: str | os.PathLike[str], *, fsync: str = "group") -> None:
        if fsync not in self.MODES:
            raise ConfigError(f"fsync mode must be one of {', '.join(self.MODES)}, got {fsync!r}")
        self.path = Path(path)
        self.mode = fsync
        self._lock = threading.Lock()
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._syncer: _Syncer | None = None
        if fsync == "group":
            self._syncer = _Syncer(self._fd, self.path.name)
            self._syncer.start()

    def write(self, row: Mapping[str, Any]) -> None:
        data = (dumps_line(row) + "\n").encode("utf-8")
        with self._lock:
            if self._fd is None:
                raise ValueError(f"{self.path} is closed")
            view = memoryview(data)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            if self.mode == "line":
                os.fsync(self._fd)
        if self._syncer is not None:
            self._syncer.mark()

    def close(self) -> None:
        with self._lock:
            if self._fd is None:
                return
            if self._syncer is not None:
                self._syncer.stop()
            try:
                if self.mode != "none":
                    os.fsync(self._fd)
            finally:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> ResultsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------------------------------
# Reading and repairing


def parse_lines(path: Path, *, repair: bool) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file. A last line without its newline is a torn write: truncated away when
    ``repair``, else ignored. Any other bad line is a :class:`DataError` naming the file and line."""
    if not path.exists():
        return []
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    if end < len(data):
        if repair:
            with open(path, "r+b") as handle:
                handle.truncate(end)
                handle.flush()
                os.fsync(handle.fileno())
        data = data[:end]
    rows: list[dict[str, Any]] = []
    for lineno, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise DataError(f"{path}: line {lineno} is not valid JSON ({exc}); the file was edited or damaged") from None
        if not isinstance(row, dict) or "id" not in row:
            raise DataError(f"{path}: line {lineno} is not a result row (a JSON object with an 'id')")
        rows.append(row)
    return rows


def read_results(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every finished row of a run directory, in file order (a torn last line is ignored, the file is not changed)."""
    return parse_lines(Path(run_dir) / RESULTS_FILE, repair=False)


def rewrite_lines(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """Replace a JSONL file by ``rows``, atomically."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(dumps_line(row) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def compact_traces(path: Path, done: set[str]) -> None:
    """Keep exactly one trace line per finished question (drop torn lines and traces of unfinished questions).

    A finished question with several trace lines keeps its last: a trace is written just before its result, so the
    last one is the trace of the attempt whose row results.jsonl holds (an earlier one belongs to an attempt that
    never wrote its row)."""
    if not path.exists():
        return
    data = path.read_bytes()
    last: dict[str, int] = {}
    rows: list[tuple[str, dict[str, Any]]] = []
    changed = not data.endswith(b"\n") and bool(data)
    for line in data.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            changed = True
            continue
        rid = row.get("id") if isinstance(row, dict) else None
        if rid not in done:
            changed = True
            continue
        if rid in last:
            changed = True
        last[rid] = len(rows)
        rows.append((rid, row))
    if changed:
        rewrite_lines(path, [row for index, (rid, row) in enumerate(rows) if last[rid] == index])


# ---------------------------------------------------------------------------------------------------------------------
# Owning a run directory


@contextlib.contextmanager
def run_dir_lock(run_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on RUNDIR/.lock (released by the OS even on SIGKILL)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no cross-process lock
        yield
        return
    fd = os.open(run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunDirError(f"run directory {run_dir} is in use by another kgqa eval process; wait for it to end "
                              "or choose another --out") from None
        yield
    finally:
        os.close(fd)


def refuse_non_empty(run_dir: Path) -> None:
    """A :class:`RunDirError` when RUNDIR holds anything but its lock file (a new run never writes over an old one)."""
    if not run_dir.is_dir():
        return
    others = sorted(p.name for p in run_dir.iterdir() if p.name != LOCK_FILE)
    if others:
        finished = len(read_results(run_dir)) if (run_dir / RESULTS_FILE).exists() else 0
        raise RunDirError(f"run directory {run_dir} is not empty ({finished} finished questions; files: "
                          f"{', '.join(others[:6])}); pass --resume to continue that run, or choose another --out. "
                          "Nothing was changed.")
