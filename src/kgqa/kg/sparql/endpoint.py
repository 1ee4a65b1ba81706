"""The HTTP side of the SPARQL backend: one endpoint, queries sent as form posts, SPARQL JSON results parsed, transient
failures retried with backoff, and each server's ways of saying "timeout", "bad query" or "partial result" recognised."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

import httpx

from kgqa import deadline
from kgqa.errors import KGError, QueryTimeout
from kgqa.kg.sparql.guard import ensure_read_only

__all__ = ["Response", "SparqlEndpoint"]

# Errors in the query itself (Virtuoso answers them with HTTP 500): sending the same text again cannot help.
_QUERY_ERROR = re.compile(r"Virtuoso (37000|22023|42000)|Error (SP|SQ|FT)\d|SPARQL compiler|syntax error|parse error",
                          re.IGNORECASE)
_SERVER_TIMEOUT = re.compile(r"Virtuoso S1T00")


#: The longest Retry-After a query waits for before asking again (a longer one is cut to this).
MAX_RETRY_AFTER = 30.0


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header given in seconds (an HTTP date or garbage: the usual backoff instead)."""
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _snippet(text: str, size: int = 300) -> str:
    text = " ".join(text.split())
    return text[:size] + ("..." if len(text) > size else "")


@dataclass
class Response:
    rows: list[dict[str, dict[str, str]]]
    boolean: bool | None
    partial: bool


