"""Issue 52 item 5 in the service: one deadline per asked question (the config's ``question_timeout``, else the ask
timeout), shared by its linking, KG queries and model calls, so an ask over an endpoint that never answers ends
within it instead of working on behind a 504. Real uvicorn server, real HTTP endpoint on 127.0.0.1 that never
answers."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kgqa import config


@pytest.fixture
def hanging_sparql() -> Iterator[str]:
    """A SPARQL URL on 127.0.0.1 whose server accepts every connection and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    sock.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                held.append(sock.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/sparql"
    finally:
        stop.set()
        thread.join(timeout=5)
        for conn in held:
            conn.close()
        sock.close()


@pytest.mark.parametrize("where", ["question_timeout", "ask timeout"])
def test_an_ask_over_a_hanging_endpoint_ends_within_the_question_deadline(
        hanging_sparql: str, where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, start_server: Any,
        token: str) -> None:
    rules = tmp_path / "rules.jsonl"
    rules.write_text(json.dumps({"reply": {"answers": ["James Cameron"]}}) + "\n", encoding="utf-8")
    config_file = tmp_path / "kgqa.toml"
    config_file.write_text("question_timeout = 2\n" if where == "question_timeout" else "", encoding="utf-8")
    monkeypatch.setenv("KGQA_CONFIG", str(config_file))
    monkeypatch.delenv("KGQA_QUESTION_TIMEOUT", raising=False)
    config._file_values.cache_clear()
    # the KG's own settings stay the defaults (30 s per attempt, 2 retries): without the deadline the first query
    # alone would wait 90 s, past the ask timeout, and go on in the background after the 504
    ask_timeout = 60.0 if where == "question_timeout" else 3.0
    server = start_server(kg=hanging_sparql, llm=f"scripted:{rules}", embedder="hash:64", token=token, rate_limit=0,
                          ask_timeout_s=ask_timeout)
    try:
        with server.client() as client:  # 30 s: longer than either deadline, far shorter than 90 s
            response = client.post("/v1/ask", json={"question": "Who directed Titanic?", "method": "tog"})
            body = response.json()
            if response.status_code == 504:  # the ask timeout answered first: its trace shows how the ask ended
                trace_id = body["trace_id"]
                for _ in range(100):
                    trace = client.get(f"/v1/traces/{trace_id}")
                    if trace.status_code == 200 and trace.json().get("status") not in (None, "running"):
                        break
                    threading.Event().wait(0.1)
                body = trace.json()
        seconds = 2 if where == "question_timeout" else 3
        assert f"ran out of its {seconds:g} s deadline" in json.dumps(body), body
        assert "Traceback" not in json.dumps(body)
    finally:
        server.stop()
        config._file_values.cache_clear()
