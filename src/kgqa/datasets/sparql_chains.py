"""Gold relation chains and constraints read from the text of a benchmark's SPARQL query (CWQ's, WebQSP's).

The reader knows the small part of SPARQL these queries use: ``PREFIX`` declarations, ``SELECT [DISTINCT] ?x``, a
``WHERE`` group of triple patterns (``subject predicate object .``, with ``;`` and ``,`` lists), nested groups joined by
``UNION``, ``OPTIONAL`` groups (ignored: they never restrict the answers), ``FILTER`` (its ``EXISTS`` groups are read as
side patterns; ``?x != T``, ``str(?v) = "..."`` and ``?v = "..."`` are understood, anything else is skipped), ``#``
comments, and ``ORDER BY`` / ``LIMIT`` / ``OFFSET`` after the group. Whatever else it meets (``BIND``, ``VALUES``,
``MINUS``, sub-queries, a variable predicate on the chain ...) makes the query unreadable: :func:`read_sparql_chain`
returns None and :func:`sparql_problem` says why, so a caller counts instead of crashing on a weird query.

The chain: a path of triple patterns from a topic entity (a constant ``ns:m.…`` in a pattern) to the selected variable,
through variables only, each pattern walked in either direction (``?c ns:r ns:m.topic`` walked from the topic is
``Hop("r", Direction.IN)``). When several exist, the chosen one

1. passes the node the query names in ``FILTER (?x != T)`` when it can: CWQ's generator writes that filter for the
   node the original WebQSP query started from (the topic entity, or for a composition the variable ``?c`` that took
   its place), so a second topic that is only a constraint value ("Male" in "which of JFK's brothers ...") does not
   become the start just because its pattern is one hop from ``?x``;
2. is the shortest;
3. starts at the topic mentioned first in the query, then follows the patterns in the query's order (UNION branches
   in order), so the choice is deterministic.

Constraints (:class:`GoldConstraint`): every other triple pattern, side patterns of ``FILTER EXISTS`` included, that
hangs on a node of the chain by one triple and ends in a constant (the value) or in a variable nothing else reaches
(value None: the query orders or ranges by it, unless an equality filter gives its value). A side branch longer than
one triple is not a constraint and is left out.

Terms: Freebase ids and relations lose their ``ns:`` prefix (``m.0abc``, ``film.film.directed_by``), literals are
written in kgqa's N-Triples form (``"1998"^^<http://www.w3.org/2001/XMLSchema#dateTime>``), variables keep their
``?``, any other IRI keeps its angle brackets.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from kgqa.kg.base import Chain, ConstraintChain, Direction, Hop, make_literal

__all__ = ["GoldConstraint", "SparqlChain", "read_sparql_chain", "sparql_problem"]

FREEBASE_NS = "http://rdf.freebase.com/ns/"
XSD = "http://www.w3.org/2001/XMLSchema#"
RDF_TYPE = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"

# More UNION combinations than this is not a benchmark's gold query; refusing keeps the reading linear in practice.
_MAX_ALTERNATIVES = 64
# No gold chain of CWQ or WebQSP is longer than 4 hops; 8 bounds the path search on a pathological query.
_MAX_CHAIN_LENGTH = 8


@dataclass(frozen=True)
class GoldConstraint:
    """A gold constraint on a question's chain: at ``position`` (0 the topic ... ``len(chain)`` the answer) the
    chain's node has a ``relation`` edge in ``direction`` (from that node) to ``value``: an entity id (``m.0abc``), a
    literal in N-Triples form, or None when the query only orders or ranges by what the edge reaches."""

    position: int
    relation: str
    direction: Direction
    value: str | None

    def as_constraint_chain(self) -> ConstraintChain:
        """The same constraint as the KG's :class:`~kgqa.kg.base.ConstraintChain` (for ``filter_by_constraint``)."""
        return ConstraintChain(self.position, (Hop(self.relation, self.direction),), self.value)


@dataclass(frozen=True)
class SparqlChain:
    """What :func:`read_sparql_chain` read: the topic the chain starts from, the chain, the query's term at each node
    of the chain (``nodes[0]`` the topic, ``nodes[-1]`` the answer variable) and the constraints hanging on it."""

    topic: str
    chain: Chain
    nodes: tuple[str, ...]
    constraints: tuple[GoldConstraint, ...]


