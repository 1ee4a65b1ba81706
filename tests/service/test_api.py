"""The HTTP API against real uvicorn servers on 127.0.0.1, with the demo KG and the scripted model."""

from __future__ import annotations

import http.client
import json
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from kgqa.errors import ConfigError
from kgqa.service import ServiceSettings


def raw_get(server: Any, path: str, token: str | None) -> tuple[int, dict[str, Any]]:
    """A GET with the path sent exactly as written (no client-side normalisation of '..' or %2F)."""
    parts = urlsplit(server.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    conn.request("GET", path, headers={"Authorization": f"Bearer {token}"} if token else {})
    response = conn.getresponse()
    body = json.loads(response.read() or b"null")
    conn.close()
    return response.status, body


def assert_error(response: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["status"] == status and body["message"]
    if code is not None:
        assert body["error"] == code
    return body


# ---------------------------------------------------------------------------------------------------------------------
# Auth


def test_health_needs_no_token_and_says_auth_is_on(server: Any) -> None:
    with server.client(token=None) as client:
        body = client.get("/v1/health").json()
    assert body["status"] == "ok" and body["auth"] is True and body["runs"] is True


@pytest.mark.parametrize("path", ["/v1/methods", "/v1/kg", "/v1/runs", "/v1/runs/ccor-demo",
                                  "/v1/traces/0123456789abcdef0123456789abcdef"])
def test_every_api_endpoint_refuses_a_missing_or_wrong_token(server: Any, token: str, path: str) -> None:
    with server.client(token=None) as client:
        missing = client.get(path)
        wrong = client.get(path, headers={"Authorization": "Bearer not-the-token-at-all"})
        basic = client.get(path, headers={"Authorization": f"Basic {token}"})
    assert "bearer token is required" in assert_error(missing, 401, "unauthorized")["message"]
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert_error(wrong, 401, "unauthorized")
    assert_error(basic, 401, "unauthorized")
    with server.client(token=None) as client:
        refused = client.post("/v1/ask", json={"question": "Who directed Inception?", "method": "ccor"})
    assert_error(refused, 401)


def test_the_token_is_accepted(server: Any) -> None:
    with server.client() as client:
        assert client.get("/v1/kg").status_code == 200


# ---------------------------------------------------------------------------------------------------------------------
# Service endpoints


def test_methods_come_from_the_registry_with_their_settings(server: Any) -> None:
    with server.client() as client:
        methods = {m["name"]: m for m in client.get("/v1/methods").json()["methods"]}
    assert {"ccor", "cor", "io", "cot", "tog", "pog", "fog", "srp", "vog"} <= set(methods)
    top_k = next(s for s in methods["ccor"]["settings"] if s["name"] == "top_k")
    assert top_k["default"] == 3 and top_k["type"] == "int"
    assert methods["io"]["needs"]["kg"] is False and methods["ccor"]["needs"]["kg"] is True


def test_kg_stats_of_the_served_kg_without_server_paths(server: Any) -> None:
    with server.client() as client:
        stats = client.get("/v1/kg").json()
    assert stats["kg"] == "demo" and stats["backend"] == "embedded" and stats["triples"] > 3000
    assert "directory" not in json.dumps(stats)


def test_openapi_docs_are_served_offline(server: Any) -> None:
    with server.client(token=None) as client:
        docs = client.get("/docs")
        schema = client.get("/openapi.json").json()
        bundle = client.get("/static/vendor/swagger-ui/swagger-ui-bundle.js")
    assert docs.status_code == 200 and "/static/vendor/swagger-ui/swagger-ui-bundle.js" in docs.text
    assert "cdn." not in docs.text and bundle.status_code == 200 and len(bundle.content) > 100_000
    paths = set(schema["paths"])
    assert {"/v1/ask", "/v1/traces/{trace_id}", "/v1/methods", "/v1/kg", "/v1/health", "/v1/runs", "/v1/runs/{run}",
            "/v1/runs/{run}/questions", "/v1/runs/{run}/questions/{qid}"} <= paths
    assert "HTTPBearer" in schema["components"]["securitySchemes"]


def test_the_page_and_its_files_carry_security_headers(server: Any) -> None:
    with server.client(token=None) as client:
        page = client.get("/")
        script = client.get("/static/app.js")
    assert page.status_code == 200 and 'src="/static/app.js"' in page.text
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
    assert page.headers["x-content-type-options"] == "nosniff" and script.status_code == 200
    assert "innerHTML" not in script.text and "insertAdjacentHTML" not in script.text and "eval(" not in script.text


def test_unknown_endpoints_and_methods_are_json_errors(server: Any) -> None:
    with server.client() as client:
        assert_error(client.get("/v1/nothing-here"), 404, "not_found")
        assert_error(client.delete("/v1/kg"), 405)


# ---------------------------------------------------------------------------------------------------------------------
# Asking


def test_ask_returns_the_prediction_summary_usage_graph_and_a_trace_id(server: Any) -> None:
    with server.client() as client:
        response = client.post("/v1/ask", json={"question": "Who directed Inception?", "method": "ccor"})
        assert response.status_code == 200, response.text
        body = response.json()
        assert [a["name"] for a in body["answers"]] == ["Christopher Nolan"]
        assert body["grounding"] == "structured"
        assert ["m.0demo_inception", "film.film.directed_by", "m.0demo_christopher_nolan"] in body["evidence"]
        assert "main chain: film.film.directed_by" in body["summary"]["lines"]
        assert body["summary"]["fields"]["main_chain"] == "film.film.directed_by"
        assert body["usage"]["calls"] == 2 and body["usage"]["prompt_tokens"] > 0
        assert body["topics"] == [{"id": "m.0demo_inception", "name": "Inception"}]
        kinds = {n["id"]: n["kind"] for n in body["graph"]["nodes"]}
        assert kinds == {"m.0demo_inception": "topic", "m.0demo_christopher_nolan": "answer"}
        assert body["graph"]["edges"] == [{"source": "m.0demo_inception", "target": "m.0demo_christopher_nolan",
                                           "relation": "film.film.directed_by"}]
        assert "trace" not in body and "llm_calls" not in body

        trace = client.get(f"/v1/traces/{body['trace_id']}").json()
    assert trace["status"] == "done" and trace["answers"] == body["answers"]
    steps = [e["step"] for e in trace["trace"]]
    assert steps[0] == "start" and "main.decision" in steps and steps[-1] == "answer"
    assert trace["linking"]["linked"][0]["id"] == "m.0demo_inception"
    calls = trace["llm_calls"]
    assert [c["step"] for c in calls] == ["ccor.prune", "ccor.reason"]
    assert "Who directed Inception?" in calls[0]["messages"][-1]["content"]
    assert json.loads(calls[0]["reply"]) == {"relations": ["film.film.directed_by"]}
    assert calls[1]["prompt_tokens"] > 0 and calls[1]["completion_tokens"] > 0
    assert sum(c["prompt_tokens"] for c in calls) == body["usage"]["prompt_tokens"]


def test_ask_through_a_cvt_marks_the_cvt_node(server: Any) -> None:
    with server.client() as client:
        body = client.post("/v1/ask", json={"question": "Who starred in Inception?", "method": "ccor",
                                            "topics": ["Inception"], "method_config": {"top_k": 2}}).json()
    assert {a["name"] for a in body["answers"]} >= {"Leonardo DiCaprio", "Tom Hardy"}
    kinds = [n["kind"] for n in body["graph"]["nodes"]]
    assert kinds.count("topic") == 1 and kinds.count("cvt") >= 6 and kinds.count("answer") >= 6
    assert {e["relation"] for e in body["graph"]["edges"]} == {"film.film.starring", "film.performance.actor"}
    assert body["method_config"]["top_k"] == 2


def test_an_llm_only_method_needs_no_topic(server: Any) -> None:
    with server.client() as client:
        body = client.post("/v1/ask", json={"question": "Who directed Inception?", "method": "io"}).json()
    assert [a["name"] for a in body["answers"]] == ["Christopher Nolan"]
    assert body["grounding"] == "parametric" and body["graph"]["nodes"] == [] and body["kg"] is None


def test_the_method_reads_the_question_without_the_topic_brackets(server: Any) -> None:
    with server.client() as client:
        body = client.post("/v1/ask", json={"question": "Who directed [Inception]?", "method": "io"}).json()
        assert [a["name"] for a in body["answers"]] == ["Christopher Nolan"]
        calls = client.get(f"/v1/traces/{body['trace_id']}").json()["llm_calls"]
    prompt = calls[0]["messages"][-1]["content"]
    assert "Who directed Inception?" in prompt and "[Inception]" not in prompt


def test_a_method_error_is_returned_as_json_with_its_trace(server: Any) -> None:
    with server.client() as client:
        response = client.post("/v1/ask", json={"question": "What is the airspeed of a swallow?", "method": "io"})
        body = assert_error(response, 500, "method_error")
        assert "no rule matches" in body["message"] and body["method"] == "io"
        trace = client.get(f"/v1/traces/{body['trace_id']}").json()
    assert trace["status"] == "failed" and "LLMError" in trace["error"]
    assert trace["llm_calls"][0]["error"] and trace["llm_calls"][0]["reply"] is None


def stream_events(client: httpx.Client, payload: dict[str, Any]) -> list[dict[str, Any]]:
    with client.stream("POST", "/v1/ask/stream", json=payload) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("application/x-ndjson")
        return [json.loads(line) for line in response.iter_lines() if line.strip()]


def test_a_streamed_ask_sends_steps_and_calls_as_they_happen_then_the_result(server: Any) -> None:
    with server.client() as client:
        events = stream_events(client, {"question": "Who directed Inception?", "method": "ccor"})
        assert events[0]["event"] == "accepted" and len(events[0]["trace_id"]) == 32
        kinds = [e["event"] for e in events]
        assert kinds[-1] == "done" and kinds.count("llm_call") == 2 and kinds.count("step") >= 5
        steps = [e["step"]["step"] for e in events if e["event"] == "step"]
        assert steps[0] == "start" and steps[-1] == "answer"
        # The order is the order things happened: the judge's call comes after the pruning step it follows.
        order = [e["step"]["step"] if e["event"] == "step" else e["call"]["step"] for e in events[1:-1]]
        assert order.index("ccor.prune") < order.index("main.decision")
        result = events[-1]["result"]
        assert [a["name"] for a in result["answers"]] == ["Christopher Nolan"]
        assert result["trace_id"] == events[0]["trace_id"]
        trace = client.get(f"/v1/traces/{result['trace_id']}").json()
    assert [e["step"] for e in trace["trace"]] == steps


def test_a_streamed_ask_that_fails_ends_with_a_json_error_event(server: Any) -> None:
    with server.client() as client:
        events = stream_events(client, {"question": "What is the airspeed of a swallow?", "method": "io"})
        refused = client.post("/v1/ask/stream", json={"question": "Who?", "method": "nope"})
    assert events[-1]["event"] == "error" and events[-1]["error"] == "method_error" and events[-1]["trace_id"]
    assert_error(refused, 400)


@pytest.mark.parametrize(("payload", "status", "words"), [
    ({"question": "Who directed Inception?", "method": "no-such-method"}, 400, "no-such-method"),
    ({"question": "Who directed Inception?", "method": "ccor", "method_config": {"top_k": "many"}}, 400, "top_k"),
    ({"question": "Who directed Inception?", "method": "ccor", "method_config": {"colour": 1}}, 400, "colour"),
    ({"question": "Who directed it?", "method": "ccor", "topics": ["Nobody Such"]}, 400, "Nobody Such"),
    ({"question": "What is the weather like?", "method": "ccor"}, 400, "no entity of the KG"),
    ({"method": "ccor"}, 422, "question"),
    ({"question": "", "method": "ccor"}, 422, "question"),
    ({"question": "Who directed Inception?", "method": "ccor", "surprise": True}, 422, "surprise"),
])
def test_bad_asks_are_refused_with_a_clear_json_message(server: Any, payload: dict[str, Any], status: int,
                                                        words: str) -> None:
    with server.client() as client:
        body = assert_error(client.post("/v1/ask", json=payload), status)
    assert words in body["message"]


def test_an_ask_must_be_json(server: Any) -> None:
    with server.client() as client:
        response = client.post("/v1/ask", content=b'{"question": "Who directed Inception?", "method": "io"}',
                               headers={"Content-Type": "text/plain"})
    assert response.status_code in (415, 422) and response.json()["message"]


def test_trace_ids_are_validated(server: Any) -> None:
    with server.client() as client:
        assert_error(client.get("/v1/traces/0123456789abcdef0123456789abcdef"), 404, "not_found")
        bad = client.get("/v1/traces/..%2F..%2Fetc%2Fpasswd")
    assert bad.status_code in (404, 422) and bad.json()["message"]


# ---------------------------------------------------------------------------------------------------------------------
# Runs


def test_runs_are_listed_with_their_scores(server: Any) -> None:
    with server.client() as client:
        runs = {r["id"]: r for r in client.get("/v1/runs").json()["runs"]}
    assert set(runs) == {"ccor-demo", "cot-demo"}  # not-a-run and .hidden are not runs
    assert runs["ccor-demo"]["method"] == "ccor" and runs["ccor-demo"]["n"] == 12 and runs["ccor-demo"]["errors"] == 1
    assert runs["ccor-demo"]["hits@1"] > runs["cot-demo"]["hits@1"]


def test_a_runs_summary_and_config(server: Any) -> None:
    with server.client() as client:
        body = client.get("/v1/runs/ccor-demo").json()
    assert body["id"] == "ccor-demo" and body["summary"]["n"] == 12 and "legacy_hits@1" in body["summary"]
    assert body["config"]["method"] == "ccor" and body["config"]["dataset"] == "demo"


def test_questions_are_filtered_and_paged(server: Any) -> None:
    with server.client() as client:
        everything = client.get("/v1/runs/ccor-demo/questions").json()
        failed = client.get("/v1/runs/ccor-demo/questions", params={"filter": "failed"}).json()
        right = client.get("/v1/runs/ccor-demo/questions", params={"filter": "right"}).json()
        wrong = client.get("/v1/runs/ccor-demo/questions", params={"filter": "wrong"}).json()
        page2 = client.get("/v1/runs/ccor-demo/questions", params={"page": 2, "page_size": 5}).json()
        assert_error(client.get("/v1/runs/ccor-demo/questions", params={"filter": "odd"}), 422)
        assert_error(client.get("/v1/runs/ccor-demo/questions", params={"page": 0}), 422)
    assert everything["total"] == 12 and everything["counts"]["all"] == 12
    assert [q["id"] for q in failed["questions"]] == ["demo-004"] and failed["questions"][0]["error"]
    assert right["total"] + wrong["total"] + failed["total"] == 12 and right["total"] >= 8
    assert all(q["verdict"] == "right" and q["hit1"] == 1.0 for q in right["questions"])
    assert all(q["verdict"] == "wrong" for q in wrong["questions"])
    assert page2["page"] == 2 and page2["pages"] == 3 and [q["id"] for q in page2["questions"]] == \
        [q["id"] for q in everything["questions"][5:10]]


def test_a_runs_question_has_verdicts_trace_summary_and_graph(server: Any) -> None:
    with server.client() as client:
        body = client.get("/v1/runs/ccor-demo/questions/demo-001").json()
        failed = client.get("/v1/runs/ccor-demo/questions/demo-004").json()
    assert body["question"] == "Who directed Inception?" and body["method"] == "ccor"
    assert body["answers"] == [{"id": "m.0demo_christopher_nolan", "name": "Christopher Nolan", "strict": True,
                                "legacy": True}]
    assert body["gold"][0]["strict"] is True and body["verdicts"]["strict"]["hit1"] == 1.0
    assert body["verdicts"]["legacy"]["hit1"] == 1.0 and body["grounding"] == "structured"
    assert "main chain: film.film.directed_by" in body["summary"]["lines"]
    assert {n["kind"] for n in body["graph"]["nodes"]} == {"topic", "answer"}
    assert body["graph"]["nodes"][0]["label"] == "Inception"
    assert next(e["step"] for e in body["trace"]) == "start" and body["llm_calls"] is None
    assert failed["error"] and "Traceback" in failed["traceback"] and failed["answers"] == []


def test_a_run_recorded_with_its_calls_shows_each_prompt_and_reply(server: Any) -> None:
    with server.client() as client:
        body = client.get("/v1/runs/cot-demo/questions/demo-001").json()
    (call,) = body["llm_calls"]
    assert call["step"] == "cot.generate" and call["reply"] and '"Christopher Nolan"' in call["reply"]
    assert any("Who directed Inception?" in m["content"] for m in call["messages"] if m["role"] == "user")
    assert call["prompt_tokens"] > 0 and call["completion_tokens"] > 0 and body["llm_calls_dropped"] == 0


def test_two_runs_side_by_side_where_they_differ(server: Any) -> None:
    with server.client() as client:
        body = client.get("/v1/runs/ccor-demo/compare/cot-demo").json()
        same = client.get("/v1/runs/ccor-demo/compare/ccor-demo").json()
    assert body["shared"] == 12 and 0 < body["total"] <= 12
    first = body["questions"][0]
    assert first["a"]["answers"] != first["b"]["answers"] or first["verdict_changed"]
    assert same["total"] == 0


@pytest.mark.parametrize("path", [
    "/v1/runs/..%2F..%2Fetc/questions",
    "/v1/runs/%2E%2E/questions",
    "/v1/runs/..",
    "/v1/runs/.hidden",
    "/v1/runs/not-a-run",
    "/v1/runs/ccor-demo%2F..%2F..%2Fsecret",
    "/v1/runs/ccor-demo/questions/..%2F..%2Fconfig.json",
    "/v1/runs/ccor-demo/questions/%2E%2E",
    "/v1/runs/ccor-demo/questions/no-such-question",
    "/v1/runs/ccor-demo/compare/..%2Fcot-demo",
    "/v1/runs/../runs",
    "/v1/runs/%00/questions",
])
def test_path_traversal_and_unknown_ids_are_refused(server: Any, token: str, path: str) -> None:
    status, body = raw_get(server, path, token)
    assert status in (400, 404, 422), (path, status, body)
    assert body["message"] and "Traceback" not in json.dumps(body)


def test_a_symlink_out_of_the_runs_root_is_refused(server: Any, runs_root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside).mkdir()
    (outside / "results.jsonl").write_text('{"id": "x"}\n', encoding="utf-8")
    link = runs_root / "escape"
    link.symlink_to(outside, target_is_directory=True)
    try:
        with server.client() as client:
            assert_error(client.get("/v1/runs/escape"), 404)
            assert "escape" not in {r["id"] for r in client.get("/v1/runs").json()["runs"]}
    finally:
        link.unlink()


# ---------------------------------------------------------------------------------------------------------------------
# Limits


@pytest.fixture(scope="module")
def tight(rules_file: Path, start_server: Any, token: str) -> Any:
    live = start_server(kg="demo", llm=f"scripted:{rules_file}", token=token, rate_limit=6, max_body_bytes=1024)
    yield live
    live.stop()


def test_a_large_body_is_refused_with_413(tight: Any) -> None:
    big = {"question": "x" * 5000, "method": "io"}
    with tight.client() as client:
        assert_error(client.post("/v1/ask", json=big), 413, "body_too_large")

        def chunks() -> Any:  # no Content-Length: counted as it arrives
            for _ in range(10):
                yield b" " * 512

        assert_error(client.post("/v1/ask", content=chunks(), headers={"Content-Type": "application/json"}), 413)


def test_past_the_rate_limit_is_429_with_retry_after(tight: Any) -> None:
    with tight.client() as client:
        statuses = [client.get("/v1/kg").status_code for _ in range(10)]
        assert statuses[:5] == [200] * 5 and statuses[-1] == 429
        limited = client.get("/v1/methods")
        assert_error(limited, 429, "rate_limited")
        assert int(limited.headers["retry-after"]) >= 1
        assert client.get("/v1/health").status_code == 200  # probes always get through
        # Wrong tokens are throttled too (the limit comes before the token check).
        assert client.get("/v1/kg", headers={"Authorization": "Bearer wrong-wrong-wrong"}).status_code == 429


class _Gate:
    """A scripted model that waits for the test before it replies."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.entered = threading.Event()

    def __call__(self, messages: list[dict[str, str]]) -> str:
        self.entered.set()
        assert self.open.wait(20)
        return json.dumps({"answers": ["Christopher Nolan"]})


def test_asks_beyond_the_slots_are_503_and_a_slow_ask_is_504_then_finishes(start_server: Any, token: str) -> None:
    from kgqa.llm.scripted import ScriptedModel

    gate = _Gate()
    live = start_server(kg="demo", llm_object=ScriptedModel(gate, name="gate"), token=token, rate_limit=0, max_asks=1,
                 max_queued_asks=0, ask_timeout_s=0.5)
    try:
        with live.client() as client:
            slow = client.post("/v1/ask", json={"question": "Who directed Inception?", "method": "io"})
            body = assert_error(slow, 504, "timeout")
            assert gate.entered.is_set() and "/v1/traces/" in body["message"]
            assert client.get(f"/v1/traces/{body['trace_id']}").json()["status"] == "running"
            busy = client.post("/v1/ask", json={"question": "Who directed Inception?", "method": "io"})
            assert_error(busy, 503, "busy")
            assert_error(client.post("/v1/ask/stream", json={"question": "Who?", "method": "io"}), 503, "busy")
            gate.open.set()
            deadline = time.monotonic() + 10
            while client.get(f"/v1/traces/{body['trace_id']}").json()["status"] == "running":
                assert time.monotonic() < deadline
                time.sleep(0.05)
            done = client.get(f"/v1/traces/{body['trace_id']}").json()
            assert done["status"] == "done" and done["answers"][0]["name"] == "Christopher Nolan"
            while client.get("/v1/health").json()["asks_in_flight"]:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            again = client.post("/v1/ask", json={"question": "Who directed Inception?", "method": "io"})
            assert again.status_code == 200, again.text
    finally:
        gate.open.set()
        live.stop()


def test_without_a_token_only_loopback_hosts_are_answered(rules_file: Path, start_server: Any) -> None:
    live = start_server(kg="demo", llm=f"scripted:{rules_file}", token=None, rate_limit=0)
    try:
        with live.client(token=None) as client:
            assert client.get("/v1/health").json()["auth"] is False
            assert client.get("/v1/kg").status_code == 200
            assert_error(client.get("/v1/kg", headers={"Host": "evil.example:80"}), 403, "forbidden")
            assert client.get("/v1/kg", headers={"Host": "localhost"}).status_code == 200
    finally:
        live.stop()


@pytest.mark.parametrize(("settings", "words"), [
    ({"token": None, "host": "0.0.0.0"}, "loopback"),
    ({"token": None, "host": "192.168.1.10"}, "loopback"),
    ({"token": "short"}, "16 characters"),
    ({"token": "a-long-enough-token-123", "max_body_bytes": 10}, "max body bytes"),
])
def test_unsafe_settings_are_refused(settings: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        ServiceSettings(**settings).check()


def test_loopback_with_no_token_is_allowed() -> None:
    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        ServiceSettings(token=None, host=host).check()


def test_a_streamed_ask_is_read_while_the_model_is_still_thinking(start_server: Any, token: str) -> None:
    from kgqa.llm.scripted import ScriptedModel

    gate = _Gate()
    live = start_server(kg="demo", llm_object=ScriptedModel(gate, name="gate"), token=token, rate_limit=0)
    try:
        with live.client() as client, client.stream(
                "POST", "/v1/ask/stream", json={"question": "Who directed Inception?", "method": "io"}) as response:
            lines = response.iter_lines()
            first = json.loads(next(lines))
            assert first["event"] == "accepted"
            assert gate.entered.wait(10) and not gate.open.is_set()  # the event came while the model was busy
            gate.open.set()
            rest = [json.loads(line) for line in lines if line.strip()]
        assert sorted(e["event"] for e in rest[:-1]) == ["llm_call", "step"] and rest[-1]["event"] == "done"
        assert rest[-1]["result"]["answers"][0]["name"] == "Christopher Nolan"
    finally:
        gate.open.set()
        live.stop()
