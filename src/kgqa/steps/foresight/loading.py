"""Loading a trained foresight scorer and the label vectors it reads, once per method object.

The scorer comes from a directory (a trained scorer or an ensemble of them) or, on the demo KG with none configured,
from the artifact store: the artifact :data:`DEMO_SCORER`, whose recipe the method that trains scorers registers. Label
vectors are per KG and use the encoder the scorer was trained with, from the ``label-embeddings`` artifact when the
store has the KG's names.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from kgqa.core import MethodContext
from kgqa.errors import ConfigError

__all__ = ["DEMO_SCORER", "ScorerLoader", "check_scorer_dir", "load_answer_types", "shared_embedder",
           "shared_scorer"]

#: The artifact holding the demo KG's own scorer (built on first use into the artifact store).
DEMO_SCORER = "fog-demo-scorer"


def check_scorer_dir(value: str | None, *, what: str, how_to_train: str) -> str | None:
    """A config value naming a scorer directory, checked early (a settings error rather than a failed question)."""
    from kgqa.steps.foresight.scorer import ENSEMBLE, META, WEIGHTS

    if value is not None:
        path = Path(value).expanduser()
        if (path / ENSEMBLE).is_file():
            return value  # an ensemble of scorers: its members are checked when it loads
        if not (path / META).is_file() or not (path / WEIGHTS).is_file():
            raise ValueError(f"{value!r} is not a {what} directory (expected {META} and {WEIGHTS}, or "
                             f"{ENSEMBLE}; {how_to_train})")
    return value


_SHARED_LOCK = threading.Lock()
#: Scorers loaded from a directory, by (resolved directory, its files' stamps): one load per process.
_SCORERS: dict[tuple[str, tuple[Any, ...]], Any] = {}
#: Encoders by spec, for the scorers that read with another embedder than the context's.
_ENCODERS: dict[str, Any] = {}
#: Scorers kept at most (the oldest goes first).
MAX_SHARED_SCORERS = 8


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


def shared_scorer(path: str) -> Any:
    """The scorer (or ensemble) in ``path``, loaded once per process while its files stay the same: every method
    object naming that directory shares it (a server's asks with different settings, the methods of one eval)."""
    from kgqa.steps.foresight.scorer import ENSEMBLE, META, WEIGHTS, load_scorer

    directory = Path(path).expanduser().resolve()
    key = (str(directory), tuple(_stamp(directory / name) for name in (META, WEIGHTS, ENSEMBLE)))
    with _SHARED_LOCK:
        hit = _SCORERS.get(key)
    if hit is not None:
        return hit
    scorer = load_scorer(path)
    with _SHARED_LOCK:
        scorer = _SCORERS.setdefault(key, scorer)
        while len(_SCORERS) > MAX_SHARED_SCORERS:
            _SCORERS.pop(next(iter(_SCORERS)))
    return scorer


def shared_embedder(spec: str) -> Any:
    """The embedder ``spec``, made once per process (a scorer's encoder when the context offers another one)."""
    from kgqa.text import load_embedder

    with _SHARED_LOCK:
        hit = _ENCODERS.get(spec)
    if hit is not None:
        return hit
    embedder = load_embedder(spec)
    with _SHARED_LOCK:
        return _ENCODERS.setdefault(spec, embedder)


def load_answer_types(path: str | Any, scorer_embedder: Any) -> tuple[Any, Any]:
    """The answer-type model in ``path`` and the embedder it reads with: the scorer's when it is the same encoder,
    else its own (made once per process)."""
    from kgqa.steps.foresight.answer_types import AnswerTypes

    types = AnswerTypes.load(str(path))
    same = getattr(scorer_embedder, "name", None) == types.embedder_name
    return types, scorer_embedder if same else shared_embedder(types.encoder)


class ScorerLoader:
    """Thread-safe cache of (scorer, label vectors) for one configured scorer path (None: the demo scorer).

    ``how_to_train`` ends the error a KG without a scorer gets (the method knows the command that trains one)."""

    def __init__(self, path: str | None, *, method: str, how_to_train: str) -> None:
        self.path = path
        self.method = method
        self.how_to_train = how_to_train
        self._lock = threading.Lock()
        self._scorer: Any = None
        self._labels: dict[int, Any] = {}

    def get(self, ctx: MethodContext) -> tuple[Any, Any]:
        from kgqa.steps.foresight.scorer import LabelVectors

        with self._lock:
            if self._scorer is None:
                self._scorer = shared_scorer(self.path) if self.path is not None else self._default(ctx)
            scorer = self._scorer
            labels = self._labels.get(id(ctx.kg))
            if labels is None:
                embedder = ctx.embedder if getattr(ctx.embedder, "name", None) == scorer.encoder \
                    else shared_embedder(scorer.encoder)
                table = None
                if ctx.artifacts is not None and hasattr(ctx.kg, "iter_names"):
                    table = ctx.artifacts.get("label-embeddings", kg=ctx.kg, embedder=embedder)
                labels = self._labels[id(ctx.kg)] = LabelVectors(ctx.kg, embedder, table)
            return scorer, labels

    def _default(self, ctx: MethodContext) -> Any:
        """On the demo KG, the scorer trained on the demo questions (built once into the artifact store); elsewhere
        an error that says how to train one."""
        from kgqa.kg.demo import is_demo_kg

        if is_demo_kg(ctx.kg):
            if ctx.artifacts is None:
                raise ConfigError(f"{self.method}: the demo scorer is built in the artifact store, and this context "
                                  "has none")
            return ctx.artifacts.get(DEMO_SCORER)
        raise ConfigError(f"{self.method} needs a trained scorer for this KG: {self.how_to_train}")
