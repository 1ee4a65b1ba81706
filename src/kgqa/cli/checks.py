"""Checks of command-line input that several commands share: each turns a user's mistake into one clear line."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from kgqa.errors import ConfigError

__all__ = ["OutputPath", "check_arguments", "check_method_config", "check_output_dir"]


class OutputPath(click.Path):
    """A ``click.Path`` (as :class:`pathlib.Path`) that refuses an empty value: ``--out ""`` would otherwise become
    ``.``, the current directory, and a run or an import would be written there."""

    def __init__(self) -> None:
        super().__init__(path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            self.fail(f"{value!r} is empty: name a directory (\".\" for the current one)", param, ctx)
        return super().convert(value, param, ctx)


def check_method_config(items: Sequence[str]) -> None:
    """Refuse a ``--method-config`` key given twice (``top_k=3 ... top_k=5``): the last would silently win."""
    seen: dict[str, str] = {}
    for item in items:
        key = item.partition("=")[0].strip()
        if not key.isidentifier():
            continue  # not key=value at all: parse_method_config says so
        if key in seen:
            raise ConfigError(f"--method-config {key} is given twice ({seen[key]!r} and {item!r}); give each setting once")
        seen[key] = item


def check_arguments(argv: Sequence[str]) -> None:
    """Refuse arguments that are not valid UTF-8 (the shell passed bytes Python could only keep as surrogates).

    Such a string cannot be sent to a KG, written to JSON or printed; failing here names the argument instead of a
    UnicodeEncodeError deep inside a backend.
    """
    for position, arg in enumerate(argv, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError as exc:
            raw = arg.encode("utf-8", "surrogateescape")
            shown = raw.decode("utf-8", "backslashreplace")
            raise ConfigError(f"argument {position} ({shown!r}) is not valid UTF-8 (byte "
                              f"0x{raw[exc.start]:02X} at character {exc.start + 1}); pass text in UTF-8") from None


def check_output_dir(path: Path, option: str = "--out") -> None:
    """An output directory that can be created or written: the error names the option, the path and what is wrong."""
    text = str(path)
    if any(ch in text for ch in "\n\r\t\x00"):
        raise ConfigError(f"{option} {text!r} contains a control character")
    try:
        if path.exists() and not path.is_dir():
            raise ConfigError(f"{option} {path} is a file, not a directory")
        ancestor = path
        while not ancestor.exists():
            if ancestor.parent == ancestor:
                break
            ancestor = ancestor.parent
    except OSError as exc:  # e.g. a name longer than the file system allows
        raise ConfigError(f"{option} {text[:120]!r} is not a usable path: {exc.strerror or exc}") from None
    if ancestor.exists() and not ancestor.is_dir():
        raise ConfigError(f"{option} {path} cannot be created: {ancestor} is a file, not a directory")
    if ancestor.exists() and not os.access(ancestor, os.W_OK | os.X_OK):
        raise ConfigError(f"{option} {path} cannot be created or written: no permission to write in {ancestor}")
