"""How the SPARQL client reads a server giving up: Virtuoso's own time limit (HTTP 500 whose body says ``Virtuoso
S1T00``) is a QueryTimeout at once, a gateway timeout (HTTP 504) is retried and then a QueryTimeout, and other server
errors stay errors of their own kind. Against a real HTTP server on 127.0.0.1 that plays a script of answers."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from urllib.parse import parse_qs

import pytest

from kgqa.errors import KGError, QueryTimeout
from kgqa.kg.sparql import SparqlKG

QUERY = "SELECT ?o WHERE { <http://rdf.freebase.com/ns/m.e001> ?p ?o } LIMIT 1"
S1T00 = ("Virtuoso S1T00 Error SR171: Transaction timed out\n\nSPARQL query:\n" + QUERY).encode()
ROWS = json.dumps({"head": {"vars": ["o"]},
                   "results": {"bindings": [{"o": {"type": "literal", "value": "answer"}}]}}).encode()


class ScriptedEndpoint:
    """Answers each POST with the next ``(status, body)`` of ``script`` (the last one repeats), or sleeps ``seconds``
    first for a ``("sleep", seconds)`` item; ``queries`` records every query text that arrived."""

    def __init__(self, script: list[tuple[object, object]]) -> None:
        self.script = list(script)
        self.queries: list[str] = []
        endpoint = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
                endpoint.queries.append(parse_qs(body)["query"][0])
                step = endpoint.script.pop(0) if len(endpoint.script) > 1 else endpoint.script[0]
                if step[0] == "sleep":
                    time.sleep(float(step[1]))  # type: ignore[arg-type]
                    return
                status, payload = int(step[0]), bytes(step[1])  # type: ignore[call-overload]
                self.send_response(status)
                self.send_header("Server", "Virtuoso/07.20.3240 (Linux) x86_64-generic-linux-glibc25")
                self.send_header("Content-Type", "application/sparql-results+json" if status == 200
                                 else "text/plain")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/sparql"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def endpoint() -> Iterator[type[ScriptedEndpoint]]:
    made: list[ScriptedEndpoint] = []

    class Made(ScriptedEndpoint):
        def __init__(self, script: list[tuple[object, object]]) -> None:
            super().__init__(script)
            made.append(self)

    yield Made
    for server in made:
        server.close()


def _kg(url: str, **options: object) -> SparqlKG:
    return SparqlKG(url, "freebase", timeout=options.pop("timeout", 5.0), retries=options.pop("retries", 2),
                    backoff=0.01, max_backoff=0.02, **options)  # type: ignore[arg-type]


def test_virtuoso_server_side_timeout_is_a_query_timeout_without_retry(endpoint: type[ScriptedEndpoint]) -> None:
    server = endpoint([(500, S1T00)])
    with _kg(server.url) as kg, pytest.raises(QueryTimeout, match="stopped the query at its own time limit") as info:
        kg.select(QUERY)
    assert server.url in str(info.value) and "S1T00" in str(info.value)
    assert server.queries == [QUERY]  # the server's limit would stop it again: not retried


def test_gateway_timeout_is_retried_then_a_query_timeout(endpoint: type[ScriptedEndpoint]) -> None:
    server = endpoint([(504, b"Gateway Time-out")])
    with _kg(server.url, retries=2) as kg, pytest.raises(QueryTimeout, match=r"HTTP 504.*after 3 attempt\(s\)"):
        kg.select(QUERY)
    assert server.queries == [QUERY] * 3


def test_a_gateway_timeout_then_an_answer_is_the_answer(endpoint: type[ScriptedEndpoint]) -> None:
    server = endpoint([(504, b"Gateway Time-out"), (200, ROWS)])
    with _kg(server.url, retries=2) as kg:
        assert kg.select(QUERY) == [{"o": '"answer"'}]
    assert len(server.queries) == 2


def test_other_server_errors_are_not_timeouts(endpoint: type[ScriptedEndpoint]) -> None:
    # A malformed query (Virtuoso answers 500 with a SQL state): rejected at once, not retried, not a timeout.
    bad_query = endpoint([(500, b"Virtuoso 37000 Error SP030: SPARQL compiler, line 1: syntax error")])
    with _kg(bad_query.url) as kg, pytest.raises(KGError, match="rejected the query") as info:
        kg.select(QUERY)
    assert not isinstance(info.value, QueryTimeout) and len(bad_query.queries) == 1
    # A server that keeps failing: retried, then a failure that is not a timeout.
    failing = endpoint([(503, b"Service Unavailable")])
    with _kg(failing.url, retries=1) as kg, pytest.raises(KGError, match=r"failed after 2 attempt\(s\): HTTP 503") as info:
        kg.select(QUERY)
    assert not isinstance(info.value, QueryTimeout) and len(failing.queries) == 2


def test_no_answer_within_the_timeout_is_retried_then_a_query_timeout(endpoint: type[ScriptedEndpoint]) -> None:
    server = endpoint([("sleep", 2.0)])
    started = time.monotonic()
    with _kg(server.url, timeout=0.3, retries=1) as kg, pytest.raises(QueryTimeout, match=r"no answer within 0\.3s"):
        kg.select(QUERY)
    assert len(server.queries) == 2 and time.monotonic() - started < 5


def test_rate_limited_queries_wait_as_told_then_get_their_answer(endpoint: type[ScriptedEndpoint]) -> None:
    server = endpoint([(429, b"Too Many Requests"), (200, ROWS)])
    started = time.monotonic()
    with _kg(server.url, retries=2) as kg:
        rows = kg.select(QUERY)
    assert len(rows) == 1 and "answer" in str(rows[0]["o"])
    assert server.queries == [QUERY, QUERY]
    assert time.monotonic() - started < 5


def test_rate_limited_every_time_is_an_error_naming_the_limit(endpoint: type[ScriptedEndpoint]) -> None:
    server = endpoint([(429, b"Too Many Requests")])
    with _kg(server.url, retries=1) as kg, pytest.raises(KGError, match=r"after 2 attempt\(s\): HTTP 429 \(rate limited\)"):
        kg.select(QUERY)
    assert server.queries == [QUERY] * 2
