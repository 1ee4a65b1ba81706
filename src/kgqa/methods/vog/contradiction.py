"""The second checker of VoG's verification: does a text contradict another? (issue 14, item 3, a shared step).

The paper checks the predicted observation against the KG observation with DeBERTa-MNLI in both directions, on top of
the LLM verifier. No NLI model can be installed offline here, so the checker is pluggable (:class:`ContradictionChecker`):

* :class:`EmbeddingContradictionProxy` (``"embedding"``, the default) — **a deviation from the paper**: it flags a
  contradiction when the cosine between the two texts' embeddings is below a threshold, i.e. when they are not about
  the same facts. It is a proxy for "they disagree", not NLI: it catches an observation about something else (or
  nothing), but not "same subject and relation, another value" (Obama born in Chicago vs Honolulu), which embeds
  close to the truth; that case is left to the LLM verifier. The cosine is symmetric, so the two directions the
  paper checks are one and the same here.
* :class:`CrossEncoderNLI` (``"nli:MODEL"``) — the paper's option: any sentence-transformers ``CrossEncoder`` NLI
  model (such as a DeBERTa-MNLI cross-encoder), both directions, loaded from a local path or the Hugging Face cache.

Threshold of the proxy (``DEFAULT_THRESHOLD`` = 0.4, calibrated for all-MiniLM-L6-v2, the project's default embedder):
on hand pairs of a predicted observation and a KG observation in triples, MiniLM gives 0.68-0.89 for pairs that agree
(8 pairs), 0.41-0.79 for same-topic pairs with another value (7) and -0.04-0.11 for off-topic or empty observations
(5). 0.4 sits in the middle of the gap between the off-topic pairs and the agreeing ones, so the proxy never flags an
agreeing pair of that set (a false alarm costs a revision and -0.5 reward) and flags every off-topic one. The hashing
embedder of the tests spreads less (agreeing 0.27-0.73, off-topic -0.10-0.20): give it its own threshold
(``"embedding:0.25"``) where the margin matters.
"""

from __future__ import annotations

import math
import numbers
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from kgqa.errors import ConfigError
from kgqa.text.base import Embedder

#: The proxy's default cosine threshold (see the module docstring for why 0.4).
DEFAULT_THRESHOLD = 0.4
#: A contradiction needs the NLI model's contradiction probability above this (and to be its top label).
NLI_MIN_PROBABILITY = 0.5
#: The valid checker specs, for error messages.
CHECKER_SPECS = '"embedding" (the default), "embedding:THRESHOLD" (a cosine in [-1, 1]) or "nli:MODEL" ' \
                "(a sentence-transformers CrossEncoder NLI model name or path)"


@dataclass(frozen=True)
class CheckResult:
    """A checker's verdict on one pair: contradiction or not, its contradiction score in [0, 1], and why."""

    contradiction: bool
    score: float
    detail: str


@runtime_checkable
class ContradictionChecker(Protocol):
    """Anything with a ``name`` and ``check(premise, hypothesis) -> CheckResult``."""

    name: str

    def check(self, premise: str, hypothesis: str) -> CheckResult: ...


def _texts(premise: Any, hypothesis: Any) -> tuple[str, str]:
    for what, text in (("premise", premise), ("hypothesis", hypothesis)):
        if not isinstance(text, str):
            raise ConfigError(f"the contradiction checker's {what} must be a string, got {type(text).__name__}")
    return premise, hypothesis


#: The verdict on a pair with a blank side: nothing to contradict (an empty observation is the verifier's business).
BLANK = CheckResult(contradiction=False, score=0.0, detail="blank text: nothing to compare")


class EmbeddingContradictionProxy:
    """Contradiction when ``cosine(premise, hypothesis) < threshold``; score ``(1 - cosine) / 2``.

    A proxy, not NLI (see the module docstring): cosine is symmetric, so both directions give the same verdict.
    """

    name = "embedding"

    def __init__(self, embedder: Embedder, *, threshold: float = DEFAULT_THRESHOLD) -> None:
        if embedder is None or not callable(getattr(embedder, "embed", None)):
            raise ConfigError(f"the embedding contradiction checker needs an embedder, got {embedder!r}")
        if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or not math.isfinite(threshold) \
                or not -1.0 <= threshold <= 1.0:
            raise ConfigError(f"the embedding checker's threshold must be a cosine in [-1, 1], got {threshold!r}")
        self.embedder = embedder
        self.threshold = float(threshold)

    def cosine(self, premise: str, hypothesis: str) -> float:
        """The cosine of the two texts' embeddings (the embedder's rows are unit vectors)."""
        vectors = np.asarray(self.embedder.embed([premise, hypothesis]), dtype=float)
        return float(min(max(vectors[0] @ vectors[1], -1.0), 1.0))

    def check(self, premise: str, hypothesis: str) -> CheckResult:
        premise, hypothesis = _texts(premise, hypothesis)
        if not premise.strip() or not hypothesis.strip():
            return BLANK
        cosine = self.cosine(premise, hypothesis)
        contradiction = cosine < self.threshold
        sign = "<" if contradiction else ">="
        return CheckResult(contradiction=contradiction, score=(1.0 - cosine) / 2.0,
                           detail=f"cosine {cosine:.2f} {sign} {self.threshold:.2f}")


