"""The method contract: what a method declares (its typed config, what it needs, how it shows its reasoning) and does.

A method is a class (or any factory) registered by name with :func:`kgqa.methods.registry.register_method`. The
contract, all optional for a plain factory and all present on :class:`KGQAMethod` subclasses:

* ``Config``: a pydantic model (a :class:`MethodConfig`) with defaults. ``kgqa eval/ask --method-config KEY=VALUE``
  is validated against it (an unknown key or a bad value is refused naming the field and the valid ones), ``kgqa
  methods`` lists it, and a run writes the resolved config whole into ``config.json``.
* ``needs(llm)``: a :class:`Needs` saying whether it needs a KG, an LLM, an embedder, and which trained artifacts;
  the CLI and the runner load exactly those.
* ``Details``: a :class:`MethodDetails` model, the method's typed account of how it answered (chains, a plan, rounds);
  the method fills ``ctx.details`` as it goes and the prediction carries it (``prediction.details``).
* ``explain(prediction)``: an :class:`Explanation`, the method's own summary of how it answered, made from its
  details, which ``kgqa ask`` prints and ``--json`` includes, so nothing reads a method's trace events by name.
* ``signatures``: every prompt the method asks, each declared once with its reply model and step
  (:class:`~kgqa.llm.prompts.Signature`); a test renders each against its reply model.
* ``answer(question, ctx)``: the prediction. The caller (the runner, ``kgqa ask``, :func:`solve`) attaches the trace
  and the usage, so a method returns only what it decided.
* ``label(llm)``: the name the run's figures are reported under (summary.json's ``method``, report.md, ``kgqa eval
  compare``), given the model spec of the run; None (the default): the name it was run under. A setting that makes the
  method something other than its paper's says so here (FoG's graph mode: ``fog[graph]``); config.json keeps the
  registered name, which resuming, the ledger and the service key on.
* ``trainers``: what the method trains or builds (:class:`~kgqa.methods.trainer.Trainer` classes, each with typed
  settings); ``kgqa train NAME`` reaches them through the registry. Empty for a method that trains nothing.

Dataset facts a method needs (CCoR's depth 4 on CWQ) come in ``question.metadata`` from the dataset's registry entry,
never from a dataset-name test inside a method.
"""

from __future__ import annotations

import abc
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kgqa.core import MethodContext, Prediction, Question
from kgqa.errors import ConfigError

R = TypeVar("R")

if TYPE_CHECKING:
    from kgqa.llm.accounting import Recorder
    from kgqa.llm.prompts import Signature
    from kgqa.methods.trainer import Trainer


class MethodDetails(BaseModel):
    """Base of a method's typed account of one answer (``prediction.details``): every field has a default, and keys a
    newer or older kgqa wrote that this one does not know are ignored, so a stored run always reads."""

    model_config = ConfigDict(extra="ignore")

    @staticmethod
    def round_of(rounds: list[R], number: int, make: Callable[..., R]) -> R:
        """The entry of ``rounds`` whose ``round`` is ``number``, appended as ``make(round=number)`` when there is none
        yet (a round's steps fill one entry as they happen)."""
        found = next((r for r in rounds if getattr(r, "round", None) == number), None)
        if found is None:
            found = make(round=number)
            rounds.append(found)
        return found


