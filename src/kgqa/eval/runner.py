"""The evaluation runner: answer a dataset's questions with a method, score each one, and never lose a finished question.

``run_eval(dataset, method=..., llm=..., out=RUNDIR)`` (and ``kgqa eval``) writes into RUNDIR:

``config.json``
    The full configuration (dataset, split, method and its config, LLM / KG / embedder specs, seed, shuffle, limit,
    workers, kgqa version, start time), plus one entry per ``--resume``.
``results.jsonl``
    One JSON line per finished question, appended as it finishes: the whole line in one ``write`` under a lock (so a
    killed process leaves at most a torn last line), then fsynced (see :class:`ResultsWriter`; ``fsync="line"``
    waits for each fsync, the default ``"group"`` lets a background thread do it). Fields: ``id``, ``question``,
    ``answers`` (ranked names), ``answer_ids``, ``gold``, ``gold_ids``, ``hit1``, ``hit``, ``precision``,
    ``recall``, ``f1``, the ``legacy_*`` scores, ``grounding``, ``kgr``, ``llm_calls``, ``prompt_tokens``,
    ``completion_tokens``, ``latency_s`` (wall time of the question), ``llm_latency_s``, ``kg_time_s`` and
    ``kg_calls`` (time inside KG calls), ``error``, ``groups`` (breakdown values) and ``hops`` / ``qtype`` where the
    data has them. A row is a :meth:`QuestionScore.to_dict` plus those extras.
``traces.jsonl``
    The step trace, evidence and (for failures) the traceback of each question, kept apart so results stay small.
    Each trace line is written before its result line; a resume drops trace lines without a result. Traces are
    not fsynced (a power loss may cost trace lines, never result lines).
``summary.json``, ``report.md``, ``*.png``
    :func:`kgqa.eval.metrics.summarize` over ALL lines of results.jsonl (a resumed run summarises everything), plus
    run facts; the report and plots come from :mod:`kgqa.eval.report`.

Resuming: with ``resume=True`` the finished ids are read back (a torn last line left by a crash is truncated away)
and skipped, so no question is ever written twice; the run must keep the settings that decide answers (dataset,
split, method and config, LLM, KG, seed, shuffle). Without ``resume`` a non-empty RUNDIR is refused. A lock file
stops two processes from writing one RUNDIR. ``retry_errors`` (with ``resume``) drops failed rows first and reruns them.

A question whose method raises is recorded as :meth:`Prediction.failed` with its error and the run goes on; after
``max_consecutive_failures`` failures in a row (a dead model server, a missing KG) the run stops early, writes its
summary and raises :class:`RunStopped`, since the rest would fail the same way.

Time accounting: the KG is wrapped in :class:`TimedKG`, which adds the time of every KG call to the question being
answered, so ``kg_time_s / latency_s`` says how much of a run the KG side costs. Work a method starts in threads of its
own (without copying the context) is not attributed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import random
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kgqa import __version__, config
from kgqa.errors import ConfigError, DataError, KGQAError
from kgqa.eval.datasets import dataset_root, load_dataset
from kgqa.eval.metrics import QuestionScore, score_prediction, summarize
from kgqa.llm.accounting import RecordedModel, Recorder
from kgqa.methods.base import Method, MethodContext, Prediction, Question, get_method

if TYPE_CHECKING:
    from kgqa.kg.base import KnowledgeGraph
    from kgqa.llm.base import ChatModel
    from kgqa.text.base import Embedder

__all__ = [
    "CONFIG_FILE",
    "RESULTS_FILE",
    "SUMMARY_FILE",
    "TRACES_FILE",
    "EvalRun",
    "KGClock",
    "ResultsWriter",
    "RunDirError",
    "RunStopped",
    "TimedKG",
    "read_results",
    "run_eval",
    "summarize_run",
]

RESULTS_FILE = "results.jsonl"
TRACES_FILE = "traces.jsonl"
CONFIG_FILE = "config.json"
SUMMARY_FILE = "summary.json"
LOCK_FILE = ".lock"

#: Settings that decide the answers: a resumed run must keep them, or its results would mix two experiments.
RESUME_KEYS = ("dataset", "split", "method", "method_config", "llm", "kg", "seed", "shuffle")


class RunDirError(ConfigError):
    """The run directory cannot be used as asked (holds another run, is locked, or its results file is damaged)."""


class RunStopped(KGQAError):
    """The run stopped early (too many consecutive failures); what finished is saved and a resume continues it."""


# ---------------------------------------------------------------------------------------------------------------------
# Time spent in the KG


class KGClock:
    """Time and number of KG calls of one question."""

    __slots__ = ("_lock", "calls", "seconds")

    def __init__(self) -> None:
        self.calls = 0
        self.seconds = 0.0
        self._lock = threading.Lock()

    def add(self, seconds: float) -> None:
        with self._lock:  # a method may call the KG from several threads of its own
            self.calls += 1
            self.seconds += seconds


_KG_CLOCK: ContextVar[KGClock | None] = ContextVar("kgqa_kg_clock", default=None)


@contextlib.contextmanager
def kg_clock() -> Iterator[KGClock]:
    """Attribute the KG calls made through a :class:`TimedKG` inside the block to a fresh clock."""
    clock = KGClock()
    token = _KG_CLOCK.set(clock)
    try:
        yield clock
    finally:
        _KG_CLOCK.reset(token)


class TimedKG:
    """A thin proxy of a KG: every public method call is timed into the current :func:`kg_clock` (if any).

    Attributes that are not callables (``schema``) pass through untouched. The wrappers are made once per name.
    """

    def __init__(self, inner: Any) -> None:
        self.__dict__["_inner"] = inner

    @property
    def inner(self) -> Any:
        return self.__dict__["_inner"]

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.__dict__["_inner"], name)
        if name.startswith("_") or not callable(attr):
            return attr

        def timed(*args: Any, **kwargs: Any) -> Any:
            clock = _KG_CLOCK.get()
            if clock is None:
                return attr(*args, **kwargs)
            started = time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                clock.add(time.perf_counter() - started)

        timed.__name__ = name
        timed.__doc__ = getattr(attr, "__doc__", None)
        self.__dict__[name] = timed  # later lookups skip __getattr__
        return timed

    def __repr__(self) -> str:
        return f"TimedKG({self.__dict__['_inner']!r})"


# ---------------------------------------------------------------------------------------------------------------------
# Accounting


# ---------------------------------------------------------------------------------------------------------------------
# Files


def _json_default(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    return str(value)


def _dumps(row: Mapping[str, Any]) -> str:
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"), default=_json_default)


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
        data = (_dumps(row) + "\n").encode("utf-8")
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


def _parse_lines(path: Path, *, repair: bool) -> list[dict[str, Any]]:
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
    return _parse_lines(Path(run_dir) / RESULTS_FILE, repair=False)


def _write_json(path: Path, value: Any) -> None:
    """Write JSON atomically (temporary file, fsync, rename), so a crash never leaves half a config or summary."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(value, handle, ensure_ascii=False, indent=2, default=_json_default)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _rewrite_lines(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(_dumps(row) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


