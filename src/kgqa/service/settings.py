"""What one ``kgqa serve`` process serves and how it guards itself (``kgqa serve --help`` sets these)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from kgqa.errors import ConfigError

#: Host names that mean this machine only.
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def is_loopback(host: str) -> bool:
    """Whether binding to ``host`` accepts connections from this machine only (127.0.0.0/8, ::1, localhost)."""
    name = host.strip().strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class ServiceSettings:
    """The served KG and model, the run directories, and the limits.

    ``token`` None means no authentication, which :meth:`check` allows only on a loopback host. ``rate_limit`` is
    requests per minute per client address on ``/v1/`` (0: off), with bursts up to the same number. ``max_asks`` asks
    run at once; up to ``max_queued_asks`` more wait for a slot, and any beyond are refused (503). An ask that takes
    longer than ``ask_timeout_s`` is answered 504 (it finishes in the background; its trace id still works).
    ``artifacts``: directories whose subdirectories a request may name in a method setting (a trained FoG scorer, an
    answer-type model, an SRP reference base), beside the artifact store's built artifacts; never a path.
    """

    kg: str | None = None
    llm: str | None = None
    runs: Path | None = None
    artifacts: tuple[Path, ...] = ()
    schema: str | None = None
    embedder: str = "minilm"
    host: str = "127.0.0.1"
    token: str | None = None
    max_body_bytes: int = 64 * 1024
    rate_limit: int = 300
    ask_timeout_s: float = 120.0
    max_asks: int = 4
    max_queued_asks: int = 32
    keep_traces: int = 256
    seed: int = 0

    def check(self) -> None:
        """Refuse settings that make no sense or leave an open server (a :class:`ConfigError`, one line)."""
        if self.token is None and not is_loopback(self.host):
            raise ConfigError(f"--no-auth is allowed only on a loopback host (127.0.0.1, ::1, localhost), not {self.host!r}; "
                              "drop --no-auth to require the bearer token")
        if self.token is not None and len(self.token) < 16:
            raise ConfigError("the service token (serve_token / KGQA_SERVE_TOKEN) must be at least 16 characters")
        for name, value, low in (("max body bytes", self.max_body_bytes, 256), ("max asks", self.max_asks, 1),
                                 ("max queued asks", self.max_queued_asks, 0), ("rate limit", self.rate_limit, 0),
                                 ("kept traces", self.keep_traces, 1)):
            if value < low:
                raise ConfigError(f"{name} must be at least {low}, got {value}")
        if not self.ask_timeout_s > 0:
            raise ConfigError(f"the ask timeout must be positive, got {self.ask_timeout_s}")
        if self.runs is not None and not Path(self.runs).is_dir():
            raise ConfigError(f"--runs {self.runs} is not a directory")
        for directory in self.artifacts:
            if not Path(directory).is_dir():
                raise ConfigError(f"--artifacts {directory} is not a directory")
