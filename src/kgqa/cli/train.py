"""``kgqa train``: one subcommand per trainer a registered method declares (``kgqa train fog``, ``kgqa train srp``, ...),
each option made from one field of the trainer's settings (:mod:`kgqa.methods.trainer`)."""

from __future__ import annotations

import inspect
import types
import typing
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from kgqa.errors import ConfigError


class TrainerGroup(click.Group):
    """The ``train`` group: its commands are the method registry's trainers, made when asked for (so ``kgqa --help``
    imports no method)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        from kgqa.methods import trainers

        return list(trainers())

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        from kgqa.methods import trainers

        found = trainers().get(cmd_name)
        return None if found is None else trainer_command(*found)

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_help_text(ctx, formatter)
        from kgqa.methods import trainers

        methods = sorted({method for method, _ in trainers().values()})
        with formatter.indentation():
            formatter.write_paragraph()
            formatter.write_text(f"Trainable methods: {', '.join(methods) or '(none)'}.")


@click.group("train", cls=TrainerGroup)
def train_group() -> None:
    """Train or build what a method loads (a trained scorer, a reference base): `kgqa train NAME --help`."""


def trainer_command(method: str, trainer: type[Any]) -> click.Command:
    """The click command of a trainer: an option per settings field, the trainer's docstring as help."""
    settings = trainer.Settings

    def callback(**values: Any) -> None:
        from kgqa.methods.trainer import TrainingSession

        ctx = click.get_current_context()
        given = {name: _settings_value(value) for name, value in values.items()
                 if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE}
        session = TrainingSession.on_stderr(f"train {trainer.name}", given=frozenset(given))
        report = trainer().run(given, session)
        for line in report.lines:
            click.echo(line)

    summary = trainer.summary or (trainer.__doc__ or "").strip().splitlines()[0]
    return click.Command(trainer.name, callback=callback, params=[_option(settings, name) for name in settings.model_fields],
                         help=f"{inspect.cleandoc(trainer.__doc__ or summary)}\n\n(method: {method})",
                         short_help=f"[{method}] {summary}")


def _settings_value(value: Any) -> Any:
    """A click value as the settings take it: a repeated option's tuple as a list."""
    return list(value) if isinstance(value, tuple) else value


def _option(model: Any, name: str) -> click.Option:
    """The option of one settings field: its flag, type (a Literal is a choice, bool a --x/--no-x pair, a list a
    repeatable option, a directory a click.Path), default and help."""
    from kgqa.methods.trainer import flag_of

    info = model.model_fields[name]
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    flag = flag_of(model, name)
    required = info.is_required()
    default = None if required else info.get_default(call_default_factory=True)
    annotation = _without_none(info.annotation)
    kwargs: dict[str, Any] = {"help": info.description or "", "metavar": extra.get("metavar"),
                              "required": required and typing.get_origin(annotation) is not list}
    if annotation is bool:
        return click.Option([f"{flag}/--no-{flag[2:]}", name], default=default, show_default=True, help=kwargs["help"])
    if typing.get_origin(annotation) is list:
        inner = typing.get_args(annotation)[0]
        return click.Option([flag, name], multiple=True, type=_click_type(inner, extra), required=required,
                            metavar=kwargs["metavar"], help=kwargs["help"])
    return click.Option([flag, name], type=_click_type(annotation, extra), default=default,
                        show_default=default is not None, **kwargs)


def _without_none(annotation: Any) -> Any:
    """``X | None`` -> ``X``."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _click_type(annotation: Any, extra: dict[str, Any]) -> Any:
    if typing.get_origin(annotation) is typing.Literal:
        return click.Choice([str(a) for a in typing.get_args(annotation)])
    if annotation is Path:
        return click.Path(file_okay=not extra.get("directory"), path_type=Path)
    if annotation in (int, float, str):
        return annotation
    raise ConfigError(f"a trainer setting of type {annotation!r} has no command-line form")
