"""The evaluation runner: answer a dataset's questions with a method, score each one, and never lose a finished question.

``run_eval(dataset, method=..., llm=..., out=RUNDIR)`` (and ``kgqa eval``) writes config.json, results.jsonl (one
fsynced line per finished question), traces.jsonl, summary.json, report.md and plots into RUNDIR; the files are
described in :mod:`kgqa.eval.rundir`, the summary in :mod:`kgqa.eval.summary`, the report in :mod:`kgqa.eval.report`.

The method: a registered name (default: the config's ``method``) is built by :func:`kgqa.methods.registry.get_method`
from ``method_config`` (validated against the method's config model: an unknown key or a bad value is a
:class:`~kgqa.errors.ConfigError` naming it, raised before anything is loaded or written). What the run loads comes
from the method's needs (:func:`kgqa.methods.base.method_needs`): the KG only if it needs one, the embedder only if it
needs one, the LLM only if it needs one. config.json records ``method_config``, the settings the caller gave, and
``method_config_resolved``, the method's resolved config whole (defaults included), and ``method_label``, the name its
figures are reported under (:func:`kgqa.methods.base.method_label`: FoG's graph mode is ``fog[graph]``; ``method``
keeps the registered name). The runner attaches each question's trace and usage to the prediction itself
(:func:`kgqa.methods.base.attach_run_facts`); a method returns only what it decided.

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
import json
import os
import random
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kgqa import __version__, config
from kgqa.core import Question
from kgqa.datasets import dataset_root, load_dataset
from kgqa.deadline import DeadlineExceeded, question_deadline
from kgqa.errors import ConfigError, DataError, KGError, KGQAError, QueryTimeout
from kgqa.eval.kg_timing import KGClock, TimedKG
from kgqa.eval.ledger import record_test_run, test_looks
from kgqa.eval.progress import RunProgress
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
from kgqa.eval.solver import UNREADABLE_ERROR, QuestionSolver
from kgqa.eval.summary import summarize_run
from kgqa.llm.accounting import Recorder
from kgqa.methods.base import Method, Needs, method_config_dump, method_label, method_needs
from kgqa.methods.context import Resources, build_context
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
    unreadable: int = 0  # of the failed, those whose only error is a reply still unreadable after its re-ask


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
    # --limit 0 would write an empty run that reports Hits@1 0.0 as if it had measured something
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"--limit must be a whole number >= 1 (the questions to answer), got {limit!r}")


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
    timeout: float | None = None,
) -> EvalRun:
    """Evaluate ``method`` on ``dataset``/``split`` into the run directory ``out`` (see the module docstring).

    ``method`` is a registered name built with ``method_config`` (None: the config's ``method``) or a method object
    (whose own config is recorded; ``method_config`` is then refused). What the method needs (``method_needs``)
    decides what is loaded (:func:`kgqa.methods.context.build_context`): ``llm`` a model spec (default: config
    ``llm``) or a chat model, only if it needs an LLM; ``kg`` a KG spec or object (default: config ``kg``), only if it
    needs a KG; ``embedder`` a spec or object, only if it needs an embedder. ``questions`` replaces the dataset loader
    (``dataset`` is then only a label). ``limit`` takes the first N questions in file order, or a seeded random N with
    ``shuffle``. ``fsync`` is the durability of results.jsonl (see :class:`ResultsWriter`). ``record_calls`` keeps
    every LLM call's prompt and reply in the question's traces.jsonl line (``llm_calls``; the trace viewer shows
    them). ``on_row`` is called with each row once written. ``timeout`` is each question's deadline in seconds, shared
    by its KG queries and LLM calls (:mod:`kgqa.deadline`; None: none); a question past it is recorded as failed with
    ``DeadlineExceeded``, which ``--retry-errors`` runs again. Raises :class:`~kgqa.errors.ConfigError` for a bad method
    setting (before anything is written), :class:`RunDirError` for an unusable RUNDIR and :class:`RunStopped` after
    too many consecutive failures.
    """
    started_wall, started = time.time(), time.perf_counter()
    _check_arguments(limit, workers, resume, retry_errors, fsync)
    if timeout is not None and not (isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0):
        raise ConfigError(f"timeout must be a positive number of seconds (None: no deadline), got {timeout!r}")
    settings = dict(method_config or {})
    method_obj, method_name = _build_method(method, settings)
    run_dir = Path(out).expanduser()
    if not resume:
        refuse_non_empty(run_dir)  # before loading anything: a mistyped --out should fail fast
    resources = Resources(kg=kg, llm=llm, embedder=embedder, kg_options=dict(kg_options or {}),
                          capture_calls=record_calls, progress=_say)
    needs = method_needs(method_obj, resources.llm_spec)
    label = method_label(method_obj, resources.llm_spec, method_name)  # what the figures are reported under
    resources.llm_options = _llm_options(resources.llm_spec, llm_options, workers) if needs.llm else {}
    selected = _questions(dataset, split, data_dir, questions, limit, seed, shuffle)
    checks = _method_checks(method_obj, dataset, split, selected)  # e.g. SRP refuses references from this split
    # Build what the questions need before touching the run directory, so a bad spec leaves nothing behind.
    recorder = Recorder()
    base = build_context(needs, resources, seed=seed, recorder=recorder)
    check_ready = getattr(method_obj, "check_ready", None)
    if callable(check_ready):
        check_ready(base)  # e.g. a scorer method on a KG with none: one error, not one per question
    _note_concurrency(base.llm, workers)
    run_config = _run_config(dataset, split, method_name, settings, method_config_dump(method_obj) or settings,
                             needs, resources, seed=seed, shuffle=shuffle, limit=limit, workers=workers,
                             data_dir=None if questions is not None else str(dataset_root(dataset, data_dir)),
                             selected=len(selected), started_wall=started_wall)
    run_config["method_label"] = label
    if "ablation" in checks:
        run_config["ablation"] = checks.pop("ablation")
    if checks:
        run_config["method_checks"] = checks
    run_config["question_timeout"] = timeout  # each question's deadline in seconds (None: none)
    if run_dir.exists() and not run_dir.is_dir():
        raise RunDirError(f"--out {run_dir} exists and is not a directory")
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        with run_dir_lock(run_dir):
            pending, previous, run_config = _open_run(run_dir, run_config, selected, base.kg, resume=resume,
                                                      retry_errors=retry_errors, timeout=timeout)
            solver = QuestionSolver(method_obj, base, recorder, record_calls=record_calls and base.llm is not None,
                                    timeout=timeout)
            bar = RunProgress(len(selected), [r for r in previous if r["id"] in {q.id for q in selected}],
                            enabled=progress, label=f"{label} {dataset}")
            loop = _RunLoop(run_dir, bar, on_row, max_consecutive_failures, kg=run_config.get("kg"), fsync=fsync)
            loop.answer(pending, solver, workers)
            _record_endpoint(run_dir, run_config, base.llm)
            facts = _run_facts(loop, selected, pending, workers, started, base.artifacts)
            # a test split: how often it has been looked at, this run counted (a resume that answers nothing is no look)
            looks = test_looks(run_config) if loop.answered else None
            if looks is not None:
                facts["test_ledger"] = looks
            summary = summarize_run(run_dir, report=report, run_facts=facts)
            if looks is not None:
                record_test_run(run_config, summary, run_dir)
    finally:
        with contextlib.suppress(Exception):  # closing is best effort; the results are written
            resources.close()
    return _finished(run_dir, summary, selected, pending, loop, report, started)


def _run_facts(loop: _RunLoop, selected: Sequence[Question], pending: Sequence[Question], workers: int,
               started: float, artifacts: Any) -> dict[str, Any]:
    """How this invocation went, for summary.json: counts, times, whether it stopped, the artifacts it used."""
    return {
        "wall_s": round(time.perf_counter() - started, 3), "loop_s": round(loop.seconds, 3),
        "answered": loop.answered, "failed": loop.failed, "unreadable": loop.unreadable,
        "skipped": len(selected) - len(pending),
        "selected": len(selected), "workers": workers,
        "questions_per_s": round(loop.answered / loop.seconds, 2) if loop.seconds > 0 and loop.answered else None,
        "complete": loop.answered == len(pending), "stopped": loop.stop_reason,
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        # which trained or built artifacts the answers came from (name and content digest)
        "artifacts": [{"name": ref.name, "digest": ref.digest} for ref in artifacts.used()] if artifacts else [],
    }


def _method_checks(method: Method, dataset: str, split: str, questions: Sequence[Question]) -> dict[str, Any]:
    """What the method checks and records about the run before its first question (its optional ``check_run``: SRP
    refuses references drawn from the run's dataset and split), for config.json; ``ablation`` says how the run departs
    from the method's paper (summary.json repeats it)."""
    check = getattr(method, "check_run", None)
    return dict(check(dataset=dataset, split=split, questions=questions) or {}) if callable(check) else {}


def _check_arguments(limit: int | None, workers: int, resume: bool, retry_errors: bool, fsync: str) -> None:
    """The run's own arguments, checked before anything is loaded."""
    _check_limit(limit)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"--workers must be a positive integer, got {workers!r}")
    if retry_errors and not resume:
        raise ConfigError("--retry-errors only makes sense with --resume")
    if fsync not in ResultsWriter.MODES:
        raise ConfigError(f"fsync must be one of {', '.join(ResultsWriter.MODES)}, got {fsync!r}")


def _say(message: str) -> None:
    """A line for the user on stderr (an artifact build, a note on the run's settings)."""
    print(f"kgqa: {message}", file=sys.stderr)


def _questions(dataset: str, split: str, data_dir: str | os.PathLike[str] | None,
               questions: Sequence[Question] | None, limit: int | None, seed: int, shuffle: bool) -> list[Question]:
    """The questions of the run (the dataset's, or those given), each id once."""
    selected = _select(dataset, split, data_dir, limit, seed, shuffle) if questions is None else \
        _sample(questions, limit, seed, shuffle)
    seen: set[str] = set()
    for q in selected:
        if q.id in seen:
            raise DataError(f"question id {q.id!r} occurs twice in {dataset}/{split}; results are keyed by id")
        seen.add(q.id)
    return selected


def _llm_options(spec: str, given: Mapping[str, Any] | None, workers: int) -> dict[str, Any]:
    """The model's options: an OpenAI-compatible endpoint gets at least ``workers`` requests in flight unless
    ``llm_concurrency`` is set (its default of 8 would otherwise cap ``--workers 32`` silently)."""
    options = dict(given or {})
    backend = str(spec).partition(":")[0].strip().lower()
    if (backend == "openai" and workers > 1 and "max_concurrency" not in options
            and config.get("llm_concurrency") in (None, "")):
        options["max_concurrency"] = max(8, workers)
    return options


def _note_concurrency(model: Any, workers: int) -> None:
    """Say once when a set limit on the model's requests keeps some workers waiting."""
    limit = getattr(model, "max_concurrency", None) if model is not None else None
    if isinstance(limit, int) and not isinstance(limit, bool) and limit < workers:
        _say(f"note: {workers} workers, but at most {limit} model requests run at once (llm_concurrency / "
             "KGQA_LLM_CONCURRENCY); raise it to use every worker")


def _run_config(dataset: str, split: str, method_name: str, settings: Mapping[str, Any], resolved: Any, needs: Needs,
                resources: Resources, *, seed: int, shuffle: bool, limit: int | None, workers: int,
                data_dir: str | None, selected: int, started_wall: float) -> dict[str, Any]:
    """config.json of a new run: what decides the answers (dataset, method and its resolved config, model, KG, seed)
    and how the run was made."""
    return {
        "dataset": dataset, "split": split, "method": method_name, "method_config": dict(settings),
        "method_config_resolved": resolved, "llm": resources.llm_spec if needs.llm else None,
        "kg": resources.kg_spec if needs.kg else None,
        "embedder": resources.embedder_spec if needs.embedder else None, "seed": seed,
        "shuffle": shuffle, "limit": limit, "workers": workers, "data_dir": data_dir,
        "questions": selected, "kgqa_version": __version__, "kgqa_commit": source_commit(),
        "python": sys.version.split()[0],
        "started_at": datetime.fromtimestamp(started_wall, UTC).isoformat(timespec="seconds"),
        "argv": list(sys.argv),
    }


def _open_run(run_dir: Path, run_config: dict[str, Any], selected: Sequence[Question], kg: Any, *, resume: bool,
              retry_errors: bool, timeout: float | None = None) -> tuple[list[Question], list[dict[str, Any]],
                                                                          dict[str, Any]]:
    """Read what the run directory holds (under its lock) and write its config.json: the questions still to answer,
    the rows already written and the run's config (a resumed run keeps its own, with this invocation appended to
    ``resumes``; how many topics the KG has, when it has one)."""
    results_path, config_path = run_dir / RESULTS_FILE, run_dir / CONFIG_FILE
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
        # the label is today's: the resume check kept method, resolved config and model (a run written before labels
        # were recorded gets one)
        run_config = {**old_config, "embedder": old_config.get("embedder") or run_config.get("embedder"),
                      "method_label": run_config.get("method_label") or old_config.get("method_label")}
    if retry_errors:
        kept = [r for r in previous if not r.get("error")]
        if len(kept) != len(previous):
            rewrite_lines(results_path, kept)
            previous = kept
    done = {r["id"] for r in previous}
    compact_traces(run_dir / TRACES_FILE, done)
    pending = [q for q in selected if q.id not in done]
    if kg is not None and pending:
        run_config["topic_coverage"] = _topic_coverage(kg, pending, timeout=timeout)
    write_json(run_dir / CONFIG_FILE, run_config)
    return pending, previous, run_config


class _RunLoop:
    """Answers the pending questions (one at a time, or on a pool of ``workers``), writes each row as it finishes and
    decides when the run must stop: ``max_failures`` failed questions in a row, or a few whose every KG query timed
    out (each waited out every retry: the KG is not answering)."""

    def __init__(self, run_dir: Path, bar: RunProgress, on_row: Callable[[dict[str, Any]], None] | None,
                 max_failures: int, *, kg: Any, fsync: str) -> None:
        self.run_dir, self.bar, self.on_row, self.max_failures, self.kg, self.fsync = (run_dir, bar, on_row,
                                                                                       max_failures, kg, fsync)
        self.answered = self.failed = self.unreadable = self.consecutive = self.kg_stalls = 0
        self.stop_reason: str | None = None
        self.seconds = 0.0

    def answer(self, pending: Sequence[Question], solver: QuestionSolver, workers: int) -> None:
        started = time.perf_counter()
        with ResultsWriter(self.run_dir / RESULTS_FILE, fsync=self.fsync) as results, \
                ResultsWriter(self.run_dir / TRACES_FILE, fsync="none") as traces:
            def finish(row: dict[str, Any], trace_row: dict[str, Any]) -> bool:
                traces.write(trace_row)  # before the result: a result line always has its trace
                results.write(row)
                return self._finished(row)

            try:
                if workers == 1:
                    for question in pending:
                        if not finish(*solver(question)):
                            break
                else:
                    _run_pool(pending, solver, finish, workers)
            finally:
                self.bar.close()
        self.seconds = time.perf_counter() - started

    def _finished(self, row: dict[str, Any]) -> bool:
        """Count one written question; False when the run should stop."""
        self.answered += 1
        self.bar.add(row)
        if self.on_row is not None:
            self.on_row(row)
        stalled = (str(row.get("error") or "").startswith(QueryTimeout.__name__)
                   or 0 < int(row.get("kg_calls", 0)) == int(row.get("kg_timeouts", 0)))
        self.kg_stalls = self.kg_stalls + 1 if stalled else 0
        if self.max_failures and self.kg_stalls >= min(self.max_failures, KG_TIMEOUT_FAILURES):
            self.stop_reason = (f"stopped after {self.kg_stalls} consecutive questions whose every KG query timed "
                                f"out: the KG {self.kg} is not answering; raise --kg-timeout or check it")
        if str(row.get("error") or "").startswith(UNREADABLE_ERROR):
            # the model answered, unreadably: a question to ask again (--retry-errors), not a sign that the model or
            # the KG is gone, so it neither counts towards the consecutive failures that stop a run nor resets them
            self.failed += 1
            self.unreadable += 1
        elif row.get("error"):
            self.failed += 1
            self.consecutive += 1
            if self.max_failures and self.consecutive >= self.max_failures and self.stop_reason is None:
                self.stop_reason = (f"stopped after {self.consecutive} consecutive failed questions (last: "
                                    f"{row['error'][:300]})")
        else:
            self.consecutive = 0
        return self.stop_reason is None


def _record_endpoint(run_dir: Path, run_config: dict[str, Any], model: Any) -> None:
    """What the endpoint turned out to accept (structured-output mode, token parameter), learned during the run, into
    config.json; a resumed run answered from the cache learns nothing and keeps what an earlier one recorded."""
    endpoint = getattr(model, "endpoint_settings", None) if model is not None else None
    if not callable(endpoint):
        return
    info = endpoint()
    if info.get("structured_mode_source") != "untested" or "llm_structured_mode" not in run_config:
        run_config["llm_structured_mode"] = info.get("structured_mode")
        run_config["llm_endpoint"] = info
        write_json(run_dir / CONFIG_FILE, run_config)


def _finished(run_dir: Path, summary: dict[str, Any], selected: Sequence[Question], pending: Sequence[Question],
              loop: _RunLoop, report: bool, started: float) -> EvalRun:
    """The run's account, or :class:`RunStopped` when it stopped early (what finished is saved)."""
    files = {"results": run_dir / RESULTS_FILE, "traces": run_dir / TRACES_FILE, "config": run_dir / CONFIG_FILE,
             "summary": run_dir / SUMMARY_FILE}
    if report:
        files["report"] = run_dir / REPORT_FILE
    if loop.stop_reason is not None:
        raise RunStopped(f"{loop.stop_reason}. The {loop.answered} questions answered are saved in {run_dir}; fix the "
                         "cause, then continue with --resume --retry-errors.")
    return EvalRun(run_dir, summary, len(selected), len(selected) - len(pending), loop.answered, loop.failed,
                   time.perf_counter() - started, files, loop.unreadable)


def _run_pool(pending: Sequence[Question], solver: QuestionSolver,
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


def _topic_coverage(kg: Any, questions: Sequence[Question], sample: int = 50, *,
                    timeout: float | None = None) -> dict[str, Any]:
    """How many of the first ``sample`` questions have a topic entity in the KG (a wrong --kg shows up as 0); each
    question's lookups get the question deadline ``timeout``, as its answering would."""
    checked = covered = 0
    for q in questions[:sample]:
        if not q.topic_entities:
            continue
        checked += 1
        try:
            with question_deadline(timeout):
                if any(kg.has_entity(t.id) for t in q.topic_entities):
                    covered += 1
        except (QueryTimeout, DeadlineExceeded) as exc:
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


