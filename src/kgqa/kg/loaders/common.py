"""What every loader shares: the :class:`LoadReport`, the :class:`Sink` a loader feeds, reading files line by line
(``.gz`` too, undecodable bytes kept as one bad line), the longest field accepted (:func:`max_field_chars`), checking
one id or relation field, and the bad-line rule (raise naming ``file:line``, or count and skip with ``skip_bad``)."""

from __future__ import annotations

import gzip
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from itertools import count, repeat
from pathlib import Path
from typing import IO, Any, Protocol

from kgqa.errors import ConfigError, DataError, ImportAborted, KGError, KGQAError
from kgqa.kg.base import parse_literal
from kgqa.kg.schema import Schema, get_schema

#: How many skipped-line messages a report keeps (the count is always exact).
MAX_KEPT_ERRORS = 20
_CONTROL_RE = re.compile("[\x00-\x1f\x7f\udc80-\udcff]")
_SPACE_OR_CONTROL_RE = re.compile("[\\s\x00-\x1f\x7f\udc80-\udcff]")
_UNDECODABLE_RE = re.compile("[\udc80-\udcff]")

#: The longest field (id, relation, literal or name) a loader accepts, in characters, unless the config key
#: ``max_field_chars`` (``KGQA_MAX_FIELD_CHARS``) or ``load_into(max_field_chars=...)`` says otherwise. A longer field is
#: a bad line naming ``file:line``: no KG needs a megabyte in one id or value, and a file that has one is usually not
#: the file the user meant (a binary, a JSON dump, a line-ending mix-up).
DEFAULT_MAX_FIELD_CHARS = 1 << 20
_FIELD_LIMIT: ContextVar[int | None] = ContextVar("kgqa_max_field_chars", default=None)


class Sink(Protocol):
    """What a loader needs from a builder (``EmbeddedKGBuilder`` is one): ``add_triple``, ``add_name``, ``schema``."""

    schema: Schema

    def add_triple(self, head: str, relation: str, tail: str) -> None: ...

    def add_name(self, entity: str, name: str) -> None: ...


