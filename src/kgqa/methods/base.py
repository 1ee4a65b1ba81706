"""What every method speaks: the question it gets, the prediction it returns, its context, and the registry by name.

A method is anything with a ``name`` and ``answer(question, ctx) -> Prediction``. It is registered under a name with
:func:`register_method` and built with :func:`get_method`. Methods live in ``kgqa/methods/<name>/``; the registry imports
those subpackages (and the ``kgqa.methods`` entry-point group of installed plugins) the first time it is asked for a name,
so importing this module stays cheap and a broken method cannot break the others.
"""

from __future__ import annotations

import enum
import importlib
import importlib.metadata
import inspect
import pkgutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kgqa.errors import ConfigError

if TYPE_CHECKING:  # the LLM and text layers are optional at import time
    from kgqa.kg.base import KnowledgeGraph
    from kgqa.llm.accounting import Recorder
    from kgqa.llm.base import ChatModel
    from kgqa.text.base import Embedder


# ---------------------------------------------------------------------------------------------------------------------
# Questions


class TopicEntity(BaseModel):
    """An entity the question is about: its KG id (``m.0abc``, ``Q42``, a MetaQA label) and its display name."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str


class GoldAnswer(BaseModel):
    """One gold answer. ``id`` is ``None`` for a literal (a year, a count) or when the data gives names only."""

    model_config = ConfigDict(frozen=True)

    id: str | None = None
    name: str
    aliases: list[str] = Field(default_factory=list)


class Question(BaseModel):
    """A benchmark question.

    ``metadata`` keys used across datasets (present only where the data says): ``hops`` (int), ``qtype`` (str),
    ``compositionality`` (str), ``constraints`` (list), ``sparql`` (str), ``dataset`` and ``split``; loaders add their
    own (``level``, ``function``, ``webqsp_id`` ...).
    """

    id: str
    text: str
    topic_entities: list[TopicEntity] = Field(default_factory=list)
    answers: list[GoldAnswer] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def topic_ids(self) -> list[str]:
        return [t.id for t in self.topic_entities]

    @property
    def gold_names(self) -> list[str]:
        return [a.name for a in self.answers]


# ---------------------------------------------------------------------------------------------------------------------
# Predictions


class Grounding(enum.StrEnum):
    """Where the final answer came from (CCoR paper, Sec. V-A).

    ``structured``: derived entirely from explicit KG execution. ``synthesis``: the KG gave intermediate results (e.g.
    a candidate set) and the LLM decided the answer from them. ``parametric``: the LLM answered from its own memory.
    """

    STRUCTURED = "structured"
    SYNTHESIS = "synthesis"
    PARAMETRIC = "parametric"

    @property
    def weight(self) -> float:
        """The KGR weight of this state (Eq. 10): 1.0, 0.5, 0."""
        return GROUNDING_WEIGHTS[self]


GROUNDING_WEIGHTS: dict[Grounding, float] = {
    Grounding.STRUCTURED: 1.0,
    Grounding.SYNTHESIS: 0.5,
    Grounding.PARAMETRIC: 0.0,
}


class AnswerItem(BaseModel):
    """One predicted answer: the KG id when the method has one, and the name shown to the user."""

    model_config = ConfigDict(frozen=True)

    id: str | None = None
    name: str = ""


def _coerce_answer(value: Any) -> Any:
    # Methods and baselines often have bare strings; accept them so every method need not wrap them.
    if isinstance(value, str):
        return AnswerItem(id=None, name=value)
    if isinstance(value, tuple) and len(value) == 2:
        return AnswerItem(id=value[0], name=value[1] if value[1] is not None else "")
    return value


class Prediction(BaseModel):
    """What a method returns for one question (JSON-serialisable with ``model_dump(mode="json")``).

    ``answers`` are ranked, best first. ``evidence`` holds the triples or paths the answer rests on (each a list of
    ids/names). ``trace`` is the step trace, ``usage`` the accounting totals (``calls``, ``prompt_tokens``,
    ``completion_tokens``, ``latency_s`` ...). ``error`` is set when the method failed; the answers are then whatever it
    had (usually none). ``grounding`` defaults to ``parametric`` so a method that forgets it is never over-credited.
    """

    answers: list[AnswerItem] = Field(default_factory=list)
    grounding: Grounding = Grounding.PARAMETRIC
    evidence: list[list[str]] = Field(default_factory=list)
    trace: list[dict[str, Any]] = Field(default_factory=list)
    usage: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None

    @field_validator("answers", mode="before")
    @classmethod
    def _answers_from_strings(cls, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return [_coerce_answer(v) for v in value]
        return value

    @classmethod
    def failed(cls, error: str, *, usage: dict[str, Any] | None = None,
               trace: list[dict[str, Any]] | None = None) -> Prediction:
        """A prediction for a question whose method raised: no answers, parametric, the error kept."""
        return cls(answers=[], grounding=Grounding.PARAMETRIC, usage=dict(usage or {}), trace=list(trace or []),
                   error=error)

    @property
    def names(self) -> list[str]:
        """The ranked answer names."""
        return [a.name for a in self.answers]


# ---------------------------------------------------------------------------------------------------------------------
# Context


class Trace(list[dict[str, Any]]):
    """The step trace of one question: a plain list of events (so it serialises as JSON as is)."""

    def add(self, step: str, **data: Any) -> dict[str, Any]:
        """Append the event ``{"step": step, **data}`` and return it (so a step can fill in its outcome later)."""
        event: dict[str, Any] = {"step": step, **data}
        self.append(event)
        return event

    def steps(self) -> list[str]:
        return [str(e.get("step", "")) for e in self]


@dataclass
class MethodContext:
    """What a method may use while answering: the KG, the chat model, an optional embedder, a seed and the recorder."""

    kg: KnowledgeGraph
    llm: ChatModel
    embedder: Embedder | None = None
    seed: int = 0
    recorder: Recorder | None = None
    trace: Trace = field(default_factory=Trace)

    def for_question(self) -> MethodContext:
        """A copy with a fresh trace (one per question, so concurrent questions never share one)."""
        return replace(self, trace=Trace())


# ---------------------------------------------------------------------------------------------------------------------
# The method protocol and the registry


@runtime_checkable
class Method(Protocol):
    """A KGQA method."""

    name: str

    def answer(self, question: Question, ctx: MethodContext) -> Prediction: ...


F = TypeVar("F", bound=Callable[..., Any])

_REGISTRY: dict[str, Callable[..., Method]] = {}
_IMPORT_ERRORS: dict[str, str] = {}
_LOCK = threading.RLock()  # guards the two dicts above
# Held while importing method packages; separate from _LOCK so a package that registers itself while another thread
# is discovering never waits on a lock held by a thread that is waiting for that package's import.
_DISCOVERY_LOCK = threading.RLock()
_discovered = False
ENTRY_POINT_GROUP = "kgqa.methods"


def _key(name: str) -> str:
    return name.strip().lower()


def register_method(name: str) -> Callable[[F], F]:
    """Register a class or factory under ``name``: ``get_method(name, **config)`` calls it with the config."""
    key = _key(name)
    if not key:
        raise ValueError("a method name must not be empty")

    def decorator(factory: F) -> F:
        with _LOCK:
            previous = _REGISTRY.get(key)
            # Re-registering the same object (a module re-import) is harmless; two methods under one name are a bug.
            if previous is not None and previous is not factory and (
                    getattr(previous, "__qualname__", None) != getattr(factory, "__qualname__", None)
                    or getattr(previous, "__module__", None) != getattr(factory, "__module__", None)):
                raise ValueError(f"method name {name!r} is already registered by {previous!r}")
            _REGISTRY[key] = factory
        return factory

    return decorator


def discover_methods(*, force: bool = False) -> None:
    """Import every subpackage of ``kgqa.methods`` and every ``kgqa.methods`` entry point, once.

    A subpackage that fails to import is remembered (and reported by :func:`get_method` when its name is asked for)
    rather than raised, so one broken method does not hide the others.
    """
    global _discovered
    with _DISCOVERY_LOCK:
        if _discovered and not force:
            return
        package = importlib.import_module("kgqa.methods")
        for info in pkgutil.iter_modules(package.__path__):
            if not info.ispkg or info.name.startswith("_"):
                continue
            try:
                importlib.import_module(f"kgqa.methods.{info.name}")
            except Exception as exc:  # a broken method must not break the registry
                with _LOCK:
                    _IMPORT_ERRORS[_key(info.name)] = f"{type(exc).__name__}: {exc}"
        try:
            entry_points = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
        except Exception:  # pragma: no cover - broken metadata of some other distribution
            entry_points = ()
        for ep in entry_points:
            try:
                factory = ep.load()
            except Exception as exc:
                with _LOCK:
                    _IMPORT_ERRORS[_key(ep.name)] = f"{type(exc).__name__}: {exc}"
                continue
            with _LOCK:
                if _key(ep.name) not in _REGISTRY and callable(factory):
                    _REGISTRY[_key(ep.name)] = factory
        _discovered = True


def method_names() -> list[str]:
    """The registered method names, sorted."""
    discover_methods()
    with _LOCK:
        return sorted(_REGISTRY)


def get_method(name: str, **config: Any) -> Method:
    """Build the method registered as ``name`` with ``config``; an unknown name is a :class:`ConfigError`."""
    discover_methods()
    key = _key(name)
    with _LOCK:
        factory = _REGISTRY.get(key)
        import_error = _IMPORT_ERRORS.get(key)
    if factory is None:
        if import_error is not None:
            raise ConfigError(f"method {name!r} could not be loaded: {import_error}")
        known = ", ".join(method_names()) or "(none registered)"
        raise ConfigError(f"unknown method {name!r}; known methods: {known}")
    try:
        inspect.signature(factory).bind(**config)
    except TypeError as exc:
        raise ConfigError(f"bad configuration for method {name!r}: {exc}") from exc
    except ValueError:  # no introspectable signature (a builtin): let the call itself complain
        pass
    return factory(**config)
