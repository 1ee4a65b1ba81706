"""Line formats: MetaQA's ``head|relation|tail``, TSV triples (with Freebase's bare values as literals) and
``id<TAB>name`` files."""

from __future__ import annotations

import re
import time
from pathlib import Path

from kgqa.kg.base import make_literal
from kgqa.kg.loaders.common import (
    LoadReport,
    Sink,
    _add_triple,
    _BadLine,
    _finish,
    _handle_bad,
    _line_problem,
    _lines,
    _node,
    _relation,
    _schema_of,
)
from kgqa.kg.schema import FREEBASE_ID_RE

# Bare Freebase values that are literals, not entities: integers, decimals, years, dates and date-times.
_FREEBASE_VALUE_RE = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$|^-?\d{4}(-\d{2}(-\d{2}(T[0-9:.]+(Z|[+-]\d{2}:\d{2})?)?)?)?$")

# Each line first meets one compiled regex that accepts the common case (plain ids, no control characters, no
# undecodable bytes); only lines it rejects go through the field-by-field checks that explain what is wrong.

_C = "\x00-\x1f\x7f\udc80-\udcff"
_TSV_ID = f'[^\\s"{_C}](?:[^\\t{_C}]*[^\\s{_C}])?'
_TSV_FAST_RE = re.compile(f"({_TSV_ID})\t([^\\s\"{_C}]+)\t({_TSV_ID})(?:\t|$)")
_PIPE_ID = f'[^\\s"|{_C}](?:[^|{_C}]*[^\\s|{_C}])?'
_METAQA_FAST_RE = re.compile(f"({_PIPE_ID})\\|([^\\s\"|{_C}]+)\\|({_PIPE_ID})$")


def load_metaqa(builder: Sink, path: Path, *, skip_bad: bool = False) -> LoadReport:
    """Load a WikiMovies/MetaQA ``head|relation|tail`` file. Ids are labels; every entity is named by its label.

    Duplicate lines are fine (the store keeps one triple and counts the statements: ``statement_counts``). Blank lines
    are ignored.
    """
    started = time.perf_counter()
    path = Path(path)
    report = LoadReport("metaqa", [str(path)])
    named: set[str] = set()  # one add_name per entity; MetaQA is small enough to remember its labels
    add_name, fast, where = builder.add_name, _METAQA_FAST_RE.match, str(path)
    for number, line in _lines(path, report, skip_bad, sep="|"):
        match = fast(line)
        if match:
            head, rel, tail = match.groups()
        else:
            if not line.strip():
                continue
            try:
                _line_problem(line)
                parts = line.split("|")
                if len(parts) != 3:
                    raise _BadLine(f"expected head|relation|tail (3 fields separated by '|'), found {len(parts)} "
                                   "field(s)")
                head, tail = _node(parts[0], "head"), _node(parts[2], "tail")
                rel = _relation(parts[1])
                for label in (head, tail):
                    if label.startswith('"'):
                        raise _BadLine(f"label {label[:80]!r} starts with a double quote, which marks a literal")
            except _BadLine as exc:
                _handle_bad(report, f"{path}:{number}", str(exc), skip_bad)
                continue
        if not _add_triple(builder, report, head, rel, tail, skip_bad, where, number):
            continue
        if head not in named:
            named.add(head)
            add_name(head, head)
            report.names += 1
        if tail not in named:
            named.add(tail)
            add_name(tail, tail)
            report.names += 1
    return _finish(report, started)


def _freebase_tail(value: str) -> str:
    """A Freebase tail: an m./g. id or quoted literal as is, a bare number or date as a plain literal."""
    if value.startswith('"') or FREEBASE_ID_RE.match(value):
        return value
    if _FREEBASE_VALUE_RE.match(value):
        return make_literal(value)
    return value


def _load_tsv_triples(builder: Sink, path: Path, report: LoadReport, skip_bad: bool, *, freebase: bool,
                      entities: set[str] | None = None) -> None:
    """The TSV core shared by ``tsv`` and the Freebase gold-path file; ``entities`` collects non-literal ids."""
    fast, where = _TSV_FAST_RE.match, str(path)
    for number, line in _lines(path, report, skip_bad):
        match = fast(line)
        if match:
            head, rel, tail = match.groups()
            if match.end() < len(line) and line[match.end():].strip() and not freebase:
                report.extra(f"{path}:{number}")  # the Freebase pieces' 4th column (question ids) is documented
        else:
            if not line.strip():
                continue
            try:
                _line_problem(line)
                parts = line.split("\t")
                if len(parts) < 3:
                    raise _BadLine(f"expected head<TAB>relation<TAB>tail, found {len(parts)} tab-separated field(s)")
                head, rel, tail = _node(parts[0], "head"), _relation(parts[1]), _node(parts[2], "tail")
                if len(parts) > 3 and any(p.strip() for p in parts[3:]) and not freebase:
                    report.extra(f"{path}:{number}")
                if head.startswith('"'):
                    raise _BadLine(f"head {head[:80]!r} is a literal; a literal can only be a tail")
            except _BadLine as exc:
                _handle_bad(report, f"{path}:{number}", str(exc), skip_bad)
                continue
        if freebase:
            tail = _freebase_tail(tail)
        if not _add_triple(builder, report, head, rel, tail, skip_bad, where, number):
            continue
        if entities is not None:
            entities.add(head)
            if not tail.startswith('"'):
                entities.add(tail)


def load_tsv(builder: Sink, path: Path, *, names: Path | None = None, skip_bad: bool = False,
             report: LoadReport | None = None) -> LoadReport:
    """Load ``head<TAB>relation<TAB>tail[<TAB>anything]`` triples, then an optional ``id<TAB>name`` file.

    A field starting with ``"`` is a literal in N-Triples form; under the Freebase schema a bare number or date in the
    tail becomes a plain literal too (Freebase values, not entities).
    """
    started = time.perf_counter()
    path = Path(path)
    report = report if report is not None else LoadReport("tsv")
    report.sources.append(str(path))
    _load_tsv_triples(builder, path, report, skip_bad, freebase=_schema_of(builder).name == "freebase")
    if names is not None:
        load_names_tsv(builder, Path(names), skip_bad=skip_bad, report=report)
    return _finish(report, started)


def load_names_tsv(builder: Sink, path: Path, *, skip_bad: bool = False,
                   report: LoadReport | None = None) -> LoadReport:
    """Load ``id<TAB>name`` lines. The first name given to an entity wins (the builder's rule); naming an id that
    has no triple adds it as an edgeless node."""
    started = time.perf_counter()
    path = Path(path)
    report = report if report is not None else LoadReport("names")
    report.sources.append(str(path))
    for number, line in _lines(path, report, skip_bad):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        parts = line.split("\t", 1)
        try:
            _line_problem(line)
            if len(parts) != 2:
                raise _BadLine("expected id<TAB>name")
            entity = _node(parts[0], "id")
            if entity.startswith('"'):
                raise _BadLine(f"id {entity[:80]!r} is a literal; only entities have names")
            name = parts[1].strip()
            if not name:
                raise _BadLine(f"empty name for {entity!r}")
        except _BadLine as exc:
            _handle_bad(report, where, str(exc), skip_bad)
            continue
        builder.add_name(entity, name)
        report.names += 1
    report.seconds += time.perf_counter() - started
    return report
