"""Asking live: one question, one method, over the served KG and model, as ``kgqa ask`` does it.

The method comes from the registry with its settings validated (:func:`kgqa.methods.get_method`); what gets loaded is
what it needs (:func:`kgqa.methods.base.method_needs`); the question is solved by :func:`kgqa.methods.base.solve` with
a fresh recorder, so usage is counted exactly as in a run; the method's own summary is its ``explain()``. Asks run on a
bounded thread pool (``max_asks`` at once, ``max_queued_asks`` waiting, the rest refused) with a timeout; every ask
gets a trace id whose record (trace, evidence graph, each LLM call's prompt and reply) is kept in memory, the newest
``keep_traces`` of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kgqa import config
from kgqa.core import MAX_QUESTION_CHARS, Question, TopicEntity, Trace, check_question_text
from kgqa.errors import ConfigError, KGError, KGQAError
from kgqa.eval.rundir import json_default
from kgqa.llm.calls import CALLS, CallLog
from kgqa.methods.context import Resources, build_context
from kgqa.service.artifacts import ArtifactCatalog, MissingArtifact, ServiceArtifactStore
from kgqa.service.graph import evidence_graph
from kgqa.service.method_settings import check_method_settings
from kgqa.service.settings import ServiceSettings

TRACE_ID_LEN = 32

#: Receives the events of a streamed ask (from the worker thread).
Emit = Callable[[dict[str, Any]], None]


class AskRequest(BaseModel):
    """``POST /v1/ask``: the question, the method (``GET /v1/methods``), topic entities (ids or exact names; linked in
    the question when omitted) and the method's settings (checked against its config)."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(description=f"The question, in natural language: at most {MAX_QUESTION_CHARS:,} characters, "
                                      "no control characters but newline and tab.",
                          json_schema_extra={"minLength": 1, "maxLength": MAX_QUESTION_CHARS})
    method: str = Field(min_length=1, max_length=64, description="A method name from GET /v1/methods.")
    topics: list[Annotated[str, Field(min_length=1, max_length=300)]] | None = Field(
        default=None, max_length=10, description="Topic entities: KG ids or exact names (linked when omitted).")
    method_config: dict[str, Any] | None = Field(
        default=None, description="Method settings (GET /v1/methods); a setting that names something on disk takes an "
                                  "artifact name from GET /v1/artifacts, never a path.")

    @field_validator("question")
    @classmethod
    def _question(cls, value: str) -> str:
        try:
            return check_question_text(value)  # the rule of `kgqa ask` too
        except ConfigError as exc:
            raise ValueError(str(exc)) from None


class UserError(KGQAError):
    """The ask cannot be answered as given (no topic in the KG, a bad setting): answered 400."""


class Busy(Exception):
    """Every ask slot and queue place is taken: answered 503."""


class AskTimeout(Exception):
    """The ask ran past the timeout (it goes on in the background under its trace id): answered 504."""

    def __init__(self, trace_id: str, seconds: float) -> None:
        super().__init__(f"the ask took longer than {seconds:g} s; it goes on in the background: "
                         f"GET /v1/traces/{trace_id} shows it when it ends")
        self.trace_id = trace_id


