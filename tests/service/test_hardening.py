"""What a hostile client and a busy server still met (issue 52), against real uvicorn servers on 127.0.0.1: files served
only from inside --runs, method settings that name artifacts and never paths, no build or training started by a
request, bad settings answered 400, and models loaded once per server process however the asks vary."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

NOLAN = "Which films did Christopher Nolan direct?"


def assert_error(response: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["status"] == status and body["message"] and "Traceback" not in response.text
    if code is not None:
        assert body["error"] == code
    return body


# ---------------------------------------------------------------------------------------------------------------------
# Item 2: every served file resolves inside its run directory


@pytest.mark.parametrize("linked", ["summary.json", "config.json", "results.jsonl", "traces.jsonl"])
def test_a_run_file_linked_out_of_the_run_is_never_served(server: Any, runs_root: Path, tmp_path: Path,
                                                          linked: str) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"id": "demo-001", "n": 1, "token": "SECRET-OUTSIDE-RUNS"}) + "\n", encoding="utf-8")
    run = runs_root / f"linked-{linked.split('.')[0]}"
    shutil.copytree(runs_root / "ccor-demo", run)
    (run / linked).unlink()
    (run / linked).symlink_to(secret)
    try:
        with server.client() as client:
            views = [client.get(f"/v1/runs/{run.name}"), client.get(f"/v1/runs/{run.name}/questions"),
                     client.get(f"/v1/runs/{run.name}/questions/demo-001"),
                     client.get(f"/v1/runs/ccor-demo/compare/{run.name}")]
            listing = client.get("/v1/runs")
        for response in views:
            assert "SECRET-OUTSIDE-RUNS" not in response.text
            assert "link out of the run" in assert_error(response, 404, "not_found")["message"]
        assert run.name not in {r["id"] for r in listing.json()["runs"]} and "SECRET" not in listing.text
    finally:
        shutil.rmtree(run)


def test_a_link_to_another_runs_file_is_refused_too_but_a_link_inside_the_run_is_not(server: Any, runs_root: Path) -> None:
    other = runs_root / "linked-to-other-run"
    inside = runs_root / "linked-inside"
    for run in (other, inside):
        shutil.copytree(runs_root / "ccor-demo", run)
        (run / "summary.json").unlink()
    (other / "summary.json").symlink_to(runs_root / "cot-demo" / "summary.json")
    (inside / "summary.copy.json").write_bytes((runs_root / "ccor-demo" / "summary.json").read_bytes())
    (inside / "summary.json").symlink_to("summary.copy.json")
    try:
        with server.client() as client:
            assert_error(client.get(f"/v1/runs/{other.name}"), 404)
            assert client.get(f"/v1/runs/{inside.name}").json()["summary"]["n"] == 12
    finally:
        shutil.rmtree(other)
        shutil.rmtree(inside)


# ---------------------------------------------------------------------------------------------------------------------
# Item 3: method settings name artifacts, never paths


@pytest.fixture()
def artifact_server(start_server: Any, token: str, kit_kg: Any, scorer_source: Path, served_store: Path,
                    tmp_path: Path, rules_file: Path) -> Any:
    """The kit KG served with one allow-listed artifacts directory holding a trained scorer (``kit-scorer``)."""
    allowed = tmp_path / "models"
    allowed.mkdir()
    shutil.copytree(scorer_source, allowed / "kit-scorer")
    outside = tmp_path / "outside-scorer"
    shutil.copytree(scorer_source, outside)
    (allowed / "escape").symlink_to(outside, target_is_directory=True)
    live = start_server(kg="kit", kg_object=kit_kg, llm=f"scripted:{rules_file}", token=token, rate_limit=0,
                        artifacts=(allowed,))
    live.allowed = allowed
    live.outside = outside
    yield live
    live.stop()


def ask(client: httpx.Client, method: str, settings: dict[str, Any] | None, question: str = NOLAN) -> httpx.Response:
    return client.post("/v1/ask", json={"question": question, "method": method, "method_config": settings})


def test_an_artifact_setting_takes_a_name_and_answers_with_it(artifact_server: Any) -> None:
    with artifact_server.client() as client:
        listed = client.get("/v1/artifacts").json()["artifacts"]
        body = ask(client, "fog", {"scorer": "kit-scorer", "mode": "graph"}).json()
    assert {"name": "kit-scorer", "source": "directory", "kind": None} in listed
    assert "escape" not in {a["name"] for a in listed}  # a link out of the allowed directory is no artifact
    assert str(artifact_server.allowed) not in json.dumps(listed)
    assert body["status"] == "done" and body["method_config"]["scorer"] == "kit-scorer"
    assert (body["method"], body["method_name"]) == ("fog[graph]", "fog")  # reported as kgqa eval reports it
    assert "Inception" in {a["name"] for a in body["answers"]}
    assert str(artifact_server.allowed) not in json.dumps(body)


@pytest.mark.parametrize(("method", "setting"), [("fog", "answer_types"), ("fog", "scorer"), ("srp", "references"),
                                                 ("chains", "scorer")])
def test_a_path_in_an_artifact_setting_is_refused_and_says_nothing_of_the_server(artifact_server: Any, tmp_path: Path,
                                                                                 method: str, setting: str) -> None:
    private = tmp_path / "private"
    private.mkdir()
    with artifact_server.client() as client:
        replies = {value: ask(client, method, {setting: value}) for value in
                   ("/etc/passwd", str(private), str(tmp_path / "no-such-dir"), str(artifact_server.outside),
                    f"{artifact_server.allowed}/kit-scorer", "../outside-scorer", "~/models", "escape")}
    messages = []
    for value, response in replies.items():
        body = assert_error(response, 400, "bad_request")
        assert setting in body["message"] and "trace_id" not in body  # refused before any ask started
        assert "root:" not in response.text
        messages.append(body["message"].replace(repr(value), "VALUE"))
    # An existing directory, a missing one and a readable file get the same answer: no oracle for the server's disk.
    assert len(set(messages[:4])) == 1 and "not a path" in messages[0]
    assert "no artifact named 'escape'" in replies["escape"].json()["message"]


def test_a_text_setting_that_looks_like_a_path_is_refused(artifact_server: Any) -> None:
    with artifact_server.client() as client:
        body = assert_error(ask(client, "vog", {"checker": "nli:/root/models/nli"}), 400)
    assert "checker" in body["message"] and "path" in body["message"]


# ---------------------------------------------------------------------------------------------------------------------
# Item 4: the service never builds or trains


def test_an_ask_that_needs_an_unbuilt_artifact_is_409_and_builds_nothing(start_server: Any, token: str, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         rules_file: Path) -> None:
    store = tmp_path / "cache" / "artifacts"
    monkeypatch.setenv("KGQA_CACHE_DIR", str(tmp_path / "cache"))
    # The demo KG's FoG scorer is not built in this server's store: `kgqa ask` would train it (minutes), a server never.
    live = start_server(kg="demo", llm=f"scripted:{rules_file}", token=token, rate_limit=0, ask_timeout_s=60)
    try:
        with live.client() as client:
            started = time.monotonic()
            body = assert_error(ask(client, "fog", None, "Who directed Inception?"), 409, "missing_artifact")
            assert time.monotonic() - started < 120  # refused at once (a digest to compute), not after the build (10+ min)
            assert body["artifact"] == "fog-demo-scorer" and "kgqa artifacts build fog-demo-scorer" in body["message"]
            streamed = [json.loads(line) for line in client.post(
                "/v1/ask/stream", json={"question": "Who directed Inception?", "method": "fog"}).text.splitlines()]
            assert streamed[-1]["event"] == "error" and streamed[-1]["status"] == 409
            assert streamed[-1]["artifact"] == "fog-demo-scorer"
            assert client.get(f"/v1/traces/{body['trace_id']}").json()["status"] == "unavailable"
            assert client.get("/v1/health").json()["asks_in_flight"] == 0  # no job left running
    finally:
        live.stop()
    built = [p.relative_to(store) for p in store.rglob("*")] if store.exists() else []
    assert not [p for p in built if p.parts[0] == "fog-demo-scorer" and len(p.parts) > 1 and not p.name.endswith(".lock")]


# ---------------------------------------------------------------------------------------------------------------------
# Item 9: a bad setting is a 400 naming it, never a 500


@pytest.mark.parametrize(("settings", "named"), [
    ({"top_k": 1e18}, "top_k"),                 # out of any sane range: refused before the ask
    ({"top_k": 10**18}, "top_k"),
    ({"max_iterations": -1e300}, "max_iterations"),
    ({"top_k": 31}, "top_k"),                   # in range, but more than the 30 candidates the pruner lists
])
def test_a_bad_setting_is_a_400_naming_it(server: Any, settings: dict[str, Any], named: str) -> None:
    with server.client() as client:
        body = assert_error(ask(client, "ccor", settings, "Who directed Inception?"), 400, "bad_request")
    assert named in body["message"]


# ---------------------------------------------------------------------------------------------------------------------
# Item 15: models are loaded once per server process, whatever the asks


def test_models_are_loaded_once_per_server_process(artifact_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import kgqa.llm
    import kgqa.steps.foresight.scorer as scorer_module
    import kgqa.text

    loads: dict[str, list[Any]] = {"llm": [], "embedder": [], "scorer": []}

    def counted(name: str, real: Any) -> Any:
        def load(*args: Any, **kwargs: Any) -> Any:
            loads[name].append(args[0] if args else kwargs)
            return real(*args, **kwargs)
        return load

    monkeypatch.setattr(kgqa.llm, "load", counted("llm", kgqa.llm.load))
    monkeypatch.setattr(kgqa.text, "load_embedder", counted("embedder", kgqa.text.load_embedder))
    monkeypatch.setattr(scorer_module, "load_scorer", counted("scorer", scorer_module.load_scorer))
    with artifact_server.client() as client:
        for tau_e in (0.02, 0.05, 0.1, 0.02, 0.05):  # three settings: three method objects, one scorer
            body = ask(client, "fog", {"scorer": "kit-scorer", "mode": "graph", "tau_e": tau_e}).json()
            assert body["status"] == "done", body
        for _ in range(3):
            assert ask(client, "io", None, "Who directed Inception?").json()["answers"][0]["name"] == "Christopher Nolan"
    assert len(loads["scorer"]) == 1, loads
    # the scorer's encoder: made once per process (an earlier test of this process may have made it already)
    assert loads["embedder"] in ([], ["hash:64"]), loads
    assert len(loads["llm"]) == 1, loads


def test_a_run_of_fogs_graph_mode_shows_its_questions_under_its_label(start_server: Any, token: str, kit_kg: Any,
                                                                       scorer_source: Path, served_store: Path,
                                                                       rules_file: Path, tmp_path: Path) -> None:
    """A real FoG run in graph mode: its summary reports it as fog[graph], and so does the question view."""
    from kgqa.eval.runner import run_eval

    runs = tmp_path / "runs"
    run_eval("demo", out=runs / "fog-graph", method="fog", method_config={"scorer": str(scorer_source), "mode": "graph"},
             kg=kit_kg, llm=None, embedder=None, limit=2, progress=False, report=False)
    live = start_server(kg="kit", kg_object=kit_kg, llm=f"scripted:{rules_file}", runs=runs, token=token, rate_limit=0)
    try:
        with live.client() as client:
            qid = client.get("/v1/runs/fog-graph/questions").json()["questions"][0]["id"]
            body = client.get(f"/v1/runs/fog-graph/questions/{qid}").json()
    finally:
        live.stop()
    assert (body["method"], body["method_name"]) == ("fog[graph]", "fog")
