"""A real OpenAI-compatible server for the end-to-end tests: llama-cpp-python's own, serving the packaged SmolLM2.

One server per test session (``llama_server``), on a free port of 127.0.0.1, stopped at the end. It needs
``llama-cpp-python[server]`` (.ci/install_local_model.sh installs it): without it the tests skip, except under CI
(``CI=true``), where they fail.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from real_server import LlamaServer

from kgqa.llm.settings import default_threads, in_ci

#: Variables that would point kgqa elsewhere than at the server under test.
FOREIGN = ("KGQA_LLM", "KGQA_LLM_CACHE", "KGQA_LLM_JSON_MODE", "KGQA_LLM_TOKEN_PARAM", "KGQA_LLM_TEMPERATURE_PARAM",
           "OPENAI_API_KEY", "OPENAI_BASE_URL")


def _unavailable(reason: str) -> None:
    if in_ci():
        pytest.fail(f"{reason}; under CI the real-server tests must run (.ci/install_local_model.sh installs it)")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _server_importable() -> str | None:
    """None when ``python -m llama_cpp.server`` can start here, else why not."""
    probe = subprocess.run([sys.executable, "-c", "import uvicorn, llama_cpp.server.app"], capture_output=True,
                           text=True, timeout=120)
    if probe.returncode == 0:
        return None
    last = (probe.stderr.strip().splitlines() or ["?"])[-1]
    return f"llama_cpp.server cannot be imported ({last}); pip install 'llama-cpp-python[server]'"


@pytest.fixture(scope="module")  # not session: its prompt cache grows to >10 GB RSS, freed as soon as the module ends
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    why = _server_importable()
    if why is not None:
        _unavailable(why)
    from kgqa.errors import ConfigError
    from kgqa.llm.local import find_gguf

    try:
        gguf = find_gguf("smollm2")  # the same packaged weights local:smollm2 runs
    except ConfigError as exc:
        _unavailable(str(exc))
    threads = default_threads()  # KGQA_LLM_THREADS, else 1 under CI, else half the cores
    port = _free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # the access log (stdout) must reach the file as it happens
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see docs/llm.md: ACTIVE collapses when the cores are shared
    # --cache: llama-cpp-python keeps the KV state of earlier prompts in RAM and reuses the longest shared prefix, so
    # the methods' long shared system prompts are evaluated once (30 demo questions: 134 s instead of 178 s on 2 cores).
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1", "--port",
               str(port), "--n_ctx", "2048", "--n_threads", str(threads), "--n_threads_batch", str(threads),
               "--cache", "true"]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    server = LlamaServer(process, port, log)
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {process.returncode} before serving:\n{server.tail()}")
            try:
                if httpx.get(f"{server.url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not answer /v1/models within 120 s:\n{server.tail()}")
            time.sleep(0.25)
        yield server
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)  # its own session: only the server (and any child) is stopped
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)


@pytest.fixture
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """An environment for kgqa under test: a fresh cache directory, nothing pointing at another model."""
    for name in FOREIGN:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KGQA_CACHE_DIR", str(tmp_path / "cache"))
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN}
    env.update({"KGQA_CACHE_DIR": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    return env
