"""The evaluation runner: answer a dataset's questions with a method, score each one, and never lose a finished question.

``run_eval(dataset, method=..., llm=..., out=RUNDIR)`` (and ``kgqa eval``) writes config.json, results.jsonl (one
fsynced line per finished question), traces.jsonl, summary.json, report.md and plots into RUNDIR; the files are
described in :mod:`kgqa.eval.rundir`, the summary in :mod:`kgqa.eval.summary`, the report in :mod:`kgqa.eval.report`.

The method: a registered name (default: the config's ``method``) is built by :func:`kgqa.methods.registry.get_method`
from ``method_config`` (validated against the method's config model: an unknown key or a bad value is a
:class:`~kgqa.errors.ConfigError` naming it, raised before anything is loaded or written). What the run loads comes
from the method's needs (:func:`kgqa.methods.base.method_needs`): the KG only if it needs one, the embedder only if it
needs one, the LLM only if it needs one. config.json records ``method_config``, the settings the caller gave, and
``method_config_resolved``, the method's resolved config whole (defaults included). The runner attaches each question's trace and
usage to the prediction itself (:func:`kgqa.methods.base.attach_run_facts`); a method returns only what it decided.

Resuming: with ``resume=True`` the finished ids are read back (a torn last line left by a crash is truncated away)
and skipped, so no question is ever written twice; the run must keep the settings that decide answers (dataset,
split, method and its resolved config, LLM, KG, seed, shuffle). Without ``resume`` a non-empty RUNDIR is refused. A
lock file stops two processes from writing one RUNDIR. ``retry_errors`` (with ``resume``) drops failed rows first and
reruns them.

A question whose method raises is recorded as :meth:`Prediction.failed` with its error and the run goes on; after
``max_consecutive_failures`` failures in a row (a dead model server, a missing KG) the run stops early, writes its
summary and raises :class:`RunStopped`, since the rest would fail the same way.

Time accounting: the KG is wrapped in :class:`~kgqa.eval.kg_timing.TimedKG`, which adds the time of every KG call to
the question being answered, so ``kg_time_s / latency_s`` says how much of a run the KG side costs.

The names tests, benchmarks and the CLI have always imported from here (``read_results``, ``summarize_run``,
``ResultsWriter``, ``TimedKG``, ``parse_method_config`` ...) are re-exported from the modules that now hold them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kgqa import __version__, config
from kgqa.core import MethodContext, Prediction, Question
from kgqa.datasets import dataset_root, load_dataset
from kgqa.errors import ConfigError, DataError, KGError, KGQAError, QueryTimeout
from kgqa.eval.kg_timing import KGClock, TimedKG, kg_clock
from kgqa.eval.metrics import QuestionScore, score_prediction
from kgqa.eval.rundir import (
    CONFIG_FILE,
    REPORT_FILE,
    RESULTS_FILE,
    SUMMARY_FILE,
    TRACES_FILE,
    ResultsWriter,
    RunDirError,
    compact_traces,
    json_default,
    parse_lines,
    read_results,
    refuse_non_empty,
    rewrite_lines,
    run_dir_lock,
    write_json,
)
from kgqa.eval.summary import summarize_run
from kgqa.llm.accounting import RecordedModel, Recorder
from kgqa.methods.base import Method, Needs, attach_run_facts, method_config_dump, method_needs, solve
from kgqa.methods.registry import get_method, parse_method_config
from kgqa.provenance import source_commit

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
    "parse_method_config",
    "read_results",
    "run_eval",
    "summarize_run",
]

#: Settings that decide the answers: a resumed run must keep them, or its results would mix two experiments.
#: Consecutive questions whose every KG call timed out after which a run stops (each waited out every retry).
KG_TIMEOUT_FAILURES = 3
RESUME_KEYS = ("dataset", "split", "method", "method_config_resolved", "llm", "kg", "seed", "shuffle")


class RunStopped(KGQAError):
    """The run stopped early (too many consecutive failures); what finished is saved and a resume continues it."""


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


def _select(dataset: str, split: str, data_dir: str | os.PathLike[str] | None, limit: int | None, seed: int,
            shuffle: bool) -> list[Question]:
    root = dataset_root(dataset, data_dir)
    if not shuffle:  # the loader stops reading at the limit
        return load_dataset(dataset, split, data_dir=root, limit=limit)
    return _sample(load_dataset(dataset, split, data_dir=root), limit, seed, shuffle)


def _sample(questions: Sequence[Question], limit: int | None, seed: int, shuffle: bool) -> list[Question]:
    """The first ``limit`` questions, of a seeded shuffle with ``shuffle`` (the same seed draws the same sample)."""
    selected = list(questions)
    if shuffle:
        random.Random(seed).shuffle(selected)
    return selected if limit is None else selected[:limit]


def _check_limit(limit: int | None) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ConfigError(f"--limit must be a non-negative integer, got {limit!r}")


def _spec_of(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return str(getattr(value, "name", None) or type(value).__name__)


def _build_method(method: str | Method | None, settings: Mapping[str, Any]) -> tuple[Method, str]:
    """The method object and its name: a name (None: the config's ``method``) is built from validated settings."""
    if method is None:
        method = str(config.get("method"))
    if isinstance(method, str):
        name = method.strip().lower()
        return get_method(name, **settings), name
    if settings:
        raise ConfigError("method_config is for a method given by name; configure the method object itself")
    return method, str(getattr(method, "name", None) or type(method).__name__)


def _load_llm(llm: str | ChatModel | None, spec: str | None, recorder: Recorder,
              options: Mapping[str, Any] | None, workers: int = 1) -> ChatModel:
    """The chat model of the run, recorded by ``recorder``: loaded from ``spec``, or the given model wrapped.

    An OpenAI-compatible endpoint gets at least ``workers`` requests in flight unless ``llm_concurrency`` is set: its
    default of 8 would otherwise cap ``--workers 32`` silently. A set limit below ``workers`` is said once.
    """
    if llm is None or isinstance(llm, str):
        from kgqa import config
        from kgqa import llm as llm_layer

        opts = dict(options or {})
        backend = str(spec).partition(":")[0].strip().lower()
        if (backend == "openai" and workers > 1 and "max_concurrency" not in opts
                and config.get("llm_concurrency") in (None, "")):
            opts["max_concurrency"] = max(8, workers)
        model = llm_layer.load(str(spec), recorder=recorder, **opts)
    else:
        model = RecordedModel(llm, recorder)
    limit = getattr(model, "max_concurrency", None)
    if isinstance(limit, int) and not isinstance(limit, bool) and limit < workers:
        print(f"kgqa: note: {workers} workers, but at most {limit} model requests run at once (llm_concurrency / "
              "KGQA_LLM_CONCURRENCY); raise it to use every worker", file=sys.stderr)
    return model


def _artifact_store(needs: Needs) -> Any:
    """The artifact store, for a method that names artifacts; a build it starts says so on stderr."""
    if not needs.artifacts:
        return None
    from kgqa.artifacts import ArtifactStore

    return ArtifactStore(progress=lambda message: print(f"kgqa: {message}", file=sys.stderr))


def _check_resume(run_dir: Path, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    # A run written before configs were resolved has no resolved config: compare the settings it was given instead,
    # and say that the method's defaults of then cannot be checked (a default may have changed since).
    keys = RESUME_KEYS if "method_config_resolved" in old else (*RESUME_KEYS, "method_config")
    if "method_config_resolved" not in old:
        print(f"kgqa: warning: {run_dir} was written by an older kgqa that did not record the method's resolved "
              f"config; resuming with today's defaults ({_canonical(new.get('method_config_resolved'))}), which "
              "may differ from the run's. Start a new run if they do.", file=sys.stderr)
    diffs = [f"{k}: {old.get(k)!r} (run) vs {new.get(k)!r} (now)" for k in keys
             if k in old and _canonical(old.get(k)) != _canonical(new.get(k))]
    if diffs:
        raise RunDirError(f"cannot resume {run_dir} with different settings ({'; '.join(diffs)}); "
                          "resume with the run's settings or choose another --out")


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=json_default)


_SCORE_FIELDS = tuple(f.name for f in dataclasses.fields(QuestionScore))


def question_row(question: Question, prediction: Prediction, score: QuestionScore) -> dict[str, Any]:
    """The results.jsonl row of one scored question: question, answers, gold, every score, and the breakdown facts
    (``hops``, ``qtype``). A run adds its timings; an imported run (``kgqa eval import-run``) its source line."""
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
    for key in ("hops", "qtype"):
        if question.metadata.get(key) is not None:
            row[key] = question.metadata[key]
    return row


def _row(question: Question, prediction: Prediction, score: QuestionScore, clock: KGClock, usage: Mapping[str, Any]) -> dict:
    row = question_row(question, prediction, score)
    row["llm_latency_s"] = float(usage.get("latency_s", 0.0))
    row["cache_hits"] = int(usage.get("cache_hits", 0))
    row["retries"] = int(usage.get("retries", 0))
    row["unreadable_replies"] = int(usage.get("unreadable_replies", 0))
    row["kg_time_s"] = clock.seconds
    row["kg_calls"] = clock.calls
    row["kg_timeouts"] = clock.timeouts
    return row


class _Solver:
    """Answers and scores one question at a time (thread-safe: per-question state lives in locals)."""

    def __init__(self, method: Method, base: MethodContext, recorder: Recorder, *, record_calls: bool = False) -> None:
        self.method = method
        self.base = base
        self.recorder = recorder
        self.record_calls = record_calls

    def __call__(self, question: Question) -> tuple[dict[str, Any], dict[str, Any]]:
        if not self.record_calls:
            return self._solve(question)
        from kgqa.llm.calls import CALLS, CallLog

        log = CallLog()
        token = CALLS.set(log)
        try:
            row, trace_row = self._solve(question)
        finally:
            CALLS.reset(token)
        trace_row["llm_calls"] = log.calls
        if log.dropped:
            trace_row["llm_calls_dropped"] = log.dropped
        return row, trace_row

    def _solve(self, question: Question) -> tuple[dict[str, Any], dict[str, Any]]:
        ctx = self.base.for_question()
        tb: str | None = None
        started = time.perf_counter()
        with kg_clock() as clock:
            try:
                # solve() answers inside the recorder's scope of the question and attaches the trace and the usage.
                prediction = solve(self.method, question, ctx, recorder=self.recorder, scope=question.id)
            except Exception as exc:  # a failing question is recorded, never fatal to the run
                tb = traceback.format_exc()
                prediction = attach_run_facts(Prediction.failed(f"{type(exc).__name__}: {exc}", trace=list(ctx.trace)),
                                              ctx, recorder=self.recorder, scope=question.id)
        latency = time.perf_counter() - started
        self.recorder.release(question.id)
        try:
            score = score_prediction(question, prediction, latency_s=latency)
        except Exception as exc:  # e.g. a method returned a malformed answer: record it as that question's failure
            tb = traceback.format_exc()
            prediction = Prediction.failed(f"scoring failed: {type(exc).__name__}: {exc}", usage=prediction.usage,
                                           trace=prediction.trace)
            score = score_prediction(question, prediction, latency_s=latency)
        row = _row(question, prediction, score, clock, prediction.usage)
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
    method: str | Method | None = None,
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
    kg_options: Mapping[str, Any] | None = None,
    record_calls: bool = False,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> EvalRun:
    """Evaluate ``method`` on ``dataset``/``split`` into the run directory ``out`` (see the module docstring).

    ``method`` is a registered name built with ``method_config`` (None: the config's ``method``) or a method object
    (whose own config is recorded; ``method_config`` is then refused). What the method needs (``method_needs``)
    decides what is loaded: ``llm`` a model spec (default: config ``llm``) or a chat model, only if it needs an LLM;
    ``kg`` a KG spec or object (default: config ``kg``), only if it needs a KG; ``embedder`` a spec or object, only if
    it needs an embedder. ``questions`` replaces the dataset loader (``dataset`` is then only a label). ``limit`` takes
    the first N questions in file order, or a seeded random N with ``shuffle``. ``fsync`` is the durability of
    results.jsonl (see :class:`ResultsWriter`). ``record_calls`` keeps every LLM call's prompt and reply in the
    question's traces.jsonl line (``llm_calls``; the trace viewer shows them). ``on_row`` is called with each row once
    written. Raises
    :class:`~kgqa.errors.ConfigError` for a bad method setting (before anything is written), :class:`RunDirError` for
    an unusable RUNDIR and :class:`RunStopped` after too many consecutive failures.
    """
    started_wall = time.time()
    started = time.perf_counter()
    _check_limit(limit)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"--workers must be a positive integer, got {workers!r}")
    if retry_errors and not resume:
        raise ConfigError("--retry-errors only makes sense with --resume")
    if fsync not in ResultsWriter.MODES:
        raise ConfigError(f"fsync must be one of {', '.join(ResultsWriter.MODES)}, got {fsync!r}")
    settings = dict(method_config or {})
    method_obj, method_name = _build_method(method, settings)
    resolved_config = method_config_dump(method_obj) or settings  # a plain object without a config: what was given
    run_dir = Path(out).expanduser()
    if not resume:
        refuse_non_empty(run_dir)  # before loading anything: a mistyped --out should fail fast
    llm_spec = _spec_of(llm) if llm is not None else str(config.get("llm"))
    needs = method_needs(method_obj, llm_spec)
    if not needs.llm:
        llm_spec = None
    kg_spec = (_spec_of(kg) if kg is not None else str(config.get("kg"))) if needs.kg else None
    if needs.embedder and embedder is None:
        raise ConfigError(f"method {method_name!r} needs an embedder; give one (--embedder SPEC)")

    if questions is None:
        selected = _select(dataset, split, data_dir, limit, seed, shuffle)
    else:
        selected = _sample(questions, limit, seed, shuffle)
    seen: set[str] = set()
    for q in selected:
        if q.id in seen:
            raise DataError(f"question id {q.id!r} occurs twice in {dataset}/{split}; results are keyed by id")
        seen.add(q.id)

    # Build what the questions need before touching the run directory, so a bad spec leaves nothing behind.
    recorder = Recorder()
    model = _load_llm(llm, llm_spec, recorder, llm_options, workers) if needs.llm else None
    if record_calls and model is not None:
        from kgqa.llm.calls import CapturingModel

        model = CapturingModel(model)  # every call's prompt and reply into the question's trace line
    kg_obj: Any = None
    owns_kg = False
    if needs.kg and kg is not None and not isinstance(kg, str):
        kg_obj = kg
    elif kg_spec is not None:
        from kgqa.kg import open_kg

        if kg_options and not str(kg_spec).strip().startswith(("http://", "https://", "endpoint:")):
            raise ConfigError(f"SPARQL options ({', '.join(sorted(kg_options))}) were given but the KG {kg_spec!r} is "
                              "not a SPARQL endpoint URL")
        kg_obj, owns_kg = open_kg(kg_spec, **dict(kg_options or {})), True
    text_embedder: Any = None
    if needs.embedder and isinstance(embedder, str):
        from kgqa.text import load_embedder

        text_embedder = load_embedder(embedder)
    elif needs.embedder:
        text_embedder = embedder
    artifacts = _artifact_store(needs)
    if run_dir.exists() and not run_dir.is_dir():
        raise RunDirError(f"--out {run_dir} exists and is not a directory")
    run_dir.mkdir(parents=True, exist_ok=True)
    results_path, traces_path, config_path = run_dir / RESULTS_FILE, run_dir / TRACES_FILE, run_dir / CONFIG_FILE

    run_config: dict[str, Any] = {
        "dataset": dataset, "split": split, "method": method_name, "method_config": settings,
        "method_config_resolved": resolved_config, "llm": llm_spec, "kg": kg_spec, "embedder": None, "seed": seed,
        "shuffle": shuffle, "limit": limit, "workers": workers,
        "data_dir": None if questions is not None else str(dataset_root(dataset, data_dir)),
        "questions": len(selected), "kgqa_version": __version__, "kgqa_commit": source_commit(),
        "python": sys.version.split()[0],
        "started_at": datetime.fromtimestamp(started_wall, UTC).isoformat(timespec="seconds"),
        "argv": list(sys.argv),
    }

    with run_dir_lock(run_dir):
        if not resume:
            refuse_non_empty(run_dir)
        previous = parse_lines(results_path, repair=True)
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
                rewrite_lines(results_path, kept)
                previous = kept
        done = {r["id"] for r in previous}
        compact_traces(traces_path, done)
        pending = [q for q in selected if q.id not in done]

        if text_embedder is not None and not run_config.get("embedder"):
            run_config["embedder"] = _spec_of(embedder)
        if kg_obj is not None and pending:
            run_config["topic_coverage"] = _topic_coverage(kg_obj, pending)
        write_json(config_path, run_config)

        base = MethodContext(kg=TimedKG(kg_obj) if kg_obj is not None else None,  # type: ignore[arg-type]
                             llm=model, embedder=text_embedder, seed=seed, recorder=recorder,  # type: ignore[arg-type]
                             artifacts=artifacts)
        solver = _Solver(method_obj, base, recorder, record_calls=record_calls and model is not None)
        bar = _Progress(len(selected), [r for r in previous if r["id"] in seen], enabled=progress,
                        label=f"{method_name} {dataset}")
        answered = failed = 0
        stop_reason: str | None = None
        loop_started = time.perf_counter()
        with ResultsWriter(results_path, fsync=fsync) as results, ResultsWriter(traces_path, fsync="none") as traces:
            consecutive = kg_stalls = 0

            def finish(row: dict[str, Any], trace_row: dict[str, Any]) -> bool:
                """Write one finished question; False when the run should stop."""
                nonlocal answered, failed, consecutive, kg_stalls, stop_reason
                traces.write(trace_row)  # before the result: a result line always has its trace
                results.write(row)
                answered += 1
                bar.add(row)
                if on_row is not None:
                    on_row(row)
                # A question whose every KG call timed out (failed, or answered by a method's fallback) waited out
                # every retry of every query: a few in a row mean the KG is not answering.
                stalled = (str(row.get("error") or "").startswith(QueryTimeout.__name__)
                           or 0 < int(row.get("kg_calls", 0)) == int(row.get("kg_timeouts", 0)))
                kg_stalls = kg_stalls + 1 if stalled else 0
                if max_consecutive_failures and kg_stalls >= min(max_consecutive_failures, KG_TIMEOUT_FAILURES):
                    stop_reason = (f"stopped after {kg_stalls} consecutive questions whose every KG query timed out: "
                                   f"the KG {run_config.get('kg')} is not answering; raise --kg-timeout or check it")
                if row.get("error"):
                    failed += 1
                    consecutive += 1
                    if max_consecutive_failures and consecutive >= max_consecutive_failures and stop_reason is None:
                        stop_reason = (f"stopped after {consecutive} consecutive failed questions (last: "
                                       f"{row['error'][:300]})")
                else:
                    consecutive = 0
                return stop_reason is None

            try:
                if workers == 1:
                    for question in pending:
                        if not finish(*solver(question)):
                            break
                else:
                    _run_pool(pending, solver, finish, workers)
            finally:
                bar.close()
        loop_s = time.perf_counter() - loop_started
        endpoint = getattr(model, "endpoint_settings", None)
        if callable(endpoint):
            # What the endpoint turned out to accept (structured-output mode, token parameter), learned during the run.
            endpoint_info = endpoint()
            # A resumed run answered from the cache learns nothing: it keeps what an earlier invocation recorded.
            if endpoint_info.get("structured_mode_source") != "untested" or "llm_structured_mode" not in run_config:
                run_config["llm_structured_mode"] = endpoint_info.get("structured_mode")
                run_config["llm_endpoint"] = endpoint_info
                write_json(config_path, run_config)

        summary = summarize_run(run_dir, report=report, run_facts={
            "wall_s": round(time.perf_counter() - started, 3), "loop_s": round(loop_s, 3),
            "answered": answered, "failed": failed, "skipped": len(selected) - len(pending),
            "selected": len(selected), "workers": workers,
            "questions_per_s": round(answered / loop_s, 2) if loop_s > 0 and answered else None,
            "complete": answered == len(pending), "stopped": stop_reason,
            "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
            # which trained or built artifacts the answers came from (name and content digest)
            "artifacts": [{"name": ref.name, "digest": ref.digest} for ref in artifacts.used()] if artifacts else [],
        })
    if owns_kg:
        with contextlib.suppress(Exception):  # closing is best effort; the results are written
            kg_obj.close()
    files = {"results": results_path, "traces": traces_path, "config": config_path, "summary": run_dir / SUMMARY_FILE}
    if report:
        files["report"] = run_dir / REPORT_FILE
    run = EvalRun(run_dir, summary, len(selected), len(selected) - len(pending), answered, failed,
                  time.perf_counter() - started, files)
    if stop_reason is not None:
        raise RunStopped(f"{stop_reason}. The {answered} questions answered are saved in {run_dir}; fix the cause, "
                         "then continue with --resume --retry-errors.")
    return run


def _run_pool(pending: Sequence[Question], solver: _Solver,
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
                in_flight.add(pool.submit(solver, question))
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
        except QueryTimeout as exc:
            # One lookup of one id ran out of time after every retry: the endpoint is not answering, and each question
            # would wait as long. Stop before the first question rather than warn about coverage.
            raise KGError(f"the KG is not answering ({exc}); no question was run. Check the endpoint, or give it "
                          "more time with --kg-timeout / KGQA_KG_TIMEOUT") from None
        except KGQAError:
            continue
    if checked and not covered:
        print(f"kgqa: warning: none of the {checked} questions checked has a topic entity in the KG; is --kg the KG "
              "of this dataset? (for MetaQA: kgqa kg import DATA/metaqa/kb.txt --out DIR, then --kg DIR)",
              file=sys.stderr)
    return {"checked": checked, "covered": covered}


