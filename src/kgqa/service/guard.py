"""What stands in front of the service: security headers, the body size limit, the per-client rate limit, the bearer
token and (without a token) the loopback Host check. Plain ASGI middleware, so a refused request costs no routing.

Every refusal is a JSON error of the one shape the whole service uses (:func:`error_body`).
"""

from __future__ import annotations

import hmac
import json
import math
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from kgqa.service.settings import is_loopback

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Paths under /v1/ that need neither the token nor a rate-limit slot (probes must always get through).
OPEN_API_PATHS = frozenset({"/v1/health"})

#: The page's Content-Security-Policy: nothing but this origin, no inline script, no plugins, no framing.
PAGE_CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
            "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")

ERROR_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
               408: "timeout", 409: "conflict", 413: "body_too_large", 415: "unsupported_media_type", 422: "invalid_request",
               429: "rate_limited", 500: "internal_error", 503: "busy", 504: "timeout"}


def error_body(status: int, message: str, code: str | None = None, **extra: Any) -> dict[str, Any]:
    """``{"error": CODE, "message": MESSAGE, "status": STATUS, ...}``: every error the service returns."""
    return {"error": code or ERROR_CODES.get(status, "error"), "message": message, "status": status, **extra}


async def send_json(send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]] = ()) -> None:
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": data})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or ():
        if key.lower() == name:
            return value.decode("latin-1")
    return None


class SecurityHeaders:
    """nosniff, no referrer, no framing on every response; the strict CSP on the page (not on /docs, whose Swagger UI
    starts with an inline script)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        page = path == "/" or (path.startswith("/static/") and not path.startswith("/static/vendor/"))

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                headers += [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer"),
                            (b"x-frame-options", b"DENY")]
                # Answers are never stored; the shipped files are revalidated (ETag) so an upgrade shows at once.
                if not any(k.lower() == b"cache-control" for k, _ in headers):
                    headers.append((b"cache-control", b"no-cache" if path.startswith("/static/") else b"no-store"))
                if page:
                    headers.append((b"content-security-policy", PAGE_CSP.encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)


class BodyLimit:
    """Refuse a request body over ``limit`` bytes with 413, by its Content-Length or, for a chunked body, by reading
    at most ``limit + 1`` bytes before the application sees any of it."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        too_large = error_body(413, f"the request body is larger than {self.limit} bytes")
        length = _header(scope, b"content-length")
        if length is not None:
            try:
                declared = int(length)
            except ValueError:
                await send_json(send, 400, error_body(400, "the Content-Length header is not a number"))
                return
            if declared > self.limit:
                await send_json(send, 413, too_large, [(b"connection", b"close")])
                return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await send_json(send, 413, too_large, [(b"connection", b"close")])
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class RateLimiter:
    """A token bucket per client: ``per_minute`` requests a minute on average, bursts of up to ``per_minute``."""

    def __init__(self, per_minute: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, client: str) -> float:
        """0 when ``client`` may go on (one token taken), else the seconds until it may."""
        now = self.clock()
        with self._lock:
            tokens, last = self._buckets.get(client, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - last) * self.rate)
            if tokens >= 1.0:
                self._buckets[client] = (tokens - 1.0, now)
                wait = 0.0
            else:
                self._buckets[client] = (tokens, now)
                wait = (1.0 - tokens) / self.rate
            if len(self._buckets) > 10_000:  # forget clients whose bucket is full again
                full = [c for c, (t, at) in self._buckets.items() if t + (now - at) * self.rate >= self.capacity]
                for c in full:
                    del self._buckets[c]
        return wait


class ApiGuard:
    """On ``/v1/`` (but /v1/health): the per-client rate limit (429, counted before the token check, so guessing
    tokens is throttled too), then the bearer token (401). Without a token the server is on loopback; then a request
    whose Host header is not a loopback name is refused (403), so a web page cannot reach it by DNS rebinding."""

    def __init__(self, app: ASGIApp, *, token: str | None, rate_limit: int) -> None:
        self.app = app
        self.token = token.encode() if token else None
        self.limiter = RateLimiter(rate_limit) if rate_limit > 0 else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if self.token is None and not _loopback_host(_header(scope, b"host")):
            await send_json(send, 403, error_body(403, "this server answers only to a loopback Host "
                                                       "(127.0.0.1, localhost, [::1])"))
            return
        if not path.startswith("/v1/") or path in OPEN_API_PATHS:
            await self.app(scope, receive, send)
            return
        if self.limiter is not None:
            client = (scope.get("client") or ("unknown", 0))[0]
            wait = self.limiter.take(str(client))
            if wait > 0:
                seconds = max(1, math.ceil(wait))
                await send_json(send, 429, error_body(429, f"too many requests; retry in {seconds} s",
                                                      retry_after=seconds),
                                [(b"retry-after", str(seconds).encode())])
                return
        if self.token is not None:
            given = _header(scope, b"authorization") or ""
            scheme, _, value = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), self.token):
                message = ("a bearer token is required: send 'Authorization: Bearer TOKEN' (kgqa serve printed it)"
                           if not given else "the bearer token is not valid")
                await send_json(send, 401, error_body(401, message), [(b"www-authenticate", b'Bearer realm="kgqa"')])
                return
        await self.app(scope, receive, send)


def _loopback_host(host: str | None) -> bool:
    if not host:
        return False
    name = host.strip()
    if name.startswith("["):  # [::1]:8765
        name = name[1:name.find("]")] if "]" in name else name
    elif name.count(":") == 1:
        name = name.rsplit(":", 1)[0]
    return is_loopback(name)
