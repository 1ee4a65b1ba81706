"""Issue 16, finding 5: a SPARQL endpoint whose JSON parses but is not SPARQL 1.1 results (unbound variables, values of
the wrong type, bindings that are not a list, an ASK answer that is not a boolean) gives one clear error naming the
endpoint in ``kg info``, ``kg search`` and ``kg relations``, never a KeyError/TypeError traceback."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kgqa.cli import main

PAYLOADS = {
    "unbound-variables": {"head": {"vars": ["p"]}, "results": {"bindings": [{}, {"zzz": {"type": "uri", "value": "x"}}]}},
    "value-not-an-object": {"head": {"vars": ["p"]}, "results": {"bindings": [{"p": "not an object"}]}},
    "value-of-wrong-type": {"head": {"vars": ["c"]}, "results": {"bindings": [{"c": {"type": "literal", "value": 5}}]}},
    "count-not-a-number": {"head": {"vars": ["c"]}, "results": {"bindings": [{"c": {"type": "literal", "value": "abc"},
                                                                             "p": {"type": "literal", "value": "abc"},
                                                                             "e": {"type": "literal", "value": "abc"}}]}},
    "bindings-not-a-list": {"head": {}, "results": {"bindings": "nope"}},
    "ask-not-a-boolean": {"head": {}, "boolean": "maybe"},
}


@pytest.fixture(params=sorted(PAYLOADS))
def endpoint(request: pytest.FixtureRequest) -> Iterator[str]:
    body = json.dumps(PAYLOADS[request.param]).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            self.send_response(200)
            self.send_header("content-type", "application/sparql-results+json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/sparql"
    finally:
        server.shutdown()


@pytest.mark.parametrize("command", [["kg", "info"], ["kg", "search", "{url}", "abc"],
                                     ["kg", "relations", "{url}", "m.0abc"],
                                     ["kg", "chain", "{url}", "--from", "m.0abc", "--path", "film.film.directed_by"]],
                         ids=["info", "search", "relations", "chain"])
def test_malformed_results_are_one_clear_error(endpoint: str, command: list[str],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    args = [part.format(url=endpoint) for part in command]
    if "{url}" not in " ".join(command):
        args.append(endpoint)
    code = main(args)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert "Traceback" not in err and len(lines) == 1, err
    assert lines[0].startswith("kgqa: error:") and endpoint in lines[0], err
