"""The method registry: methods by name, built from validated settings, with what ``kgqa methods`` lists about each.

Built-in methods are the subpackages of ``kgqa.methods``, imported the first time a name is asked for; third-party
methods come from the ``kgqa.methods`` entry-point group (see docs/adding-a-method.md). A registered entry is a
:class:`~kgqa.methods.base.KGQAMethod` subclass (whose ``Config`` is its settings) or any callable; for a plain callable
the settings model is made from its signature, so ``--method-config`` is checked for it too.

A method's trainers (``KGQAMethod.trainers``) are reached here too: :func:`trainers` lists them by command name (what
``kgqa train`` offers), :func:`get_trainer` finds one and :func:`train` runs one from Python.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, create_model

from kgqa.errors import ConfigError
from kgqa.methods.base import KGQAMethod, Method, Needs, describe_type, method_needs, validate_config
from kgqa.methods.trainer import Trainer, TrainingReport
from kgqa.registry import Registry, import_submodules

F = TypeVar("F", bound=Callable[..., Any])


def _discover_builtin_methods() -> None:
    import_submodules("kgqa.methods", registry=METHODS)


#: Every method by name (entries are classes or factories).
METHODS: Registry[Callable[..., Method]] = Registry("method", discover=_discover_builtin_methods)
ENTRY_POINT_GROUP = METHODS.entry_point_group


def register_method(name: str) -> Callable[[F], F]:
    """Register a method class or factory under ``name``: ``get_method(name, **settings)`` builds it."""
    return METHODS.register(name)  # type: ignore[return-value]


def discover_methods(*, force: bool = False) -> None:
    """Import the built-in method packages and the entry points, once (a broken one is remembered, not raised)."""
    METHODS.discover(force=force)


def method_names() -> list[str]:
    """The registered method names, sorted."""
    return METHODS.names()


def config_model(factory: Callable[..., Any]) -> type[BaseModel]:
    """The settings model of a registered entry: its ``Config``, or a model made from a factory's signature."""
    declared = getattr(factory, "Config", None)
    if isinstance(declared, type) and issubclass(declared, BaseModel):
        return declared
    cached = getattr(factory, "__kgqa_config_model__", None)
    if cached is not None:
        return cached
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # no introspectable signature: accept anything
        return create_model(f"{getattr(factory, '__name__', 'Method')}Config",
                            __config__=ConfigDict(extra="allow"))
    try:
        hints = typing.get_type_hints(factory.__init__ if inspect.isclass(factory) else factory)
    except Exception:  # unresolvable annotations: the fields stay untyped
        hints = {}
    fields: dict[str, Any] = {}
    extra = "forbid"
    for param in signature.parameters.values():
        if param.kind is param.VAR_KEYWORD:
            extra = "allow"
            continue
        if param.kind is param.VAR_POSITIONAL or param.name == "self":
            continue
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (hints.get(param.name, Any), default)
    model = create_model(f"{getattr(factory, '__name__', 'Method')}Config",
                         __config__=ConfigDict(extra=extra, arbitrary_types_allowed=True), **fields)
    with contextlib.suppress(AttributeError, TypeError):  # a builtin or slotted factory cannot hold the cache
        factory.__kgqa_config_model__ = model  # type: ignore[attr-defined]
    return model


def trainers() -> dict[str, tuple[str, type[Trainer]]]:
    """Every registered method's trainers by name (``kgqa train NAME``), each with the method that declares it, in
    the order of the methods' names and of each method's ``trainers``. A method that cannot be imported has none."""
    out: dict[str, tuple[str, type[Trainer]]] = {}
    for method in method_names():
        try:
            factory = METHODS.get(method)
        except ConfigError:  # a broken plugin: `kgqa methods` reports it; training goes on without it
            continue
        for trainer in getattr(factory, "trainers", ()):
            claimed = out.get(trainer.name)
            if claimed is not None and claimed[1] is not trainer:
                raise ValueError(f"trainer name {trainer.name!r} is declared by methods {claimed[0]!r} and {method!r}")
            out[trainer.name] = (method, trainer)
    return out


def get_trainer(name: str) -> type[Trainer]:
    """The trainer ``name``; an unknown name is a ConfigError listing the trainers there are."""
    found = trainers().get(str(name).strip().lower())
    if found is None:
        raise ConfigError(f"no trainer {name!r}; trainers: {', '.join(trainers()) or '(none)'}")
    return found[1]


def train(name: str, /, **settings: Any) -> TrainingReport:
    """Run the trainer ``name`` with ``settings`` (its ``Settings`` fields, as ``kgqa train NAME`` takes them),
    reporting progress on stderr: ``train("fog", dataset=["metaqa-1hop"], kg="kgs/metaqa", out="models/fog")``."""
    return get_trainer(name)().run(settings)