class _Unreadable(ValueError):
    """Raised inside the reader for a query it does not understand; never leaves this module."""


@dataclass(frozen=True)
class _Pattern:
    subject: str
    predicate: str
    object: str

    @property
    def relation(self) -> str | None:
        """The Freebase relation of the pattern, None for a variable or foreign predicate (never a hop)."""
        return self.predicate if _is_constant(self.predicate) and not self.predicate.startswith("<") else None


@dataclass
class _Query:
    answer: str
    alternatives: list[list[_Pattern]]  # one pattern list per combination of UNION branches
    side_patterns: list[_Pattern] = field(default_factory=list)  # inside FILTER [NOT] EXISTS
    equalities: dict[str, str] = field(default_factory=dict)  # ?v -> literal, from FILTER (str(?v) = "...")
    exclusions: list[tuple[str, str]] = field(default_factory=list)  # (?v, T) from FILTER (?v != T)
    text_order: list[str] = field(default_factory=list)  # subject and object constants, in the query's order


def _is_variable(term: str) -> bool:
    return term.startswith("?")


def _is_constant(term: str) -> bool:
    """An entity or relation id, or a foreign IRI: not a variable, not a literal."""
    return not term.startswith(("?", '"'))


# ---------------------------------------------------------------------------------------------------------------------
# Tokens