class MethodConfig(BaseModel):
    """Base of every method's config: frozen, unknown keys refused, defaults validated."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


@dataclass(frozen=True, slots=True)
class Needs:
    """What a method needs to answer: loaded by the CLI and the runner before the first question, nothing more."""

    kg: bool = True
    llm: bool = True
    embedder: bool = False
    #: Names of artifacts (``kgqa artifacts``) the method loads: trained weights, precomputed indexes.
    artifacts: tuple[str, ...] = ()

    def describe(self) -> str:
        parts = [what for what, needed in (("KG", self.kg), ("LLM", self.llm), ("embedder", self.embedder)) if needed]
        parts += [f"artifact {a}" for a in self.artifacts]
        return ", ".join(parts) or "nothing"


class Explanation(BaseModel):
    """A method's own summary of how it answered one question.

    ``fields`` are machine-readable (merged into ``kgqa ask --json``); ``lines`` are what ``kgqa ask`` prints, one
    per line, after the answers and the grounding.
    """

    fields: dict[str, Any] = Field(default_factory=dict)
    lines: list[str] = Field(default_factory=list)


@runtime_checkable
class Method(Protocol):
    """What the runner needs of a method: a name and ``answer``. ``needs``/``explain``/``config``/``label`` are
    optional."""

    name: str

    def answer(self, question: Question, ctx: MethodContext) -> Prediction: ...


class KGQAMethod(abc.ABC):
    """Base class of kgqa's methods: set ``name``, ``summary`` and ``Config``, implement ``answer``.

    ``KGQAMethod(**settings)`` validates the settings against ``Config`` (a :class:`ConfigError` names the field);
    ``self.config`` is the validated, frozen config.
    """

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    Config: ClassVar[type[MethodConfig]] = MethodConfig
    #: What the method trains or builds (``kgqa train NAME``); the first is its main trainer, named after it.
    trainers: ClassVar[tuple[type[Trainer], ...]] = ()
    #: Every prompt the method asks, declared once with its reply model and step.
    signatures: ClassVar[tuple[Signature, ...]] = ()
    #: The model of ``prediction.details``.
    Details: ClassVar[type[MethodDetails]] = MethodDetails

    def __init__(self, config: MethodConfig | None = None, /, **settings: Any) -> None:
        if config is not None and settings:
            raise ConfigError(f"{self.name}: give a config object or settings, not both")
        self.config = config if config is not None else validate_config(self.name, self.Config, settings)

    def needs(self, llm: str | None = None) -> Needs:
        """What this configured method needs; ``llm`` is the model spec the run uses (some defaults depend on it)."""
        return Needs()

    def label(self, llm: str | None = None) -> str | None:
        """The name this configured method's figures are reported under with the model spec ``llm`` (the run's, as
        :meth:`needs` gets it); None: the name it was run under. Override when a setting makes it another method than
        its paper's."""
        return None

    def check_ready(self, ctx: MethodContext) -> None:
        """Raise a :class:`ConfigError` when this method cannot answer any question with ``ctx`` (a trained part
        the KG has none of), so a run refuses up front rather than failing each question; the default checks
        nothing."""
        return None

    @abc.abstractmethod
    def answer(self, question: Question, ctx: MethodContext) -> Prediction: ...

    def explain(self, prediction: Prediction) -> Explanation:
        """The summary ``kgqa ask`` shows; the default shows nothing beyond answers and grounding."""
        return Explanation()

    def account(self, ctx: MethodContext) -> Any:
        """This question's details (``ctx.details``, the method's ``Details``), made on first use; a method fills it as
        it goes and the prediction carries it."""
        if not isinstance(ctx.details, self.Details):
            ctx.details = self.Details()
        return ctx.details

    def details_of(self, prediction: Prediction) -> Any:
        """``prediction.details`` as this method's ``Details`` (defaults where a field is missing or malformed, as in a
        run written by another kgqa)."""
        try:
            return self.Details.model_validate(prediction.details)
        except ValidationError:
            return self.Details()


def validate_config(method: str, model: type[BaseModel], settings: dict[str, Any]) -> BaseModel:
    """Validate ``settings`` against ``model``; a :class:`ConfigError` names the bad field and lists the valid ones."""
    try:
        return model.model_validate(settings)
    except ValidationError as exc:
        fields = model.model_fields
        valid = ", ".join(f"{n} ({describe_type(f.annotation)})" for n, f in fields.items()) or "(none)"
        problems = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err.get("loc", ())) or "config"
            if err.get("type") == "extra_forbidden":
                problems.append(f"{where!r} is not a setting of this method")
            else:
                problems.append(f"{where}={err.get('input')!r}: {err.get('msg')}")
        raise ConfigError(f"bad configuration for method {method!r}: {'; '.join(problems)}. "
                          f"Valid settings: {valid}") from None


