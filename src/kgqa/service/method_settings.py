"""The method settings of an ask, checked before the method sees them (``POST /v1/ask``'s ``method_config``).

* A setting that names something on disk (an *artifact setting*: a ``Path``, a field marked
  ``json_schema_extra={"artifact": True}``, or free text whose description says it is a directory, file or path, such
  as FoG's ``scorer`` and ``answer_types`` or SRP's ``references``) takes an artifact name from
  :class:`~kgqa.service.artifacts.ArtifactCatalog`, which the server turns into the directory; a path, or a name the
  catalog does not hold, is refused. The method never opens a path a client wrote.
* Any other text setting may not look like a path either (``/``, ``\\``, a leading ``~`` or ``.``), nor hold control
  characters.
* Numbers must be finite and at most :data:`MAX_SETTING_NUMBER` in size (``top_k=1e18`` is a 400, not a failed ask).

Every refusal is a :class:`~kgqa.errors.ConfigError` naming the setting (answered 400).
"""

from __future__ import annotations

import math
import os
import re
import types
import typing
from pathlib import PurePath
from typing import Any

from kgqa.errors import ConfigError
from kgqa.service.artifacts import ArtifactCatalog

#: The largest number (in absolute value) a method setting may be in a request.
MAX_SETTING_NUMBER = 1_000_000
_PATH_WORDS = re.compile(r"\b(directory|directories|folder|file|path to)\b", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _free_text(annotation: Any) -> bool:
    """Whether a setting's type takes arbitrary text (``str``, a path, or a union holding one; not a Literal)."""
    if annotation is str:
        return True
    if isinstance(annotation, type) and issubclass(annotation, (PurePath, os.PathLike)):
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _free_text(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return any(_free_text(a) for a in typing.get_args(annotation))
    return False


def _path_typed(annotation: Any) -> bool:
    if isinstance(annotation, type) and issubclass(annotation, (PurePath, os.PathLike)):
        return True
    origin = typing.get_origin(annotation)
    if origin in (typing.Annotated, typing.Union, types.UnionType):
        return any(_path_typed(a) for a in typing.get_args(annotation))
    return False


def is_artifact_setting(field: Any) -> bool:
    """Whether a method's config field names something on disk (and so takes an artifact name in a request)."""
    extra = getattr(field, "json_schema_extra", None)
    if isinstance(extra, dict) and "artifact" in extra:
        return bool(extra["artifact"])
    annotation = getattr(field, "annotation", None)
    if _path_typed(annotation):
        return True
    return _free_text(annotation) and bool(_PATH_WORDS.search(getattr(field, "description", None) or ""))


def artifact_settings(method: str) -> tuple[frozenset[str], frozenset[str] | None]:
    """The artifact settings of ``method`` and all its settings (None when it takes any); an unknown method is a
    ConfigError."""
    from kgqa.methods.registry import METHODS, config_model

    model = config_model(METHODS.get(method))
    fields = model.model_fields
    known = None if model.model_config.get("extra") == "allow" else frozenset(fields)
    return frozenset(name for name, field in fields.items() if is_artifact_setting(field)), known


def _check_value(where: str, value: Any) -> None:
    """Numbers in range, text that is no path and holds no control character, the same inside lists and objects."""
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, (int, float)):
        if not math.isfinite(value) or abs(value) > MAX_SETTING_NUMBER:
            raise ConfigError(f"method setting {where}={_shown(value)} is out of range: the service takes numbers of "
                              f"at most {MAX_SETTING_NUMBER:,} in size")
        return
    if isinstance(value, str):
        if _CONTROL.search(value):
            raise ConfigError(f"method setting {where} holds a control character")
        if "/" in value or "\\" in value or value.startswith(("~", ".")):
            raise ConfigError(f"method setting {where}={_shown(value)} looks like a path; the service takes no paths "
                              "in method settings")
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check_value(f"{where}[{i}]", item)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            _check_value(f"{where}.{key}", item)


def check_method_settings(method: str, settings: dict[str, Any] | None,
                          catalog: ArtifactCatalog) -> tuple[dict[str, Any], dict[str, str]]:
    """``settings`` with each artifact name replaced by its directory on this server, and ``{setting: name}`` of
    those; a ConfigError naming the setting when one is a path, an unknown artifact, out of range or malformed."""
    given = dict(settings or {})
    artifacts, known = artifact_settings(method)
    resolved: dict[str, Any] = {}
    names: dict[str, str] = {}
    for key, value in given.items():
        if key in artifacts and isinstance(value, str) and value.strip():
            name = value.strip()
            path = catalog.resolve(name)
            if path is None:
                if "/" in name or "\\" in name or name.startswith(("~", ".")):
                    raise ConfigError(f"method setting {key!r} takes the name of an artifact on this server "
                                      f"(GET /v1/artifacts lists them), not a path: {_shown(name)}")
                raise ConfigError(f"method setting {key!r}: no artifact named {_shown(name)} on this server "
                                  "(GET /v1/artifacts lists the names)")
            resolved[key] = str(path)
            names[key] = name
            continue
        if known is None or key in known:  # (a key the method does not take: its own error names the valid ones)
            _check_value(str(key), value)
        resolved[key] = value
    return resolved, names
