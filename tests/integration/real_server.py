"""The handle of the real OpenAI-compatible server the end-to-end tests run against (started by conftest.py)."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

_ACCESS_RE = re.compile(r'"POST /v1/chat/completions HTTP/[\d.]+" (\d{3})')


@dataclass
class LlamaServer:
    """The running server: ``url`` is its OpenAI base URL; ``statuses()`` the HTTP status of every chat request so far."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def spec(self) -> str:
        return f"openai:smollm2@{self.url}"

    def statuses(self) -> list[int]:
        """Status codes of the chat-completion requests the server has answered, from its access log, in order."""
        return [int(code) for code in _ACCESS_RE.findall(self.log.read_text(encoding="utf-8", errors="replace"))]

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