def describe_type(annotation: Any) -> str:
    """A short readable name of a config field's type (``int``, ``'llm' | 'embedding'``, ``int | None``)."""
    if annotation is None or annotation is type(None):
        return "None"
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return describe_type(typing.get_args(annotation)[0])
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(describe_type(a) for a in typing.get_args(annotation))
    if origin is not None:
        args = ", ".join(describe_type(a) for a in typing.get_args(annotation))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if annotation is Any:
        return "any"
    return getattr(annotation, "__name__", str(annotation))


def solve(method: Method, question: Question, ctx: MethodContext, *, recorder: Recorder | None = None,
          scope: str | None = None) -> Prediction:
    """Answer one question and attach what the caller owns: the trace of ``ctx`` and the usage of ``recorder``.

    Exceptions of the method propagate (the runner records them as a failed question; ``kgqa ask`` shows them).
    """
    if recorder is not None:
        with recorder.scope(scope or question.id):
            prediction = method.answer(question, ctx)
    else:
        prediction = method.answer(question, ctx)
    if not isinstance(prediction, Prediction):
        prediction = Prediction.model_validate(prediction)
    return attach_run_facts(prediction, ctx, recorder=recorder, scope=scope or question.id)


def attach_run_facts(prediction: Prediction, ctx: MethodContext, *, recorder: Recorder | None,
                     scope: str) -> Prediction:
    """The prediction with the context's trace, topics and details (where the method returned none) and the
    recorder's usage merged in."""
    update: dict[str, Any] = {}
    if not prediction.trace and ctx.trace:
        update["trace"] = list(ctx.trace)
    if not prediction.topics and ctx.topics:
        update["topics"] = list(ctx.topics)
    if not prediction.details and ctx.details is not None:
        update["details"] = ctx.details.model_dump(mode="json")
    if recorder is not None:
        update["usage"] = {**prediction.usage, **recorder.totals(scope).to_dict()}
    return prediction.model_copy(update=update) if update else prediction


def method_needs(method: Any, llm: str | None = None) -> Needs:
    """The needs of any method object: its ``needs()``, else the old ``needs_kg``/``needs_embedder`` attributes."""
    needs = getattr(method, "needs", None)
    if callable(needs):
        result = needs(llm)
        if isinstance(result, Needs):
            return result
    return Needs(kg=bool(getattr(method, "needs_kg", True)), embedder=bool(getattr(method, "needs_embedder", False)))


def method_label(method: Any, llm: str | None, name: str) -> str:
    """The name ``method`` (run as ``name``) is reported under with the model spec ``llm``: its ``label(llm)`` (or a
    ``label`` text attribute, for a plain method object), else ``name``."""
    label = getattr(method, "label", None)
    result = label(llm) if callable(label) else label
    return result.strip() if isinstance(result, str) and result.strip() else name


def method_explanation(method: Any, prediction: Prediction) -> Explanation:
    """The method's explanation of ``prediction`` (empty for a method without ``explain``)."""
    explain = getattr(method, "explain", None)
    if callable(explain):
        result = explain(prediction)
        if isinstance(result, Explanation):
            return result
    return Explanation()


def method_config_dump(method: Any) -> dict[str, Any]:
    """The resolved config of a method object as JSON-ready data (written whole into a run's config.json)."""
    config = getattr(method, "config", None)
    if isinstance(config, BaseModel):
        return config.model_dump(mode="json")
    if hasattr(config, "__dataclass_fields__"):
        import dataclasses

        return dataclasses.asdict(config)  # type: ignore[arg-type]
    return {}
