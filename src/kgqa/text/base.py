"""The embedder seam: anything with ``name``, ``dim`` and ``embed(texts) -> float32 array of L2-normalised rows``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors, so a dot product is the cosine similarity."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def l2_normalize(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (all-zero rows stay zero), as float32."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (matrix / norms).astype(np.float32, copy=False)


def check_texts(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list of str; a single string is refused (a common slip that would embed characters)."""
    from kgqa.errors import ConfigError

    if isinstance(texts, str):
        raise ConfigError("embed() takes a sequence of texts, not a single string; wrap it in a list")
    out = list(texts)
    for i, text in enumerate(out):
        if not isinstance(text, str):
            raise ConfigError(f"text {i} to embed is {type(text).__name__}, not str")
    return out
