"""Released runs of other projects as kgqa run directories: ``kgqa eval import-run FILE --format NAME``.

A released run is a JSONL file with one line per question, written by another project's own code (PoG, VoG, AoG; see
docs/released-runs.md). :func:`import_run` reads it, joins every row to a question of a kgqa dataset, scores the row's
answer against the dataset's gold answers and aliases with :func:`kgqa.eval.metrics.score_prediction` (strict and
legacy), and writes a run directory that ``kgqa eval report`` and ``kgqa eval compare`` read like one kgqa wrote:

``results.jsonl``
    One row per joined question, in file order, in the runner's shape (a :class:`~kgqa.eval.metrics.QuestionScore`
    plus ``question``, ``answers``, ``answer_ids``, ``gold``, ``gold_ids``, ``hops`` / ``qtype``), with ``latency_s``
    from the row's ``time``. What the file does not record is left out rather than written as zero: the usage fields
    (``llm_calls``, ``prompt_tokens``, ``completion_tokens``) of a row without them, and always ``llm_latency_s``,
    ``kg_time_s``, ``kg_calls``, ``cache_hits`` and ``retries``. Each row also carries ``imported``: its line in the
    file, a note when its answer was missing or unreadable, and facts of the source row worth keeping (AoG's own
    verdict ``correct``).
``traces.jsonl``
    Per question, the KG triples of the row's ``reasoning_chains`` as ``evidence`` (the trace is empty).
``config.json``
    ``imported: true``, the source file, its format and sha256, dataset, split, ``questions`` (the dataset's size, so
    the report says "N of M"), ``join``: the counts below, and ``usage_recorded``: how many rows record calls and
    tokens and their means over those rows (summary.json averages over every scored row, a row without usage as 0).
``unmatched.jsonl``, ``duplicates.jsonl``, ``missing.txt``
    The rows that match no question (with their line and why), the repeated rows (first kept), and the dataset
    questions the file has no row for (``id<TAB>question``). Always written, empty when there is nothing to list.
``summary.json``, ``report.md``, plots
    By :func:`kgqa.eval.summary.summarize_run`, as for any run.

Join: by id where the row has one (``id``, ``ID``, ``QuestionId``, ``qid`` or ``question_id``), else by the question
text, exactly, then folded (case, accents) with white space collapsed. Two rows joining one question: the first is
kept, the others counted as duplicates. A question with several identical texts in the dataset takes the rows in order.

Broken rows: a line that is not a JSON object, or whose answer field cannot be read, is counted; when its question can
still be found (for a bad line, from the text of its question field) it is kept as that question with no answer, an
``error`` and a note (so it scores 0 and the report lists it), otherwise it is listed as unmatched. A file whose first
readable row is not of the format asked for is refused (a :class:`~kgqa.errors.ConfigError` naming the format it looks
like); so is a file of which fewer than half of the rows match a question of the dataset (the wrong ``--dataset``).
Nothing is written before these checks pass.

Grounding: ``synthesis`` (the LLM wrote the answer from KG evidence it explored), except ``parametric`` when the row
records no KG evidence at all (an empty ``reasoning_chains``, which includes PoG's answers from the LLM alone, marked
``"Known"`` in its reply).

Formats: :data:`READERS` maps a format name to the function reading one parsed row into a :class:`Released`; adding a
format is one function and one entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kgqa import __version__
from kgqa.core import Grounding, Prediction, Question
from kgqa.datasets import dataset_root, load_dataset
from kgqa.errors import ConfigError, DataError
from kgqa.eval.metrics import score_prediction
from kgqa.eval.rundir import (
    CONFIG_FILE,
    LOCK_FILE,
    RESULTS_FILE,
    TRACES_FILE,
    RunDirError,
    rewrite_lines,
    run_dir_lock,
    write_json,
)
from kgqa.eval.solver import question_row
from kgqa.eval.summary import summarize_run
from kgqa.normalize import fold

__all__ = [
    "DUPLICATES_FILE",
    "MISSING_FILE",
    "READERS",
    "UNMATCHED_FILE",
    "ImportedRun",
    "NotThisFormat",
    "Released",
    "import_run",
    "read_aog",
    "read_pog",
    "read_vog",
]

UNMATCHED_FILE = "unmatched.jsonl"
DUPLICATES_FILE = "duplicates.jsonl"
MISSING_FILE = "missing.txt"

#: Row fields that hold a question id, in the order they are tried.
ID_KEYS = ("id", "ID", "QuestionId", "qid", "question_id")
#: Row fields that hold the question text, in the order they are tried.
TEXT_KEYS = ("question", "RawQuestion")


class NotThisFormat(ValueError):
    """A row lacks what defines the format (raised by a reader; the first readable row decides the whole file)."""


@dataclass
class Released:
    """One row of a released run, read: what to join on, what it answered, and what it cost."""

    text: str | None
    qid: str | None
    answers: list[str]
    grounding: Grounding
    usage: dict[str, int] | None  # calls, prompt_tokens, completion_tokens; None when the row does not record them
    latency_s: float | None
    evidence: list[list[str]] = field(default_factory=list)
    note: str | None = None  # why the answer is missing or unreadable
    broken: bool = False  # the answer field could not be read: kept without an answer, counted
    source: dict[str, Any] = field(default_factory=dict)  # facts of the source row kept in the result row


Reader = Callable[[Mapping[str, Any]], Released]


# ---------------------------------------------------------------------------------------------------------------------
# What every format shares


def _first(row: Mapping[str, Any], keys: Sequence[str]) -> Any:
    return next((row[k] for k in keys if row.get(k) is not None), None)


def _triples(chains: Any) -> list[list[str]]:
    """The [head, relation, tail] triples inside a row's ``reasoning_chains`` (nested lists, any depth)."""
    found: list[list[str]] = []
    stack = [chains]
    while stack:
        item = stack.pop()
        if not isinstance(item, list):
            continue
        if len(item) == 3 and all(isinstance(x, str) for x in item):
            found.append(list(item))
        else:
            stack.extend(reversed(item))
    return found


