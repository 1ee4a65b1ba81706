"""Helpers shared by the LLM-layer tests (imported by name; tests/llm is on sys.path)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest


def llama_available() -> bool:
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return False
    return True


def require_llama() -> None:
    """Skip without llama-cpp-python, except under CI where it must be installed."""
    if not llama_available():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("llama-cpp-python is not importable under CI: .ci/install_local_model.sh should install it")
        pytest.skip("llama-cpp-python is not installed (run .ci/install_local_model.sh)")


def network_off_prefix() -> list[str]:
    """A command prefix that runs a program with no network (a fresh network namespace), or [] if unavailable."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return []
    probe = subprocess.run([unshare, "-n", "true"], capture_output=True)
    return [unshare, "-n"] if probe.returncode == 0 else []
