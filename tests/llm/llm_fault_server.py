"""A real OpenAI-compatible chat-completions server on 127.0.0.1 that injects faults on request, for the tests.

Faults are queued and consumed one per request, in arrival order: ``"429"`` (with ``Retry-After``), ``"500"``,
``"503"``, ``"400"``, ``"stall"`` (sleeps past the client's timeout), ``"truncate"`` (announces more bytes than it sends),
``"malformed"`` (200 with a body that is not JSON), ``"empty_choices"``, and two faults in the reply's *content* (a
well-formed 200 chat completion that a client can only catch by validating what the model said): ``"wrong_shape"``
(valid JSON of another shape, :data:`WRONG_SHAPE`), ``"truncated_json"`` (the normal reply cut in half by its token
budget, as a real server cuts one: finish reason ``length`` and the whole ``max_tokens`` billed) and ``"cut_short"``
(the normal reply cut in half, but finish reason ``stop`` and only its words billed: a reply damaged on the way, not
one its budget cut off). With the queue empty it answers normally.
The server counts the tokens it billed in successful replies, so the tests compare them with the client's accounting.

Random faults (the fault probe): with ``fault_rate`` > 0, a request the queue leaves alone gets a fault drawn from
``fault_kinds`` with probability ``fault_rate``. The draw is seeded (``fault_seed``) and keyed by the request, not by
its arrival order: ``fault_key(body)`` (default: a digest of the messages) plus how many times that key was seen before,
so the same requests get the same faults however concurrent clients interleave (a retry of a request is the next
occurrence of its key and draws again). Every request's draw is logged in ``fault_log`` as (key, occurrence, fault).

Two standing behaviours imitate real endpoints (they apply to every request, after the queued faults):

* ``refuse`` (a set of ``"max_tokens"``, ``"temperature"``, ``"top_p"``): like OpenAI's reasoning models, a request
  that sends one of them gets HTTP 400 with an OpenAI-shaped error body naming the parameter (``param``, ``code``), or
  only in the message when ``name_param`` is False; ``"max_completion_tokens"`` imitates an older server;
* ``format_errors`` (response-format kind -> HTTP status; kinds ``json_schema``, ``json_object_schema`` (json_object
  with a ``schema``) and ``json_object``): like llama-cpp-python's server, which answers ``json_schema`` with HTTP 500
  and a validation message about ``response_format``.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: The content of a ``wrong_shape`` reply: valid JSON, but not the shape any kgqa reply model asks for.
WRONG_SHAPE: dict[str, Any] = {"result": "x", "items": [1, 2]}
#: Faults answered with a well-formed 200 chat completion whose content is unusable (the client's transport is happy).
CONTENT_FAULTS = frozenset({"wrong_shape", "truncated_json", "cut_short"})
#: The faults of the fault probe (issue 16): 429 with Retry-After, 500, a hang past the client's timeout, a body that is
#: not JSON, a body cut short, a reply cut short, and JSON of the wrong shape.
PROBE_FAULTS = ("429", "500", "stall", "malformed", "truncate", "truncated_json", "wrong_shape")


def messages_key(body: dict[str, Any]) -> str:
    """The default ``fault_key``: a digest of the request's messages (a retry sends the same ones)."""
    return hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True).encode()).hexdigest()[:16]


