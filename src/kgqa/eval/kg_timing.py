"""Time spent in the KG, per question: :class:`TimedKG` wraps a KG and adds the time of every call to the
:class:`KGClock` of the question being answered (:func:`kg_clock`), so ``kg_time_s / latency_s`` says how much of a run
the KG side costs.

The clock travels in a context variable: work a method starts in threads of its own (without copying the context) is
not attributed.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from kgqa.deadline import DeadlineExceeded
from kgqa.errors import QueryTimeout

__all__ = ["KGClock", "TimedKG", "kg_clock"]


class KGClock:
    """Time and number of KG calls of one question, and how many of them ran out of time."""

    __slots__ = ("_lock", "calls", "seconds", "timeouts")

    def __init__(self) -> None:
        self.calls = 0
        self.seconds = 0.0
        self.timeouts = 0
        self._lock = threading.Lock()

    def add(self, seconds: float, *, timed_out: bool = False) -> None:
        with self._lock:  # a method may call the KG from several threads of its own
            self.calls += 1
            self.seconds += seconds
            self.timeouts += int(timed_out)


_KG_CLOCK: ContextVar[KGClock | None] = ContextVar("kgqa_kg_clock", default=None)


@contextlib.contextmanager
def kg_clock() -> Iterator[KGClock]:
    """Attribute the KG calls made through a :class:`TimedKG` inside the block to a fresh clock."""
    clock = KGClock()
    token = _KG_CLOCK.set(clock)
    try:
        yield clock
    finally:
        _KG_CLOCK.reset(token)


class TimedKG:
    """A thin proxy of a KG: every public method call is timed into the current :func:`kg_clock` (if any).

    Attributes that are not callables (``schema``) pass through untouched. The wrappers are made once per name.
    """

    def __init__(self, inner: Any) -> None:
        self.__dict__["_inner"] = inner

    @property
    def inner(self) -> Any:
        return self.__dict__["_inner"]

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.__dict__["_inner"], name)
        if name.startswith("_") or not callable(attr):
            return attr

        def timed(*args: Any, **kwargs: Any) -> Any:
            clock = _KG_CLOCK.get()
            if clock is None:
                return attr(*args, **kwargs)
            started = time.perf_counter()
            timed_out = False
            try:
                return attr(*args, **kwargs)
            except (QueryTimeout, DeadlineExceeded):
                # methods may fall back and go on; the run still learns the KG is not answering (a question whose
                # deadline ran out inside a KG call waited for the KG as well)
                timed_out = True
                raise
            finally:
                clock.add(time.perf_counter() - started, timed_out=timed_out)

        timed.__name__ = name
        timed.__doc__ = getattr(attr, "__doc__", None)
        self.__dict__[name] = timed  # later lookups skip __getattr__
        return timed

    def __repr__(self) -> str:
        return f"TimedKG({self.__dict__['_inner']!r})"
