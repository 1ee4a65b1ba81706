"""The README's first command runs .ci/install_local_model.sh, whose llama.cpp compile takes minutes: it must say what
it is doing, how long that usually takes, and keep showing it is alive while the compile runs (issue 52, item 16).

The script runs for real under bash; only the interpreter it drives is a stand-in (``PYTHON``), which reports
llama-cpp-python missing and takes a few seconds to "build" it, so no package is installed.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / ".ci" / "install_local_model.sh"

# A stand-in python: `- DIST VERSION` (the script's version probe) says present except llama-cpp-python; `-c CODE`
# (import checks) fails; `-m pip install ...` records its arguments and CMAKE_ARGS, and sleeps while "compiling".
FAKE_PYTHON = """#!/usr/bin/env bash
log="$FAKE_LOG"
if [ "$1" = "-" ]; then
  cat >/dev/null
  [ "$#" -eq 1 ] && { echo "install_local_model: ok (fake)"; exit 0; }
  [ "$2" = "llama-cpp-python" ] && exit 1
  exit 0
fi
[ "$1" = "-c" ] && exit 1
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then
  echo "pip $* CMAKE_ARGS=${CMAKE_ARGS:-}" >> "$log"
  case "$*" in *llama-cpp-python*) sleep "$FAKE_BUILD_SECONDS"; exit "$FAKE_BUILD_STATUS";; esac
  exit 0
fi
exit 0
"""


def _run(tmp_path: Path, *, status: int) -> tuple[subprocess.CompletedProcess[str], str]:
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "pip.log"
    env = {**os.environ, "PYTHON": str(fake), "FAKE_LOG": str(log), "FAKE_BUILD_SECONDS": "3",
           "FAKE_BUILD_STATUS": str(status), "KGQA_INSTALL_HEARTBEAT": "1"}
    done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120)
    return done, log.read_text() if log.exists() else ""


@pytest.mark.skipif(not SCRIPT.is_file(), reason="no install script")
def test_the_compile_says_what_it_does_how_long_it_takes_and_that_it_is_alive(tmp_path: Path) -> None:
    done, pip_log = _run(tmp_path, status=0)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for step in range(1, 6):
        assert f"[{step}/5]" in out
    assert "compiling llama-cpp-python 0.3.36 from source, once: usually about 5 minutes" in out
    assert out.count("install_local_model: still compiling llama-cpp-python (") >= 2
    assert "CMAKE_ARGS=-DGGML_NATIVE=OFF" in pip_log  # the portable build flags still reach pip


@pytest.mark.skipif(not SCRIPT.is_file(), reason="no install script")
def test_a_failed_compile_fails_the_script(tmp_path: Path) -> None:
    done, _ = _run(tmp_path, status=3)
    assert done.returncode != 0
    assert "[4/5]" not in done.stdout