def contradiction_index(id2label: Mapping[Any, str], model_name: str) -> int:
    """The output index of the contradiction label in a model's ``id2label`` (keys may be ints or digit strings)."""
    found = [int(i) for i, label in id2label.items() if str(label).strip().lower().startswith("contradict")]
    if len(found) != 1:
        labels = {int(i): str(label) for i, label in id2label.items()}
        raise ConfigError(f"NLI model {model_name!r} has {'no' if not found else 'more than one'} contradiction label "
                          f"in its config (id2label {labels}); give an NLI model whose labels name 'contradiction'")
    return found[0]


def nli_verdict(p_to_h: Sequence[float], h_to_p: Sequence[float], contradiction: int) -> CheckResult:
    """The verdict from the label probabilities of both directions (premise -> hypothesis, hypothesis -> premise).

    Contradiction when, in either direction, the contradiction label is the most probable one and above 0.5; the
    score is the larger of the two contradiction probabilities.
    """
    rows = [np.asarray(p_to_h, dtype=float), np.asarray(h_to_p, dtype=float)]
    for row in rows:
        if row.ndim != 1 or not 0 <= contradiction < row.size or not np.all(np.isfinite(row)):
            raise ConfigError(f"NLI probabilities {row.tolist()} do not fit contradiction label {contradiction}")
    probs = [float(row[contradiction]) for row in rows]
    flagged = [int(np.argmax(row)) == contradiction and p > NLI_MIN_PROBABILITY for row, p in zip(rows, probs, strict=True)]
    return CheckResult(contradiction=any(flagged), score=min(max(max(probs), 0.0), 1.0),
                       detail=f"nli: contradiction {probs[0]:.2f} (p->h), {probs[1]:.2f} (h->p)")


class CrossEncoderNLI:
    """The paper's second checker: a sentence-transformers ``CrossEncoder`` NLI model, both directions.

    The model loads on the first :meth:`check` (or :meth:`load`), from a local path or the Hugging Face cache only
    unless ``allow_download``; the label order comes from the model's ``id2label``.
    """

    name = "nli"

    def __init__(self, model_name: str, *, allow_download: bool = False) -> None:
        if not isinstance(model_name, str) or not model_name.strip():
            raise ConfigError(f"the NLI checker needs a model name, got {model_name!r} (spec {CHECKER_SPECS})")
        self.model_name = model_name.strip()
        self.allow_download = allow_download
        self._model: Any = None
        self._contradiction: int | None = None
        self._lock = threading.Lock()

    def load(self) -> None:
        """Load the model now (a clear ConfigError when it cannot be loaded or is not an NLI model)."""
        with self._lock:
            if self._model is not None:
                return
            try:
                from sentence_transformers import CrossEncoder
            except ImportError:
                raise ConfigError(f"the NLI checker {self.model_name!r} needs sentence-transformers and torch: run "
                                  ".ci/install_local_model.sh") from None
            try:
                model = CrossEncoder(self.model_name, device="cpu", local_files_only=not self.allow_download)
            except (OSError, ValueError, RuntimeError) as exc:
                where = "a local path or the Hugging Face cache" if not self.allow_download else "the Hugging Face hub"
                raise ConfigError(
                    f"cannot load the NLI model {self.model_name!r} from {where} ({type(exc).__name__}); no NLI model "
                    "ships offline with kgqa: put one in the cache or a folder and name it, or use the checker "
                    "'embedding'") from None
            config = getattr(model, "config", None)
            id2label = getattr(config, "id2label", None) or {}
            index = contradiction_index(id2label, self.model_name)
            self._contradiction, self._model = index, model

    def check(self, premise: str, hypothesis: str) -> CheckResult:
        premise, hypothesis = _texts(premise, hypothesis)
        if not premise.strip() or not hypothesis.strip():
            return BLANK
        self.load()
        import torch

        assert self._contradiction is not None
        probs = self._model.predict([(premise, hypothesis), (hypothesis, premise)], apply_softmax=True,
                                    activation_fn=torch.nn.Identity(), show_progress_bar=False, convert_to_numpy=True)
        probs = np.asarray(probs, dtype=float)
        if probs.ndim != 2 or probs.shape[1] < 2:
            raise ConfigError(f"NLI model {self.model_name!r} gives {probs.shape} scores per pair, not one per label")
        return nli_verdict(probs[0], probs[1], self._contradiction)


def load_checker(spec: str, *, embedder: Embedder | None) -> ContradictionChecker:
    """A checker from its spec: ``"embedding"`` (needs ``embedder``), ``"embedding:THRESHOLD"`` or ``"nli:MODEL"``."""
    if not isinstance(spec, str):
        raise ConfigError(f"contradiction checker spec must be a string, got {spec!r}; valid: {CHECKER_SPECS}")
    kind, sep, arg = spec.strip().partition(":")
    kind, arg = kind.strip().lower(), arg.strip()
    if kind == "embedding":
        if embedder is None:
            raise ConfigError(f"contradiction checker {spec!r} needs an embedder, and none was given")
        if not sep:
            return EmbeddingContradictionProxy(embedder)
        try:
            threshold = float(arg)
        except ValueError:
            raise ConfigError(f"contradiction checker {spec!r}: the threshold {arg!r} is not a number; "
                              f"valid: {CHECKER_SPECS}") from None
        return EmbeddingContradictionProxy(embedder, threshold=threshold)
    if kind == "nli":
        if not arg:
            raise ConfigError(f"contradiction checker {spec!r} names no model; valid: {CHECKER_SPECS}")
        return CrossEncoderNLI(arg)
    raise ConfigError(f"unknown contradiction checker {spec!r}; valid: {CHECKER_SPECS}")