def _usage(row: Mapping[str, Any]) -> dict[str, int] | None:
    """Calls and tokens, from ``call_num``, ``input_token`` and ``output_token``; None unless all three are counts."""
    values = [row.get(k) for k in ("call_num", "input_token", "output_token")]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        return None
    calls, prompt, completion = values
    return {"calls": calls, "prompt_tokens": prompt, "completion_tokens": completion}


def _latency(row: Mapping[str, Any]) -> float | None:
    value = row.get("time")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return None


def _answer_list(value: Any, field_name: str) -> tuple[list[str], str | None, bool]:
    """(answers, note, broken) of an answer field: a string is one answer, a list its items in order, null none."""
    if value is None:
        return [], f"no answer ({field_name} is null)", False
    if isinstance(value, str):
        return ([value], None, False) if value.strip() else ([], f"no answer ({field_name} is empty)", False)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [str(value)], None, False
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
        answers = [str(v) for v in value if str(v).strip()]
        return answers, (None if answers else f"no answer ({field_name} is an empty list)"), False
    return [], f"unreadable answer: {field_name} is a {type(value).__name__}", True


def _released(row: Mapping[str, Any], answers: list[str], note: str | None, broken: bool, *,
              parametric: bool = False, source: dict[str, Any] | None = None) -> Released:
    evidence = _triples(row.get("reasoning_chains"))
    qid = _first(row, ID_KEYS)
    text = _first(row, TEXT_KEYS)
    return Released(
        text=text if isinstance(text, str) else None, qid=str(qid) if qid is not None else None, answers=answers,
        grounding=Grounding.PARAMETRIC if parametric or not evidence else Grounding.SYNTHESIS,
        usage=_usage(row), latency_s=_latency(row), evidence=evidence, note=note, broken=broken,
        source=dict(source or {}))


