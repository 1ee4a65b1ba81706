"""Loaders that stream KG files into an :class:`~kgqa.kg.embedded.EmbeddedKGBuilder`.

Formats (``load_into(builder, source, fmt)``; ``guess_format(path)`` picks one from the file name):

* ``metaqa``: WikiMovies/MetaQA ``head|relation|tail``; ids are the labels and each entity is named by its label.
* ``tsv``: ``head<TAB>relation<TAB>tail[<TAB>ignored...]``; a field that starts with ``"`` is a literal in N-Triples
  form. Under the Freebase schema a bare number or date in the tail (``1967``, ``1967-05-01``) is a literal too.
* ``nt``, ``nq``, ``ttl``, ``trig``: RDF through pyoxigraph. IRIs become ids through the schema, the schema's name
  predicates become names (not edges), blank nodes become ``_:bN`` ids (nameless, so they act as CVT nodes), named graphs
  are merged.
* ``freebase-pieces``: the Freebase-flavoured directory (gold-path triples, names.tsv, FB15k-237), see
  :func:`load_freebase_pieces`.

Every loader reads line by line (or through pyoxigraph's streaming parser) and returns a :class:`LoadReport`. A bad line
raises :class:`~kgqa.errors.DataError` naming ``file:line`` and the problem; with ``skip_bad=True`` it is counted and
skipped instead.
"""

from __future__ import annotations

import gzip
import hashlib
import re
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from kgqa.errors import ConfigError, DataError, ImportAborted, KGError, KGQAError
from kgqa.kg.base import make_literal, parse_literal
from kgqa.kg.schema import Schema, get_schema

#: How many skipped-line messages a report keeps (the count is always exact).
MAX_KEPT_ERRORS = 20
_XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
_RDF_LANGSTRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"
_CONTROL_RE = re.compile("[\x00-\x1f\x7f\udc80-\udcff]")
_SPACE_OR_CONTROL_RE = re.compile("[\\s\x00-\x1f\x7f\udc80-\udcff]")
_UNDECODABLE_RE = re.compile("[\udc80-\udcff]")
_NEEDS_ESCAPE_RE = re.compile('[\\\\"\n\r\t]')
_FREEBASE_ID_RE = re.compile(r"^[mg]\.[0-9a-z_]+$")
# Bare Freebase values that are literals, not entities: integers, decimals, years, dates and date-times.
_FREEBASE_VALUE_RE = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$|^-?\d{4}(-\d{2}(-\d{2}(T[0-9:.]+(Z|[+-]\d{2}:\d{2})?)?)?)?$")
# The Freebase dumps (and files derived from them) escape double quotes inside names.
_ESCAPED_QUOTE_RE = re.compile(r'\\"')


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
        self.errors.extend(other.errors[: max(0, MAX_KEPT_ERRORS - len(self.errors))])

    def to_dict(self) -> dict[str, Any]:
        return {"format": self.format, "sources": list(self.sources), "lines": self.lines, "triples": self.triples,
                "names": self.names, "skipped": self.skipped, "synthetic_cvts": self.synthetic_cvts,
                "errors": list(self.errors), "seconds": round(self.seconds, 3)}

    def summary(self) -> str:
        text = (f"{self.format}: {self.lines:,} lines read, {self.triples:,} triples and {self.names:,} names added, "
                f"{self.skipped:,} bad lines skipped")
        if self.synthetic_cvts:
            text += f", {self.synthetic_cvts:,} synthetic CVT nodes"
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


def _open_binary(path: Path) -> IO[bytes]:
    """Open a file for binary streaming, decompressing ``.gz`` transparently."""
    _check_file(path)
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    return path.open("rb")


def _open_text(path: Path) -> IO[str]:
    """Open a file for line streaming. Undecodable bytes become lone surrogates (``surrogateescape``) so a bad byte
    costs one bad line, found by :func:`_line_problem`, instead of aborting the read."""
    _check_file(path)
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", errors="surrogateescape", newline="\n")
    return path.open("r", encoding="utf-8", errors="surrogateescape", newline="\n")


