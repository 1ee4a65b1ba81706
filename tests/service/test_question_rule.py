"""One rule for the question text in `kgqa ask` and `POST /v1/ask` (kgqa.core.check_question_text): not empty, at most
2,000 characters, no control character but newline and tab. The service is a real uvicorn on 127.0.0.1; the CLI runs
as a process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kgqa.core import MAX_QUESTION_CHARS


@pytest.mark.parametrize(("question", "words"), [
    ("Who directed\x00 Inception?", "U+0000"),
    ("Who directed \x1b[2J Inception?", "U+001B"),
    ("Who\x7f directed Inception?", "U+007F"),
    ("Who directed \x9b Inception?", "U+009B"),
    ("Who directed \ud800 Inception?", "U+D800"),
    ("Who directed Inception?\r", "U+000D"),
    ("x" * (MAX_QUESTION_CHARS + 1), "the limit is 2,000"),
    ("   \n\t ", "empty"),
], ids=["nul", "esc", "del", "c1", "surrogate", "cr", "too-long", "blank"])
def test_the_service_refuses_a_question_the_rule_refuses(server: Any, question: str, words: str) -> None:
    body = json.dumps({"question": question, "method": "io"})  # ASCII JSON: a lone surrogate goes as \ud800
    with server.client() as client:
        response = client.post("/v1/ask", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    body = response.json()
    assert "question" in body["message"] and words in body["message"]


def test_the_service_takes_newlines_tabs_and_2000_characters(server: Any) -> None:
    with server.client() as client:
        multiline = client.post("/v1/ask", json={"question": "Who directed\tInception?\n", "method": "io"})
        longest = client.post("/v1/ask", json={"question": "x" * MAX_QUESTION_CHARS, "method": "io"})
        schema = client.get("/openapi.json").json()["components"]["schemas"]["AskRequest"]["properties"]["question"]
        health = client.get("/v1/health").json()
    assert multiline.status_code != 422 and longest.status_code != 422
    assert schema["maxLength"] == MAX_QUESTION_CHARS and health["limits"]["max_question_chars"] == MAX_QUESTION_CHARS


def ask_cli(question: str, rules_file: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KGQA_CONFIG": "", "PYTHONIOENCODING": "utf-8"}
    return subprocess.run([sys.executable, "-m", "kgqa", "ask", question, "--method", "io",
                           "--llm", f"scripted:{rules_file}"], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120)


@pytest.mark.parametrize(("question", "words"), [
    ("Who directed \x1b]0;pwned\x07 Inception?", "U+001B"),
    ("Who directed Inception?" + " and then?" * 300, "the limit is 2,000"),
], ids=["esc", "too-long"])
def test_kgqa_ask_refuses_what_the_service_refuses(question: str, words: str, rules_file: Path, tmp_path: Path) -> None:
    proc = ask_cli(question, rules_file, tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert words in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stdout == ""


def test_kgqa_ask_takes_a_question_on_two_lines(rules_file: Path, tmp_path: Path) -> None:
    proc = ask_cli("Who directed\nInception?", rules_file, tmp_path)
    assert "control character" not in proc.stderr and "limit" not in proc.stderr