def clean(value: Any) -> Any:
    """JSON-ready: pydantic models, sets and odd objects by the run files' rules, NaN and infinities as null."""
    def finite(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {str(k): finite(x) for k, x in v.items()}
        if isinstance(v, list):
            return [finite(x) for x in v]
        return v

    return finite(json.loads(json.dumps(value, ensure_ascii=False, default=json_default)))


class LiveTrace(Trace):
    """A trace that also emits each step the moment the method appends it (as it is then: a step that fills in its
    outcome later shows it in the final record)."""

    def __init__(self, emit: Emit) -> None:
        super().__init__()
        self._emit = emit

    def append(self, event: dict[str, Any]) -> None:
        super().append(event)
        with contextlib.suppress(Exception):  # the stream's reader went away: the ask goes on
            self._emit({"event": "step", "index": len(self) - 1, "step": clean(dict(event))})


class TraceStore:
    """The newest ``keep`` ask records by trace id (thread-safe)."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._data: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, trace_id: str, record: dict[str, Any]) -> None:
        with self._lock:
            self._data[trace_id] = record
            self._data.move_to_end(trace_id)
            while len(self._data) > self.keep:
                self._data.popitem(last=False)

    def get(self, trace_id: str) -> dict[str, Any] | None:
        with self._lock:
            return self._data.get(trace_id)

    def __len__(self) -> int:
        return len(self._data)


def resolve_topics(kg: Any, question: str, given: list[str] | None) -> tuple[list[TopicEntity], dict[str, Any]]:
    """The topic entities given (ids or exact names) or linked in the question, and what linking chose (as in
    ``kgqa ask``: :func:`kgqa.steps.linking.question_topics`)."""
    from kgqa.errors import KGError
    from kgqa.steps.linking import question_topics

    try:
        topics, linked = question_topics(kg, question, given)
    except KGError as exc:
        raise UserError(str(exc)) from None
    return topics, ({"linking": linked.to_dict()} if linked is not None else {})


class AskService:
    """The served KG and model, the method cache, the ask pool and the trace store."""

    def __init__(self, settings: ServiceSettings, *, kg: Any = None, llm: Any = None) -> None:
        self.settings = settings
        self.kg_spec = str(config.get("kg", settings.kg))
        if llm is None or isinstance(llm, str):
            self.llm_spec = str(config.get("llm", llm or settings.llm))
        else:  # a ready model object (tests, embedding applications)
            self.llm_spec = str(getattr(llm, "name", "model"))
        # every ask's context is built from these (kgqa.methods.context), each loaded once and shared by the asks;
        # the artifact store only loads (a request never builds or trains), and requests name artifacts, not paths
        shown_kg = self.kg_display if self.kg_display == self.kg_spec else f"<the directory of KG {self.kg_display}>"
        self.store = ServiceArtifactStore(shown_params={"kg": shown_kg})
        self.catalog = ArtifactCatalog(settings.artifacts, self.store)
        self.resources = ServedResources(kg=kg if kg is not None else self.kg_spec,
                                         llm=llm if llm is not None and not isinstance(llm, str) else self.llm_spec,
                                         embedder=settings.embedder, schema=settings.schema, capture_calls=True,
                                         store=self.store)
        self._methods: OrderedDict[str, tuple[Any, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self._inflight = 0
        self.executor = ThreadPoolExecutor(max_workers=settings.max_asks, thread_name_prefix="kgqa-ask")
        self.traces = TraceStore(settings.keep_traces)
        self.asked = 0
        from kgqa.deadline import question_timeout

        # one deadline per question, shared by its linking, KG queries and model calls (kgqa.deadline): the config's
        # question_timeout, else the ask timeout, so an ask answered 504 does not go on working for long
        self.question_timeout = question_timeout(None, default=settings.ask_timeout_s)

    # -- what is served ------------------------------------------------------------------------------------------

    def open(self, *, llm: bool = True) -> None:
        """Open the KG (and the model, with ``llm``) now, so a bad spec stops the server before it listens."""
        self.resources.open_kg()
        if llm:
            self.resources.model()

    @property
    def kg(self) -> Any:
        return self.resources.open_kg()

    @property
    def kg_display(self) -> str:
        """The served KG as a client is shown it: ``demo``, an endpoint URL, or a directory's last part."""
        return self.kg_spec if self.kg_spec == "demo" or self.kg_spec.startswith(("http://", "https://")) \
            else _last_part(self.kg_spec)

    def kg_stats(self) -> dict[str, Any]:
        import dataclasses

        stats = dataclasses.asdict(self.kg.stats())
        extra = {k: v for k, v in (stats.pop("extra", None) or {}).items() if k != "directory"}  # no server paths
        return clean({"kg": self.kg_display, **stats, "extra": extra})

    def method(self, name: str, settings: dict[str, Any] | None) -> tuple[Any, Any]:
        """The configured method and its needs, cached by name and settings; a bad name or setting is a ConfigError."""
        from kgqa.methods import get_method
        from kgqa.methods.base import method_needs

        key = json.dumps([name, settings or {}], sort_keys=True, default=str)
        with self._lock:
            hit = self._methods.get(key)
            if hit is not None:
                self._methods.move_to_end(key)
                return hit
        runner = get_method(name, **(settings or {}))
        needs = method_needs(runner, self.llm_spec)
        with self._lock:
            self._methods[key] = (runner, needs)
            while len(self._methods) > 64:
                self._methods.popitem(last=False)
        return runner, needs

    # -- asking --------------------------------------------------------------------------------------------------

    def submit(self, request: AskRequest, emit: Emit | None = None) -> tuple[str, Future[dict[str, Any]]]:
        """Start one ask on the pool: its trace id and the future of its record. ``emit`` (called from the worker
        thread) receives each trace step and LLM call as it happens. :class:`UserError` for a bad method or setting,
        :class:`Busy` when every slot and queue place is taken."""
        name = request.method.strip().lower()
        try:
            settings, artifacts = check_method_settings(name, request.method_config, self.catalog)
        except ConfigError as exc:
            raise UserError(str(exc)) from None
        try:
            runner, needs = self.method(name, settings)
        except ConfigError as exc:  # (an artifact it names shows by its name, not where it is on this server)
            raise UserError(self.catalog.display(str(exc))) from None
        with self._lock:
            if self._inflight >= self.settings.max_asks + self.settings.max_queued_asks:
                raise Busy(f"{self._inflight} asks are running or waiting; try again shortly")
            self._inflight += 1
            self.asked += 1
        trace_id = uuid.uuid4().hex
        self.traces.put(trace_id, {"trace_id": trace_id, "status": "running", "question": request.question,
                                   **self._method_names(runner, request.method, needs), "created_at": _now()})
        try:
            future: Future[dict[str, Any]] = self.executor.submit(self._answer, trace_id, request, runner, needs, emit,
                                                                  artifacts)
        except RuntimeError:  # shutting down
            self._release()
            raise Busy("the server is shutting down") from None
        future.add_done_callback(lambda _f: self._release())
        return trace_id, future

    async def ask(self, request: AskRequest) -> dict[str, Any]:
        """Answer one ask: the record (status ``done``, ``failed`` or ``refused``); :class:`UserError`, :class:`Busy`
        or :class:`AskTimeout` otherwise."""
        trace_id, future = self.submit(request)
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), self.settings.ask_timeout_s)
        except TimeoutError:
            raise AskTimeout(trace_id, self.settings.ask_timeout_s) from None

    def _release(self) -> None:
        with self._lock:
            self._inflight -= 1

    @property
    def inflight(self) -> int:
        return self._inflight

    def _method_names(self, runner: Any, asked: str, needs: Any) -> dict[str, str]:
        """``method``: the label the answer is reported under, as `kgqa eval` and `kgqa ask` report it (FoG's graph
        mode is ``fog[graph]``); ``method_name``: the registered name it ran as."""
        from kgqa.methods.base import method_label

        name = runner_name(runner, asked)
        return {"method": method_label(runner, self.llm_spec if needs.llm else None, name), "method_name": name}

    def _answer(self, trace_id: str, request: AskRequest, runner: Any, needs: Any, emit: Emit | None = None,
                artifacts: dict[str, str] | None = None) -> dict[str, Any]:
        from kgqa.deadline import question_deadline

        with question_deadline(self.question_timeout):  # from linking to the answer, as `kgqa ask`
            return self._answer_within(trace_id, request, runner, needs, emit, artifacts)

    def _answer_within(self, trace_id: str, request: AskRequest, runner: Any, needs: Any, emit: Emit | None,
                       artifacts: dict[str, str] | None) -> dict[str, Any]:
        from kgqa.llm.accounting import Recorder
        from kgqa.methods.base import method_config_dump, method_explanation, solve

        started = time.perf_counter()
        previous = self.traces.get(trace_id) or {}
        base = {"trace_id": trace_id, "created_at": previous.get("created_at") or _now(), "question": request.question,
                **self._method_names(runner, request.method, needs),
                # artifact settings show the names the request gave, not where they are on this server
                "method_config": {**clean(method_config_dump(runner)), **(artifacts or {})},
                "kg": self.kg_spec if needs.kg else None,
                "llm": self.llm_spec if needs.llm else None}
        log = CallLog(None if emit is None else lambda index, call: emit({"event": "llm_call", "index": index,
                                                                          "call": call}))
        token = CALLS.set(log)
        try:
            topics: list[TopicEntity] = []
            linking: dict[str, Any] = {}
            recorder = Recorder()
            try:
                if needs.kg:
                    topics, linking = resolve_topics(self.kg, request.question, request.topics)
                ctx = build_context(needs, self.resources, seed=self.settings.seed, recorder=recorder,
                                    trace=Trace() if emit is None else LiveTrace(emit))
            except (UserError, KGError) as exc:
                record = {**base, "status": "refused", "error": self.catalog.display(str(exc)),
                          "elapsed_s": time.perf_counter() - started}
                self.traces.put(trace_id, record)
                return record
            except KGQAError as exc:  # the model or the KG cannot be opened: the server's setup, not the question
                record = {**base, "status": "failed", "error": f"{type(exc).__name__}: {exc}", "trace": [],
                          "llm_calls": [], "elapsed_s": time.perf_counter() - started}
                self.traces.put(trace_id, record)
                return record
            from kgqa.steps.linking import question_text

            question = Question(id=trace_id, text=question_text(request.question), topic_entities=topics)
            try:
                prediction = solve(runner, question, ctx, recorder=recorder, scope=trace_id)
                status, error = ("failed" if prediction.error else "done"), prediction.error
            except (MissingArtifact, ConfigError) as exc:
                # Not the method failing: an artifact this server has not built (409; nothing is built), a setting the
                # method refused only once it ran (400), or a method this server is not set up for (409).
                message = self.catalog.display(str(exc))
                if isinstance(exc, MissingArtifact):
                    status, extra = "unavailable", {"artifact": exc.artifact}
                elif _names_a_setting(message, request.method_config):
                    status, extra = "refused", {}
                    message = f"a method setting was refused: {message}"
                else:
                    status, extra = "unavailable", {}
                    message += " (GET /v1/artifacts lists what this server offers to method settings)"
                record = {**base, "status": status, "error": message, **extra, "trace": clean(list(ctx.trace)),
                          "llm_calls": log.calls, "elapsed_s": time.perf_counter() - started}
                self.traces.put(trace_id, record)
                return record
            except Exception as exc:  # the method raised: the ask failed, its partial trace is kept
                from kgqa.core import Prediction
                from kgqa.methods.base import attach_run_facts

                prediction = attach_run_facts(Prediction.failed(f"{type(exc).__name__}: {exc}", trace=list(ctx.trace)),
                                              ctx, recorder=recorder, scope=trace_id)
                status, error = "failed", prediction.error
            try:
                summary = method_explanation(runner, prediction).model_dump(mode="json")
            except Exception as exc:  # an explain() that cannot read a failed prediction
                summary = {"fields": {}, "lines": [f"(no summary: {type(exc).__name__}: {exc})"]}
            answers = [a.model_dump(mode="json") for a in prediction.answers]
            known = {t.id: t.name for t in topics} | {a.id: a.name for a in prediction.answers if a.id and a.name}
            graph = evidence_graph(prediction.evidence, topics=[t.id for t in topics],
                                   answers=[(a.id, a.name) for a in prediction.answers], kg=ctx.kg, known_names=known)
            record = clean({
                **base, "status": status, "error": error,
                "topics": [t.model_dump() for t in topics], **linking,
                "answers": answers, "grounding": prediction.grounding.value, "evidence": prediction.evidence,
                "summary": summary, "usage": prediction.usage, "audits": prediction.audits, "stats": prediction.stats,
                "graph": graph, "trace": prediction.trace, "llm_calls": log.calls, "llm_calls_dropped": log.dropped,
                "elapsed_s": time.perf_counter() - started,
            })
            self.traces.put(trace_id, record)
            return record
        finally:
            CALLS.reset(token)

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)


@dataclass
class ServedResources(Resources):
    """The service's :class:`~kgqa.methods.context.Resources`: the artifact store is the server's, which never builds."""

    store: ServiceArtifactStore | None = None

    def artifact_store(self) -> Any:
        return self._once("artifacts", lambda: self.store if self.store is not None else ServiceArtifactStore())


#: Keys of an ask record that only GET /v1/traces/{id} returns (the ask's answer stays small).
TRACE_ONLY = ("trace", "llm_calls", "llm_calls_dropped", "linking")


def ask_response(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in TRACE_ONLY}


def runner_name(runner: Any, asked: str) -> str:
    return str(getattr(runner, "name", "") or asked).strip().lower()


def _names_a_setting(message: str, settings: dict[str, Any] | None) -> bool:
    """Whether ``message`` names one of the ask's ``settings`` (a refusal of them, not of the server's setup)."""
    return any(re.search(rf"\b{re.escape(str(key))}\b", message) for key in settings or {})


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _last_part(spec: str) -> str:
    from pathlib import Path

    return Path(spec).name or spec
