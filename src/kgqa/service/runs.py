"""The run directories under ``--runs``, read-only: listing, summaries, questions filtered and paged, one question
with its trace, and two runs side by side. The metrics a listing and a summary show are the registered ones
(:mod:`kgqa.eval.metric_registry`): the headline metrics in the listing, those shown in the service in a summary.

A run id is the name of a directory directly under the runs root; it is checked against a strict pattern and the
resolved path must sit directly in the root (a symlink out of it is refused), so no id reaches outside. Every file
served is confined the same way: a run whose results, summary, config or traces file resolves to anywhere but directly
inside the run's own directory (a symlink to /etc/passwd, to another run, to a subdirectory) is refused as a whole
and left out of the listing. Files are read
through :mod:`kgqa.eval.rundir` and :func:`kgqa.eval.report.load_summary` and cached by their size and modification
time, so a run still being written shows its new questions on the next request.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from kgqa.eval.metric_registry import Place, Section, shown_in
from kgqa.eval.report import load_summary
from kgqa.eval.rundir import CONFIG_FILE, RESULTS_FILE, SUMMARY_FILE, TRACES_FILE, read_config, read_results
from kgqa.normalize import normalize_answer

T = TypeVar("T")

RUN_ID_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+@=-]{0,127}$")
#: A question id is only looked up, never a path; still, no control characters, separators or dot-only names.
QID_RE = re.compile(r"^[^\x00-\x1f\x7f/\\]{1,256}$")
FILTERS = ("all", "right", "wrong", "failed")
#: Every file of a run the service reads (each must resolve directly inside the run's directory).
SERVED_FILES = (RESULTS_FILE, SUMMARY_FILE, CONFIG_FILE, TRACES_FILE)


class NotFound(LookupError):
    """No such run, question or trace (answered 404)."""


class BadId(ValueError):
    """An id that can never name anything here (answered 400)."""


def check_run_id(run: str) -> str:
    if not RUN_ID_RE.match(run) or ".." in run:
        raise BadId(f"run id {run[:80]!r} is not valid: a directory name under --runs (letters, digits, _ . + @ = -)")
    return run


def check_qid(qid: str) -> str:
    if not QID_RE.match(qid) or qid.strip(".") == "":
        raise BadId(f"question id {qid[:80]!r} is not valid")
    return qid


def verdict(row: dict[str, Any]) -> str:
    """``failed`` (the method raised), ``right`` (strict Hits@1) or ``wrong``."""
    if row.get("error"):
        return "failed"
    return "right" if float(row.get("hit1") or 0) >= 1.0 else "wrong"


def _stamp(*paths: Path) -> tuple[Any, ...]:
    out: list[Any] = []
    for p in paths:
        try:
            st = p.stat()
            out.append((st.st_size, st.st_mtime_ns))
        except OSError:
            out.append(None)
    return tuple(out)


class _Cache:
    """Values by (key, file stamps): recomputed when a file changes. Bounded, oldest out."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._data: dict[Any, tuple[tuple[Any, ...], Any]] = {}
        self._lock = threading.Lock()

    def get(self, key: Any, stamp: tuple[Any, ...], make: Callable[[], T]) -> T:
        with self._lock:
            hit = self._data.get(key)
            if hit is not None and hit[0] == stamp:
                return hit[1]  # type: ignore[no-any-return]
        value = make()
        with self._lock:
            self._data.pop(key, None)
            self._data[key] = (stamp, value)
            while len(self._data) > self.size:
                self._data.pop(next(iter(self._data)))
        return value


def headline_metrics() -> list[dict[str, Any]]:
    """The run list's metric columns: the registered headline metrics, described (name, labels, format ...)."""
    return [metric.describe() for metric in shown_in(Place.HEADLINE)]