class SparqlEndpoint:
    """Sends read-only queries to one SPARQL endpoint URL.

    ``timeout`` is per HTTP attempt (seconds); ``retries`` extra attempts are made on 5xx, timeouts and connection errors
    with exponential backoff plus jitter. ``default_graph`` (already checked as an IRI) is sent as ``default-graph-uri``.
    Every text passes :func:`~kgqa.kg.sparql.guard.ensure_read_only` first (federated ``SERVICE`` queries only with
    ``allow_service``).
    """

    def __init__(self, url: str, *, timeout: float, retries: int, backoff: float, max_backoff: float,
                 default_graph: str | None, headers: dict[str, str] | None = None,
                 transport: httpx.BaseTransport | None = None, allow_service: bool = False) -> None:
        self.url = url
        self.allow_service = bool(allow_service)
        self.timeout = float(timeout)
        self.retries = int(retries)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.default_graph = default_graph
        #: The ``Server`` header of the first answer (None until one arrives).
        self.server_header: str | None = None
        self._client = httpx.Client(headers={"Accept": "application/sparql-results+json", **(headers or {})},
                                    transport=transport, follow_redirects=True)
        #: The last 50 query texts sent, most recent last (for traces and debugging).
        self.history: list[str] = []
        #: How many queries were sent (retries not counted).
        self.queries_sent = 0

    def close(self) -> None:
        self._client.close()

    def send(self, query: str, *, timeout: float | None = None, retries: int | None = None) -> Response:
        """Send one query (guarded), retrying transient failures; parse the JSON results."""
        ensure_read_only(query, allow_service=self.allow_service)
        self.history.append(query)
        del self.history[:-50]
        self.queries_sent += 1
        timeout = self.timeout if timeout is None else timeout
        attempts = 1 + (self.retries if retries is None else retries)
        data = {"query": query}
        if self.default_graph:
            data["default-graph-uri"] = self.default_graph
        last = ""
        timed_out = False
        retry_after: float | None = None
        for attempt in range(attempts):
            if attempt:
                delay = min(self.max_backoff, self.backoff * 2 ** (attempt - 1))
                if retry_after is not None:  # the server said how long to wait (HTTP 429): honour it, within reason
                    wait = min(retry_after, MAX_RETRY_AFTER)
                    retry_after = None
                else:
                    wait = delay * (0.5 + random.random())  # jitter: spread retries of parallel workers
                # the question's deadline (kgqa.deadline): no back-off or retry past it
                deadline.sleep(wait, f"before retrying the SPARQL endpoint {self.url} (last: {last})")
            # each attempt waits at most what the question has left
            waited = deadline.attempt_timeout(timeout, f"waiting for the SPARQL endpoint {self.url}"
                                              + (f" (last: {last})" if last else ""))
            try:
                response = self._client.post(self.url, data=data,
                                             timeout=httpx.Timeout(waited, connect=min(waited, 10.0)))
            except httpx.TimeoutException:
                timed_out, last = True, f"no answer within {waited:.3g}s"
                deadline.check(f"waiting for the SPARQL endpoint {self.url}: {last}")
                continue
            except httpx.TransportError as exc:
                timed_out, last = False, f"connection failed ({type(exc).__name__}: {exc})"
                continue
            if self.server_header is None:
                self.server_header = response.headers.get("server", "")
            if response.status_code >= 500:
                last = f"HTTP {response.status_code}: {_snippet(response.text)}"
                if _SERVER_TIMEOUT.search(response.text[:500]):
                    raise QueryTimeout(f"SPARQL endpoint {self.url} stopped the query at its own time limit: "
                                       f"{_snippet(response.text)}")
                if _QUERY_ERROR.search(response.text[:500]):
                    # Virtuoso answers 500 to a malformed query; sending it again cannot help.
                    raise KGError(f"SPARQL endpoint {self.url} rejected the query: {last}")
                timed_out = response.status_code == 504  # a gateway gave up waiting: a timeout, retried
                continue
            if response.status_code == 429:
                # Rate limited (the public Wikidata endpoint does this): wait as told, then ask again.
                timed_out, last = False, f"HTTP 429 (rate limited): {_snippet(response.text)}"
                retry_after = _retry_after(response.headers.get("retry-after"))
                continue
            if response.status_code >= 400:
                raise KGError(f"SPARQL endpoint {self.url} refused the query (HTTP {response.status_code}): "
                              f"{_snippet(response.text)}")
            return self._parse(response)
        if timed_out:
            raise QueryTimeout(f"SPARQL endpoint {self.url}: {last} after {attempts} attempt(s); "
                               "raise the timeout or simplify the query")
        raise KGError(f"SPARQL endpoint {self.url} failed after {attempts} attempt(s): {last}")

    def _parse(self, response: httpx.Response) -> Response:
        try:
            payload = response.json()
        except ValueError as exc:
            raise KGError(f"SPARQL endpoint {self.url} did not answer with SPARQL JSON results "
                          f"(content-type {response.headers.get('content-type')!r}): {_snippet(response.text)}"
                          ) from exc
        # Virtuoso's "anytime" queries return 200 with a partial result and say so only in headers.
        partial = response.headers.get("x-sql-state", "") == "S1TAT" or "x-sparql-maxrows" in response.headers
        if not isinstance(payload, dict):
            raise KGError(f"SPARQL endpoint {self.url} sent malformed JSON results")
        if "boolean" in payload:
            if not isinstance(payload["boolean"], bool):
                raise KGError(f"SPARQL endpoint {self.url} sent an ASK result that is not true or false: "
                              f"{_snippet(repr(payload['boolean']), 80)}")
            return Response([], payload["boolean"], partial)
        try:
            rows = payload["results"]["bindings"]
        except (KeyError, TypeError) as exc:
            raise KGError(f"SPARQL endpoint {self.url} sent JSON without results.bindings") from exc
        self._check_bindings(rows)
        return Response(rows, None, partial)

    def _check_bindings(self, rows: object) -> None:
        """Every row a JSON object of variable -> {"type": str, "value": str}, as SPARQL 1.1 JSON results are."""
        if not isinstance(rows, list):
            raise KGError(f"SPARQL endpoint {self.url} sent results.bindings that is not a list")
        for number, row in enumerate(rows, start=1):
            if not isinstance(row, dict):
                raise KGError(f"SPARQL endpoint {self.url} sent result row {number} that is not a JSON object")
            for var, term in row.items():
                if not (isinstance(term, dict) and isinstance(term.get("type"), str)
                        and isinstance(term.get("value"), str)):
                    raise KGError(f"SPARQL endpoint {self.url} sent a malformed value for ?{var} in result row "
                                  f"{number}: {_snippet(repr(term), 80)}")

    def select(self, query: str, *, timeout: float | None = None, retries: int | None = None,
               strict: bool = True) -> tuple[list[dict[str, dict[str, str]]], bool]:
        """The rows of a SELECT and whether they are partial; ``strict`` turns a partial result into QueryTimeout."""
        answer = self.send(query, timeout=timeout, retries=retries)
        if answer.partial and strict:
            raise QueryTimeout(f"SPARQL endpoint {self.url} returned a partial result (server-side time or row "
                               "limit); raise the endpoint's limits or simplify the query")
        return answer.rows, answer.partial

    def ask(self, query: str) -> bool:
        return bool(self.send(query).boolean)
