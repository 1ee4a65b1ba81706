"""Typed reads of the LLM/text settings: flag (explicit option) > environment > config file > default.

Every module of ``kgqa.llm`` and ``kgqa.text`` reads its settings through :func:`setting` so the precedence is the same
everywhere. ``KGQA_*`` keys go through :func:`kgqa.config.get` (which also knows the config file); the few variables that
belong to other tools (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``CI``) are read from the environment directly.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from kgqa import config
from kgqa.errors import ConfigError

T = TypeVar("T")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def to_bool(value: Any, *, name: str = "value") -> bool:
    """Parse a flag or environment value as a boolean (``1/true/yes/on`` and ``0/false/no/off``)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(f"{name} must be a boolean (true/false), got {value!r}")


def _convert(key: str, value: Any, kind: Callable[[Any], T]) -> T:
    if kind is bool:
        return to_bool(value, name=key)  # type: ignore[return-value]
    try:
        return kind(value)
    except (TypeError, ValueError):
        kind_name = getattr(kind, "__name__", str(kind))
        raise ConfigError(f"setting {key} (env KGQA_{key.upper()}) must be {kind_name}, got {value!r}") from None


def setting(key: str, flag: Any = None, *, kind: Callable[[Any], T] = str, default: T | None = None) -> T | None:
    """The value of ``key``: ``flag`` if given, else ``KGQA_<KEY>``, else the config file, else ``default``."""
    value = config.get(key, flag)
    if value is None or value == "":
        return default
    return _convert(key, value, kind)


def choice(key: str, flag: Any, choices: tuple[str, ...], *, default: str) -> str:
    """A setting that must be one of ``choices`` (flag > ``KGQA_<KEY>`` > config file > ``default``), lower-cased."""
    value = setting(key, flag, default=default)
    text = str(value).strip().lower()
    if text not in choices:
        raise ConfigError(f"setting {key} (env KGQA_{key.upper()}) must be one of {', '.join(choices)}; got {value!r}")
    return text


def foreign_env(name: str, flag: Any = None) -> str | None:
    """A variable owned by another tool (``OPENAI_API_KEY``...): the flag if given, else the environment."""
    if flag is not None:
        return str(flag)
    value = os.environ.get(name)
    return value or None


def in_ci() -> bool:
    """True when running under CI (``CI=true``): defaults then favour fewer threads."""
    return os.environ.get("CI", "").strip().lower() in _TRUE


def cache_dir(flag: str | os.PathLike[str] | None = None) -> Path:
    """The kgqa cache directory (:func:`kgqa.config.cache_dir`)."""
    return config.cache_dir(flag)


def default_threads(flag: int | None = None, *, key: str = "llm_threads") -> int:
    """Threads for CPU inference: flag > ``KGQA_<KEY>`` > 1 under CI > half the cores (1 to 4).

    Half, not all: llama.cpp's and torch's OpenMP workers wait for each other, so with another process busy on a 2-core
    machine a 2-thread decode fell to 2-7 tokens/s here while 1 thread kept 35-60.
    """
    value = setting(key, flag, kind=int)
    if value is None:
        return 1 if in_ci() else max(1, min(4, (os.cpu_count() or 1) // 2))
    if value < 1:
        raise ConfigError(f"setting {key} must be a positive number of threads, got {value}")
    return value