def _require_text(row: Mapping[str, Any], fmt: str) -> None:
    if not isinstance(_first(row, TEXT_KEYS), str) and _first(row, ID_KEYS) is None:
        raise NotThisFormat(f"no question field ({' or '.join(TEXT_KEYS)}) in a {fmt} row")


# ---------------------------------------------------------------------------------------------------------------------
# The formats


def read_pog(row: Mapping[str, Any]) -> Released:
    """PoG (github.com/liyichen-cly/PoG): ``results`` is the final reply as a JSON string ``{"A": {"Sufficient" |
    "Known", "Answer"}, "R": reason}``; ``"Known"`` marks PoG's answer from the LLM alone (no KG evidence)."""
    _require_text(row, "pog")
    results = row.get("results")
    if "plan" in row or not isinstance(results, (str, dict)):
        raise NotThisFormat("a pog row has 'results' (PoG's JSON reply) and no 'plan'")
    if isinstance(results, str):
        if not results.lstrip().startswith("{"):
            raise NotThisFormat("'results' is not PoG's JSON reply {\"A\": ..., \"R\": ...}")
        try:
            reply = json.loads(results)
        except ValueError as exc:
            return _released(row, [], f"unreadable answer: results is not valid JSON ({exc.msg} at char {exc.pos})",
                             True)
    else:
        reply = results
    verdict = reply.get("A") if isinstance(reply, dict) else None
    if not isinstance(verdict, dict):
        return _released(row, [], "unreadable answer: results has no 'A' object", True)
    if "Answer" not in verdict:
        return _released(row, [], f"unreadable answer: results.A has no 'Answer' (keys: {', '.join(map(str, verdict))})",
                         True)
    answers, note, broken = _answer_list(verdict["Answer"], "results.A.Answer")
    return _released(row, answers, note, broken, parametric="Known" in verdict)


def read_vog(row: Mapping[str, Any]) -> Released:
    """VoG (github.com/WenxinAZhao/VoG): ``results`` is the text of the final ``Finish[...]`` step of ``plan``."""
    _require_text(row, "vog")
    if "plan" not in row or "results" not in row:
        raise NotThisFormat("a vog row has 'results' (the answer text) and 'plan' (the Thought/Action steps)")
    answers, note, broken = _answer_list(row["results"], "results")
    return _released(row, answers, note, broken)


def read_aog(row: Mapping[str, Any]) -> Released:
    """AoG: the reply's fields at the top level, ``Answer`` the answer text, ``Sufficient``, ``R`` the reason, and the
    project's own verdict ``correct`` against its ``ground_truth`` (kept, never used for scoring)."""
    _require_text(row, "aog")
    if "Answer" not in row:
        raise NotThisFormat("an aog row has the reply's 'Answer' at the top level")
    answers, note, broken = _answer_list(row["Answer"], "Answer")
    source = {k: row[k] for k in ("correct", "Sufficient") if k in row}
    return _released(row, answers, note, broken, source=source)


#: Released-run formats by name: each reads one parsed JSON row (adding a format is one function and one entry).
READERS: dict[str, Reader] = {"pog": read_pog, "vog": read_vog, "aog": read_aog}


# ---------------------------------------------------------------------------------------------------------------------
# Reading a file


@dataclass
class _Line:
    number: int
    row: Released | None  # None: the row could not be read at all (and no question text was found in it)
    raw: str
    problem: str | None = None  # why the line itself is broken (not JSON, not an object, not of the format)


_TEXT_IN_RAW = re.compile('"(?:' + "|".join(map(re.escape, TEXT_KEYS)) + r')"\s*:\s*"((?:[^"\\]|\\.)*)"')


def _text_from_raw(raw: str) -> str | None:
    """The question text of a line that is not valid JSON, when its question field is still whole."""
    found = _TEXT_IN_RAW.search(raw)
    if not found:
        return None
    try:
        text = json.loads(f'"{found.group(1)}"')
    except ValueError:
        return None
    return text if isinstance(text, str) and text.strip() else None


