"""The FastAPI application of ``kgqa serve``: the JSON API under ``/v1/``, the page at ``/``, OpenAPI docs at ``/docs``.

Endpoints (docs/service.md has examples):

* ``POST /v1/ask`` -> the prediction (answers, grounding, evidence, the method's summary, usage, the evidence graph) and
  its ``trace_id``; ``POST /v1/ask/stream`` -> the same ask as NDJSON events while it is answered (steps, LLM calls,
  then the result); ``GET /v1/traces/{trace_id}`` -> the record with the step trace and every LLM call;
* ``GET /v1/methods`` (the registry, with each method's settings), ``GET /v1/kg`` (stats of the served KG),
  ``GET /v1/artifacts`` (what a method setting may name), ``GET /v1/health``;
* ``GET /v1/runs``, ``GET /v1/runs/{run}``, ``GET /v1/runs/{run}/questions?filter=wrong|right|failed&page=N``,
  ``GET /v1/runs/{run}/questions/{qid}``, ``GET /v1/runs/{run}/compare/{other}`` over the run directories under
  ``--runs`` (the listing and a run's ``metrics`` come from the metric registry, :mod:`kgqa.eval.metric_registry`).

Errors are JSON: ``{"error": CODE, "message": ..., "status": N}`` (:func:`kgqa.service.guard.error_body`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI, Query, Request, Security
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, StreamingResponse
from fastapi.security import HTTPBearer
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from kgqa import __version__
from kgqa.core import MAX_QUESTION_CHARS
from kgqa.errors import KGQAError
from kgqa.service.asks import AskRequest, AskService, AskTimeout, Busy, UserError, ask_response, clean
from kgqa.service.graph import evidence_graph
from kgqa.service.guard import ApiGuard, BodyLimit, SecurityHeaders, error_body
from kgqa.service.runs import (
    FILTERS,
    BadId,
    NotFound,
    RunStore,
    check_qid,
    check_run_id,
    headline_metrics,
    summary_metrics,
)
from kgqa.service.settings import ServiceSettings

log = logging.getLogger("kgqa.service")

STATIC = Path(str(resources.files("kgqa.service") / "static"))
TRACE_ID_RE = r"^[0-9a-f]{32}$"

# Declared for the OpenAPI docs (Swagger's "Authorize" button); the token is checked by ApiGuard before routing.
_bearer = HTTPBearer(auto_error=False, description="The token kgqa serve printed (or serve_token from the config).")


def _json_error(status: int, message: str, code: str | None = None, headers: dict[str, str] | None = None,
                **extra: Any) -> JSONResponse:
    return JSONResponse(error_body(status, message, code, **extra), status_code=status, headers=headers)


def create_app(settings: ServiceSettings | None = None, *, kg: Any = None, llm: Any = None,
               open_now: bool = False) -> FastAPI:
    """The application. ``kg`` / ``llm`` may be ready objects (else opened from the settings' specs on first use,
    or at once with ``open_now``)."""
    settings = settings or ServiceSettings()
    settings.check()
    asks = AskService(settings, kg=kg, llm=llm)
    if open_now:
        asks.open()
    runs = RunStore(settings.runs)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> Any:
        yield
        asks.close()

    app = FastAPI(title="kgqa", version=__version__, docs_url=None, redoc_url=None, lifespan=lifespan,
                  description="Question answering over knowledge graphs: ask live, browse runs, read traces. "
                              "Every /v1/ endpoint but /v1/health needs `Authorization: Bearer TOKEN` unless the "
                              "server was started on loopback with --no-auth.")
    app.state.asks = asks
    app.state.runs = runs
    app.state.settings = settings
    secured = [Security(_bearer)]
    listed: dict[str, Any] = {}

    # -- errors, all JSON --------------------------------------------------------------------------------------

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) else "request refused"
        if exc.status_code == 404 and message == "Not Found":
            message = "no such endpoint (GET /docs lists them)"
        return _json_error(exc.status_code, message, headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        details = [{"where": ".".join(str(p) for p in e.get("loc", ())), "message": str(e.get("msg", ""))}
                   for e in exc.errors()][:20]
        message = "; ".join(f"{d['where']}: {d['message']}" for d in details) or "the request is not valid"
        return _json_error(422, message, details=details)

    @app.exception_handler(KGQAError)
    async def user_error(_request: Request, exc: KGQAError) -> JSONResponse:
        return _json_error(400, str(exc))

    @app.exception_handler(Exception)
    async def crashed(_request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return _json_error(500, f"internal error: {type(exc).__name__}")

    # -- the page and the docs -----------------------------------------------------------------------------------

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url="/openapi.json", title="kgqa API",
                                   swagger_js_url="/static/vendor/swagger-ui/swagger-ui-bundle.js",
                                   swagger_css_url="/static/vendor/swagger-ui/swagger-ui.css",
                                   swagger_favicon_url="/static/favicon.svg")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    # -- service ---------------------------------------------------------------------------------------------------

    @app.get("/v1/health", tags=["service"], summary="Liveness, version, what is served (no token needed)")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "version": __version__, "auth": settings.token is not None,
                "runs": settings.runs is not None, "asks_in_flight": asks.inflight,
                "limits": {"max_body_bytes": settings.max_body_bytes, "rate_limit_per_minute": settings.rate_limit,
                           "max_question_chars": MAX_QUESTION_CHARS,
                           "ask_timeout_s": settings.ask_timeout_s, "max_asks": settings.max_asks,
                           "max_queued_asks": settings.max_queued_asks}}

    @app.get("/v1/methods", tags=["service"], dependencies=secured,
             summary="Every registered method: summary, settings (name, type, default) and needs")
    def methods() -> dict[str, Any]:
        from kgqa.methods import method_info, method_names

        names = method_names()
        if listed.get("names") != names:  # built once (each method is built with its defaults to say what it needs)
            listed["names"] = names
            listed["body"] = clean({"methods": [method_info(name, llm=asks.llm_spec).to_dict() for name in names]})
        return listed["body"]  # type: ignore[no-any-return]

    @app.get("/v1/kg", tags=["service"], dependencies=secured, summary="Stats of the served KG")
    def kg_stats() -> dict[str, Any]:
        return asks.kg_stats()

    @app.get("/v1/artifacts", tags=["service"], dependencies=secured,
             summary="The artifacts a method setting may name (scorer, answer_types, references ...): never a path")
    def artifacts() -> dict[str, Any]:
        return {"artifacts": [entry.to_dict() for entry in asks.catalog.entries()]}

    # -- asking ------------------------------------------------------------------------------------------------

    @app.post("/v1/ask", tags=["ask"], dependencies=secured,
              summary="Answer a question with a method; the prediction and its trace id",
              responses={400: {"description": "bad method, setting or topic"}, 413: {"description": "body too large"},
                         429: {"description": "rate limited"}, 500: {"description": "the method failed"},
                         409: {"description": "the method needs an artifact this server has not built (it never "
                                               "builds one)"},
                         503: {"description": "every ask slot is busy"}, 504: {"description": "the ask timed out"}})
    async def ask(request: Request, body: AskRequest) -> Any:
        content_type = request.headers.get("content-type", "")
        if content_type.split(";")[0].strip().lower() != "application/json":
            return _json_error(415, "send the ask as application/json")
        try:
            record = await asks.ask(body)
        except UserError as exc:
            return _json_error(400, str(exc))
        except Busy as exc:
            return _json_error(503, str(exc), headers={"Retry-After": "1"})
        except AskTimeout as exc:
            return _json_error(504, str(exc), trace_id=exc.trace_id)
        if record["status"] == "refused":
            return _json_error(400, record["error"], trace_id=record["trace_id"])
        if record["status"] == "unavailable":
            code, extra = _unavailable(record)
            return _json_error(409, record["error"], code, **extra)
        if record["status"] == "failed":
            return _json_error(500, f"the method failed: {record['error']}", "method_error",
                               trace_id=record["trace_id"], method=record["method"])
        return ask_response(record)

    @app.post("/v1/ask/stream", tags=["ask"], dependencies=secured,
              summary="The same ask, streamed as it is answered: one JSON object per line (NDJSON)",
              description="Events: `accepted` (with `trace_id`), then `step` (each trace step as the method appends "
                          "it) and `llm_call` (each model call with prompt, reply and tokens) as they happen, then "
                          "`done` (with `result`, what POST /v1/ask returns) or `error` (the error body of POST "
                          "/v1/ask, with `trace_id`). Refusals before the ask starts are plain JSON errors.",
              response_class=StreamingResponse)
    async def ask_stream(request: Request, body: AskRequest) -> Any:
        content_type = request.headers.get("content-type", "")
        if content_type.split(";")[0].strip().lower() != "application/json":
            return _json_error(415, "send the ask as application/json")
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

        def emit(event: dict[str, Any]) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, event)

        try:
            trace_id, future = asks.submit(body, emit=emit)
        except UserError as exc:
            return _json_error(400, str(exc))
        except Busy as exc:
            return _json_error(503, str(exc), headers={"Retry-After": "1"})
        record = asks.traces.get(trace_id) or {}
        return StreamingResponse(_stream(trace_id, record.get("method"), body.question, future, queue,
                                         settings.ask_timeout_s), media_type="application/x-ndjson")

    @app.get("/v1/traces/{trace_id}", tags=["ask"], dependencies=secured,
             summary="An ask's record: prediction, step trace, evidence graph, every LLM call (prompt, reply, tokens)")
    async def trace(trace_id: str = PathParam(pattern=TRACE_ID_RE, description="From POST /v1/ask")) -> Any:
        record = asks.traces.get(trace_id)
        if record is None:
            return _json_error(404, f"no trace {trace_id} (traces are kept for the newest "
                                    f"{settings.keep_traces} asks of this server process)")
        return record

    # -- runs --------------------------------------------------------------------------------------------------

    def run_error(exc: Exception) -> JSONResponse:
        return _json_error(400 if isinstance(exc, BadId) else 404, str(exc))

    @app.get("/v1/runs", tags=["runs"], dependencies=secured,
             summary="The run directories under --runs, with the headline metrics (values and descriptions)")
    def list_runs() -> Any:
        return clean({"runs": runs.listing(), "root": settings.runs is not None, "metrics": headline_metrics()})

    @app.get("/v1/runs/{run}", tags=["runs"], dependencies=secured,
             summary="A run's summary, its metrics shown in the service (described, with values) and configuration")
    def run_summary(run: str) -> Any:
        try:
            summary = runs.summary(run)
            return clean({"id": check_run_id(run), "summary": summary, "metrics": summary_metrics(summary),
                          "config": runs.config(run)})
        except (BadId, NotFound) as exc:
            return run_error(exc)

    @app.get("/v1/runs/{run}/questions", tags=["runs"], dependencies=secured,
             summary="A run's questions: all, right (strict Hits@1), wrong or failed; paged")
    def run_questions(run: str,
                            filter: Literal["all", "right", "wrong", "failed"] = Query("all", description=", ".join(FILTERS)),
                            page: int = Query(1, ge=1, le=1_000_000),
                            page_size: int = Query(50, ge=1, le=500)) -> Any:
        try:
            return clean(runs.questions(run, which=filter, page=page, page_size=page_size))
        except (BadId, NotFound) as exc:
            return run_error(exc)

    @app.get("/v1/runs/{run}/questions/{qid}", tags=["runs"], dependencies=secured,
             summary="One question of a run: its result row, verdicts per answer, trace, evidence graph")
    def run_question(run: str, qid: str) -> Any:
        try:
            check_run_id(run)
            check_qid(qid)
            row, trace_row = runs.question(run, qid)
        except (BadId, NotFound) as exc:
            return run_error(exc)
        return clean(_question_view(run, row, trace_row, runs, asks))

    @app.get("/v1/runs/{run}/compare/{other}", tags=["runs"], dependencies=secured,
             summary="Two runs side by side on the questions where they differ (verdict, failure or answers)")
    def compare(run: str, other: str, page: int = Query(1, ge=1, le=1_000_000),
                      page_size: int = Query(50, ge=1, le=500)) -> Any:
        try:
            check_run_id(run)
            check_run_id(other)
            return clean(runs.compare(run, other, page=page, page_size=page_size))
        except (BadId, NotFound) as exc:
            return run_error(exc)

    # Outermost first: headers on every answer, then the body limit, then rate limit and token.
    app.add_middleware(ApiGuard, token=settings.token, rate_limit=settings.rate_limit)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    app.add_middleware(SecurityHeaders)
    return app


def _unavailable(record: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The error code and fields of an ask the server cannot answer as set up (409)."""
    if record.get("artifact"):
        return "missing_artifact", {"artifact": record["artifact"], "trace_id": record["trace_id"]}
    return "method_unavailable", {"trace_id": record["trace_id"], "method": record["method"]}


