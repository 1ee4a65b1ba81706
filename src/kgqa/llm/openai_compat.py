"""Any OpenAI-compatible chat endpoint (OpenAI, vLLM, Ollama, llama.cpp server) through the official ``openai`` SDK.

The SDK runs with ``max_retries=0``: retries, backoff, jitter and Retry-After are ours (:mod:`kgqa.llm.retry`) so that
each retry is counted. Concurrency is bounded by a semaphore (threads for ``chat``, one asyncio semaphore per event loop
for ``achat``); a slot is released while backing off.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
import weakref
from typing import Any

from kgqa.errors import ConfigError
from kgqa.llm.base import (
    BaseChatModel,
    Completion,
    LLMError,
    Usage,
    normalize_params,
    parse_json_reply,
    validate_messages,
)
from kgqa.llm.retry import RetryPolicy, parse_retry_after
from kgqa.llm.settings import foreign_env, setting
from kgqa.llm.tokens import approx_prompt_tokens, approx_tokens

JSON_MODES = ("json_schema", "json_object", "none")
_SPEC_RE = re.compile(r"^(?P<model>[^@]+?)(?:@(?P<url>https?://\S+))?$")
_RETRY_STATUS = frozenset({408, 409, 425, 429})


class _MalformedResponse(Exception):
    """The server answered 200 but the body is not a usable chat completion."""


def parse_openai_spec(rest: str) -> tuple[str, str | None]:
    """``MODEL[@URL]`` -> (model, url). The URL must be http(s)."""
    match = _SPEC_RE.match(rest.strip())
    if not match:
        raise ConfigError(f"model spec 'openai:{rest}' is malformed; expected openai:MODEL or openai:MODEL@http(s)://HOST/v1")
    return match.group("model"), match.group("url")


def _import_openai() -> Any:
    try:
        import openai
    except ImportError:
        raise ConfigError("the openai backend needs the 'openai' package: pip install 'kgqa[openai]'") from None
    return openai


class OpenAIChatModel(BaseChatModel):
    """A chat model behind an OpenAI-compatible HTTP API. Options override env (see docs/llm.md), which overrides defaults."""

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout: float | None = None, max_retries: int | None = None, backoff_base: float | None = None,
                 backoff_max: float | None = None, max_retry_after: float | None = None,
                 max_concurrency: int | None = None, json_mode: str | None = None, seed: int = 0) -> None:
        if not model:
            raise ConfigError("the openai backend needs a model name: openai:MODEL[@URL]")
        self.model = model
        self.base_url = foreign_env("OPENAI_BASE_URL", base_url)
        key = foreign_env("OPENAI_API_KEY", api_key)
        if key is None:
            if self.base_url is None:
                raise ConfigError(f"openai:{model} needs an API key: set OPENAI_API_KEY (or pass api_key), or give a "
                                  "base URL of a local server: openai:MODEL@http://HOST:PORT/v1")
            key = "not-needed"  # vLLM, Ollama and llama.cpp servers accept any key
        self.timeout = setting("llm_timeout", timeout, kind=float, default=60.0)
        self.json_mode = setting("llm_json_mode", json_mode, default="json_schema")
        if self.json_mode not in JSON_MODES:
            raise ConfigError(f"json_mode must be one of {JSON_MODES}, got {self.json_mode!r}")
        limit = setting("llm_concurrency", max_concurrency, kind=int, default=8)
        if limit < 1:
            raise ConfigError(f"max_concurrency must be >= 1, got {limit}")
        self.max_concurrency = limit
        self.policy = RetryPolicy(
            max_retries=setting("llm_retries", max_retries, kind=int, default=4),
            base_delay=setting("llm_backoff_base", backoff_base, kind=float, default=0.5),
            max_delay=setting("llm_backoff_max", backoff_max, kind=float, default=20.0),
            max_retry_after=max_retry_after if max_retry_after is not None else 120.0,
            seed=seed,
        )
        self.name = f"openai:{model}" + (f"@{self.base_url}" if base_url else "")
        self._key = key
        openai = _import_openai()
        self._openai = openai
        self._client = openai.OpenAI(base_url=self.base_url, api_key=key, timeout=self.timeout, max_retries=0)
        self._slots = threading.BoundedSemaphore(limit)
        self._async: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[Any, asyncio.Semaphore]] = (
            weakref.WeakKeyDictionary())
        self._async_lock = threading.Lock()

    def cache_identity(self) -> str:
        return f"openai:{self.model}@{self.base_url or 'https://api.openai.com/v1'}"

    # -- request building and response parsing -------------------------------------------------------------------------

    def _request(self, messages: list[dict[str, str]], params: dict[str, Any]) -> dict[str, Any]:
        request: dict[str, Any] = {"model": self.model, "messages": messages,
                                   "temperature": params["temperature"], "max_tokens": params["max_tokens"]}
        for key in ("seed", "stop", "top_p"):
            if params.get(key) is not None:
                request[key] = params[key]
        schema = params.get("schema")
        if schema is not None and self.json_mode == "json_schema":
            request["response_format"] = {"type": "json_schema", "json_schema": {
                "name": str(schema.get("title") or "reply")[:64], "schema": schema, "strict": False}}
        elif schema is not None and self.json_mode == "json_object":
            request["response_format"] = {"type": "json_object"}
        return request

    def _completion(self, response: Any, messages: list[dict[str, str]], params: dict[str, Any],
                    retries: int) -> Completion:
        choices = getattr(response, "choices", None)
        if not choices:
            raise _MalformedResponse("the reply has no choices")
        message = getattr(choices[0], "message", None)
        if message is None:
            raise _MalformedResponse("the first choice has no message")
        text = message.content or ""
        usage = getattr(response, "usage", None)
        if usage is not None and usage.prompt_tokens is not None:
            counted = Usage(int(usage.prompt_tokens), int(usage.completion_tokens or 0))
        else:  # some servers omit usage: fall back to the approximation rather than report zero
            counted = Usage(approx_prompt_tokens(messages), approx_tokens(text))
        parsed = parse_json_reply(text) if params.get("schema") is not None else None
        return Completion(text=text, usage=counted, json=parsed, model=self.name, retries=retries)

    def _classify(self, exc: BaseException) -> tuple[bool, float | None, int | None, str] | None:
        """(retryable, retry_after, status, message) for a transport/API failure; ``None`` for anything else."""
        openai = self._openai
        where = self.base_url or "api.openai.com"
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            retry_after = parse_retry_after(dict(exc.response.headers)) if exc.response is not None else None
            hint = {401: " (check OPENAI_API_KEY)", 404: " (check the model name and the base URL)"}.get(status, "")
            retryable = status in _RETRY_STATUS or status >= 500
            return retryable, retry_after, status, f"HTTP {status} from {where}{hint}: {exc.message}"
        if isinstance(exc, openai.APITimeoutError):
            return True, None, None, f"no reply from {where} within {self.timeout:g} s"
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc
            return True, None, None, f"connection to {where} failed or broke off ({type(cause).__name__}: {cause})"
        if isinstance(exc, _MalformedResponse | ValueError):
            return True, None, None, f"malformed reply from {where}: {exc}"
        return None

    def _give_up_or_wait(self, exc: BaseException, attempt: int) -> float:
        verdict = self._classify(exc)
        if verdict is None:
            raise exc
        retryable, retry_after, status, message = verdict
        if not retryable:
            raise LLMError(f"{self.name}: {message}", retries=attempt, status=status) from exc
        if attempt >= self.policy.max_retries:
            raise LLMError(f"{self.name}: gave up after {attempt + 1} attempts; last error: {message}",
                           retries=attempt, status=status) from exc
        if retry_after is not None and retry_after > self.policy.max_retry_after:
            raise LLMError(f"{self.name}: server asked to wait {retry_after:g} s (Retry-After), more than the "
                           f"{self.policy.max_retry_after:g} s limit; last error: {message}",
                           retries=attempt, status=status) from exc
        return self.policy.delay(attempt, retry_after)

    # -- sync -------------------------------------------------------------------------------------------------------------

    def _complete(self, messages: list[dict[str, str]], params: dict[str, Any]) -> Completion:
        request = self._request(messages, params)
        attempt = 0
        while True:
            try:
                with self._slots:
                    response = self._client.chat.completions.create(**request)
                return self._completion(response, messages, params, attempt)
            except Exception as exc:
                wait = self._give_up_or_wait(exc, attempt)
            time.sleep(wait)  # outside the slot: a backing-off call must not block others
            attempt += 1

    # -- async ------------------------------------------------------------------------------------------------------------

    def _loop_state(self) -> tuple[Any, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        with self._async_lock:
            state = self._async.get(loop)
            if state is None:
                client = self._openai.AsyncOpenAI(base_url=self.base_url, api_key=self._key, timeout=self.timeout,
                                                  max_retries=0)
                state = (client, asyncio.Semaphore(self.max_concurrency))
                self._async[loop] = state
        return state

    async def achat(self, messages: list[dict[str, str]], **params: Any) -> Completion:
        msgs = validate_messages(messages)
        clean = normalize_params(params)
        clean.pop("step", None)
        clean.pop("cache", None)
        request = self._request(msgs, clean)
        client, slots = self._loop_state()
        started = time.perf_counter()
        attempt = 0
        while True:
            try:
                async with slots:
                    response = await client.chat.completions.create(**request)
                completion = self._completion(response, msgs, clean, attempt)
                completion.latency_s = time.perf_counter() - started
                return completion
            except Exception as exc:
                wait = self._give_up_or_wait(exc, attempt)
            await asyncio.sleep(wait)
            attempt += 1