def _unit(*parts: object) -> float:
    """A number in [0, 1) drawn from ``parts`` alone (seeded, independent of threads and arrival order)."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _words(text: str) -> int:
    return len(text.split())


def default_responder(body: dict[str, Any]) -> str:
    last = next((m["content"] for m in reversed(body["messages"]) if m["role"] == "user"), "")
    if body.get("response_format"):
        return json.dumps({"answer": last[:40], "confidence": 0.5})
    return f"echo: {last}"


@dataclass
class ServerState:
    faults: deque[str] = field(default_factory=deque)
    retry_after: str = "1"
    stall_s: float = 3.0
    ok_delay_s: float = 0.0
    responder: Callable[[dict[str, Any]], str] = default_responder
    requests: list[dict[str, Any]] = field(default_factory=list)
    arrivals: list[tuple[float, str]] = field(default_factory=list)
    ok_replies: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    refuse: set[str] = field(default_factory=set)
    name_param: bool = True
    format_errors: dict[str, int] = field(default_factory=dict)
    #: max_tokens above this is refused as a bad value (HTTP 400, code invalid_value), as OpenAI does.
    max_tokens_limit: int | None = None
    #: Random faults (see the module docstring): probability per request, the kinds drawn from, the seed, the key.
    fault_rate: float = 0.0
    fault_kinds: tuple[str, ...] = PROBE_FAULTS
    fault_seed: int = 0
    fault_key: Callable[[dict[str, Any]], str] = messages_key
    #: (key, occurrence, fault) of every request, in arrival order (``"ok"`` when no fault was injected).
    fault_log: list[tuple[str, int, str]] = field(default_factory=list)
    key_seen: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


def format_kind(body: dict[str, Any]) -> str | None:
    """The kind of ``response_format`` a request asked for (``json_object_schema`` = json_object with a schema)."""
    fmt = body.get("response_format")
    if not fmt:
        return None
    if fmt.get("type") == "json_object" and "schema" in fmt:
        return "json_object_schema"
    return str(fmt.get("type"))


def _standing_refusal(state: ServerState, body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    limit = state.max_tokens_limit
    if limit is not None and int(body.get("max_tokens") or 0) > limit:
        return 400, {"error": {"message": f"max_tokens is too large: {body['max_tokens']}. This model supports at "
                                          f"most {limit} completion tokens.", "type": "invalid_request_error",
                               "param": "max_tokens", "code": "invalid_value"}}
    for name in ("max_tokens", "max_completion_tokens", "temperature", "top_p"):
        if name not in state.refuse or name not in body:
            continue
        if name == "max_completion_tokens":  # an older server that only knows max_tokens
            error = {"message": "Unrecognized request argument supplied: max_completion_tokens",
                     "type": "invalid_request_error"}
        elif name == "max_tokens":
            error = {"message": "Unsupported parameter: 'max_tokens' cannot be used with this model; "
                                "send 'max_completion_tokens' instead.",
                     "type": "invalid_request_error", "param": name, "code": "unsupported_parameter"}
        else:
            if body[name] == 1:
                continue
            error = {"message": f"Unsupported value: '{name}' does not support {body[name]} with this model; "
                                "only the default (1) is allowed.",
                     "type": "invalid_request_error", "param": name, "code": "unsupported_value"}
        if not state.name_param:
            error = {"message": error["message"], "type": "invalid_request_error"}
        return 400, {"error": error}
    kind = format_kind(body)
    if kind is not None and kind in state.format_errors:
        message = (f"1 validation error: body.response_format.type: input should be 'text' or 'json_object', "
                   f"got {kind!r}")
        return state.format_errors[kind], {"error": {"message": message, "type": "internal_server_error"}}
    return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        return

    def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None,
              length: int | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload) if length is None else length))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    def do_POST(self) -> None:
        state = self.server.state
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if not self.path.endswith("/chat/completions"):
            self._send(404, b'{"error": {"message": "not found"}}')
            return
        body = json.loads(raw)
        key = state.fault_key(body) if state.fault_rate > 0 else ""
        with state.lock:
            fault = state.faults.popleft() if state.faults else "ok"
            if state.fault_rate > 0:
                seen = state.key_seen.get(key, 0)
                state.key_seen[key] = seen + 1
                if fault == "ok" and _unit(state.fault_seed, key, seen, "rate") < state.fault_rate:
                    kinds = state.fault_kinds
                    fault = kinds[int(_unit(state.fault_seed, key, seen, "kind") * len(kinds))]
                state.fault_log.append((key, seen, fault))
            state.requests.append(body)
            state.arrivals.append((time.monotonic(), fault))
            state.in_flight += 1
            state.max_in_flight = max(state.max_in_flight, state.in_flight)
        try:
            self._respond(state, body, fault)
        finally:
            with state.lock:
                state.in_flight -= 1

    def _respond(self, state: ServerState, body: dict[str, Any], fault: str) -> None:
        error = json.dumps({"error": {"message": f"injected {fault}", "type": "test"}}).encode()
        refusal = _standing_refusal(state, body) if fault == "ok" else None
        if refusal is not None:
            self._send(refusal[0], json.dumps(refusal[1]).encode())
        elif fault == "429":
            self._send(429, error, {"Retry-After": state.retry_after})
        elif fault in {"500", "503", "400", "401"}:
            self._send(int(fault), error)
        elif fault == "stall":
            time.sleep(state.stall_s)
            self._send(500, error)
        elif fault == "truncate":
            self._send(200, b'{"id": "x", "choices": [{"ind', length=400)
            self.close_connection = True
        elif fault == "malformed":
            self._send(200, b"{this is not json")
        elif fault == "empty_choices":
            self._send(200, json.dumps({"id": "x", "object": "chat.completion", "created": 0,
                                        "model": body["model"], "choices": []}).encode())
        else:
            if state.ok_delay_s:
                time.sleep(state.ok_delay_s)
            text = state.responder(body)
            finish = "stop"
            if fault == "wrong_shape":
                text = json.dumps(WRONG_SHAPE)
            elif fault in ("truncated_json", "cut_short"):
                text = text[:max(1, len(text) // 2)]
            prompt = sum(_words(m["content"]) for m in body["messages"])
            completion = _words(text)
            budget = body.get("max_tokens") or body.get("max_completion_tokens")
            if fault == "truncated_json":  # cut off by its budget: the whole budget was spent
                finish, completion = "length", int(budget) if budget else completion
            payload = {
                "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
                "model": body["model"],
                "choices": [{"index": 0, "finish_reason": finish,
                             "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion},
            }
            with state.lock:
                state.ok_replies += 1
                state.prompt_tokens += prompt
                state.completion_tokens += completion
            self._send(200, json.dumps(payload).encode())


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, state: ServerState) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet about clients that hung up (a stalled reply written after the client's timeout); loud otherwise."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class FaultServer:
    """Context manager: a running server; ``url`` is the OpenAI base URL (``http://127.0.0.1:PORT/v1``)."""

    def __init__(self, **state: Any) -> None:
        self.state = ServerState(**state)
        self._server = _Server(self.state)
        self._thread = threading.Thread(target=self._server.serve_forever, name="fault-server", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def inject(self, *faults: str) -> None:
        with self.state.lock:
            self.state.faults.extend(faults)

    def __enter__(self) -> FaultServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