def _lines(path: Path, report: LoadReport) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` without the line end, counting lines read."""
    with _open_text(path) as fh:
        for number, text in enumerate(fh, start=1):
            report.lines += 1
            yield number, text.rstrip("\r\n")


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


# ---------------------------------------------------------------------------------------------------------------------
# MetaQA and TSV
#
# Each line first meets one compiled regex that accepts the common case (plain ids, no control characters, no
# undecodable bytes); only lines it rejects go through the field-by-field checks that explain what is wrong.

_C = "\x00-\x1f\x7f\udc80-\udcff"
_TSV_ID = f'[^\\s"{_C}](?:[^\\t{_C}]*[^\\s{_C}])?'
_TSV_FAST_RE = re.compile(f"({_TSV_ID})\t([^\\s\"{_C}]+)\t({_TSV_ID})(?:\t|$)")
_PIPE_ID = f'[^\\s"|{_C}](?:[^|{_C}]*[^\\s|{_C}])?'
_METAQA_FAST_RE = re.compile(f"({_PIPE_ID})\\|([^\\s\"|{_C}]+)\\|({_PIPE_ID})$")


def load_metaqa(builder: Sink, path: Path, *, skip_bad: bool = False) -> LoadReport:
    """Load a WikiMovies/MetaQA ``head|relation|tail`` file. Ids are labels; every entity is named by its label.

    Duplicate lines are fine (the store removes them). Blank lines are ignored.
    """
    started = time.perf_counter()
    path = Path(path)
    report = LoadReport("metaqa", [str(path)])
    named: set[str] = set()  # one add_name per entity; MetaQA is small enough to remember its labels
    add_name, fast, where = builder.add_name, _METAQA_FAST_RE.match, str(path)
    for number, line in _lines(path, report):
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
    if value.startswith('"') or _FREEBASE_ID_RE.match(value):
        return value
    if _FREEBASE_VALUE_RE.match(value):
        return make_literal(value)
    return value


def _load_tsv_triples(builder: Sink, path: Path, report: LoadReport, skip_bad: bool, *, freebase: bool,
                      entities: set[str] | None = None) -> None:
    """The TSV core shared by ``tsv`` and the Freebase gold-path file; ``entities`` collects non-literal ids."""
    fast, where = _TSV_FAST_RE.match, str(path)
    for number, line in _lines(path, report):
        match = fast(line)
        if match:
            head, rel, tail = match.groups()
        else:
            if not line.strip():
                continue
            try:
                _line_problem(line)
                parts = line.split("\t")
                if len(parts) < 3:
                    raise _BadLine(f"expected head<TAB>relation<TAB>tail, found {len(parts)} tab-separated field(s)")
                head, rel, tail = _node(parts[0], "head"), _relation(parts[1]), _node(parts[2], "tail")
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
    for number, line in _lines(path, report):
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


# ---------------------------------------------------------------------------------------------------------------------
# RDF through pyoxigraph

RDF_FORMATS = ("nt", "nq", "ttl", "trig")
# Blank-node ids are numbered per builder so two files loaded into one builder never share a `_:bN` by accident.
_BNODE_COUNTERS: weakref.WeakKeyDictionary[Any, list[int]] = weakref.WeakKeyDictionary()
# N-Triples/N-Quads are parsed in chunks of this many lines; a chunk with an error is re-parsed line by line.
_RDF_CHUNK_LINES = 20_000


def _schema_of(builder: Sink, schema: str | Schema | None = None) -> Schema:
    return get_schema(schema if schema is not None else getattr(builder, "schema", None))


class _CountingReader:
    """A binary reader that counts the lines pyoxigraph pulls through it (for the report)."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self.newlines = 0
        self.last_byte = b""

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        if data:
            self.newlines += data.count(b"\n")
            self.last_byte = data[-1:]
        return data

    def lines(self) -> int:
        return self.newlines + (1 if self.last_byte not in (b"", b"\n") else 0)


class _RdfMapper:
    """Maps pyoxigraph terms to kgqa ids and sends triples and names to the builder."""

    def __init__(self, builder: Sink, schema: Schema, report: LoadReport, skip_bad: bool) -> None:
        import pyoxigraph

        self.named_node, self.blank_node, self.literal_type = (pyoxigraph.NamedNode, pyoxigraph.BlankNode,
                                                               pyoxigraph.Literal)
        self.builder = builder
        self.schema = schema
        self.report = report
        self.skip_bad = skip_bad
        self.name_predicates = frozenset(schema.name_predicates)
        self.relations: dict[str, str] = {}  # predicate IRI -> relation id (vocabularies are small)
        self.bnodes: dict[str, str] = {}
        try:
            self.counter = _BNODE_COUNTERS.setdefault(builder, [0])
        except TypeError:  # a builder that cannot be weakly referenced: number blank nodes per load
            self.counter = [0]
        # Best name so far per entity: (rank, name); lower rank wins, ties keep the first seen.
        self.best_names: dict[str, tuple[int, str]] = {}
        # Schemas that keep the generic IRI mapping get it inlined (the hot path of an RDF import).
        self.plain_ids = type(schema).entity_id is Schema.entity_id
        self.entity_base = schema.entity_base

    def _bnode(self, label: str) -> str:
        node = self.bnodes.get(label)
        if node is None:
            node = self.bnodes[label] = f"_:b{self.counter[0]}"
            self.counter[0] += 1
        return node

    def _resource(self, term: Any, position: str) -> str:
        kind = type(term)
        if kind is self.named_node:
            iri = term.value
            if self.plain_ids and "%" not in iri and iri.startswith(self.entity_base):
                return iri[len(self.entity_base):]
            return self.schema.entity_id(iri)
        if kind is self.blank_node:
            return self._bnode(term.value)
        raise _BadLine(f"the {position} is a {kind.__name__}, which kgqa does not store (RDF-star?)")

    def _name_rank(self, lang: str | None) -> int:
        want = (self.schema.language or "").lower()
        if not lang:
            return 1
        lang = lang.lower()
        if lang == want:
            return 0
        if want and lang.startswith(want + "-"):
            return 2
        return 3  # another language: kept only when nothing better exists, so the entity is not taken for a CVT

    @staticmethod
    def literal(term: Any) -> str:
        value, lang = term.value, term.language
        # make_literal's output for the common case of nothing to escape, without its per-character loop.
        body = f'"{value}"' if not _NEEDS_ESCAPE_RE.search(value) else make_literal(value)
        if lang:
            return f"{body}@{lang}"
        datatype = term.datatype.value
        if datatype in (_XSD_STRING, _RDF_LANGSTRING):
            return body
        return f"{body}^^<{datatype}>"

    def add_all(self, quads: Any, where: Callable[[int], str]) -> None:
        """Send a batch of parsed statements to the builder; ``where(i)`` names statement ``i`` in an error."""
        add_triple, relations, name_predicates = self.builder.add_triple, self.relations, self.name_predicates
        literal_type = self.literal_type
        added = 0
        for index, quad in enumerate(quads):
            try:
                head = self._resource(quad.subject, "subject")
                predicate = quad.predicate.value
                obj = quad.object
                is_literal_object = type(obj) is literal_type
                if is_literal_object and predicate in name_predicates:
                    self._offer_name(head, obj)
                    continue
                relation = relations.get(predicate)
                if relation is None:
                    relation = self.schema.relation_id(predicate)
                    if len(relations) < 1_000_000:
                        relations[predicate] = relation
                tail = self.literal(obj) if is_literal_object else self._resource(obj, "object")
                add_triple(head, relation, tail)
            except ImportAborted:
                raise
            except (_BadLine, KGQAError) as exc:
                _handle_bad(self.report, where(index), str(exc), self.skip_bad)
                continue
            added += 1
        self.report.triples += added

    def _offer_name(self, entity: str, term: Any) -> None:
        if not term.value.strip():
            return
        rank = self._name_rank(term.language)
        best = self.best_names.get(entity)
        if best is None or rank < best[0]:
            self.best_names[entity] = (rank, term.value)

    def flush_names(self) -> None:
        for entity, (_, name) in self.best_names.items():
            self.builder.add_name(entity, name)
            self.report.names += 1
        self.best_names = {}


def _syntax_line(exc: SyntaxError) -> int | None:
    return exc.lineno if isinstance(exc.lineno, int) else None


def _syntax_message(exc: SyntaxError) -> str:
    text = str(exc.msg if exc.msg else exc)
    return re.sub(r"^Parser error (at|between) line \d+[^:]*: ", "", text)


def _load_line_rdf(path: Path, fmt: Any, mapper: _RdfMapper, report: LoadReport, skip_bad: bool) -> None:
    """N-Triples / N-Quads: one statement per line, parsed in chunks; a failing chunk is re-parsed line by line so the
    good lines around a bad one survive and every error has its exact line number."""
    import pyoxigraph

    parse = pyoxigraph.parse

    def parse_chunk(lines: list[bytes], first: int) -> None:
        try:
            quads = list(parse(b"".join(lines), fmt))
        except SyntaxError as exc:
            if not skip_bad:
                line = first + (_syntax_line(exc) or 1) - 1
                _handle_bad(report, f"{path}:{line}", _syntax_message(exc), skip_bad)
            for offset, raw in enumerate(lines):
                try:
                    single = list(parse(raw, fmt))
                except SyntaxError as exc_line:
                    _handle_bad(report, f"{path}:{first + offset}", _syntax_message(exc_line), skip_bad)
                    continue
                mapper.add_all(single, lambda _i, n=first + offset: f"{path}:{n}")
            return
        starts: list[int] = []

        def where(index: int) -> str:
            # A clean chunk holds one statement per non-blank, non-comment line: that gives each statement its line.
            if not starts:
                starts.extend(_line_starts(lines, first))
            return f"{path}:{starts[index] if index < len(starts) else first}"

        mapper.add_all(quads, where)

    with _open_binary(path) as fh:
        chunk: list[bytes] = []
        first = 1
        for number, raw in enumerate(fh, start=1):
            if not chunk:
                first = number
            chunk.append(raw if raw.endswith(b"\n") else raw + b"\n")
            if len(chunk) >= _RDF_CHUNK_LINES:
                report.lines += len(chunk)
                parse_chunk(chunk, first)
                chunk = []
        if chunk:
            report.lines += len(chunk)
            parse_chunk(chunk, first)


def _line_starts(lines: list[bytes], first: int) -> list[int]:
    """Line number of each statement in a clean chunk: every line that is not blank or a comment holds one statement."""
    numbers = []
    for offset, raw in enumerate(lines):
        stripped = raw.strip()
        if stripped and not stripped.startswith(b"#"):
            numbers.append(first + offset)
    return numbers


def _load_stream_rdf(path: Path, fmt: Any, mapper: _RdfMapper, report: LoadReport, skip_bad: bool) -> None:
    """Turtle / TriG: one streaming parse. With ``skip_bad`` the parser resynchronises after an error at the next
    statement end, so a statement next to a bad one may be lost with it (each error counts as one skipped line)."""
    import pyoxigraph

    with _open_binary(path) as raw:
        reader = _CountingReader(raw)
        parser = pyoxigraph.parse(reader, fmt, base_iri=path.resolve().as_uri())
        last_error: tuple[int | None, str] | None = None

        def where(_index: int) -> str:
            # pyoxigraph gives no position for a parsed statement; the reader's count is where parsing has got to.
            return f"{path} (statement read by line {reader.lines()})"

        batch: list[Any] = []
        while True:
            try:
                batch.append(next(parser))
            except StopIteration:
                break
            except SyntaxError as exc:
                mapper.add_all(batch, where)
                batch = []
                key = (_syntax_line(exc), str(exc))
                if key == last_error:  # no progress: stop rather than loop on the same error
                    break
                last_error = key
                _handle_bad(report, f"{path}:{_syntax_line(exc) or '?'}", _syntax_message(exc), skip_bad)
                continue
            if len(batch) >= 10_000:
                mapper.add_all(batch, where)
                batch = []
        mapper.add_all(batch, where)
        report.lines += reader.lines()


def load_rdf(builder: Sink, path: Path, fmt: str, *, schema: str | Schema | None = None,
             skip_bad: bool = False) -> LoadReport:
    """Load N-Triples (``nt``), N-Quads (``nq``), Turtle (``ttl``) or TriG (``trig``) through pyoxigraph.

    IRIs map to ids through the schema (``schema.entity_id`` / ``relation_id``); literals keep their N-Triples form
    (``xsd:string`` written plain); objects of the schema's name predicates become names, preferring the schema's
    language, then no language, then a regional variant, then any other language (first seen wins within a rank).
    Blank nodes become ``_:bN``; named graphs are merged into one graph.
    """
    import pyoxigraph

    started = time.perf_counter()
    path = Path(path)
    if fmt not in RDF_FORMATS:
        raise ConfigError(f"RDF format {fmt!r} is not one of {', '.join(RDF_FORMATS)}")
    _check_file(path)
    report = LoadReport(fmt, [str(path)])
    mapper = _RdfMapper(builder, _schema_of(builder, schema), report, skip_bad)
    ox_format = {"nt": pyoxigraph.RdfFormat.N_TRIPLES, "nq": pyoxigraph.RdfFormat.N_QUADS,
                 "ttl": pyoxigraph.RdfFormat.TURTLE, "trig": pyoxigraph.RdfFormat.TRIG}[fmt]
    try:
        if fmt in ("nt", "nq"):
            _load_line_rdf(path, ox_format, mapper, report, skip_bad)
        else:
            _load_stream_rdf(path, ox_format, mapper, report, skip_bad)
    except OSError as exc:
        raise DataError(f"{path}: cannot read: {exc}") from None
    mapper.flush_names()
    return _finish(report, started)


# ---------------------------------------------------------------------------------------------------------------------
# Freebase-flavoured pieces


def fb15k_mid(mid: str) -> str:
    """``/m/0abc`` -> ``m.0abc`` (FB15k writes mids as paths)."""
    if mid.startswith("/") and mid.count("/") == 2:
        return mid[1:].replace("/", ".", 1)
    return mid


def fb15k_relation(relation: str) -> tuple[str, ...]:
    """``/a/b/c`` -> ``("a.b.c",)``; a compound ``/film/actor/film./film/performance/film`` (a collapsed CVT) ->
    ``("film.actor.film", "film.performance.film")``."""
    parts = relation.split("./")
    out = []
    for i, part in enumerate(parts):
        text = part if i == 0 else "/" + part
        if not text.startswith("/") or len(text) < 2:
            raise _BadLine(f"relation {relation!r} is not a Freebase path like /a/b/c")
        out.append(text[1:].replace("/", "."))
    return tuple(out)


def synthetic_cvt(head: str, relation: str, tail: str) -> str:
    """The id of the mediator node re-inserted into a compound FB15k-237 relation: deterministic, nameless, and
    inside the Freebase id grammar (``m.cvt_`` + 16 hex digits)."""
    digest = hashlib.blake2b(f"{head}\t{relation}\t{tail}".encode(), digest_size=8).hexdigest()
    return f"m.cvt_{digest}"


def _read_id_table(path: Path, report: LoadReport, skip_bad: bool) -> dict[int, str]:
    """OpenKE ``entity2id.txt`` / ``relation2id.txt``: a count line, then ``name<TAB>id`` lines."""
    table: dict[int, str] = {}
    expected: int | None = None
    for number, line in _lines(path, report):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        if expected is None:
            try:
                expected = int(line.strip())
            except ValueError:
                raise DataError(f"{where}: an OpenKE id file starts with a count line, found {line[:80]!r}") from None
            continue
        parts = line.split("\t") if "\t" in line else line.split()
        try:
            _line_problem(line)
            if len(parts) != 2 or not parts[1].strip().isdigit():
                raise _BadLine("expected name<TAB>integer id")
            name, index = _node(parts[0], "name"), int(parts[1])
            if index in table:
                raise _BadLine(f"id {index} given twice")
        except _BadLine as exc:
            _handle_bad(report, where, str(exc), skip_bad)
            continue
        table[index] = name
    if expected is None:
        raise DataError(f"{path}: empty OpenKE id file")
    if expected != len(table) and not skip_bad:
        raise DataError(f"{path}: the count line says {expected} ids but {len(table)} were listed")
    return table


def load_fb15k237(builder: Sink, directory: Path, *, skip_bad: bool = False,
                  entities: set[str] | None = None) -> LoadReport:
    """FB15k-237 from OpenKE id files (``train2id``/``valid2id``/``test2id``: a count line, then ``head tail relation``
    ids) with ``entity2id.txt`` and ``relation2id.txt``. Mids and relations are normalised to Freebase form; a compound
    relation becomes two triples through a synthetic CVT (:func:`synthetic_cvt`). Names are not loaded here.

    ``entities``, if given, collects every entity id seen (for name filtering).
    """
    started = time.perf_counter()
    directory = Path(directory)
    report = LoadReport("fb15k237")
    ent_path, rel_path = directory / "entity2id.txt", directory / "relation2id.txt"
    report.sources += [str(ent_path), str(rel_path)]
    mids = {i: fb15k_mid(m) for i, m in _read_id_table(ent_path, report, skip_bad).items()}
    relations: dict[int, tuple[str, ...]] = {}
    for i, rel in _read_id_table(rel_path, report, skip_bad).items():
        try:
            relations[i] = fb15k_relation(rel)
        except _BadLine as exc:
            _handle_bad(report, f"{rel_path} (relation id {i})", str(exc), skip_bad)
    for split in ("train2id.txt", "valid2id.txt", "test2id.txt"):
        path = directory / split
        report.sources.append(str(path))
        header_seen = False
        expected = listed = 0
        for number, line in _lines(path, report):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            if not header_seen:
                header_seen = True
                try:
                    expected = int(line.strip())
                except ValueError:
                    raise DataError(f"{where}: an OpenKE triple file starts with a count line, "
                                    f"found {line[:80]!r}") from None
                continue
            parts = line.split()
            try:
                if len(parts) != 3 or not all(p.isdigit() for p in parts):
                    raise _BadLine("expected three integer ids 'head tail relation'")
                h, t, r = (int(p) for p in parts)
                if h not in mids or t not in mids:
                    raise _BadLine(f"entity id {h if h not in mids else t} is not in entity2id.txt")
                if r not in relations:
                    raise _BadLine(f"relation id {r} is not in relation2id.txt")
            except _BadLine as exc:
                _handle_bad(report, where, str(exc), skip_bad)
                continue
            listed += 1
            head, tail, hops = mids[h], mids[t], relations[r]
            if entities is not None:
                entities.add(head)
                entities.add(tail)
            if len(hops) == 1:
                _add_triple(builder, report, head, hops[0], tail, skip_bad, where)
                continue
            # A compound relation walks through one mediator per hop boundary (FB15k-237 only has two-hop ones).
            nodes = [head]
            for k in range(len(hops) - 1):
                nodes.append(synthetic_cvt(head, ".".join(hops[: k + 1]) + "|" + ".".join(hops), tail))
                report.synthetic_cvts += 1
            nodes.append(tail)
            for k, hop in enumerate(hops):
                _add_triple(builder, report, nodes[k], hop, nodes[k + 1], skip_bad, where)
        if header_seen and expected != listed and not skip_bad:
            raise DataError(f"{path}: the count line says {expected} triples but {listed} were listed")
    return _finish(report, started)


def _unescape_freebase_name(name: str) -> str:
    return _ESCAPED_QUOTE_RE.sub('"', name)


def load_freebase_pieces(data_dir: Path, builder: Sink, include_fb15k: bool = True, *,
                         skip_bad: bool = False) -> LoadReport:
    """Load the Freebase-flavoured directory (``../shared/data/freebase``) into a Freebase-schema builder.

    * ``goldpath_triples.tsv``: raw Freebase triples with MIDs and CVT nodes (the 4th column, question ids, is ignored);
    * ``fb15k237/`` (if ``include_fb15k``): normalised as in :func:`load_fb15k237`;
    * ``names.tsv`` then ``fb15k237/FB15k_mid2name.txt`` (underscores read as spaces) as a fallback: names only for
      entities that occur in the loaded triples (a name alone would add an edgeless node); ``\\"`` in names is read as
      ``"``. CVT nodes (real and synthetic) stay nameless.
    """
    started = time.perf_counter()
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise DataError(f"{data_dir}: not a directory (expected the Freebase pieces: goldpath_triples.tsv, names.tsv, "
                        "fb15k237/)")
    report = LoadReport("freebase-pieces")
    entities: set[str] = set()
    gold = data_dir / "goldpath_triples.tsv"
    _load_tsv_triples(builder, gold, report, skip_bad, freebase=True, entities=entities)
    report.sources.append(str(gold))
    fb_dir = data_dir / "fb15k237"
    if include_fb15k:
        report.merge(load_fb15k237(builder, fb_dir, skip_bad=skip_bad, entities=entities))
    names_report = LoadReport("names")
    named: set[str] = set()
    _load_freebase_names(builder, data_dir / "names.tsv", names_report, entities, named, skip_bad, fb15k=False)
    mid2name = fb_dir / "FB15k_mid2name.txt"
    if include_fb15k and mid2name.exists():
        _load_freebase_names(builder, mid2name, names_report, entities, named, skip_bad, fb15k=True)
    report.merge(names_report)
    return _finish(report, started)


def _load_freebase_names(builder: Sink, path: Path, report: LoadReport, entities: set[str], named: set[str],
                         skip_bad: bool, *, fb15k: bool) -> None:
    report.sources.append(str(path))
    for number, line in _lines(path, report):
        if not line.strip():
            continue
        parts = line.split("\t", 1)
        try:
            _line_problem(line)
            if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
                raise _BadLine("expected mid<TAB>name")
        except _BadLine as exc:
            _handle_bad(report, f"{path}:{number}", str(exc), skip_bad)
            continue
        mid = fb15k_mid(parts[0].strip()) if fb15k else parts[0].strip()
        if mid not in entities or mid in named:
            continue
        named.add(mid)
        name = parts[1].strip().replace("_", " ") if fb15k else parts[1].strip()
        builder.add_name(mid, _unescape_freebase_name(name))
        report.names += 1


# ---------------------------------------------------------------------------------------------------------------------
# Registry

FORMATS = ("metaqa", "tsv", "nt", "ttl", "nq", "trig", "freebase-pieces")
_SUFFIXES = {".nt": "nt", ".ntriples": "nt", ".ttl": "ttl", ".turtle": "ttl", ".nq": "nq", ".nquads": "nq",
             ".trig": "trig", ".tsv": "tsv"}


def guess_format(path: Path) -> str:
    """Guess a loader format from a path: a directory with ``goldpath_triples.tsv`` is ``freebase-pieces``, RDF and
    ``.tsv`` go by extension (``.gz`` ignored), a ``.txt`` file by its first non-blank line (``a|b|c`` = ``metaqa``)."""
    path = Path(path)
    if path.is_dir():
        if (path / "goldpath_triples.tsv").is_file():
            return "freebase-pieces"
        raise ConfigError(f"{path} is a directory but not the Freebase pieces (no goldpath_triples.tsv); "
                          "name a file, or pass --format")
    name = path.name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    suffix = Path(name).suffix
    if suffix in _SUFFIXES:
        return _SUFFIXES[suffix]
    if suffix in (".txt", ".csv", "") and path.is_file():
        with _open_binary(path) as fh:
            for raw in fh:
                line = raw.decode("utf-8", errors="replace").strip()
                if not line:
                    continue
                if "\t" in line and len(line.split("\t")) >= 3:
                    return "tsv"
                if "\t" not in line and len(line.split("|")) == 3:
                    return "metaqa"
                break
    raise ConfigError(f"cannot guess the format of {path}; pass one of: {', '.join(FORMATS)}")


def load_into(builder: Sink, source: Path, fmt: str, *, names: Path | None = None,
              skip_bad: bool = False) -> LoadReport:
    """Load ``source`` in format ``fmt`` (one of :data:`FORMATS`; ``freebase-pieces`` takes the directory) into
    ``builder``; ``names`` is an optional ``id<TAB>name`` file loaded afterwards (any format)."""
    started = time.perf_counter()
    source = Path(source)
    key = (fmt or "").strip().lower()
    aliases = {"ntriples": "nt", "n-triples": "nt", "turtle": "ttl", "nquads": "nq", "n-quads": "nq",
               "freebase": "freebase-pieces", "wikimovies": "metaqa"}
    key = aliases.get(key, key)
    if key not in FORMATS:
        raise ConfigError(f"unknown KG file format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if key == "freebase-pieces":
        report = load_freebase_pieces(source, builder, skip_bad=skip_bad)
    else:
        _check_file(source)
        if key == "metaqa":
            report = load_metaqa(builder, source, skip_bad=skip_bad)
        elif key == "tsv":
            report = load_tsv(builder, source, skip_bad=skip_bad)
        else:
            report = load_rdf(builder, source, key, skip_bad=skip_bad)
    if names is not None:
        load_names_tsv(builder, Path(names), skip_bad=skip_bad, report=report)
    report.seconds = time.perf_counter() - started
    return report


__all__ = [
    "FORMATS", "LoadReport", "fb15k_mid", "fb15k_relation", "guess_format", "load_fb15k237", "load_freebase_pieces",
    "load_into", "load_metaqa", "load_names_tsv", "load_rdf", "load_tsv", "synthetic_cvt",
]