_TOKEN_RE = re.compile(r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<iri><[^<>"{}|^`\\\s]*>)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')(?P<lang>@[A-Za-z]+(?:-[A-Za-z0-9]+)*)?
  | (?P<var>[?$][A-Za-z0-9_]+)
  | (?P<pname>[A-Za-z][\w\-]*:(?:[\w\-.%]*[\w\-%])?)
  | (?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
  | (?P<word>[A-Za-z_]\w*)
  | (?P<op>\|\||&&|!=|<=|>=|\^\^|[{}()\[\].;,=<>!*/+\-])
""", re.VERBOSE)

_STRING_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "b": "\b", "f": "\f", '"': '"', "'": "'", "\\": "\\"}


@dataclass(frozen=True)
class _Token:
    kind: str  # iri | string | var | pname | number | word | op
    text: str
    lang: str | None = None

    def is_op(self, *texts: str) -> bool:
        return self.kind == "op" and self.text in texts

    def is_word(self, *words: str) -> bool:
        return self.kind == "word" and self.text.upper() in words


def _tokens(text: str) -> list[_Token]:
    out = []
    pos = 0
    while pos < len(text):
        match = _TOKEN_RE.match(text, pos)
        if match is None:
            raise _Unreadable(f"unexpected character {text[pos]!r} at offset {pos}")
        pos = match.end()
        kind = match.lastgroup
        if kind == "lang":  # the language tag is matched after the string it belongs to
            kind = "string"
        if kind == "space":
            continue
        assert kind is not None
        lang = match.group("lang")
        out.append(_Token(kind, match.group(kind), lang[1:] if lang else None))
    return out


# ---------------------------------------------------------------------------------------------------------------------
# Parsing


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.at = 0
        # CWQ's queries use xsd: without declaring it; a declaration of either replaces the default
        self.prefixes = {"xsd": XSD, "ns": FREEBASE_NS}
        self.query = _Query(answer="", alternatives=[[]])

    # -- token access

    def peek(self) -> _Token | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self) -> _Token:
        token = self.peek()
        if token is None:
            raise _Unreadable("the query ends too early")
        self.at += 1
        return token

    def peek_within(self, what: str) -> _Token:
        """The next token, which must exist: the query may not end inside ``what``."""
        token = self.peek()
        if token is None:
            raise _Unreadable(f"unclosed {what}")
        return token

    def expect_op(self, text: str) -> None:
        token = self.take()
        if not token.is_op(text):
            raise _Unreadable(f"expected {text!r}, found {token.text!r}")

    # -- the query

    def parse(self) -> _Query:
        while (token := self.peek()) is not None and token.is_word("PREFIX", "BASE"):
            self.take()
            if token.is_word("BASE"):
                raise _Unreadable("BASE is not supported")
            name, iri = self.take(), self.take()
            if name.kind != "pname" or not name.text.endswith(":") or iri.kind != "iri":
                raise _Unreadable(f"malformed PREFIX {name.text} {iri.text}")
            self.prefixes[name.text[:-1]] = iri.text[1:-1]
        self.query.answer = self.select()
        token = self.peek()
        if token is not None and token.is_word("WHERE"):
            self.take()
        self.query.alternatives = self.group()
        self.modifiers()
        return self.query

    def select(self) -> str:
        if not self.take().is_word("SELECT"):
            raise _Unreadable("not a SELECT query")
        if (token := self.peek()) is not None and token.is_word("DISTINCT", "REDUCED"):
            self.take()
        selected = []
        while (token := self.peek()) is not None and token.kind == "var":
            selected.append(self.take().text)
        if len(selected) != 1:
            raise _Unreadable("the query must select exactly one variable (no *, no expression)")
        return "?" + selected[0][1:]

    def modifiers(self) -> None:
        """ORDER BY, LIMIT and OFFSET after the group: they choose among the answers, never change the chain."""
        while (token := self.peek()) is not None:
            if token.is_word("ORDER"):
                self.take()
                if not self.take().is_word("BY"):
                    raise _Unreadable("ORDER without BY")
                while (token := self.peek()) is not None and not token.is_word("LIMIT", "OFFSET"):
                    self.take()
            elif token.is_word("LIMIT", "OFFSET"):
                self.take()
                if self.take().kind != "number":
                    raise _Unreadable(f"{token.text} without a number")
            else:
                raise _Unreadable(f"unexpected {token.text!r} after the WHERE group")

    # -- groups

    def group(self) -> list[list[_Pattern]]:
        """A ``{ ... }`` group as its alternatives: one pattern list per combination of its UNION branches."""
        self.expect_op("{")
        alternatives: list[list[_Pattern]] = [[]]
        while True:
            token = self.peek_within("group")
            if token.is_op("}"):
                self.take()
                return alternatives
            if token.is_op("."):
                self.take()
            elif token.is_word("FILTER"):
                self.take()
                self.filter()
            elif token.is_word("OPTIONAL"):
                self.take()
                self.group()  # an optional pattern never restricts the answers
            elif token.is_op("{"):
                branches = self.group()
                while (nxt := self.peek()) is not None and nxt.is_word("UNION"):
                    self.take()
                    branches = branches + self.group()
                alternatives = [a + b for a in alternatives for b in branches]
                if len(alternatives) > _MAX_ALTERNATIVES:
                    raise _Unreadable(f"more than {_MAX_ALTERNATIVES} UNION combinations")
            elif token.kind == "word" and token.text.lower() != "a":
                raise _Unreadable(f"{token.text.upper()} is not supported")
            else:
                patterns = self.triples()
                for alternative in alternatives:
                    alternative.extend(patterns)

    def triples(self) -> list[_Pattern]:
        """``subject verb object (, object)* (; verb object ...)*``, up to its ``.`` (or the group's end)."""
        subject = self.term()
        patterns = []
        while True:
            verb = self.take()
            predicate = RDF_TYPE if verb.kind == "word" and verb.text == "a" else self.term(verb, record=False)
            patterns.append(_Pattern(subject, predicate, self.term()))
            while (token := self.peek()) is not None and token.is_op(","):
                self.take()
                patterns.append(_Pattern(subject, predicate, self.term()))
            token = self.peek()
            if token is None or not token.is_op(";"):
                break
            while (token := self.peek()) is not None and token.is_op(";"):
                self.take()
            if token is None or token.is_op(".", "}"):  # a trailing ';' before the end of the block
                break
        if (token := self.peek()) is not None and token.is_op("."):
            self.take()
        return patterns

    def filter(self) -> None:
        """A FILTER: its EXISTS groups become side patterns; ``?v != T`` and ``str(?v) = "..."`` are noted."""
        token = self.take()
        if token.is_word("NOT", "EXISTS"):
            if token.is_word("NOT") and not self.take().is_word("EXISTS"):
                raise _Unreadable("NOT without EXISTS in a FILTER")
            self.side_group()
            return
        if token.kind == "word" and (nxt := self.peek()) is not None and nxt.is_op("("):  # FILTER regex(...)
            token = self.take()
        if not token.is_op("("):
            raise _Unreadable(f"FILTER followed by {token.text!r}")
        expression: list[_Token] = []
        depth = 1
        while depth:
            token = self.peek_within("FILTER")
            if token.is_op("{"):
                self.side_group()
                continue
            self.take()
            depth += token.is_op("(") - token.is_op(")")
            if depth:
                expression.append(token)
        self.note_comparison(expression)

    def side_group(self) -> None:
        for alternative in self.group():
            self.query.side_patterns.extend(alternative)

    def note_comparison(self, expression: list[_Token]) -> None:
        texts = [t.text for t in expression]
        if len(expression) == 3 and expression[0].kind == "var" and texts[1] == "!=":
            self.query.exclusions.append(("?" + texts[0][1:], self.term(expression[2], record=False)))
        elif len(expression) == 6 and expression[0].is_word("STR") and texts[1] == "(" and texts[3:5] == [")", "="] \
                and expression[2].kind == "var" and expression[5].kind == "string":
            self.query.equalities["?" + texts[2][1:]] = self.term(expression[5], record=False)
        elif len(expression) == 3 and expression[0].kind == "var" and texts[1] == "=" \
                and expression[2].kind == "string":
            self.query.equalities["?" + texts[0][1:]] = self.term(expression[2], record=False)

    # -- terms

    def term(self, token: _Token | None = None, *, record: bool = True) -> str:
        token = token or self.take()
        if token.kind == "var":
            return "?" + token.text[1:]
        if token.kind in ("iri", "pname"):
            term = self.constant(token)
            if record and term not in self.query.text_order:
                self.query.text_order.append(term)
            return term
        if token.kind == "string":
            return self.literal(token)
        if token.kind == "number":
            kind = "decimal" if "." in token.text else "integer"
            return make_literal(token.text, datatype=XSD + ("double" if "e" in token.text.lower() else kind))
        if token.is_word("TRUE", "FALSE"):
            return make_literal(token.text.lower(), datatype=XSD + "boolean")
        raise _Unreadable(f"{token.text!r} is not a term")

    def iri(self, token: _Token) -> str:
        if token.kind == "iri":
            return token.text[1:-1]
        prefix, _, local = token.text.partition(":")
        if prefix not in self.prefixes:
            raise _Unreadable(f"undeclared prefix {prefix}:")
        return self.prefixes[prefix] + local

    def constant(self, token: _Token) -> str:
        iri = self.iri(token)
        return iri[len(FREEBASE_NS):] if iri.startswith(FREEBASE_NS) else f"<{iri}>"

    def literal(self, token: _Token) -> str:
        value = re.sub(r"\\(.)", lambda m: _STRING_ESCAPES.get(m.group(1), m.group(1)), token.text[1:-1])
        if (nxt := self.peek()) is not None and nxt.is_op("^^"):
            self.take()
            datatype = self.take()
            if datatype.kind not in ("iri", "pname"):
                raise _Unreadable(f"datatype {datatype.text!r} is not an IRI")
            return make_literal(value, datatype=self.iri(datatype))
        return make_literal(value, lang=token.lang)


# ---------------------------------------------------------------------------------------------------------------------
# The chain and its constraints


@dataclass(frozen=True)
class _Path:
    topic: str
    hops: tuple[tuple[int, Direction], ...]  # (pattern index, direction) per hop
    nodes: tuple[str, ...]


def _orientations(pattern: _Pattern) -> tuple[tuple[str, str, Direction], ...]:
    """The pattern walked from either end: (near end, far end, direction of the hop from the near end)."""
    return (pattern.subject, pattern.object, Direction.OUT), (pattern.object, pattern.subject, Direction.IN)


def _paths(patterns: list[_Pattern], topic: str, answer: str) -> Iterator[_Path]:
    """Every simple path from ``topic`` to ``answer`` through variables, patterns in query order."""

    def walk(node: str, hops: tuple[tuple[int, Direction], ...], nodes: tuple[str, ...]) -> Iterator[_Path]:
        if node == answer:
            yield _Path(topic, hops, nodes)
            return
        if len(hops) == _MAX_CHAIN_LENGTH or (hops and not _is_variable(node)):
            return
        for index, pattern in enumerate(patterns):
            if pattern.relation is None:
                continue
            for near, far, direction in _orientations(pattern):
                if near == node and far not in nodes:
                    yield from walk(far, (*hops, (index, direction)), (*nodes, far))

    yield from walk(topic, (), (topic,))


def _choose_path(query: _Query, topics: Sequence[str]) -> tuple[_Path, list[_Pattern]]:
    """The chain by the module docstring's rules, and the patterns of the UNION combination it lies in."""
    anchors = {term for variable, term in query.exclusions if variable == query.answer}
    mentioned = {term: i for i, term in enumerate(query.text_order)}
    if topics:
        starts = sorted((t for t in set(topics) if t in mentioned), key=mentioned.__getitem__)
        if not starts:
            raise _Unreadable("no topic entity of the question appears in a triple pattern")
    else:
        starts = [t for t in query.text_order if not t.startswith("<")]
    best: tuple[tuple[int, int, int], _Path, list[_Pattern]] | None = None
    for patterns in query.alternatives:
        for rank, topic in enumerate(starts):
            for path in _paths(patterns, topic, query.answer):
                key = (0 if anchors & set(path.nodes) else 1, len(path.hops), rank)
                if best is None or key < best[0]:  # strict, so the path met first wins a tie
                    best = (key, path, patterns)
    if best is None:
        raise _Unreadable("no chain of triple patterns joins a topic entity to the answer variable")
    return best[1], best[2]


def _constraints(query: _Query, path: _Path, patterns: list[_Pattern]) -> tuple[GoldConstraint, ...]:
    on_chain = {index for index, _ in path.hops}
    position = {node: i for i, node in enumerate(path.nodes)}
    main = [p for i, p in enumerate(patterns) if i not in on_chain]
    mentions = Counter(term for p in main for term in {p.subject, p.object} if _is_variable(term))
    found: dict[GoldConstraint, None] = {}  # ordered and without repeats (FILTER's EXISTS and NOT EXISTS repeat one)
    for pattern, in_main in [(p, True) for p in main] + [(p, False) for p in query.side_patterns]:
        relation = pattern.relation
        if relation is None:
            continue
        for near, far, direction in _orientations(pattern):
            if near not in position or (_is_variable(far) and far in position):
                continue
            if _is_variable(far) and mentions[far] > in_main:
                break  # the variable leads on to other patterns: a side branch longer than one triple
            value = query.equalities.get(far) if _is_variable(far) else far
            found[GoldConstraint(position[near], relation, direction, value)] = None
            break
    return tuple(found)


def _read(sparql: str, topics: tuple[str, ...]) -> SparqlChain:
    query = _Parser(sparql).parse()
    path, patterns = _choose_path(query, topics)
    chain = tuple(Hop(patterns[index].relation or "", direction) for index, direction in path.hops)
    return SparqlChain(path.topic, chain, path.nodes, _constraints(query, path, patterns))


@functools.lru_cache(maxsize=8192)
def _read_or_problem(sparql: str, topics: tuple[str, ...]) -> SparqlChain | str:
    try:
        return _read(sparql, topics)
    except _Unreadable as exc:
        return str(exc)
    except RecursionError:  # groups nested deeper than Python's stack
        return "groups nested too deeply"


def read_sparql_chain(sparql: str, topics: Sequence[str] = ()) -> SparqlChain | None:
    """The gold chain of ``sparql`` from one of ``topics`` (entity ids; empty: any entity the query names) to its
    selected variable, with its constraints; None when the query cannot be read (:func:`sparql_problem` says why)."""
    result = _read_or_problem(sparql, tuple(topics))
    return result if isinstance(result, SparqlChain) else None


def sparql_problem(sparql: str, topics: Sequence[str] = ()) -> str | None:
    """Why :func:`read_sparql_chain` gives None for this query (None when it reads it)."""
    result = _read_or_problem(sparql, tuple(topics))
    return None if isinstance(result, SparqlChain) else result