def _broken_line(number: int, raw: str, problem: str) -> _Line:
    text = _text_from_raw(raw)
    row = None
    if text is not None:
        row = Released(text=text, qid=None, answers=[], grounding=Grounding.PARAMETRIC, usage=None, latency_s=None,
                       note=f"unreadable row: {problem}", broken=True)
    return _Line(number, row, raw, problem)


def _lines(path: Path) -> Iterator[tuple[int, str, str | None]]:
    """(line number, text, problem) of every non-blank line; ``problem`` says why a line is not UTF-8 text."""
    with path.open("rb") as handle:
        for number, data in enumerate(handle, 1):
            try:
                text, problem = data.decode("utf-8"), None
            except UnicodeDecodeError as exc:
                text, problem = data.decode("utf-8", errors="replace"), f"not UTF-8 text ({exc.reason} at byte {exc.start})"
            if text.strip():
                yield number, text.rstrip("\r\n"), problem


def _guess_format(row: Mapping[str, Any], asked: str) -> str:
    others = []
    for name, reader in READERS.items():
        if name == asked:
            continue
        try:
            reader(row)
        except NotThisFormat:
            continue
        others.append(name)
    keys = ", ".join(sorted(map(str, row))[:12])
    if others:
        return f"it looks like a {' or '.join(others)} run (try --format {others[0]}); its rows have the keys {keys}"
    return f"its rows have the keys {keys}, which no known format ({', '.join(READERS)}) has"


def _read(path: Path, fmt: str) -> list[_Line]:
    reader = READERS[fmt]
    lines: list[_Line] = []
    checked = False
    for number, raw, problem in _lines(path):
        if problem is not None:
            lines.append(_broken_line(number, raw, problem))
            continue
        try:
            value = json.loads(raw)
        except ValueError as exc:
            lines.append(_broken_line(number, raw, f"not valid JSON ({exc.msg} at char {exc.pos})"))
            continue
        if not isinstance(value, dict):
            lines.append(_Line(number, None, raw, f"not a JSON object but a JSON {type(value).__name__}"))
            continue
        try:
            row = reader(value)
        except NotThisFormat as exc:
            if not checked:  # the first readable row decides whether the file is of this format at all
                raise ConfigError(f"{path}: line {number} is not a row of the {fmt} format ({exc}); "
                                  f"{_guess_format(value, fmt)}. Nothing was written.") from None
            lines.append(_broken_line(number, raw, f"not a {fmt} row ({exc})"))
            continue
        checked = True
        lines.append(_Line(number, row, raw))
    if not lines:
        raise DataError(f"{path}: the file holds no rows; a released run has one JSON object per line")
    if not checked:
        raise DataError(f"{path}: none of its {len(lines):,} lines is a JSON object (line 1: {lines[0].problem}); a "
                        "released run is JSONL, one JSON object per line")
    return lines


# ---------------------------------------------------------------------------------------------------------------------
# Joining


def _text_key(text: str) -> str:
    return " ".join(fold(text).split())


class _Index:
    """Dataset questions by id, by exact text and by folded text; each question is taken by at most one row."""

    def __init__(self, questions: Sequence[Question]) -> None:
        self.by_id: dict[str, Question] = {q.id: q for q in questions}
        self.by_text: dict[str, list[Question]] = {}
        self.by_key: dict[str, list[Question]] = {}
        for q in questions:
            self.by_text.setdefault(q.text, []).append(q)
            self.by_key.setdefault(_text_key(q.text), []).append(q)
        self.taken: dict[str, int] = {}  # question id -> line of the row that took it

    def find(self, row: Released) -> tuple[list[Question], str]:
        """The candidate questions of ``row`` and how they were found (``id``, ``text``, ``normalised_text``)."""
        if row.qid is not None and row.qid in self.by_id:
            return [self.by_id[row.qid]], "id"
        if row.text is not None:
            if row.text in self.by_text:
                return self.by_text[row.text], "text"
            key = _text_key(row.text)
            if key in self.by_key:
                return self.by_key[key], "normalised_text"
        return [], ""


