"""Checks of command-line input that several commands share: each turns a user's mistake into one clear line."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from kgqa.errors import ConfigError

__all__ = ["check_arguments", "check_output_dir"]


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
