"""What may reach a SPARQL endpoint: the read-only guard every query text passes before it is sent, and the escaping of
strings and literals into SPARQL terms (nothing else is ever spliced into a query)."""

from __future__ import annotations

import re

from kgqa.errors import KGError
from kgqa.kg.base import parse_literal
from kgqa.kg.schema import check_iri

__all__ = ["BNODE_RE", "RDF_LANGSTRING", "XSD", "XSD_STRING", "ensure_read_only", "literal_term", "sparql_string"]

XSD = "http://www.w3.org/2001/XMLSchema#"
XSD_STRING = XSD + "string"
RDF_LANGSTRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"

# ---------------------------------------------------------------------------------------------------------------------
# Read-only guard

_MUTATING = re.compile(r"\b(INSERT|DELETE|LOAD|CLEAR|DROP|CREATE|COPY|MOVE|ADD)\b", re.IGNORECASE)
_STRIP_FOR_GUARD = re.compile(
    r'"""(?:[^"\\]|\\.|"(?!""))*"""'          # long strings
    r"|'''(?:[^'\\]|\\.|'(?!''))*'''"
    r'|"(?:[^"\\\n\r]|\\.)*"'                  # short strings
    r"|'(?:[^'\\\n\r]|\\.)*'"
    r'|<[^<>"{}|^`\\\x00-\x20]*>'              # IRIs
    r"|#[^\n\r]*"                              # comments (after IRIs and strings, which may contain '#')
    r"|[?$][A-Za-z0-9_\u00b7\u00c0-\uffff]+",  # variables
    re.DOTALL,
)
_PROLOGUE = re.compile(r"^\s*(?:(?:PREFIX\s+[A-Za-z0-9_.\-]*:|BASE)\s*)*", re.IGNORECASE)
_QUERY_FORM = re.compile(r"(SELECT|ASK)\b", re.IGNORECASE)
# Vendor functions in query text are limited to the one the search uses (Virtuoso exposes SQL procedures as bif:).
_VENDOR_CALL = re.compile(r"\b(?:bif|sql):(?!contains\b)", re.IGNORECASE)
# A federated query (SERVICE <url> { ... }) makes the endpoint fetch a URL of the query's choosing. Not a keyword when
# part of a prefixed name (ex:service, service:x).
_SERVICE = re.compile(r"(?<![\w:])SERVICE(?![\w:])", re.IGNORECASE)
# SPARQL decodes \uXXXX / \UXXXXXXXX anywhere in the query text before parsing it (SPARQL 1.1, 19.2), so a keyword
# may be spelt with escapes ("INS\u0045RT") for a server that follows the spec, while one that decodes them only inside
# strings reads the text as written. Text with such escapes is checked both ways.
_CODEPOINT_ESCAPE = re.compile(r"\\u([0-9A-Fa-f]{4})|\\U([0-9A-Fa-f]{8})")


def _decode_escapes(query: str) -> str:
    def char(match: re.Match[str]) -> str:
        code = int(match.group(1) or match.group(2), 16)
        return chr(code) if code <= 0x10FFFF else match.group(0)

    return _CODEPOINT_ESCAPE.sub(char, query)


def ensure_read_only(query: str, *, allow_service: bool = False) -> None:
    """Refuse any query text that is not a plain SELECT/ASK, before it is sent (keywords inside IRIs, literals,
    variables and comments do not count). A federated query (``SERVICE``) is refused too unless ``allow_service``:
    it would make the endpoint fetch a URL of the caller's choosing."""
    _check(query, query, allow_service)
    if "\\u" in query or "\\U" in query:
        _check(_decode_escapes(query), query, allow_service)


def _check(text: str, query: str, allow_service: bool) -> None:
    stripped = _STRIP_FOR_GUARD.sub(" ", text)
    bad = _MUTATING.search(stripped)
    if bad:
        raise KGError(f"refusing to send a query containing {bad.group(1).upper()!r}: this backend is read-only")
    body = stripped[_PROLOGUE.match(stripped).end():]  # type: ignore[union-attr]
    if not _QUERY_FORM.match(body):
        raise KGError(f"refusing to send a query that is not a SELECT or ASK: {query[:80]!r}")
    if _VENDOR_CALL.search(stripped):
        raise KGError("refusing to send a query that calls a vendor procedure (bif:/sql:)")
    if not allow_service and _SERVICE.search(stripped):
        raise KGError("refusing to send a federated query (SERVICE): it makes the endpoint fetch another URL; "
                      "open the KG with allow_service=True to allow it")


_SPARQL_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def _escape_char(ch: str) -> str:
    escaped = _SPARQL_ESCAPES.get(ch)
    if escaped is not None:
        return escaped
    # Other control characters as \u escapes: some servers (Virtuoso) reject them raw. Never used for quotes,
    # backslashes or line breaks, because SPARQL may decode \u escapes before it parses strings.
    if ch < " " or ch == "\x7f":
        return f"\\u{ord(ch):04X}"
    return ch


def sparql_string(value: str) -> str:
    """A SPARQL string literal for ``value`` with every character that could end or bend it escaped."""
    return '"' + "".join(_escape_char(ch) for ch in value) + '"'


BNODE_RE = re.compile(r"^_:[A-Za-z0-9_\-.]+$")
_LANG_RE = re.compile(r"^[A-Za-z]+(?:-[A-Za-z0-9]+)*$")


def literal_term(node: str) -> str:
    """The SPARQL term of a literal id (N-Triples form): its value escaped, its language tag or datatype checked."""
    parts = parse_literal(node)
    body = sparql_string(parts.value)
    if parts.lang:
        if not _LANG_RE.match(parts.lang):
            raise KGError(f"literal {node!r} has a malformed language tag")
        return f"{body}@{parts.lang}"
    if parts.datatype and parts.datatype != XSD_STRING:
        return f"{body}^^<{check_iri(parts.datatype)}>"
    return body