def get_method(name: str, **settings: Any) -> Method:
    """Build the method ``name`` from ``settings`` (validated); an unknown name or a bad setting is a ConfigError."""
    factory = METHODS.get(name)
    label = str(name).strip().lower()
    if isinstance(factory, type) and issubclass(factory, KGQAMethod):
        config = validate_config(label, factory.Config, settings)
        return factory(config)
    validated = validate_config(label, config_model(factory), settings)
    kwargs = {k: getattr(validated, k) for k in type(validated).model_fields}
    kwargs.update(validated.model_extra or {})
    return factory(**kwargs)


@dataclass(frozen=True)
class SettingInfo:
    name: str
    type: str
    default: Any
    description: str


@dataclass(frozen=True)
class MethodInfo:
    """What ``kgqa methods`` shows about one method."""

    name: str
    summary: str
    settings: tuple[SettingInfo, ...]
    needs: Needs | None
    error: str | None = None
    #: the ``kgqa train`` commands of the method's trainers
    trainers: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "summary": self.summary, "trainers": list(self.trainers),
                "settings": [{"name": s.name, "type": s.type, "default": s.default, "description": s.description}
                             for s in self.settings],
                "needs": None if self.needs is None else {"kg": self.needs.kg, "llm": self.needs.llm,
                                                          "embedder": self.needs.embedder,
                                                          "artifacts": list(self.needs.artifacts)},
                "error": self.error}


def method_info(name: str, *, llm: str | None = None) -> MethodInfo:
    """Name, one-line summary, settings (type, default) and needs (with default settings) of a method."""
    factory = METHODS.get(name)
    model = config_model(factory)
    settings = tuple(SettingInfo(field, describe_type(info.annotation),
                                 None if info.is_required() else _jsonable(info.get_default(call_default_factory=True)),
                                 info.description or "")
                     for field, info in model.model_fields.items())
    doc = getattr(factory, "summary", "") or inspect.getdoc(factory) or ""
    summary = doc.strip().splitlines()[0] if doc.strip() else ""
    needs: Needs | None
    error: str | None = None
    try:
        needs = method_needs(get_method(name), llm)
    except Exception as exc:  # a method that cannot be built with its defaults still gets listed
        needs, error = None, f"{type(exc).__name__}: {exc}"
    return MethodInfo(str(name).strip().lower(), summary, settings, needs, error,
                      tuple(trainer.name for trainer in getattr(factory, "trainers", ())))


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except TypeError:
        return repr(value)


def parse_method_config(items: Iterable[str], *, method: str | None = None) -> dict[str, Any]:
    """``["pruner=embedding", "top_k=5"]`` -> ``{"pruner": "embedding", "top_k": 5}``: ints, floats, booleans
    (true/false/yes/no/on/off), ``none``/``null`` and JSON lists/objects are converted; anything else stays text.

    With ``method``, a setting whose declared type is text keeps the text as written (``label=2024`` stays
    ``"2024"``; ``none`` is still None where the setting may be None): the method's config decides, not the spelling.
    A key given twice is a :class:`ConfigError`.
    """
    model = config_model(METHODS.get(method)) if method is not None else None
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key or not key.isidentifier():
            raise ConfigError(f"method config {item!r} is not key=value (e.g. --method-config pruner=embedding)")
        if key in out:  # the last would silently win (issue 52: the CLI, the Python API and scripts alike)
            raise ConfigError(f"method config {key} is given twice ({key}={out[key]!r} and {item!r}); give each "
                              "setting once")
        value = _coerce(raw.strip())
        field = model.model_fields.get(key) if model is not None else None
        if field is not None and _wants_text(field.annotation) and not (value is None and _allows_none(field.annotation)):
            value = raw.strip()
        out[key] = value
    return out


def _wants_text(annotation: Any) -> bool:
    """Whether a setting's type takes text: ``str``, a Literal of strings, or a union holding one of those."""
    if annotation is str:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _wants_text(typing.get_args(annotation)[0])
    if origin is typing.Literal:
        return all(isinstance(a, str) for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return any(_wants_text(a) for a in typing.get_args(annotation))
    return False


def _allows_none(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in typing.get_args(annotation)


def _coerce(text: str) -> Any:
    lowered = text.lower()
    if lowered in ("true", "yes", "on"):
        return True
    if lowered in ("false", "no", "off"):
        return False
    if lowered in ("none", "null"):
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
        if math.isfinite(number):  # "nan" / "inf" stay text
            return number
    except ValueError:
        pass
    if text[:1] in "[{":
        try:
            return json.loads(text)
        except ValueError:
            pass
    return text