def summary_metrics(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """A run summary's metrics: those registered to be shown in the service, by section, each described and with its
    ``value`` in ``summary`` (None when the run's summary predates the metric)."""
    return [{**metric.describe(), "value": summary.get(metric.name)}
            for section in Section for metric in shown_in(Place.SERVICE, (section,))]


def _row_brief(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": row.get("id"), "question": row.get("question"), "answers": list(row.get("answers") or [])[:10],
            "n_answers": len(row.get("answers") or []), "gold": list(row.get("gold") or [])[:10],
            "hit1": row.get("hit1"), "legacy_hit1": row.get("legacy_hit1"), "f1": row.get("f1"),
            "grounding": row.get("grounding"), "error": row.get("error"), "verdict": verdict(row),
            "llm_calls": row.get("llm_calls"), "latency_s": row.get("latency_s")}


class RunStore:
    """Read-only access to the run directories directly under ``root`` (None: no runs are served)."""

    def __init__(self, root: Path | None) -> None:
        self.root = None if root is None else Path(root).resolve()
        self._rows = _Cache()
        self._traces = _Cache()
        self._summaries = _Cache(256)

    # -- locating ------------------------------------------------------------------------------------------------

    def path(self, run: str) -> Path:
        check_run_id(run)
        if self.root is None:
            raise NotFound("this server was started without --runs")
        path = (self.root / run).resolve()
        if path.parent != self.root or not path.is_dir():
            raise NotFound(f"no run {run!r} under --runs")
        for name in SERVED_FILES:
            served = path / name
            try:
                inside = not served.is_symlink() or served.resolve().parent == path
            except (OSError, RuntimeError):  # a link loop
                inside = False
            if not inside:
                raise NotFound(f"run {run!r} is refused: its {name} is a link out of the run's directory")
        if not (path / RESULTS_FILE).is_file() and not (path / SUMMARY_FILE).is_file():
            raise NotFound(f"{run!r} is not a kgqa eval run directory (no {RESULTS_FILE})")
        return path

    def run_ids(self) -> list[str]:
        if self.root is None:
            return []
        out = []
        for child in sorted(self.root.iterdir()):
            if RUN_ID_RE.match(child.name) and ".." not in child.name:
                try:
                    self.path(child.name)
                except NotFound:
                    continue
                out.append(child.name)
        return out

    # -- reading -------------------------------------------------------------------------------------------------

    def rows(self, run: str) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
        """The result rows (file order) and the rows by id (a question answered again keeps its last row)."""
        path = self.path(run)
        results = path / RESULTS_FILE

        def make() -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
            rows = read_results(path)
            by_id = {str(r["id"]): r for r in rows}
            return [by_id[k] for k in dict.fromkeys(str(r["id"]) for r in rows)], by_id

        return self._rows.get(run, _stamp(results), make)

    def summary(self, run: str) -> dict[str, Any]:
        path = self.path(run)
        stamp = _stamp(path / SUMMARY_FILE, path / RESULTS_FILE, path / CONFIG_FILE)
        return self._summaries.get(run, stamp, lambda: load_summary(path))

    def config(self, run: str) -> dict[str, Any]:
        return read_config(self.path(run))

    def _trace_index(self, run: str) -> dict[str, tuple[int, int]]:
        """Byte offset and length of each question's line in traces.jsonl (the last line of an id wins)."""
        traces = self.path(run) / TRACES_FILE

        def make() -> dict[str, tuple[int, int]]:
            index: dict[str, tuple[int, int]] = {}
            if not traces.is_file():
                return index
            with open(traces, "rb") as handle:
                offset = 0
                for line in handle:
                    if line.endswith(b"\n"):
                        # The id is the first key of every trace line the runner writes; parse only when it is not.
                        match = re.match(rb'\{"id":("(?:[^"\\]|\\.)*")', line)
                        qid: Any = None
                        if match:
                            qid = json.loads(match.group(1))
                        else:
                            try:
                                qid = json.loads(line).get("id")
                            except (ValueError, AttributeError):
                                qid = None
                        if qid is not None:
                            index[str(qid)] = (offset, len(line))
                    offset += len(line)
            return index

        return self._traces.get(run, _stamp(traces), make)

    def trace(self, run: str, qid: str) -> dict[str, Any] | None:
        where = self._trace_index(run).get(qid)
        if where is None:
            return None
        with open(self.path(run) / TRACES_FILE, "rb") as handle:
            handle.seek(where[0])
            data = handle.read(where[1])
        try:
            value = json.loads(data)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    # -- views ---------------------------------------------------------------------------------------------------

    def listing(self) -> list[dict[str, Any]]:
        out = []
        for run in self.run_ids():
            entry: dict[str, Any] = {"id": run}
            try:
                summary = self.summary(run)
            except Exception as exc:  # one damaged run must not hide the others
                entry["problem"] = f"{type(exc).__name__}: {exc}"
                out.append(entry)
                continue
            config = self.config(run)
            for key in ("dataset", "split", "method", "llm", "kg"):
                entry[key] = summary.get(key, config.get(key))
            for key in ("n", "errors", "partial", *(metric.name for metric in shown_in(Place.HEADLINE))):
                entry[key] = summary.get(key)
            entry["started_at"] = config.get("started_at")
            out.append(entry)
        return out

    def questions(self, run: str, *, which: str = "all", page: int = 1, page_size: int = 50) -> dict[str, Any]:
        rows, _ = self.rows(run)
        counts = {name: 0 for name in FILTERS}
        chosen = []
        for row in rows:
            v = verdict(row)
            counts[v] += 1
            counts["all"] += 1
            if which in ("all", v):
                chosen.append(row)
        pages = max(1, -(-len(chosen) // page_size))
        start = (page - 1) * page_size
        return {"run": run, "filter": which, "page": page, "page_size": page_size, "pages": pages,
                "total": len(chosen), "counts": counts,
                "questions": [_row_brief(r) for r in chosen[start:start + page_size]]}

    def question(self, run: str, qid: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
        check_qid(qid)
        _, by_id = self.rows(run)
        row = by_id.get(qid)
        if row is None:
            raise NotFound(f"run {run!r} has no question {qid!r}")
        return row, self.trace(run, qid)

    def compare(self, run: str, other: str, *, page: int = 1, page_size: int = 50) -> dict[str, Any]:
        """The questions both runs answered where they differ: the strict verdict, failure or the answers."""
        rows_a, _ = self.rows(run)
        _, by_b = self.rows(other)
        differ = []
        shared = 0
        for a in rows_a:
            b = by_b.get(str(a["id"]))
            if b is None:
                continue
            shared += 1
            if verdict(a) != verdict(b) or _answer_key(a) != _answer_key(b):
                differ.append((a, b))
        pages = max(1, -(-len(differ) // page_size))
        start = (page - 1) * page_size
        items = []
        for a, b in differ[start:start + page_size]:
            brief_a, brief_b = _row_brief(a), _row_brief(b)
            items.append({"id": a["id"], "question": a.get("question"), "gold": brief_a["gold"],
                          "verdict_changed": brief_a["verdict"] != brief_b["verdict"],
                          "a": {k: brief_a[k] for k in ("answers", "n_answers", "hit1", "legacy_hit1", "f1", "grounding",
                                                         "error", "verdict")},
                          "b": {k: brief_b[k] for k in ("answers", "n_answers", "hit1", "legacy_hit1", "f1", "grounding",
                                                         "error", "verdict")}})
        return {"runs": [run, other], "shared": shared, "total": len(differ), "page": page, "page_size": page_size,
                "pages": pages, "questions": items}


def _answer_key(row: dict[str, Any]) -> frozenset[str]:
    return frozenset(normalize_answer(str(a)) for a in row.get("answers") or [])
