"""Retry policy for remote models: exponential backoff with seeded jitter, honouring ``Retry-After``.

Retries live here rather than in the SDK (which runs with ``max_retries=0``) so every retry is counted by the accounting.
"""

from __future__ import annotations

import email.utils
import random
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from kgqa.errors import ConfigError


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms``, or ``Retry-After`` as seconds or an HTTP date."""
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass
class RetryPolicy:
    """``max_retries`` extra attempts; delay ``min(max_delay, base_delay * 2**attempt)`` with jitter in [50%, 100%].

    A server's Retry-After replaces the computed delay (never shortened), but one beyond ``max_retry_after`` fails fast
    instead of stalling the run. The jitter generator is seeded so two runs back off identically.
    """

    max_retries: int = 4
    base_delay: float = 0.5
    max_delay: float = 20.0
    max_retry_after: float = 120.0
    seed: int = 0
    _rng: random.Random = field(init=False, repr=False)
    _lock: threading.Lock = field(init=False, repr=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ConfigError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ConfigError("retry delays must be >= 0")
        self._rng = random.Random(self.seed)

    def backoff(self, attempt: int) -> float:
        """Delay before retry number ``attempt + 1`` (attempt counts from 0)."""
        ceiling = min(self.max_delay, self.base_delay * (2**attempt))
        with self._lock:
            factor = 0.5 + 0.5 * self._rng.random()
        return ceiling * factor

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """The wait before the next attempt: the server's Retry-After when it gave one, else the backoff."""
        if retry_after is not None:
            return retry_after
        return self.backoff(attempt)
