"""The one start-up wait every server engine shares (kgqa.kg.servers.engine): a server that dies while starting is
reported with how it ended and the end of its log, and one that never answers is stopped after the timeout. Real
processes; the only faults are injected ones (an address the server cannot listen on, a server that never listens)."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest

from kgqa.errors import KGError
from kgqa.kg.servers import OxigraphEngine, ServerEngine, ServerProcess


def test_a_server_that_dies_while_starting_is_reported_with_its_log(generated_nt: Path, tmp_path: Path) -> None:
    engine = OxigraphEngine(tmp_path / "ox", host="192.0.2.1", start_timeout=60)  # TEST-NET-1: no machine has it
    engine.load(generated_nt, slot=0)
    started = time.monotonic()
    with pytest.raises(KGError) as raised:
        engine.start()
    message = str(raised.value)
    assert re.search(r"oxigraph server at http://192\.0\.2\.1:\d+/query exited with code \d+ during start-up", message)
    last_line = engine.log.read_text().strip().splitlines()[-1]
    assert f"log {engine.log}:" in message and last_line in message
    assert time.monotonic() - started < 30  # the exit ends the wait, not the timeout
    assert engine.process is None and not engine.running


class _NeverAnswering(ServerEngine):
    """A server process that runs but never listens (the injected fault)."""

    name = "never-answering"
    customary_port = 0
    loads_while_running = True
    spawned: ServerProcess | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/sparql"

    @property
    def store_dir(self) -> Path:
        return self.dir

    def _prepare(self) -> list[str]:
        self.dir.mkdir(parents=True, exist_ok=True)
        return [sys.executable, "-c", "import time; print('warming up', flush=True); time.sleep(120)", str(self.dir)]

    def _wait_until_ready(self, process: ServerProcess) -> None:
        self.spawned = process
        super()._wait_until_ready(process)


def test_a_server_that_never_answers_is_stopped_after_the_timeout(tmp_path: Path) -> None:
    engine = _NeverAnswering(tmp_path / "silent", start_timeout=1.5)
    with pytest.raises(KGError, match=r"never-answering server at \S+ not ready after 2s \(ConnectError\)") as raised:
        engine.start()
    assert "warming up" in str(raised.value)  # the end of its log
    assert engine.spawned is not None and engine.spawned.exited and engine.spawned.poll() is not None
    assert engine.process is None
