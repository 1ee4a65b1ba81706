"""Configuration has one home. Precedence, highest first: command-line flags, environment variables (``KGQA_*``), the config
file, built-in defaults.

The config file is TOML, found at ``$KGQA_CONFIG``, else ``./kgqa.toml``, else ``~/.config/kgqa/config.toml``::

    data_dir = "/data/kgqa"        # KGQA_DATA_DIR: benchmark data (see docs/datasets.md)
    cache_dir = "~/.cache/kgqa"    # KGQA_CACHE_DIR: LLM cache, demo KG, embeddings
    kg = "demo"                    # KGQA_KG: default KG spec
    llm = "local:smollm2"          # KGQA_LLM: default model spec
    method = "chains"              # KGQA_METHOD: default method of kgqa ask and kgqa eval
    plugins = ["mypkg.methods"]    # KGQA_PLUGINS (comma-separated): modules imported to register methods, datasets...
    kg_timeout = 30                # KGQA_KG_TIMEOUT: seconds per SPARQL request attempt (kgqa eval --kg-timeout)
    kg_retries = 2                 # KGQA_KG_RETRIES: extra attempts per SPARQL request
    question_timeout = 120         # KGQA_QUESTION_TIMEOUT: seconds per question, shared by all its KG queries and LLM
                                   # calls and their retries (kgqa ask/eval --timeout; 0: none; default: 120 for
                                   # kgqa ask, none for kgqa eval; kgqa.deadline)
    llm_cache = "on"               # KGQA_LLM_CACHE: on, off or refresh (docs/llm.md lists every LLM setting)
    serve_token = "..."            # KGQA_SERVE_TOKEN: kgqa serve's bearer token, 16+ characters (default: one is made)
    serve_artifacts = ["models"]   # KGQA_SERVE_ARTIFACTS (comma-separated): kgqa serve --artifacts, what asks may name
    wordnet = "/usr/share/wordnet" # KGQA_WORDNET: WordNet database for `kgqa train fog --synonyms wordnet`

Every key may also be given as an environment variable named ``KGQA_`` + the key in upper case.
"""

from __future__ import annotations

import os
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

from kgqa.errors import ConfigError

DEFAULTS: dict[str, Any] = {
    "data_dir": None,
    "cache_dir": "~/.cache/kgqa",
    "kg": "demo",
    "llm": "local:smollm2",
    # The one place outside methods/ that names a method: what `kgqa ask` and `kgqa eval` run when --method is not given.
    # `chains`: relation choice, stopping and year/entity constraints are graph-side (the trained foresight scorer, the
    # demo KG's built on first use), so the offline 135M model is asked only for fallbacks; measured against `ccor` and
    # FoG's graph mode by benchmarks/first_use.py (README, "kgqa ask").
    "method": "chains",
    "plugins": None,
    # Seconds per question (kgqa.deadline); None: kgqa ask uses its own default (120), kgqa eval has no deadline.
    "question_timeout": None,
}


def config_file() -> Path | None:
    """The config file in use, if any."""
    explicit = os.environ.get("KGQA_CONFIG")
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise ConfigError(f"KGQA_CONFIG names {path}, which is not a file")
        return path
    for candidate in (Path("kgqa.toml"), Path("~/.config/kgqa/config.toml").expanduser()):
        if candidate.is_file():
            return candidate
    return None


@cache
def _file_values() -> dict[str, Any]:
    path = config_file()
    if path is None:
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None


def get(key: str, flag_value: Any = None) -> Any:
    """The value of ``key``: the flag if given, else ``KGQA_<KEY>``, else the config file, else the default."""
    return get_with_origin(key, flag_value)[0]


def get_with_origin(key: str, flag_value: Any = None) -> tuple[Any, str]:
    """The value of ``key`` and where it came from (for error messages that tell the user what to fix)."""
    if flag_value is not None:
        return flag_value, f"--{key.replace('_', '-')}"
    env = os.environ.get("KGQA_" + key.upper())
    if env:
        return env, f"$KGQA_{key.upper()}"
    values = _file_values()
    if key in values:
        return values[key], f"{key} in {config_file()}"
    return DEFAULTS.get(key), "the default"


def cache_dir(flag_value: str | os.PathLike[str] | None = None) -> Path:
    """The cache directory (LLM cache, demo KG, embeddings, joined model files), created if missing."""
    value, origin = get_with_origin("cache_dir", str(flag_value) if flag_value is not None else None)
    path = Path(str(value)).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cache directory {path} (from {origin}) cannot be created: {exc}") from None
    return path


def data_dir(flag_value: str | os.PathLike[str] | None = None) -> Path:
    """The benchmark data directory; a clear error when it is not configured or missing."""
    value, origin = get_with_origin("data_dir", str(flag_value) if flag_value is not None else None)
    if not value:
        raise ConfigError(
            "no data directory given: pass --data-dir DIR, set the environment variable KGQA_DATA_DIR=DIR, or set "
            "data_dir in the config file. DIR holds the public benchmark files in their original layout (metaqa/, "
            "questions/tog/, questions/aog/, ...); docs/datasets.md lists every file and its public source.")
    path = Path(str(value)).expanduser()
    if not path.is_dir():
        raise ConfigError(f"data directory {str(path)!r} (from {origin}) does not exist or is not a directory")
    return path