def _line(event: dict[str, Any]) -> bytes:
    return (json.dumps(clean(event), ensure_ascii=False) + "\n").encode("utf-8")


async def _stream(trace_id: str, method: Any, question: str, future: Any, queue: asyncio.Queue[dict[str, Any]],
                  timeout: float) -> AsyncIterator[bytes]:
    """The events of one streamed ask, ending with ``done`` or ``error`` (a timeout ends the stream, not the ask)."""
    loop = asyncio.get_running_loop()
    yield _line({"event": "accepted", "trace_id": trace_id, "method": method, "question": question})
    finished = asyncio.ensure_future(asyncio.shield(asyncio.wrap_future(future)))
    deadline = loop.time() + timeout
    try:
        while True:
            getter = asyncio.ensure_future(queue.get())
            done, _ = await asyncio.wait({getter, finished}, timeout=max(0.0, deadline - loop.time()),
                                         return_when=asyncio.FIRST_COMPLETED)
            if getter in done:
                yield _line(getter.result())
                continue
            getter.cancel()
            if finished not in done:
                yield _line({"event": "error", **error_body(504, f"the ask took longer than {timeout:g} s; it goes on in "
                                                                 f"the background: GET /v1/traces/{trace_id} shows it "
                                                                 "when it ends", trace_id=trace_id)})
                return
            while not queue.empty():  # what the worker emitted just before it returned
                yield _line(queue.get_nowait())
            record = finished.result()
            if record["status"] == "done":
                yield _line({"event": "done", "result": ask_response(record)})
            elif record["status"] == "refused":
                yield _line({"event": "error", **error_body(400, record["error"], trace_id=trace_id)})
            elif record["status"] == "unavailable":
                code, extra = _unavailable(record)
                yield _line({"event": "error", **error_body(409, record["error"], code, **extra)})
            else:
                yield _line({"event": "error", **error_body(500, f"the method failed: {record['error']}", "method_error",
                                                            trace_id=trace_id, method=record["method"])})
            return
    finally:
        finished.cancel()  # the shield keeps the ask itself running