@dataclass
class LoadReport:
    """What a load did. ``triples`` counts triples handed to the builder (the store removes duplicates at build)."""

    format: str
    sources: list[str] = field(default_factory=list)
    lines: int = 0
    triples: int = 0
    names: int = 0
    skipped: int = 0
    synthetic_cvts: int = 0
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: Lines with fields after the third (a TSV's extra columns), which were ignored; the first such line.
    extra_fields: int = 0
    extra_fields_first: str | None = None

    def extra(self, where: str) -> None:
        self.extra_fields += 1
        if self.extra_fields_first is None:
            self.extra_fields_first = where

    def skip(self, message: str) -> None:
        self.skipped += 1
        if len(self.errors) < MAX_KEPT_ERRORS:
            self.errors.append(message)

    def merge(self, other: LoadReport) -> None:
        """Add another report's counts (used when one source is several files)."""
        self.sources.extend(s for s in other.sources if s not in self.sources)
        self.lines += other.lines
        self.triples += other.triples
        self.names += other.names
        self.skipped += other.skipped
        self.synthetic_cvts += other.synthetic_cvts
        self.extra_fields += other.extra_fields
        self.extra_fields_first = self.extra_fields_first or other.extra_fields_first
        self.errors.extend(other.errors[: max(0, MAX_KEPT_ERRORS - len(self.errors))])

    def to_dict(self) -> dict[str, Any]:
        return {"format": self.format, "sources": list(self.sources), "lines": self.lines, "triples": self.triples,
                "names": self.names, "skipped": self.skipped, "synthetic_cvts": self.synthetic_cvts,
                "errors": list(self.errors), "seconds": round(self.seconds, 3), "extra_fields": self.extra_fields}

    def summary(self) -> str:
        text = (f"{self.format}: {self.lines:,} lines read, {self.triples:,} triples and {self.names:,} names added, "
                f"{self.skipped:,} bad lines skipped")
        if self.synthetic_cvts:
            text += f", {self.synthetic_cvts:,} synthetic CVT nodes"
        if self.extra_fields:
            text += f", {self.extra_fields:,} lines with fields after the third ignored (first: {self.extra_fields_first})"
        return text + f" in {self.seconds:.1f} s"


class _BadLine(Exception):
    """A line-level problem; turned into a DataError or a skip by :func:`_handle_bad`."""


def _handle_bad(report: LoadReport, where: str, problem: str, skip_bad: bool) -> None:
    message = f"{where}: {problem}"
    if not skip_bad:
        raise DataError(message + " (use skip_bad / --skip-bad to count and skip bad lines)")
    report.skip(message)


# ---------------------------------------------------------------------------------------------------------------------
# Files


def _check_file(path: Path) -> Path:
    if not path.exists():
        raise DataError(f"{path}: no such file")
    if not path.is_file():
        raise DataError(f"{path}: not a file")
    return path


#: The UTF-8 byte order mark some editors (Notepad, Excel's "CSV UTF-8") write at the start of a file: not data.
UTF8_BOM = b"\xef\xbb\xbf"


def _open_raw(path: Path) -> IO[bytes]:
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    return path.open("rb")


def _open_binary(path: Path) -> IO[bytes]:
    """Open a file for binary streaming, decompressing ``.gz`` transparently, past a leading UTF-8 byte order mark
    (N-Triples and Turtle parsers refuse it as the first character of the first statement)."""
    _check_file(path)
    fh = _open_raw(path)
    try:
        if fh.read(len(UTF8_BOM)) != UTF8_BOM:
            fh.seek(0)
    except BaseException:
        fh.close()
        raise
    return fh


def _open_text(path: Path) -> IO[str]:
    """Open a file for line streaming. Undecodable bytes become lone surrogates (``surrogateescape``) so a bad byte
    costs one bad line, found by :func:`_line_problem`, instead of aborting the read. A leading UTF-8 byte order mark
    is skipped (``utf-8-sig``), so it never becomes part of the first id."""
    _check_file(path)
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8-sig", errors="surrogateescape", newline="\n")
    return path.open("r", encoding="utf-8-sig", errors="surrogateescape", newline="\n")


def max_field_chars(value: int | str | None = None) -> int:
    """The longest field a loader accepts: ``value`` if given, else ``KGQA_MAX_FIELD_CHARS``, else ``max_field_chars``
    in the config file, else :data:`DEFAULT_MAX_FIELD_CHARS`; a ConfigError naming the source when it is not a positive
    whole number."""
    from kgqa import config

    raw, origin = config.get_with_origin("max_field_chars", value)
    if raw is None or raw == "":
        return DEFAULT_MAX_FIELD_CHARS
    if isinstance(raw, int) and not isinstance(raw, bool):
        limit = raw
    else:
        try:
            limit = int(str(raw).strip())  # from the environment: "2000000" or "2_000_000"; never a float
        except ValueError:
            limit = 0
    if isinstance(raw, bool) or limit < 1:
        raise ConfigError(f"max_field_chars from {origin} must be a positive whole number of characters, got {raw!r}")
    return limit


@contextmanager
def field_limit(value: int | str | None = None) -> Iterator[int]:
    """Resolve the field limit once (:func:`max_field_chars`) for every loader run inside the block."""
    limit = max_field_chars(value)
    token = _FIELD_LIMIT.set(limit)
    try:
        yield limit
    finally:
        _FIELD_LIMIT.reset(token)


def _field_limit() -> int:
    """The limit set by :func:`field_limit` around this load, else the configured one."""
    limit = _FIELD_LIMIT.get()
    return limit if limit is not None else max_field_chars()


def _too_long(what: str, length: int, limit: int) -> str:
    return (f"{what} is {length:,} characters long, over the limit of {limit:,} (max_field_chars: raise it with "
            "KGQA_MAX_FIELD_CHARS or max_field_chars in the config file)")


def _lines(path: Path, report: LoadReport, skip_bad: bool = False, *,
           sep: str | None = "\t") -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` without the line end, counting lines read. A line with a field (split on ``sep``)
    longer than the field limit is a bad line here and is not yielded.

    Lines are read about 64k characters at a time, so the length check is one C-level pass per chunk (a line no
    longer than the limit has no field longer than it), not a Python test per line."""
    limit = _field_limit()
    with _open_text(path) as fh:
        first = 1
        while chunk := fh.readlines(1 << 16):
            report.lines += len(chunk)
            if max(map(len, chunk)) <= limit:  # the common case, without a Python-level step per line
                yield from zip(count(first), map(str.rstrip, chunk, repeat("\r\n")))
            else:
                for number, text in enumerate(chunk, first):
                    text = text.rstrip("\r\n")
                    lengths = [len(part.strip()) for part in text.split(sep)] if len(text) > limit else []
                    over = next((i for i, length in enumerate(lengths) if length > limit), None)
                    if over is not None:
                        _handle_bad(report, f"{path}:{number}", _too_long(f"field {over + 1}", lengths[over], limit),
                                    skip_bad)
                        continue
                    yield number, text
            first += len(chunk)


def _line_problem(line: str) -> None:
    """Raise :class:`_BadLine` for a line that was not valid UTF-8."""
    bad = _UNDECODABLE_RE.search(line)
    if bad:
        byte = ord(bad.group()) - 0xDC00
        raise _BadLine(f"not valid UTF-8 (byte 0x{byte:02x} at character {bad.start() + 1})")


def _node(text: str, what: str) -> str:
    """Validate one id field of a line: non-empty, no control characters, a well-formed literal if it is one."""
    value = text.strip()
    if not value:
        raise _BadLine(f"empty {what}")
    if value.startswith('"'):
        try:
            parse_literal(value)
        except KGError:
            raise _BadLine(f"{what} {value[:80]!r} starts with a double quote but is not a literal in N-Triples form "
                           '(e.g. "1967" or "Paris"@fr)') from None
        return value
    if _CONTROL_RE.search(value):
        raise _BadLine(f"{what} {value[:80]!r} contains a control character")
    return value


def _relation(text: str) -> str:
    value = text.strip()
    if not value:
        raise _BadLine("empty relation")
    if _SPACE_OR_CONTROL_RE.search(value):
        raise _BadLine(f"relation {value[:80]!r} contains whitespace or a control character")
    if value.startswith('"'):
        raise _BadLine(f"relation {value[:80]!r} is a literal")
    return value


def _add_triple(builder: Sink, report: LoadReport, head: str, rel: str, tail: str, skip_bad: bool, where: str,
                line: int | None = None) -> bool:
    """Hand one triple to the builder and count it; a refusal is a bad line at ``where`` (``where:line``), formatted
    only then. Returns whether the triple was added."""
    try:
        builder.add_triple(head, rel, tail)
    except ImportAborted:  # the import as a whole cannot go on: never a line to skip
        raise
    except KGQAError as exc:  # the builder refuses what the loader let through (e.g. a literal head)
        _handle_bad(report, where if line is None else f"{where}:{line}", str(exc), skip_bad)
        return False
    report.triples += 1
    return True


def _finish(report: LoadReport, started: float) -> LoadReport:
    report.seconds = time.perf_counter() - started
    return report


def _schema_of(builder: Sink, schema: str | Schema | None = None) -> Schema:
    return get_schema(schema if schema is not None else getattr(builder, "schema", None))
