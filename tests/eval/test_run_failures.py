"""Issue 16, findings 3, 4 and 9: an endpoint that never answers stops a run quickly and says so; a run whose every
question failed exits non-zero; ``--workers`` is not silently capped by the client's default concurrency."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest

from kgqa.cli import main
from kgqa.datasets import load_dataset
from kgqa.kg.servers import free_port


class _SilentServer:
    """Accepts TCP connections on 127.0.0.1 and never answers (what a wedged endpoint looks like to a client)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.held.append(conn)

    def close(self) -> None:
        self._stop.set()
        for conn in self.held:
            conn.close()
        self.sock.close()


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    server = _SilentServer()
    try:
        yield f"http://127.0.0.1:{server.port}/sparql"
    finally:
        server.close()


def _rules(tmp_path: Path) -> Path:
    path = tmp_path / "rules.jsonl"
    path.write_text(json.dumps({"reply": {"answers": ["x"]}}) + "\n", encoding="utf-8")
    return path


def test_a_hanging_sparql_endpoint_stops_the_run_within_a_minute_naming_it(
        tmp_path: Path, silent_endpoint: str, capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    code = main(["eval", "--dataset", "demo", "--method", "ccor", "--llm", f"scripted:{_rules(tmp_path)}",
                 "--kg", silent_endpoint, "--kg-timeout", "2", "--out", str(tmp_path / "run"), "--no-progress"])
    elapsed = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 2
    assert elapsed < 60
    assert silent_endpoint in err and "not answering" in err
    assert "no question has a topic entity" not in err and "none of the" not in err  # no misleading coverage warning
    assert "Traceback" not in err


def test_kg_timeout_and_retries_come_from_flag_environment_and_config(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kgqa.kg.sparql.backend import SparqlKG

    url = "http://127.0.0.1:9/sparql"
    assert SparqlKG(url).timeout == 30.0
    config = tmp_path / "kgqa.toml"
    config.write_text("kg_timeout = 7.5\nkg_retries = 0\n", encoding="utf-8")
    monkeypatch.setenv("KGQA_CONFIG", str(config))
    from kgqa import config as config_module

    config_module._file_values.cache_clear()
    assert SparqlKG(url).timeout == 7.5 and SparqlKG(url)._http.retries == 0
    monkeypatch.setenv("KGQA_KG_TIMEOUT", "4")
    assert SparqlKG(url).timeout == 4.0  # the environment beats the config file
    assert SparqlKG(url, timeout=1.5).timeout == 1.5  # and a flag beats both
    monkeypatch.setenv("KGQA_KG_TIMEOUT", "soon")
    with pytest.raises(Exception, match=r"kg_timeout from \$KGQA_KG_TIMEOUT must be a number, got 'soon'"):
        SparqlKG(url)
    config_module._file_values.cache_clear()


def test_kg_timeout_on_an_embedded_kg_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["eval", "--dataset", "demo", "--method", "ccor", "--llm", f"scripted:{_rules(tmp_path)}",
                 "--kg", "demo", "--kg-timeout", "2", "--out", str(tmp_path / "run"), "--no-progress"])
    assert code == 2
    assert "not a SPARQL endpoint URL" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


class _AskOnlyHandler(BaseHTTPRequestHandler):
    """Answers ASK queries at once until the first SELECT arrives, then lets every query wait past the client's
    timeout: an endpoint that passed the run's topic check and then wedged."""

    wedged = False

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", 0))
        query = parse_qs(self.rfile.read(length).decode())["query"][0]
        if not re.search(r"\bASK\b", query, re.IGNORECASE):
            type(self).wedged = True
        if not type(self).wedged:
            body = json.dumps({"head": {}, "boolean": True}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/sparql-results+json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        time.sleep(3)

    def log_message(self, *args: object) -> None:
        pass


def test_consecutive_kg_timeouts_trip_the_failure_limit_after_three_questions(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _AskOnlyHandler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/sparql"
    try:
        code = main(["eval", "--dataset", "demo", "--method", "ccor", "--llm", f"scripted:{_rules(tmp_path)}",
                     "--kg", url, "--kg-timeout", "0.5", "--kg-retries", "0", "--limit", "10",
                     "--out", str(tmp_path / "run"), "--no-progress", "--method-config", "pruner=llm"])
    finally:
        server.shutdown()
    err = capsys.readouterr().err
    rows = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert code == 2
    # CCoR falls back to the LLM alone when the KG times out, so the questions are answered, not failed; the run
    # still stops after three questions whose every KG query timed out instead of waiting out all ten.
    # (the first question's topic lookup was answered before the endpoint wedged)
    assert len(rows) <= 4 and all(r["kg_calls"] == r["kg_timeouts"] > 0 for r in rows[-3:])
    assert f"stopped after 3 consecutive questions whose every KG query timed out: the KG {url} is not answering" in err
    assert "--resume --retry-errors" in err


def test_a_run_whose_every_question_failed_exits_non_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGQA_LLM_RETRIES", "0")
    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    code = main(["eval", "--dataset", "demo", "--method", "io", "--llm", f"openai:m@{dead}", "--limit", "3",
                 "--out", str(tmp_path / "run"), "--no-progress", "--no-cache"])
    err = capsys.readouterr().err
    assert code == 1
    assert "every question of this invocation failed (3 of 3)" in err
    assert "Traceback" not in err
    assert len((tmp_path / "run" / "results.jsonl").read_text().splitlines()) == 3  # the rows are kept


def test_a_run_with_some_answers_still_exits_zero(tmp_path: Path) -> None:
    questions = load_dataset("demo", limit=3)
    rules = tmp_path / "rules.jsonl"
    # the first question gets an answer, the others hit no rule: failed questions, but not all of them
    rules.write_text(json.dumps({"match": re.escape(questions[0].text), "reply": {"answers": ["x"]}}) + "\n")
    code = main(["eval", "--dataset", "demo", "--method", "io", "--llm", f"scripted:{rules}", "--limit", "3",
                 "--out", str(tmp_path / "run"), "--no-progress"])
    assert code == 0


def test_workers_raise_the_openai_clients_concurrency_unless_it_is_set(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from kgqa.eval.runner import _llm_options, _note_concurrency
    from kgqa.methods.context import Resources

    spec = f"openai:m@http://127.0.0.1:{free_port()}/v1"

    def load(workers: int) -> Any:
        """The run's model as run_eval loads it for ``workers``, with its note on stderr."""
        model = Resources(llm=spec, llm_options=_llm_options(spec, {"cache": False}, workers)).model()
        _note_concurrency(model, workers)
        return model

    monkeypatch.delenv("KGQA_LLM_CONCURRENCY", raising=False)
    assert load(32).max_concurrency == 32
    assert load(1).max_concurrency == 8
    assert "note" not in capsys.readouterr().err
    monkeypatch.setenv("KGQA_LLM_CONCURRENCY", "4")
    assert load(32).max_concurrency == 4
    err = capsys.readouterr().err
    assert err.count("32 workers, but at most 4 model requests run at once") == 1


def test_record_calls_keeps_each_prompt_and_reply_in_the_trace_line(tmp_path: Path) -> None:
    rules = _rules(tmp_path)
    assert main(["eval", "--dataset", "demo", "--method", "io", "--llm", f"scripted:{rules}", "--limit", "2",
                 "--out", str(tmp_path / "run"), "--no-progress", "--record-calls"]) == 0
    traces = [json.loads(line) for line in (tmp_path / "run" / "traces.jsonl").read_text().splitlines()]
    assert len(traces) == 2
    for trace in traces:
        (call,) = trace["llm_calls"]
        assert call["step"] == "io.generate" and json.loads(call["reply"]) == {"answers": ["x"]}
        assert call["messages"][-1]["role"] == "user" and call["prompt_tokens"] > 0
    assert main(["eval", "--dataset", "demo", "--method", "io", "--llm", f"scripted:{rules}", "--limit", "1",
                 "--out", str(tmp_path / "plain"), "--no-progress"]) == 0
    assert "llm_calls" not in json.loads((tmp_path / "plain" / "traces.jsonl").read_text().splitlines()[0])