def _question_view(run: str, row: dict[str, Any], trace_row: dict[str, Any] | None, runs: RunStore,
                   asks: AskService) -> dict[str, Any]:
    """One question of a run as the page shows it: verdicts per answer and per gold answer (strict and legacy), the
    method's summary rebuilt from the trace, and the evidence graph named by the served KG where it knows the ids."""
    from kgqa.core import AnswerItem, GoldAnswer
    from kgqa.eval.metrics import match_answers
    from kgqa.eval.report import reported_method

    names = list(row.get("answers") or [])
    ids = list(row.get("answer_ids") or [None] * len(names))
    items = [AnswerItem(id=i, name=str(n)) for n, i in zip(names, ids, strict=False)]
    gold_names = list(row.get("gold") or [])
    gold_ids = list(row.get("gold_ids") or [None] * len(gold_names))
    golds = [GoldAnswer(id=i, name=str(n)) for n, i in zip(gold_names, gold_ids, strict=False)]
    answers = []
    for item in items[:200]:
        answers.append({"id": item.id, "name": item.name,
                        "strict": bool(golds) and match_answers(golds, [item]).hit >= 1,
                        "legacy": bool(golds) and match_answers(golds, [item], legacy=True).hit >= 1})
    gold = []
    for g in golds[:200]:
        gold.append({"id": g.id, "name": g.name,
                     "strict": bool(items) and match_answers([g], items).hit >= 1,
                     "legacy": bool(items) and match_answers([g], items, legacy=True).hit >= 1})
    trace = list((trace_row or {}).get("trace") or [])
    evidence = list((trace_row or {}).get("evidence") or [])
    # the topics the method started from and its own account, as the run stored them (runs written before kgqa
    # stored them show no topics and a summary without details)
    topics = [t for t in (trace_row or {}).get("topics") or [] if isinstance(t, str)]
    details = (trace_row or {}).get("details")
    config = runs.config(run)
    summary = _run_summary(config, trace, evidence, items, details if isinstance(details, dict) else {}, asks)
    known = {i: str(n) for n, i in zip(names, ids, strict=False) if i} | {
        i: str(n) for n, i in zip(gold_names, gold_ids, strict=False) if i}
    try:
        kg = asks.kg
    except Exception:  # the served KG cannot be opened: the graph shows ids
        kg = None
    graph = evidence_graph(evidence, topics=topics, answers=[(a.id, a.name) for a in items], kg=kg, known_names=known)
    verdicts = {"strict": {k: row.get(k) for k in ("hit1", "hit", "precision", "recall", "f1")},
                "legacy": {k.removeprefix("legacy_"): row.get(k) for k in ("legacy_hit1", "legacy_hit", "legacy_precision",
                                                                           "legacy_recall", "legacy_f1")}}
    # method: the label the run's figures are reported under (fog[graph]); method_name: the name it ran as
    return {"run": run, "id": row.get("id"), "question": row.get("question"),
            "method": reported_method(config) if config.get("method") else None, "method_name": config.get("method"),
            "result": row, "answers": answers, "gold": gold, "verdicts": verdicts, "grounding": row.get("grounding"),
            "error": row.get("error"), "topics": topics, "summary": summary, "evidence": evidence, "graph": graph,
            "trace": trace, "traceback": (trace_row or {}).get("traceback"),
            # a run keeps each call's prompt and reply only when it ran with `kgqa eval --record-calls`
            "llm_calls": (trace_row or {}).get("llm_calls"),
            "llm_calls_dropped": (trace_row or {}).get("llm_calls_dropped", 0),
            "trace_found": trace_row is not None}


def _run_summary(config: dict[str, Any], trace: list[dict[str, Any]], evidence: list[Any], items: list[Any],
                 details: dict[str, Any], asks: AskService) -> dict[str, Any]:
    """The method's own summary of a run's question: its ``explain()`` of the stored prediction, its details included
    (the run's settings when they still validate, else the defaults). The method comes from the asks' cache, so
    opening a run's questions builds (and loads what its constructor loads) once per method and settings."""
    from kgqa.core import Prediction
    from kgqa.methods.base import method_explanation

    name = config.get("method")
    if not name:
        return {"fields": {}, "lines": []}
    prediction = Prediction(answers=items, trace=trace, details=details,
                            evidence=[[str(x) for x in r] for r in evidence if isinstance(r, list)])
    for settings in (config.get("method_config_resolved") or {}, {}):
        try:
            runner, _needs = asks.method(str(name).strip().lower(), settings)
            return method_explanation(runner, prediction).model_dump(mode="json")
        except Exception:
            continue
    return {"fields": {}, "lines": []}
