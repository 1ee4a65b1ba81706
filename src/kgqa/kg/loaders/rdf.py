"""RDF through pyoxigraph: N-Triples and N-Quads parsed in chunks (a bad line costs only itself), Turtle and TriG
streamed; IRIs become ids through the schema, name predicates become names."""

from __future__ import annotations

import re
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from kgqa.errors import ConfigError, DataError, ImportAborted, KGQAError
from kgqa.kg.base import make_literal
from kgqa.kg.loaders.common import (
    LoadReport,
    Sink,
    _BadLine,
    _check_file,
    _field_limit,
    _finish,
    _handle_bad,
    _open_binary,
    _schema_of,
    _too_long,
)
from kgqa.kg.schema import Schema

_XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
_RDF_LANGSTRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"
_NEEDS_ESCAPE_RE = re.compile('[\\\\"\n\r\t]')
RDF_FORMATS = ("nt", "nq", "ttl", "trig")
# Blank-node ids are numbered per builder so two files loaded into one builder never share a `_:bN` by accident.
_BNODE_COUNTERS: weakref.WeakKeyDictionary[Any, list[int]] = weakref.WeakKeyDictionary()
# N-Triples/N-Quads are parsed in chunks of this many lines; a chunk with an error is re-parsed line by line.
_RDF_CHUNK_LINES = 20_000


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
        self.limit = _field_limit()  # the longest term accepted (see kgqa.kg.loaders.common.max_field_chars)

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

    def add_all(self, quads: Any, where: Callable[[int], str], *, check: bool = True) -> None:
        """Send a batch of parsed statements to the builder; ``where(i)`` names statement ``i`` in an error. ``check``
        False skips the field-length test, for a batch whose source lines are all no longer than the limit."""
        add_triple, relations, name_predicates = self.builder.add_triple, self.relations, self.name_predicates
        literal_type, limit = self.literal_type, self.limit
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
                    if len(relation) > limit:
                        raise _BadLine(_too_long("the predicate", len(relation), limit))
                    if len(relations) < 1_000_000:
                        relations[predicate] = relation
                tail = self.literal(obj) if is_literal_object else self._resource(obj, "object")
                if check and (len(head) > limit or len(tail) > limit):
                    what, value = ("the subject", head) if len(head) > limit else ("the object", tail)
                    raise _BadLine(_too_long(what, len(value), limit))
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
        if len(entity) > self.limit or len(term.value) > self.limit:
            what, value = ("the subject", entity) if len(entity) > self.limit else ("the name", term.value)
            raise _BadLine(_too_long(what, len(value), self.limit))
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
                mapper.add_all(single, lambda _i, n=first + offset: f"{path}:{n}", check=2 * len(raw) > mapper.limit)
            return
        starts: list[int] = []

        def where(index: int) -> str:
            # A clean chunk holds one statement per non-blank, non-comment line: that gives each statement its line.
            if not starts:
                starts.extend(_line_starts(lines, first))
            return f"{path}:{starts[index] if index < len(starts) else first}"

        # A term's id is at most twice as long as its line (an id re-escapes a raw tab of a literal as two characters),
        # so a chunk whose lines are all under half the limit needs no test per statement.
        mapper.add_all(quads, where, check=2 * max(map(len, lines)) > mapper.limit)

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
