"""The trainer contract: how a method declares what it trains or builds, with typed settings, reached by name.

A method that trains lists its trainers (``KGQAMethod.trainers``). A :class:`Trainer` has a ``name`` (its command:
``kgqa train NAME``; the method's main trainer is named after the method), a one-line ``summary``, typed ``Settings``
(a :class:`TrainerSettings`, as a method has a typed ``Config``) and ``train(settings, session)``. ``kgqa train`` is
made from the registry: every registered method's trainers become its subcommands, each option made from one settings
field (:func:`setting` gives the help, and where needed the flag, the metavar and the kind of path); a bound a field
declares (``ge``, ``gt``, ``le``, ``lt``) is checked before any work and refused naming the option (``--epochs must be
at least 1, got 0``). The Python API is the same object: ``kgqa.methods.train("fog", dataset=[...], kg=..., out=...)``.

A trainer writes a directory (``out``) that its method's config names (``--method-config scorer=DIR``); it never
overwrites one (:func:`new_out_dir`). Long work reports through ``session.say`` (stderr in the CLI).
"""

from __future__ import annotations

import abc
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kgqa import config as kgqa_config
from kgqa.errors import ConfigError

__all__ = ["Trainer", "TrainerSettings", "TrainingReport", "TrainingSession", "flag_of", "kg_spec", "new_out_dir",
           "setting", "validate_settings"]


class TrainerSettings(BaseModel):
    """Base of every trainer's settings: frozen, unknown keys refused; each field is one ``kgqa train`` option."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def setting(default: Any = ..., *, help: str = "", flag: str | None = None, metavar: str | None = None,
            directory: bool = False, **bounds: Any) -> Any:
    """A settings field: its ``default`` (``...``: required), the option's ``help``, and optionally its ``flag``
    (default: ``--`` + the field name with dashes; a list field is a repeatable option), ``metavar``, whether it names
    a ``directory``, and numeric ``bounds`` (``ge``, ``gt``, ``le``, ``lt``)."""
    extra = {key: value for key, value in (("flag", flag), ("metavar", metavar)) if value is not None}
    if directory:
        extra["directory"] = True
    return Field(default, description=help, json_schema_extra=extra or None, **bounds)


def flag_of(model: type[BaseModel], name: str) -> str:
    """The command-line flag of settings field ``name`` (``--reuse-scorer-phase``)."""
    extra = model.model_fields[name].json_schema_extra
    declared = extra.get("flag") if isinstance(extra, dict) else None
    return str(declared) if declared else "--" + name.replace("_", "-")


@dataclass
class TrainingSession:
    """What a training run reports through and knows of how it was started.

    ``say`` reports a line of progress; ``command`` is the command as typed (recorded in what the trainer writes);
    ``bar`` asks for progress bars (a terminal); ``given`` names the settings fields given explicitly (the rest are
    defaults), for trainers whose settings may come from an earlier run.
    """

    say: Callable[[str], None] = field(default=lambda _message: None)
    command: str = ""
    bar: bool = False
    given: frozenset[str] = frozenset()

    @classmethod
    def on_stderr(cls, label: str, *, given: frozenset[str] = frozenset()) -> TrainingSession:
        """A session reporting ``label: message`` lines on stderr, with the command line of this process."""
        def say(message: str) -> None:
            print(f"{label}: {message}", file=sys.stderr, flush=True)

        command = "kgqa " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else f"kgqa {label}"
        return cls(say=say, command=command, bar=sys.stderr.isatty(), given=given)


@dataclass(frozen=True)
class TrainingReport:
    """What a training run wrote (``out``) and the lines that tell the user about it (how to use it)."""

    out: Path
    lines: tuple[str, ...] = ()


class Trainer(abc.ABC):
    """Trains or builds what a method loads. Subclasses set ``name``, ``summary`` and ``Settings`` and implement
    :meth:`train`; :meth:`check` holds the checks across settings that must run before any work."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    Settings: ClassVar[type[TrainerSettings]] = TrainerSettings

    def check(self, settings: Any) -> None:
        """Refuse settings that cannot work together (a ConfigError naming the options), before anything is read;
        the base accepts all (the bounds of single fields are checked by their declarations)."""
        return None

    @abc.abstractmethod
    def train(self, settings: Any, session: TrainingSession) -> TrainingReport:
        """Train with ``settings`` (already validated and checked) and write ``settings.out``."""

    def run(self, values: Mapping[str, Any], session: TrainingSession | None = None) -> TrainingReport:
        """Validate ``values`` against ``Settings`` (bounds refused naming the option), check them, then train."""
        settings = validate_settings(self.Settings, values)
        self.check(settings)
        session = session or TrainingSession.on_stderr(f"train {self.name}",
                                                       given=frozenset(settings.model_fields_set))
        return self.train(settings, session)


def validate_settings(model: type[TrainerSettings], values: Mapping[str, Any]) -> Any:
    """``values`` as ``model``; the first bad value is a ConfigError naming its option and its bounds."""
    try:
        return model.model_validate(dict(values))
    except ValidationError as exc:
        error = exc.errors()[0]
        name = str(error["loc"][0]) if error.get("loc") else ""
        if error.get("type") == "extra_forbidden" or name not in model.model_fields:
            valid = ", ".join(model.model_fields)
            raise ConfigError(f"{name!r} is not a setting of this trainer; its settings: {valid}") from None
        flag = flag_of(model, name)
        bounds = _bounds_text(model, name)
        value = error.get("input")
        if bounds and isinstance(value, (int, float)) and not isinstance(value, bool):
            raise ConfigError(f"{flag} must be {bounds}, got {value!r}") from None
        raise ConfigError(f"{flag} {value!r}: {error.get('msg')}") from None


def _bounds_text(model: type[BaseModel], name: str) -> str:
    """The declared bounds of a numeric field in words: ``at least 1``, ``positive``, ``in [0, 1)``."""
    low = high = None
    low_open = high_open = False
    for item in model.model_fields[name].metadata:
        for attribute, is_low, is_open in (("ge", True, False), ("gt", True, True), ("le", False, False),
                                           ("lt", False, True)):
            bound = getattr(item, attribute, None)
            if bound is None:
                continue
            if is_low:
                low, low_open = bound, is_open
            else:
                high, high_open = bound, is_open
    if low is not None and high is not None:
        return f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    if low is not None:
        if low == 0 and low_open:
            return "positive"
        return f"above {low:g}" if low_open else f"at least {low:g}"
    if high is not None:
        return f"below {high:g}" if high_open else f"at most {high:g}"
    return ""


def new_out_dir(out: str | Path, *, flag: str = "--out") -> Path:
    """``out`` as a path, refused when it is a file or a directory holding anything (a trained model is never written
    over)."""
    path = Path(out).expanduser()
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{flag} {path}: exists and is not a directory")
    if path.is_dir() and any(path.iterdir()):
        raise ConfigError(f"{flag} {path}: the directory exists and is not empty (choose a new one)")
    return path


def kg_spec(value: str | None) -> str:
    """The KG a trainer reads: ``value`` or the configured ``kg``; neither is a ConfigError."""
    spec = value or kgqa_config.get("kg")
    if not spec:
        raise ConfigError("no KG: give --kg (an embedded directory, a SPARQL URL or demo)")
    return str(spec)