# ---------------------------------------------------------------------------------------------------------------------
# Writing the run directory


@dataclass
class ImportedRun:
    """What :func:`import_run` wrote: the run directory, its summary and the join counts (also in config.json)."""

    out_dir: Path
    summary: dict[str, Any]
    join: dict[str, Any]
    usage: dict[str, Any]  # means over the rows that record usage (the summary's means count the others as 0)
    files: dict[str, Path]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} exists and is not a directory; choose another --out")
    if out.is_dir():
        others = sorted(p.name for p in out.iterdir() if p.name != LOCK_FILE)
        if others:
            raise RunDirError(f"run directory {out} is not empty (files: {', '.join(others[:6])}); import-run writes a "
                              "new run directory: choose another --out. Nothing was changed.")


def _result_row(question: Question, released: Released, line: int) -> tuple[dict[str, Any], dict[str, Any]]:
    error = f"released row unreadable: {released.note}" if released.broken else None
    usage: dict[str, Any] = dict(released.usage or {})
    prediction = Prediction(answers=released.answers, grounding=released.grounding, usage=usage,
                            evidence=released.evidence, error=error)
    score = score_prediction(question, prediction, latency_s=released.latency_s or 0.0)
    row = question_row(question, prediction, score)
    if released.usage is None:  # not recorded: leave it out rather than claim zero cost
        for key in ("llm_calls", "prompt_tokens", "completion_tokens"):
            row.pop(key)
    if released.latency_s is None:
        row.pop("latency_s")
    imported: dict[str, Any] = {"line": line}
    if released.note:
        imported["note"] = released.note
    imported.update(released.source)
    row["imported"] = imported
    return row, {"id": question.id, "trace": [], "evidence": released.evidence}


def _unmatched_row(line: _Line, reason: str) -> dict[str, Any]:
    row: dict[str, Any] = {"line": line.number, "reason": reason}
    if line.row is not None:
        row["question"] = line.row.text
        if line.row.qid is not None:
            row["id"] = line.row.qid
    if line.problem is not None:
        row["raw"] = line.raw[:300]
    return row


