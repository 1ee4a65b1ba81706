"""Any OpenAI-compatible chat endpoint (OpenAI, vLLM, Ollama, llama.cpp server) through the official ``openai`` SDK.

The SDK runs with ``max_retries=0``: retries, backoff, jitter and Retry-After are ours (:mod:`kgqa.llm.retry`) so that
each retry is counted. Concurrency is bounded by a semaphore (threads for ``chat``, one asyncio semaphore per event loop
for ``achat``); a slot is released while backing off.

Endpoints differ in what they accept, so the client negotiates, once per endpoint (base URL + model, shared by every model
object of the process) and thread-safely:

* structured output: the strongest ``response_format`` the endpoint takes, down the ladder ``json_schema`` (OpenAI, vLLM)
  -> ``json_object_schema`` (``{"type": "json_object", "schema": ...}``, llama-cpp-python's server) -> ``json_object`` ->
  ``none`` (the schema only in the prompt; :func:`kgqa.llm.structured.ask_json` validates and re-asks). A step down is
  taken when the endpoint answers a request with a 4xx/5xx whose error is about ``response_format``;
* reasoning models (o1/o3/o4, gpt-5): ``max_completion_tokens`` instead of ``max_tokens`` and no ``temperature``/``top_p``,
  by a model-name rule and, for any model, when a 400 names the refused parameter.

A negotiation re-sends the call at once: it is not a retry, spends none of the retry budget, and is logged (logger
``kgqa.llm``), listed in :attr:`OpenAIChatModel.negotiations` and in the reply's ``Completion.negotiations``. Each rule can be
forced by a setting (``KGQA_LLM_JSON_MODE``, ``KGQA_LLM_TOKEN_PARAM``, ``KGQA_LLM_TEMPERATURE_PARAM``); a forced setting is
never changed by an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from kgqa import deadline
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
from kgqa.llm.settings import choice, foreign_env, setting
from kgqa.llm.tokens import approx_prompt_tokens, approx_tokens

#: Structured-output modes, strongest first: the order negotiation walks down.
STRUCTURED_MODES = ("json_schema", "json_object_schema", "json_object", "none")
#: Values of the ``json_mode`` setting: ``auto`` negotiates, any other forces that mode.
JSON_MODES = ("auto", *STRUCTURED_MODES)
TOKEN_PARAMS = ("auto", "max_tokens", "max_completion_tokens")
TEMPERATURE_PARAMS = ("auto", "send", "omit")
#: Sampling parameters a reasoning model refuses; they are dropped together when one of them is refused.
_SAMPLING = ("temperature", "top_p")
_REASONING_RE = re.compile(r"^(?:o\d+|gpt-5(?!-chat))(?:[-._:]|$)")
_OPENAI_URL = "https://api.openai.com/v1"
_REFUSAL_WORDS = re.compile(r"unsupported|not supported|does not support|not allowed|unrecognized|unexpected|extra input",
                            re.IGNORECASE)
#: Negotiations one call may make (each kind is one-way, so this is only a guard).
_MAX_NEGOTIATIONS = 6
_PARAM_RE = re.compile(r"\b(max_completion_tokens|max_tokens|temperature|top_p)\b")
_FORMAT_RE = re.compile(r"response_format|json_schema|json_object")
_NOT_NEGOTIABLE = frozenset({401, 403, 404, 408, 409, 425, 429})
_log = logging.getLogger("kgqa.llm")
_SPEC_RE = re.compile(r"^(?P<model>[^@]+?)(?:@(?P<url>https?://\S+))?$")
_RETRY_STATUS = frozenset({408, 409, 425, 429})


def is_reasoning_model(model: str) -> bool:
    """Whether ``model`` names an OpenAI reasoning model (o1, o3-mini, o4-mini, gpt-5...; not gpt-5-chat), by name."""
    return bool(_REASONING_RE.match(model.strip().lower().rsplit("/", 1)[-1]))


@dataclass(frozen=True, slots=True)
class Negotiation:
    """One change an endpoint forced on the client: ``setting`` went from ``old`` to ``new`` because of ``reason``."""

    endpoint: str
    model: str
    setting: str
    old: str
    new: str
    status: int | None
    reason: str
    at: float = 0.0

    def describe(self) -> str:
        return f"{self.setting}: {self.old} -> {self.new}" + (f" (HTTP {self.status})" if self.status else "")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class EndpointProfile:
    """What one endpoint (base URL + model) was found to accept. Shared by every model object of the process."""

    endpoint: str
    model: str
    structured_mode: str = STRUCTURED_MODES[0]
    #: ``untested`` until a structured call succeeds (then ``accepted``), ``negotiated`` after a step down.
    structured_source: str = "untested"
    token_param: str = "max_tokens"
    omitted: frozenset[str] = frozenset()
    events: list[Negotiation] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    #: Held by the one structured call that probes an untested endpoint, so concurrent callers do not all probe.
    probe_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def confirmed(self) -> bool:
        return self.structured_source != "untested"


_PROFILES: dict[tuple[str, str], EndpointProfile] = {}
_PROFILES_LOCK = threading.Lock()


def endpoint_profile(base_url: str | None, model: str) -> EndpointProfile:
    """The (process-wide) profile of an endpoint, created with the model-name rule on first use."""
    endpoint = (base_url or _OPENAI_URL).rstrip("/")
    with _PROFILES_LOCK:
        profile = _PROFILES.get((endpoint, model))
        if profile is None:
            reasoning = is_reasoning_model(model)
            profile = EndpointProfile(endpoint, model, token_param="max_completion_tokens" if reasoning else "max_tokens",
                                      omitted=frozenset(_SAMPLING) if reasoning else frozenset())
            _PROFILES[(endpoint, model)] = profile
        return profile


def negotiations() -> list[Negotiation]:
    """Every negotiation of this process, all endpoints, in order."""
    with _PROFILES_LOCK:
        profiles = list(_PROFILES.values())
    return sorted((e for p in profiles for e in list(p.events)), key=lambda e: e.at)


def forget_endpoints() -> None:
    """Forget what every endpoint was found to accept (tests; a server restarted with other options)."""
    with _PROFILES_LOCK:
        _PROFILES.clear()


@dataclass(frozen=True, slots=True)
class _Plan:
    """How one attempt is sent: a snapshot of the forced settings and the endpoint's profile."""

    mode: str
    token_param: str
    omitted: frozenset[str]


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
                 max_concurrency: int | None = None, json_mode: str | None = None, token_param: str | None = None,
                 temperature_param: str | None = None, seed: int = 0) -> None:
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
        self.json_mode = choice("llm_json_mode", json_mode, JSON_MODES, default="auto")
        self.token_param = choice("llm_token_param", token_param, TOKEN_PARAMS, default="auto")
        self.temperature_param = choice("llm_temperature_param", temperature_param, TEMPERATURE_PARAMS, default="auto")
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
        self.profile = endpoint_profile(self.base_url, model)

    def cache_identity(self) -> str:
        return f"openai:{self.model}@{self.base_url or _OPENAI_URL}"

    # -- what the endpoint accepts --------------------------------------------------------------------------------------

    @property
    def structured_mode(self) -> str:
        """The structured-output mode schema calls use now: forced by ``json_mode``, else negotiated with the endpoint.

        One of :data:`STRUCTURED_MODES`. Before the first schema call on an untested endpoint this is the mode that
        will be tried first (``json_schema``); :attr:`structured_mode_source` says which.
        """
        return self.json_mode if self.json_mode != "auto" else self.profile.structured_mode

    @property
    def structured_mode_source(self) -> str:
        """``forced`` (a setting), ``untested``, ``accepted`` (the first mode worked) or ``negotiated`` (stepped down)."""
        return "forced" if self.json_mode != "auto" else self.profile.structured_source

    @property
    def negotiations(self) -> list[Negotiation]:
        """What this endpoint made the client change, in order (shared by every model object of the endpoint)."""
        with self.profile.lock:
            return list(self.profile.events)

    def endpoint_settings(self) -> dict[str, Any]:
        """What is sent to the endpoint now, for a run's config: modes, their sources and the negotiations so far."""
        plan = self._plan()
        return {"structured_mode": plan.mode, "structured_mode_source": self.structured_mode_source,
                "token_param": plan.token_param, "omitted_params": sorted(plan.omitted),
                "negotiations": [e.describe() for e in self.negotiations]}

    def _plan(self) -> _Plan:
        profile = self.profile
        with profile.lock:
            mode, token_param, omitted = profile.structured_mode, profile.token_param, profile.omitted
        if self.json_mode != "auto":
            mode = self.json_mode
        if self.token_param != "auto":
            token_param = self.token_param
        if self.temperature_param != "auto":
            omitted = frozenset(_SAMPLING) if self.temperature_param == "omit" else frozenset()
        return _Plan(mode, token_param, omitted)

    def _refused(self, exc: BaseException, request: dict[str, Any]) -> tuple[str, int] | None:
        """(what, status) when ``exc`` is the endpoint refusing a request parameter we can change, else ``None``."""
        if not isinstance(exc, self._openai.APIStatusError) or exc.status_code in _NOT_NEGOTIABLE:
            return None
        status = exc.status_code
        param = getattr(exc, "param", None)
        body = exc.body
        text = str(body.get("message") or exc.message) if isinstance(body, dict) else f"{exc.message} {body!r}"
        sent = {k for k in ("max_tokens", "max_completion_tokens", *_SAMPLING) if k in request}
        code = str(body.get("code") or "") if isinstance(body, dict) else ""
        # A parameter the endpoint does not support is negotiated; a bad value of a supported one (max_tokens too
        # large) is the caller's error and must not change what is sent for the rest of the run.
        if status in (400, 422) and param in sent and (code.startswith("unsupported") or _REFUSAL_WORDS.search(text)):
            return str(param), status
        if "response_format" in request and (param == "response_format" or _FORMAT_RE.search(text)):
            return "response_format", status
        if status in (400, 422) and _REFUSAL_WORDS.search(text):
            for match in _PARAM_RE.finditer(text):
                if match.group(1) in sent:
                    return match.group(1), status
        return None

    def _negotiate(self, exc: BaseException, plan: _Plan, request: dict[str, Any]) -> tuple[bool, Negotiation | None]:
        """Adapt the endpoint's profile to a refusal of ``plan``.

        Returns (send again now, the change this call made). Each change is one-way (modes only step down, the token
        parameter flips at most once, sampling parameters once dropped stay dropped), so a call negotiates a bounded
        number of times.
        """
        refused = self._refused(exc, request)
        if refused is None:
            return False, None
        what, status = refused
        profile = self.profile
        event: Negotiation | None = None
        with profile.lock:
            done = {e.setting for e in profile.events}
            if what == "response_format":
                if self.json_mode == "auto" and profile.structured_mode == plan.mode != STRUCTURED_MODES[-1]:
                    new = STRUCTURED_MODES[STRUCTURED_MODES.index(plan.mode) + 1]  # compare-and-set: one step per mode
                    event = self._event("structured_mode", plan.mode, new, status, exc)
                    profile.structured_mode, profile.structured_source = new, "negotiated"
            elif what in ("max_tokens", "max_completion_tokens"):
                if self.token_param == "auto" and profile.token_param == what and "token_param" not in done:
                    new = "max_completion_tokens" if what == "max_tokens" else "max_tokens"
                    event = self._event("token_param", what, new, status, exc)
                    profile.token_param = new
            elif self.temperature_param == "auto" and not profile.omitted >= set(_SAMPLING):
                event = self._event("sampling_params", "send", "omit", status, exc)
                profile.omitted = frozenset(_SAMPLING)
            if event is not None:
                profile.events.append(event)
        if event is not None:
            _log.info("%s (%s): %s; %s", profile.endpoint, self.model, event.describe(), event.reason)
        return self._plan() != plan, event  # nothing changed: the error takes its normal course

    def _event(self, setting_name: str, old: str, new: str, status: int, exc: BaseException) -> Negotiation:
        reason = str(getattr(exc, "message", exc)).replace("\n", " ")[:300]
        return Negotiation(self.profile.endpoint, self.model, setting_name, old, new, status, reason, time.time())

    def _accepted(self, plan: _Plan, params: dict[str, Any]) -> None:
        if params.get("schema") is None or self.json_mode != "auto":
            return
        profile = self.profile
        with profile.lock:
            if profile.structured_source == "untested" and profile.structured_mode == plan.mode:
                profile.structured_source = "accepted"

    def _probing(self, params: dict[str, Any]) -> bool:
        return params.get("schema") is not None and self.json_mode == "auto" and not self.profile.confirmed

    @contextlib.contextmanager
    def _probe_turn(self, params: dict[str, Any]) -> Iterator[None]:
        """The first schema call on an untested endpoint probes alone; concurrent ones wait for its verdict, then go on
        together (the lock is given up at once when the probe found a mode that works)."""
        held = False
        if self._probing(params):
            self.profile.probe_lock.acquire()
            held = True
            if self.profile.confirmed:
                self.profile.probe_lock.release()
                held = False
        try:
            yield
        finally:
            if held:
                self.profile.probe_lock.release()

    # -- request building and response parsing -------------------------------------------------------------------------

    def _request(self, messages: list[dict[str, str]], params: dict[str, Any], plan: _Plan) -> dict[str, Any]:
        request: dict[str, Any] = {"model": self.model, "messages": messages, plan.token_param: params["max_tokens"]}
        if "temperature" not in plan.omitted:
            request["temperature"] = params["temperature"]
        for key in ("seed", "stop", "top_p"):
            if params.get(key) is not None and key not in plan.omitted:
                request[key] = params[key]
        schema = params.get("schema")
        if schema is None or plan.mode == "none":
            return request
        if plan.mode == "json_schema":
            request["response_format"] = {"type": "json_schema", "json_schema": {
                "name": re.sub(r"[^A-Za-z0-9_-]", "_", str(schema.get("title") or "reply"))[:64], "schema": schema,
                "strict": False}}
        elif plan.mode == "json_object_schema":
            request["response_format"] = {"type": "json_object", "schema": schema}
        else:
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
        finish = getattr(choices[0], "finish_reason", None)
        return Completion(text=text, usage=counted, json=parsed, model=self.name, retries=retries,
                          finish_reason=str(finish) if finish else None)

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

    def _after_error(self, exc: BaseException, plan: _Plan, request: dict[str, Any], negotiated: list[str],
                     attempt: int) -> float | None:
        """After a failed send: None to send again at once (the endpoint's profile was adapted: a negotiation, noted
        in ``negotiated``, not a retry), else the seconds to wait before retrying; raises when the call gives up."""
        again, event = self._negotiate(exc, plan, request)
        if event is not None:
            negotiated.append(event.describe())
        if again and len(negotiated) <= _MAX_NEGOTIATIONS:
            return None
        return self._give_up_or_wait(exc, attempt)

    def _attempt_timeout(self) -> float:
        """Seconds one attempt may take: the model's ``timeout``, cut to what the question has left (kgqa.deadline)."""
        return deadline.attempt_timeout(self.timeout, f"waiting for {self.name}")

    # -- sync -------------------------------------------------------------------------------------------------------------

    def _complete(self, messages: list[dict[str, str]], params: dict[str, Any]) -> Completion:
        with self._probe_turn(params):
            attempt = 0
            negotiated: list[str] = []
            while True:
                plan = self._plan()
                request = self._request(messages, params, plan)
                try:
                    with self._slots:
                        response = self._client.chat.completions.create(**request, timeout=self._attempt_timeout())
                    completion = self._completion(response, messages, params, attempt)
                    self._accepted(plan, params)
                    completion.negotiations = tuple(negotiated)
                    return completion
                except Exception as exc:
                    deadline.check(f"waiting for {self.name} ({type(exc).__name__})")
                    wait = self._after_error(exc, plan, request, negotiated, attempt)
                    if wait is None:
                        continue  # sent again at once: a negotiation is not a retry
                # outside the slot: a backing-off call must not block others; never past the question's deadline
                deadline.sleep(wait, f"before retrying {self.name} (attempt {attempt + 1} failed)")
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
        deadline.check(f"before asking {self.name}")
        client, slots = self._loop_state()
        started = time.perf_counter()
        attempt = 0
        negotiated: list[str] = []
        while True:  # no probe lock here (it would block the event loop); the profile's compare-and-set keeps it right
            plan = self._plan()
            request = self._request(msgs, clean, plan)
            try:
                async with slots:
                    response = await client.chat.completions.create(**request, timeout=self._attempt_timeout())
                completion = self._completion(response, msgs, clean, attempt)
                self._accepted(plan, clean)
                completion.latency_s = time.perf_counter() - started
                completion.negotiations = tuple(negotiated)
                return completion
            except Exception as exc:
                deadline.check(f"waiting for {self.name} ({type(exc).__name__})")
                wait = self._after_error(exc, plan, request, negotiated, attempt)
                if wait is None:
                    continue
            left = deadline.current()
            if left is not None and wait >= left.remaining():
                raise left.exceeded(f"before retrying {self.name} (attempt {attempt + 1} failed)")
            await asyncio.sleep(wait)
            attempt += 1
