"""Checking a JSON value against a JSON-schema dict, for replies asked for with ``schema={...}`` (a dict, not a pydantic
class): the cache stores and replays such a reply only when it matches the schema it was asked with.

The keywords a reply schema uses are checked: ``type`` (one or a list; ``integer`` is a whole number, never a boolean),
``enum``, ``const``, ``properties``, ``required``, ``additionalProperties`` (false or a schema), ``items``,
``minItems``/``maxItems``, ``minLength``/``maxLength``, ``minimum``/``maximum``, ``anyOf``/``oneOf`` (at least one
matches), ``allOf`` and local ``$ref`` (``#/$defs/NAME``, ``#/definitions/NAME``), which is what pydantic writes.
Other keywords are not checked (a value is not refused for a keyword this module does not know).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["schema_problem"]

_TYPES: dict[str, Any] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
}


def schema_problem(schema: Mapping[str, Any], value: Any) -> str | None:
    """Why ``value`` does not match the JSON-schema dict ``schema`` (the first problem found, with where), or None."""
    return _check(schema, value, "(root)", schema, 0)


def _resolve(ref: str, root: Mapping[str, Any]) -> Mapping[str, Any] | None:
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for part in ref[2:].split("/"):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node if isinstance(node, Mapping) else None


def _check(schema: Any, value: Any, where: str, root: Mapping[str, Any], depth: int) -> str | None:
    if not isinstance(schema, Mapping) or depth > 64:
        return None  # true/false schemas and runaway references are not checked
    if "$ref" in schema:
        target = _resolve(str(schema["$ref"]), root)
        if target is not None:
            problem = _check(target, value, where, root, depth + 1)
            if problem:
                return problem
    problem = _check_type(schema, value, where) or _check_choices(schema, value, where, root, depth)
    if problem:
        return problem
    if isinstance(value, dict):
        return _check_object(schema, value, where, root, depth)
    if isinstance(value, list):
        return _check_array(schema, value, where, root, depth)
    return _check_scalar(schema, value, where)


def _check_type(schema: Mapping[str, Any], value: Any, where: str) -> str | None:
    wanted = schema.get("type")
    if wanted is None:
        return None
    names = [wanted] if isinstance(wanted, str) else list(wanted)
    if any(_TYPES.get(name, lambda _v: True)(value) for name in names):
        return None
    return f"{where}: expected {' or '.join(map(str, names))}, got {type(value).__name__}"


def _check_choices(schema: Mapping[str, Any], value: Any, where: str, root: Mapping[str, Any],
                   depth: int) -> str | None:
    if "enum" in schema and value not in list(schema["enum"]):
        return f"{where}: {value!r} is not one of {schema['enum']!r}"
    if "const" in schema and value != schema["const"]:
        return f"{where}: {value!r} is not {schema['const']!r}"
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if options and all(_check(option, value, where, root, depth + 1) for option in options):
            return f"{where}: matches none of the {key} options"
    for option in schema.get("allOf") or ():
        problem = _check(option, value, where, root, depth + 1)
        if problem:
            return problem
    return None


def _check_object(schema: Mapping[str, Any], value: dict, where: str, root: Mapping[str, Any],
                  depth: int) -> str | None:
    properties = schema.get("properties") or {}
    for name in schema.get("required") or ():
        if name not in value:
            return f"{where}: missing required key {name!r}"
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        inner = f"{name}" if where == "(root)" else f"{where}.{name}"
        if name in properties:
            problem = _check(properties[name], item, inner, root, depth + 1)
        elif extra is False:
            problem = f"{where}: unexpected key {name!r}"
        else:
            problem = _check(extra, item, inner, root, depth + 1)
        if problem:
            return problem
    return None


def _check_array(schema: Mapping[str, Any], value: list, where: str, root: Mapping[str, Any], depth: int) -> str | None:
    if "minItems" in schema and len(value) < int(schema["minItems"]):
        return f"{where}: {len(value)} items, fewer than {schema['minItems']}"
    if "maxItems" in schema and len(value) > int(schema["maxItems"]):
        return f"{where}: {len(value)} items, more than {schema['maxItems']}"
    items = schema.get("items")
    if isinstance(items, Mapping):
        for index, item in enumerate(value):
            problem = _check(items, item, f"{where}[{index}]", root, depth + 1)
            if problem:
                return problem
    return None


def _check_scalar(schema: Mapping[str, Any], value: Any, where: str) -> str | None:
    if isinstance(value, str):
        if "minLength" in schema and len(value) < int(schema["minLength"]):
            return f"{where}: shorter than {schema['minLength']} characters"
        if "maxLength" in schema and len(value) > int(schema["maxLength"]):
            return f"{where}: longer than {schema['maxLength']} characters"
    elif _TYPES["number"](value):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{where}: {value} is below the minimum {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{where}: {value} is above the maximum {schema['maximum']}"
    return None