def import_run(path: str | os.PathLike[str], *, fmt: str, dataset: str, out: str | os.PathLike[str],
               split: str = "test", data_dir: str | os.PathLike[str] | None = None,
               report: bool = True) -> ImportedRun:
    """Import the released run ``path`` of format ``fmt`` (a key of :data:`READERS`) on ``dataset``/``split`` into the
    new run directory ``out`` (see the module docstring). Bad input is a ConfigError or DataError, raised before
    anything is written."""
    source = Path(path)
    out_dir = Path(out)
    name = fmt.strip().lower()
    if name not in READERS:
        raise ConfigError(f"unknown released-run format {fmt!r}; known formats: {', '.join(sorted(READERS))}")
    if not source.is_file():
        raise DataError(f"released run {source} not found" + (" (it is a directory)" if source.is_dir() else ""))
    _check_out(out_dir)
    lines = _read(source, name)
    questions = load_dataset(dataset, split, data_dir=dataset_root(dataset, data_dir))
    index = _Index(questions)

    kept: list[tuple[Question, Released, int]] = []
    unmatched: list[dict[str, Any]] = []
    duplicates: list[dict[str, Any]] = []
    joined_by = {"id": 0, "text": 0, "normalised_text": 0}
    for line in lines:
        if line.row is None:
            unmatched.append(_unmatched_row(line, f"unreadable row ({line.problem}); no question found in it"))
            continue
        candidates, how = index.find(line.row)
        if not candidates:
            reason = "no question of the dataset has this id or text"
            if line.problem is not None:
                reason += f"; the row is unreadable ({line.problem})"
            unmatched.append(_unmatched_row(line, reason))
            continue
        free = [q for q in candidates if q.id not in index.taken]
        if not free:
            first = index.taken[candidates[0].id]
            duplicates.append({"line": line.number, "id": candidates[0].id, "question": candidates[0].text,
                               "first_line": first})
            continue
        question = free[0]
        index.taken[question.id] = line.number
        joined_by[how] += 1
        kept.append((question, line.row, line.number))
    if 2 * (len(kept) + len(duplicates)) < len(lines):  # most rows match nothing: the wrong dataset, not a few strays
        first = next((line.row.text for line in lines if line.row is not None and line.row.text), None)
        raise ConfigError(f"only {len(kept) + len(duplicates):,} of the {len(lines):,} rows of {source} match a question "
                          f"of {dataset}/{split}" + (f" (first row: {first!r})" if first else "")
                          + "; is --dataset right? Nothing was written.")
    missing = [q for q in questions if q.id not in index.taken]

    broken = [line for line in lines if line.problem is not None or (line.row is not None and line.row.broken)]
    join = {
        "rows": len(lines),
        "joined": len(kept),
        "joined_by": joined_by,
        "unmatched": len(unmatched),
        "duplicates": len(duplicates),
        "missing": len(missing),
        "broken": len(broken),  # lines that are not a readable row, or whose answer cannot be read
        "broken_kept": sum(1 for _, r, _ in kept if r.broken),  # of those, scored as their question with no answer
        "no_answer": sum(1 for _, r, _ in kept if not r.answers),
        "with_usage": sum(1 for _, r, _ in kept if r.usage is not None),
        "scored": len(kept),
        "dataset_questions": len(questions),
    }
    recorded = [r.usage for _, r, _ in kept if r.usage is not None]
    usage: dict[str, Any] = {"rows": len(recorded)}
    for key in ("calls", "prompt_tokens", "completion_tokens"):
        usage[f"{key}_mean"] = sum(u[key] for u in recorded) / len(recorded) if recorded else None
    usage["tokens_mean"] = (usage["prompt_tokens_mean"] + usage["completion_tokens_mean"]) if recorded else None
    rows, traces = zip(*(_result_row(q, r, n) for q, r, n in kept), strict=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {key: out_dir / name_ for key, name_ in (
        ("config", CONFIG_FILE), ("results", RESULTS_FILE), ("traces", TRACES_FILE), ("unmatched", UNMATCHED_FILE),
        ("duplicates", DUPLICATES_FILE), ("missing", MISSING_FILE))}
    with run_dir_lock(out_dir):
        _check_out(out_dir)  # again, under the lock
        write_json(files["config"], {
            "imported": True,
            "source_file": str(source.resolve()),
            "source_sha256": _sha256(source),
            "format": name,
            "dataset": dataset,
            "split": split.strip().lower(),
            "method": f"{name} (imported)",
            "method_config": {},
            "llm": None,
            "kg": None,
            "seed": None,
            "questions": len(questions),
            "data_dir": str(dataset_root(dataset, data_dir)),
            "grounding_rule": "synthesis; parametric when the row records no KG evidence (empty reasoning_chains)",
            "join": join,
            "usage_recorded": usage,
            "kgqa_version": __version__,
            "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        })
        rewrite_lines(files["traces"], traces)
        rewrite_lines(files["unmatched"], unmatched)
        rewrite_lines(files["duplicates"], duplicates)
        tmp = files["missing"].with_name(f".{MISSING_FILE}.tmp")
        tmp.write_text("".join(f"{q.id}\t{' '.join(q.text.split())}\n" for q in missing), encoding="utf-8")
        os.replace(tmp, files["missing"])
        rewrite_lines(files["results"], rows)  # last: a directory with results is a finished import
        summary = summarize_run(out_dir, report=report, run_facts={"imported": True, **join})
    return ImportedRun(out_dir=out_dir, summary=summary, join=join, usage=usage, files=files)