@contextlib.contextmanager
def _locked(run_dir: Path) -> Iterator[None]:
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


# ---------------------------------------------------------------------------------------------------------------------
# The run


@dataclass
class EvalRun:
    """What :func:`run_eval` did: where, the summary of the whole run directory, and this invocation's counts."""

    out_dir: Path
    summary: dict[str, Any]
    selected: int  # questions selected (dataset, limit, shuffle)
    skipped: int  # already finished before this invocation (resume)
    answered: int  # finished by this invocation
    failed: int  # of those, recorded with an error
    wall_s: float
    files: dict[str, Path] = field(default_factory=dict)


def parse_method_config(items: Iterable[str]) -> dict[str, Any]:
    """``["pruner=embedding", "top_k=5"]`` -> ``{"pruner": "embedding", "top_k": 5}``: ints, floats, booleans
    (true/false/yes/no/on/off), ``none``/``null`` and JSON lists/objects are converted; anything else stays text."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key or not key.isidentifier():
            raise ConfigError(f"method config {item!r} is not key=value (e.g. --method-config pruner=embedding)")
        out[key] = _coerce(raw.strip())
    return out


def _coerce(text: str) -> Any:
    lowered = text.lower()
    if lowered in ("true", "yes", "on"):
        return True
    if lowered in ("false", "no", "off"):
        return False
    if lowered in ("none", "null"):
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
        if math.isfinite(number):  # "nan" / "inf" stay text
            return number
    except ValueError:
        pass
    if text[:1] in "[{":
        try:
            return json.loads(text)
        except ValueError:
            pass
    return text


def _select(dataset: str, split: str, data_dir: str | os.PathLike[str] | None, limit: int | None, seed: int,
            shuffle: bool) -> list[Question]:
    root = dataset_root(dataset, data_dir)
    if not shuffle:
        return load_dataset(dataset, split, data_dir=root, limit=limit)
    questions = load_dataset(dataset, split, data_dir=root)
    random.Random(seed).shuffle(questions)  # seeded: the same seed draws the same sample
    return questions if limit is None else questions[:limit]


def _check_limit(limit: int | None) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ConfigError(f"--limit must be a non-negative integer, got {limit!r}")


def _spec_of(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return str(getattr(value, "name", None) or type(value).__name__)


def _needs_embedder(method: Any, method_config: Mapping[str, Any]) -> bool:
    return bool(getattr(method, "needs_embedder", False)) or method_config.get("pruner") in ("embedding", "hybrid")


def _check_resume(run_dir: Path, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    diffs = [f"{k}: {old.get(k)!r} (run) vs {new.get(k)!r} (now)" for k in RESUME_KEYS
             if k in old and _canonical(old.get(k)) != _canonical(new.get(k))]
    if diffs:
        raise RunDirError(f"cannot resume {run_dir} with different settings ({'; '.join(diffs)}); "
                          "resume with the run's settings or choose another --out")


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=_json_default)


_SCORE_FIELDS = tuple(f.name for f in dataclasses.fields(QuestionScore))


def _row(question: Question, prediction: Prediction, score: QuestionScore, clock: KGClock, usage: Mapping[str, Any]) -> dict:
    scores = {name: getattr(score, name) for name in _SCORE_FIELDS}  # dataclasses.asdict deep-copies: slow per row
    scores["groups"] = dict(score.groups)
    row: dict[str, Any] = {
        "id": question.id,
        "question": question.text,
        "answers": [a.name for a in prediction.answers],
        "answer_ids": [a.id for a in prediction.answers],
        "gold": [g.name for g in question.answers],
        "gold_ids": [g.id for g in question.answers],
    }
    row.update(scores)
    row["llm_latency_s"] = float(usage.get("latency_s", 0.0))
    row["cache_hits"] = int(usage.get("cache_hits", 0))
    row["retries"] = int(usage.get("retries", 0))
    row["kg_time_s"] = clock.seconds
    row["kg_calls"] = clock.calls
    for key in ("hops", "qtype"):
        if question.metadata.get(key) is not None:
            row[key] = question.metadata[key]
    return row


class _Solver:
    """Answers and scores one question at a time (thread-safe: per-question state lives in locals)."""

    def __init__(self, method: Method, base: MethodContext, recorder: Recorder) -> None:
        self.method = method
        self.base = base
        self.recorder = recorder

    def __call__(self, question: Question) -> tuple[dict[str, Any], dict[str, Any]]:
        ctx = self.base.for_question()
        tb: str | None = None
        started = time.perf_counter()
        with kg_clock() as clock, self.recorder.scope(question.id):
            try:
                prediction = self.method.answer(question, ctx)
                if not isinstance(prediction, Prediction):
                    prediction = Prediction.model_validate(prediction)
            except Exception as exc:  # a failing question is recorded, never fatal to the run
                tb = traceback.format_exc()
                prediction = Prediction.failed(f"{type(exc).__name__}: {exc}", trace=list(ctx.trace))
        latency = time.perf_counter() - started
        usage = self.recorder.totals(question.id).to_dict()
        self.recorder.release(question.id)
        prediction = prediction.model_copy(update={"usage": {**prediction.usage, **usage}})
        try:
            score = score_prediction(question, prediction, latency_s=latency)
        except Exception as exc:  # e.g. a method returned a malformed answer: record it as that question's failure
            tb = traceback.format_exc()
            prediction = Prediction.failed(f"scoring failed: {type(exc).__name__}: {exc}", usage=prediction.usage,
                                           trace=prediction.trace)
            score = score_prediction(question, prediction, latency_s=latency)
        row = _row(question, prediction, score, clock, usage)
        trace_row: dict[str, Any] = {"id": question.id, "trace": prediction.trace, "evidence": prediction.evidence}
        if tb is not None:
            trace_row["traceback"] = tb
        return row, trace_row


class _Progress:
    """Running Hits@1 and cost over every row of the run (earlier rows included), shown on a tqdm bar on stderr."""

    def __init__(self, total: int, rows: Sequence[Mapping[str, Any]], *, enabled: bool, label: str) -> None:
        self.n = len(rows)
        self.hits = sum(float(r.get("hit1", 0.0)) for r in rows)
        self.calls = sum(int(r.get("llm_calls", 0)) for r in rows)
        self.tokens = sum(int(r.get("prompt_tokens", 0)) + int(r.get("completion_tokens", 0)) for r in rows)
        self.errors = sum(1 for r in rows if r.get("error"))
        self.bar: Any = None
        self._last = 0.0
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=self.n, desc=label, unit="q", file=sys.stderr, dynamic_ncols=True,
                            mininterval=0.25, smoothing=0.05)
            self._postfix(force=True)

    def add(self, row: Mapping[str, Any]) -> None:
        self.n += 1
        self.hits += float(row.get("hit1", 0.0))
        self.calls += int(row.get("llm_calls", 0))
        self.tokens += int(row.get("prompt_tokens", 0)) + int(row.get("completion_tokens", 0))
        self.errors += 1 if row.get("error") else 0
        if self.bar is not None:
            self._postfix()
            self.bar.update(1)

    def _postfix(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < 0.25:
            return  # formatting the postfix on every question would cost more than the rest of the bar
        self._last = now
        n = max(self.n, 1)
        text = f"hits@1={100 * self.hits / n:.1f}% calls={self.calls} ({self.calls / n:.1f}/q) tok={self.tokens:,}"
        if self.errors:
            text += f" errors={self.errors}"
        self.bar.set_postfix_str(text, refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self._postfix(force=True)
            self.bar.close()


def run_eval(
    dataset: str,
    *,
    out: str | os.PathLike[str],
    split: str = "test",
    method: str | Method = "io",
    method_config: Mapping[str, Any] | None = None,
    llm: str | ChatModel | None = None,
    kg: str | KnowledgeGraph | None = None,
    embedder: str | Embedder | None = "minilm",
    limit: int | None = None,
    seed: int = 0,
    shuffle: bool = False,
    workers: int = 1,
    resume: bool = False,
    retry_errors: bool = False,
    data_dir: str | os.PathLike[str] | None = None,
    questions: Sequence[Question] | None = None,
    progress: bool = True,
    report: bool = True,
    fsync: str = "group",
    max_consecutive_failures: int = 25,
    llm_options: Mapping[str, Any] | None = None,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> EvalRun:
    """Evaluate ``method`` on ``dataset``/``split`` into the run directory ``out`` (see the module docstring).

    ``method`` is a registered name (built with ``method_config``) or a method object; ``llm`` a model spec
    (default: config ``llm``) or a chat model; ``kg`` a KG spec or object, opened only for methods that need one
    (``needs_kg``, true unless a method says otherwise; default: config ``kg``); ``embedder`` a spec or object, loaded
    only when the method prunes with embeddings. ``questions`` replaces the dataset loader (``dataset`` is then only a
    label). ``limit`` takes the first N questions in file order, or a seeded random N with ``shuffle``. ``fsync`` is
    the durability of results.jsonl (see :class:`ResultsWriter`). ``on_row`` is called with each row once written.
    Raises :class:`RunDirError` for an unusable RUNDIR and :class:`RunStopped` after too many consecutive failures.
    """
    from kgqa import llm as llm_layer

    started_wall = time.time()
    started = time.perf_counter()
    _check_limit(limit)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"--workers must be a positive integer, got {workers!r}")
    if retry_errors and not resume:
        raise ConfigError("--retry-errors only makes sense with --resume")
    if fsync not in ResultsWriter.MODES:
        raise ConfigError(f"fsync must be one of {', '.join(ResultsWriter.MODES)}, got {fsync!r}")
    method_config = dict(method_config or {})
    if isinstance(method, str):
        method_name = method.strip().lower()
        method_obj = get_method(method_name, **method_config)
    else:
        if method_config:
            raise ConfigError("method_config is for a method given by name; configure the method object itself")
        method_obj = method
        method_name = str(getattr(method, "name", type(method).__name__))
    run_dir = Path(out).expanduser()
    if not resume:
        _refuse_non_empty(run_dir)  # before loading anything: a mistyped --out should fail fast
    needs_kg = bool(getattr(method_obj, "needs_kg", True))
    llm_spec = _spec_of(llm) if llm is not None else str(config.get("llm"))
    kg_spec = _spec_of(kg) if kg is not None else (str(config.get("kg")) if needs_kg else None)

    if questions is None:
        selected = _select(dataset, split, data_dir, limit, seed, shuffle)
    else:
        selected = list(questions)
        if shuffle:
            random.Random(seed).shuffle(selected)
        if limit is not None:
            selected = selected[:limit]
    seen: set[str] = set()
    for q in selected:
        if q.id in seen:
            raise DataError(f"question id {q.id!r} occurs twice in {dataset}/{split}; results are keyed by id")
        seen.add(q.id)

    # Build what the questions need before touching the run directory, so a bad spec leaves nothing behind.
    recorder = Recorder()
    if llm is None or isinstance(llm, str):
        model = llm_layer.load(llm_spec, recorder=recorder, **dict(llm_options or {}))
    else:
        model = RecordedModel(llm, recorder)
    kg_obj: Any = None
    owns_kg = False
    if kg is not None and not isinstance(kg, str):
        kg_obj = kg
    elif kg_spec is not None:
        from kgqa.kg import open_kg

        kg_obj, owns_kg = open_kg(kg_spec), True
    text_embedder: Any = None
    if embedder is not None and not isinstance(embedder, str):
        text_embedder = embedder
    elif embedder is not None and _needs_embedder(method_obj, method_config):
        from kgqa.text import load_embedder

        text_embedder = load_embedder(embedder)
    if run_dir.exists() and not run_dir.is_dir():
        raise RunDirError(f"--out {run_dir} exists and is not a directory")
    run_dir.mkdir(parents=True, exist_ok=True)
    results_path, traces_path, config_path = run_dir / RESULTS_FILE, run_dir / TRACES_FILE, run_dir / CONFIG_FILE

    run_config: dict[str, Any] = {
        "dataset": dataset, "split": split, "method": method_name, "method_config": method_config,
        "llm": llm_spec, "kg": kg_spec, "embedder": None, "seed": seed, "shuffle": shuffle, "limit": limit,
        "workers": workers, "data_dir": None if questions is not None else str(dataset_root(dataset, data_dir)),
        "questions": len(selected), "kgqa_version": __version__, "python": sys.version.split()[0],
        "started_at": datetime.fromtimestamp(started_wall, UTC).isoformat(timespec="seconds"),
        "argv": list(sys.argv),
    }

    with _locked(run_dir):
        if not resume:
            _refuse_non_empty(run_dir)
        previous = _parse_lines(results_path, repair=True)
        ids = [r["id"] for r in previous]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise RunDirError(f"{results_path} holds question {dup!r} more than once; it was not written by one "
                              "kgqa run. Fix or move the file.")
        if config_path.exists():
            try:
                old_config = json.loads(config_path.read_text(encoding="utf-8"))
            except ValueError as exc:
                raise RunDirError(f"{config_path} is not valid JSON ({exc})") from None
            _check_resume(run_dir, old_config, run_config)
            old_config.setdefault("resumes", []).append(
                {k: run_config[k] for k in ("started_at", "limit", "workers", "questions", "argv")})
            run_config = {**old_config, "embedder": old_config.get("embedder")}
        if retry_errors:
            kept = [r for r in previous if not r.get("error")]
            if len(kept) != len(previous):
                _rewrite_lines(results_path, kept)
                previous = kept
        done = {r["id"] for r in previous}
        _compact_traces(traces_path, done)
        pending = [q for q in selected if q.id not in done]

        if text_embedder is not None and not run_config.get("embedder"):
            run_config["embedder"] = _spec_of(embedder)
        if kg_obj is not None and pending:
            run_config["topic_coverage"] = _topic_coverage(kg_obj, pending)
        _write_json(config_path, run_config)

        base = MethodContext(kg=TimedKG(kg_obj) if kg_obj is not None else None,  # type: ignore[arg-type]
                             llm=model, embedder=text_embedder, seed=seed, recorder=recorder)
        solve = _Solver(method_obj, base, recorder)
        bar = _Progress(len(selected), [r for r in previous if r["id"] in seen], enabled=progress,
                        label=f"{method_name} {dataset}")
        answered = failed = 0
        stop_reason: str | None = None
        loop_started = time.perf_counter()
        with ResultsWriter(results_path, fsync=fsync) as results, ResultsWriter(traces_path, fsync="none") as traces:
            consecutive = 0

            def finish(row: dict[str, Any], trace_row: dict[str, Any]) -> bool:
                """Write one finished question; False when the run should stop."""
                nonlocal answered, failed, consecutive, stop_reason
                traces.write(trace_row)  # before the result: a result line always has its trace
                results.write(row)
                answered += 1
                bar.add(row)
                if on_row is not None:
                    on_row(row)
                if row.get("error"):
                    failed += 1
                    consecutive += 1
                    if max_consecutive_failures and consecutive >= max_consecutive_failures and stop_reason is None:
                        stop_reason = (f"stopped after {consecutive} consecutive failed questions (last: "
                                       f"{row['error'][:300]})")
                        return False
                else:
                    consecutive = 0
                return True

            try:
                if workers == 1:
                    for question in pending:
                        if not finish(*solve(question)):
                            break
                else:
                    _run_pool(pending, solve, finish, workers)
            finally:
                bar.close()
        loop_s = time.perf_counter() - loop_started

        summary = summarize_run(run_dir, report=report, run_facts={
            "wall_s": round(time.perf_counter() - started, 3), "loop_s": round(loop_s, 3),
            "answered": answered, "failed": failed, "skipped": len(selected) - len(pending),
            "selected": len(selected), "workers": workers,
            "questions_per_s": round(answered / loop_s, 2) if loop_s > 0 and answered else None,
            "complete": answered == len(pending), "stopped": stop_reason,
            "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        })
    if owns_kg:
        with contextlib.suppress(Exception):  # closing is best effort; the results are written
            kg_obj.close()
    files = {"results": results_path, "traces": traces_path, "config": config_path, "summary": run_dir / SUMMARY_FILE}
    if report:
        files["report"] = run_dir / "report.md"
    run = EvalRun(run_dir, summary, len(selected), len(selected) - len(pending), answered, failed,
                  time.perf_counter() - started, files)
    if stop_reason is not None:
        raise RunStopped(f"{stop_reason}. The {answered} questions answered are saved in {run_dir}; fix the cause, "
                         "then continue with --resume --retry-errors.")
    return run


def _run_pool(pending: Sequence[Question], solve: _Solver,
              finish: Callable[[dict[str, Any], dict[str, Any]], bool], workers: int) -> None:
    """Answer in a thread pool, keeping at most 2 x workers questions in flight; rows are written as they finish."""
    queue = iter(pending)
    in_flight: set[Future[tuple[dict[str, Any], dict[str, Any]]]] = set()
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kgqa-eval")
    stopping = False
    try:
        while True:
            while not stopping and len(in_flight) < 2 * workers:
                question = next(queue, None)
                if question is None:
                    break
                in_flight.add(pool.submit(solve, question))
            if not in_flight:
                break
            done, in_flight = wait(in_flight, return_when=FIRST_COMPLETED)
            for future in done:
                if not finish(*future.result()):
                    stopping = True  # let the questions in flight finish and be written, start no new ones
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _refuse_non_empty(run_dir: Path) -> None:
    if not run_dir.is_dir():
        return
    others = sorted(p.name for p in run_dir.iterdir() if p.name != LOCK_FILE)
    if others:
        finished = len(read_results(run_dir)) if (run_dir / RESULTS_FILE).exists() else 0
        raise RunDirError(f"run directory {run_dir} is not empty ({finished} finished questions; files: "
                          f"{', '.join(others[:6])}); pass --resume to continue that run, or choose another --out. "
                          "Nothing was changed.")


def _compact_traces(path: Path, done: set[str]) -> None:
    """Keep exactly one trace line per finished question (drop torn lines and traces of unfinished questions)."""
    if not path.exists():
        return
    data = path.read_bytes()
    kept: list[dict[str, Any]] = []
    seen: set[str] = set()
    changed = not data.endswith(b"\n") and bool(data)
    for line in data.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            changed = True
            continue
        rid = row.get("id") if isinstance(row, dict) else None
        if rid in done and rid not in seen:
            seen.add(rid)
            kept.append(row)
        else:
            changed = True
    if changed:
        _rewrite_lines(path, kept)


def _topic_coverage(kg: Any, questions: Sequence[Question], sample: int = 50) -> dict[str, Any]:
    """How many of the first ``sample`` questions have a topic entity in the KG (a wrong --kg shows up as 0)."""
    checked = covered = 0
    for q in questions[:sample]:
        if not q.topic_entities:
            continue
        checked += 1
        try:
            if any(kg.has_entity(t.id) for t in q.topic_entities):
                covered += 1
        except KGQAError:
            continue
    if checked and not covered:
        print(f"kgqa: warning: none of the {checked} questions checked has a topic entity in the KG; is --kg the KG "
              "of this dataset? (for MetaQA: kgqa kg import DATA/metaqa/kb.txt --out DIR, then --kg DIR)",
              file=sys.stderr)
    return {"checked": checked, "covered": covered}


# ---------------------------------------------------------------------------------------------------------------------
# Summary


def _share(part: float, whole: float) -> float:
    return part / whole if whole > 0 else 0.0


def summarize_run(run_dir: str | os.PathLike[str], *, report: bool = True,
                  run_facts: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Summarise ALL rows of RUNDIR/results.jsonl into RUNDIR/summary.json (and report.md + plots with ``report``).

    Usable on any run directory, e.g. one whose process was killed before it wrote its summary.
    """
    path = Path(run_dir)
    rows = read_results(path)
    if not rows and not (path / RESULTS_FILE).exists():
        raise RunDirError(f"{path} holds no {RESULTS_FILE}; is it a kgqa eval run directory?")
    run_config: dict[str, Any] = {}
    if (path / CONFIG_FILE).exists():
        with contextlib.suppress(ValueError):
            run_config = json.loads((path / CONFIG_FILE).read_text(encoding="utf-8"))
    # Completion order depends on workers and resumes; summing in id order makes the summary bit-for-bit repeatable.
    summary = summarize(sorted(rows, key=lambda r: str(r["id"])))
    latency = sum(float(r.get("latency_s", 0.0)) for r in rows)
    kg_time = sum(float(r.get("kg_time_s", 0.0)) for r in rows)
    llm_time = sum(float(r.get("llm_latency_s", 0.0)) for r in rows)
    n = max(len(rows), 1)
    summary.update({
        "kg_time_s_mean": kg_time / n,
        "kg_calls_mean": sum(int(r.get("kg_calls", 0)) for r in rows) / n,
        "kg_time_share": _share(kg_time, latency),
        "llm_time_share": _share(llm_time, latency),
        "cache_hits_total": sum(int(r.get("cache_hits", 0)) for r in rows),
    })
    for key in ("dataset", "split", "method", "method_config", "llm", "kg", "seed"):
        if key in run_config:
            summary[key] = run_config[key]
    if run_config.get("questions") is not None:
        summary["selected"] = max([int(run_config["questions"]),
                                   *(int(r.get("questions") or 0) for r in run_config.get("resumes", []))])
    if run_facts is None and (path / SUMMARY_FILE).is_file():  # a rebuild keeps the facts of the run that wrote it
        with contextlib.suppress(ValueError, AttributeError):
            run_facts = json.loads((path / SUMMARY_FILE).read_text(encoding="utf-8")).get("run")
    summary["run"] = dict(run_facts or {})
    summary = _finite(summary)
    _write_json(path / SUMMARY_FILE, summary)
    if report:
        from kgqa.eval.report import write_report

        write_report(path, summary, rows, run_config)
    return summary


def _finite(value: Any) -> Any:
    """JSON has no NaN/inf: a summary must load anywhere."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
