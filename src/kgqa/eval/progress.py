"""The progress bar of a run: running Hits@1, calls, tokens and errors over every row (earlier rows included)."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any


class RunProgress:
    """Running Hits@1 and cost over every row of the run (earlier rows included), shown on a tqdm bar on stderr."""

    def __init__(self, total: int, rows: Sequence[Mapping[str, Any]], *, enabled: bool, label: str) -> None:
        self.n = len(rows)
        self.hits = sum(float(r.get("hit1", 0.0)) for r in rows)
        self.calls = sum(int(r.get("llm_calls", 0)) for r in rows)
        self.tokens = sum(int(r.get("prompt_tokens", 0)) + int(r.get("completion_tokens", 0)) for r in rows)
        self.errors = sum(1 for r in rows if r.get("error"))
        self.bar: Any = None
        self._last = 0.0
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=self.n, desc=label, unit="q", file=sys.stderr, dynamic_ncols=True,
                            mininterval=0.25, smoothing=0.05)
            self._postfix(force=True)

    def add(self, row: Mapping[str, Any]) -> None:
        self.n += 1
        self.hits += float(row.get("hit1", 0.0))
        self.calls += int(row.get("llm_calls", 0))
        self.tokens += int(row.get("prompt_tokens", 0)) + int(row.get("completion_tokens", 0))
        self.errors += 1 if row.get("error") else 0
        if self.bar is not None:
            self._postfix()
            self.bar.update(1)

    def _postfix(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < 0.25:
            return  # formatting the postfix on every question would cost more than the rest of the bar
        self._last = now
        n = max(self.n, 1)
        text = f"hits@1={100 * self.hits / n:.1f}% calls={self.calls} ({self.calls / n:.1f}/q) tok={self.tokens:,}"
        if self.errors:
            text += f" errors={self.errors}"
        self.bar.set_postfix_str(text, refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self._postfix(force=True)
            self.bar.close()
