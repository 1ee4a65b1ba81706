"""`kgqa serve` as a real process: it prints a generated token (or takes the config's), serves on the port asked, and
refuses unsafe flags with one line and exit code 2."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def env(**extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k not in ("KGQA_SERVE_TOKEN", "KGQA_LLM", "KGQA_KG")}
    out.update({"PYTHONUNBUFFERED": "1", **extra})
    return out


class Served:
    def __init__(self, args: list[str], environ: dict[str, str], cwd: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen([sys.executable, "-m", "kgqa", "serve", "--port", str(self.port),
                                      "--log-level", "warning", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environ, cwd=cwd)
        self.lines: list[str] = []

    def read_until(self, prefix: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline() if self.proc.stdout else ""
            if not line and self.proc.poll() is not None:
                raise AssertionError(f"kgqa serve exited {self.proc.returncode}: {self.proc.stderr.read()}")
            self.lines.append(line)
            if line.startswith(prefix):
                return line.strip()
        raise AssertionError(f"no {prefix!r} line in {self.lines}")

    def wait_healthy(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/v1/health", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        raise AssertionError("kgqa serve did not answer /v1/health")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[list[Served]]:
    started: list[Served] = []
    yield started
    for s in started:
        s.stop()


def test_serve_prints_a_generated_token_and_requires_it(served: list[Served], rules_file: Path, runs_root: Path,
                                                        tmp_path: Path) -> None:
    s = Served(["--llm", f"scripted:{rules_file}", "--runs", str(runs_root)], env(), tmp_path)
    served.append(s)
    first = s.read_until("kgqa serve:")
    assert s.url in first and "KG demo" in first
    token = s.read_until("token:").split(": ", 1)[1]
    assert len(token) >= 24
    assert s.read_until("page:").endswith(f"#token={token}")
    s.wait_healthy()
    assert httpx.get(f"{s.url}/v1/runs").status_code == 401
    runs = httpx.get(f"{s.url}/v1/runs", headers={"Authorization": f"Bearer {token}"}).json()["runs"]
    assert {r["id"] for r in runs} == {"ccor-demo", "cot-demo"}
    answer = httpx.post(f"{s.url}/v1/ask", json={"question": "Who directed Inception?", "method": "ccor"},
                        headers={"Authorization": f"Bearer {token}"}, timeout=30).json()
    assert answer["answers"][0]["name"] == "Christopher Nolan"


def test_serve_takes_the_token_from_the_config(served: list[Served], rules_file: Path, tmp_path: Path) -> None:
    token = "configured-token-0123456789"
    s = Served(["--llm", f"scripted:{rules_file}"], env(KGQA_SERVE_TOKEN=token), tmp_path)
    served.append(s)
    assert "from the config" in s.read_until("auth:")
    assert token not in "".join(s.lines)  # a configured token is never printed
    s.wait_healthy()
    assert httpx.get(f"{s.url}/v1/kg", headers={"Authorization": f"Bearer {token}"}).status_code == 200


@pytest.mark.parametrize(("args", "words"), [
    (["--no-auth", "--host", "0.0.0.0"], "--no-auth is allowed only on a loopback host"),
    (["--runs", "/no/such/dir"], "is not a directory"),
    (["--artifacts", "/no/such/models"], "--artifacts /no/such/models is not a directory"),
    (["--kg", "/no/such/kg"], "KG '/no/such/kg'"),
    (["--llm", "nonsense"], "nonsense"),
])
def test_serve_refuses_bad_flags_in_one_line(args: list[str], words: str, tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "kgqa", "serve", "--port", str(free_port()), *args],
                          capture_output=True, text=True, env=env(), cwd=tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert words in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_serve_refuses_a_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "kgqa", "serve", "--no-auth", "--port", str(port)],
                              capture_output=True, text=True, env=env(), cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in proc.stderr
