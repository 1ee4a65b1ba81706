"""Structured output: ask for JSON against a pydantic model, validate, re-ask once with the error. Never ``eval``.

Backends with a JSON mode or grammar get the schema as ``schema=`` (OpenAI ``response_format``, llama.cpp grammar); any
reply is also searched for JSON in free text (fenced blocks, the first balanced object or array), so models without a
JSON mode work too.

Every reply model derives from :class:`Reply`: unknown keys are refused and the fields that carry the decision (answers,
verdicts, choices) have no default, so a well-formed reply of another shape (``{"result": ..., "items": [1, 2]}``) fails
validation and is re-asked instead of passing as an empty answer. Free-text explanation fields (``reason``,
``reasoning``, ``message``) and fields that only one verdict uses may be left out. A reply still unreadable after the
re-ask is counted by the run's recorder (:func:`kgqa.llm.accounting.note_unreadable`): ``unreadable_replies`` in
results.jsonl and the summary.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError

from kgqa.llm.accounting import note_salvaged, note_unreadable
from kgqa.llm.base import LLMError, cut_by_budget

M = TypeVar("M", bound=BaseModel)

_FENCE_RE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_TRAILING_COMMA_RE = re.compile(r",(\s*[}\]])")
_DECODER = json.JSONDecoder()


class Reply(BaseModel):
    """Base of the reply models methods ask for: keys the model was not asked for make the reply unreadable."""

    model_config = ConfigDict(extra="forbid")


# A list item copied from the reply format rather than written: the prompts show lists as ["<answer>", ...]. Only
# a bracketed word or words (not an IRI such as <http://...>), optionally numbered after a separator ("<answer_1>",
# "<answer 2>"; a bracketed identifier such as "<Q42>" stays a name), or an ellipsis.
_PLACEHOLDER_RE = re.compile(r"\s*(?:<[A-Za-z][A-Za-z _-]*(?:[ _-]\d+)?>|\.{2,}|\u2026)\s*")


def is_placeholder(text: str) -> bool:
    """Whether ``text`` is a placeholder of the reply format ("<answer>", "...") rather than something written."""
    return _PLACEHOLDER_RE.fullmatch(text) is not None


def drop_placeholders(items: list[str]) -> list[str]:
    """``items`` without the placeholders of the reply format ("<answer>", "...") a model echoed back.

    Small models copy the format's example: at bccb7fb the 135M model's answer lists began with "<answer>" on most
    ToG, PoG and SRP questions, so strict Hits@1 scored the placeholder and the real answer behind it was lost.
    At fcfad03 VoG's answer step returned only numbered placeholders ("<answer_1>", "<answer_2>", ...) on 6 of 200
    MetaQA 2-hop dev questions; those are dropped as well.
    """
    return [item for item in items if not is_placeholder(item)]


#: The answer list of a reply model: names, best first, with echoed format placeholders dropped.
AnswerNames = Annotated[list[str], AfterValidator(drop_placeholders)]


class StructuredOutputError(LLMError):
    """The model's reply was not valid JSON for the schema, even after one re-ask."""

    def __init__(self, message: str, *, text: str = "", retries: int = 0) -> None:
        super().__init__(message, retries=retries)
        self.text = text


def _loads(candidate: str) -> Any:
    try:
        return json.loads(candidate)
    except ValueError:
        # the one repair worth making: trailing commas, which small models emit often
        return json.loads(_TRAILING_COMMA_RE.sub(r"\1", candidate))


def extract_json(text: str) -> Any:
    """The JSON value in ``text``: the whole text, else a fenced block, else the first decodable ``{...}``/``[...]``."""
    if not isinstance(text, str):
        raise StructuredOutputError(f"expected text to extract JSON from, got {type(text).__name__}")
    stripped = text.strip()
    try:
        return _loads(stripped)
    except ValueError:
        pass
    for block in _FENCE_RE.findall(text):
        try:
            return _loads(block.strip())
        except ValueError:
            continue
    for start, char in enumerate(text):
        if char not in "{[":
            continue
        try:
            value, _ = _DECODER.raw_decode(text, start)
            return value
        except ValueError:
            end = text.rfind("}" if char == "{" else "]")
            if end > start:  # allow a trailing-comma repair of the outermost span
                try:
                    return _loads(text[start:end + 1])
                except ValueError:
                    pass
    raise StructuredOutputError(f"no JSON value found in the reply: {text[:200]!r}", text=text)


def close_truncated(text: str) -> Any | None:
    """The longest prefix of the JSON value that starts in ``text`` which, with its open brackets closed, decodes: what
    a reply cut off by its token budget had completed (``{"a": ["x", "y", "z`` gives ``{"a": ["x", "y"]}``). None when
    no such prefix decodes. Used by ``ask_json(salvage=True)``, which ``ask_reply`` passes by default (a partial list
    is better than a re-ask that loops again).
    """
    start = next((i for i, c in enumerate(text) if c in "{["), None)
    if start is None:
        return None
    stack: list[str] = []
    cuts: list[tuple[int, str]] = []  # (end index, closing brackets) after each completed element
    in_string = escaped = False
    for i in range(start, len(text)):
        c = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
                cuts.append((i + 1, "".join(reversed(stack))))
            continue
        if c == '"':
            in_string = True
        elif c in "{[":
            stack.append("}" if c == "{" else "]")
        elif c in "}]":
            if not stack:
                break
            stack.pop()
            cuts.append((i + 1, "".join(reversed(stack))))
            if not stack:
                break
        elif c.isalnum() and i + 1 < len(text) and not (text[i + 1].isalnum() or text[i + 1] in ".-+"):
            cuts.append((i + 1, "".join(reversed(stack))))  # a number or literal the reply finished
    for end, closing in reversed(cuts[-200:]):
        try:
            return json.loads(text[start:end] + closing)
        except ValueError:
            continue
    return None


def _validate(schema: type[M], value: Any) -> M:
    return schema.model_validate(value)


def _attempt(schema: type[M], completion_text: str, parsed: Any | None) -> tuple[M | None, str]:
    """(model, "") on success, else (None, the error to show the model)."""
    try:
        value = parsed if parsed is not None else extract_json(completion_text)
    except StructuredOutputError as exc:
        return None, str(exc)
    try:
        return _validate(schema, value), ""
    except ValidationError as exc:
        return None, "the JSON does not match the schema: " + "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}" for err in exc.errors())


def reply_error(schema: type[BaseModel] | Mapping[str, Any], text: str, parsed: Any | None = None) -> str | None:
    """Why a reply does not validate as ``schema`` (None when it does); ``parsed`` is the backend's parsed JSON, if any.

    ``schema`` is a pydantic model class or a JSON-schema dict (checked by :func:`kgqa.llm.schema_check.schema_problem`);
    anything else checks nothing."""
    if isinstance(schema, Mapping):
        from kgqa.llm.schema_check import schema_problem

        try:
            value = parsed if parsed is not None else extract_json(text)
        except StructuredOutputError as exc:
            return str(exc)
        problem = schema_problem(schema, value)
        return f"the JSON does not match the schema: {problem}" if problem else None
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        return None
    _, error = _attempt(schema, text, parsed)
    return error or None


@functools.lru_cache(maxsize=256)
def schema_instruction(schema: type[BaseModel]) -> str:
    """The line appended to the system prompt so that models without a JSON mode know the shape expected."""
    return ("Reply with one JSON value and nothing else. It must match this JSON schema:\n"
            + json.dumps(schema.model_json_schema(), separators=(",", ":")))


def ask_json(model: Any, messages: list[dict[str, str]], schema: type[M], *, step: str, instruct: bool = True,
             salvage: bool = False, **params: Any) -> M:
    """Ask ``model`` for a reply that validates as ``schema``; re-ask once with the validation error.

    ``instruct`` appends the schema to the system message (or adds one). ``salvage``: a reply that does not decode
    and was cut off by its token budget (:func:`~kgqa.llm.base.cut_by_budget`: the backend's ``finish_reason`` is
    ``length``, or, when it gives none, the reply used the whole ``max_tokens``) is read as far as it got
    (:func:`close_truncated`), and only re-asked when that does not validate either: a small model that loops on a list
    fills any budget, and the re-ask loops the same way. A salvaged reply is counted against the question being
    answered (:func:`kgqa.llm.accounting.note_salvaged`: ``salvaged_replies`` in results.jsonl). A reply that ended
    on its own but does not decode is damaged, not unfinished: it is re-asked, never shortened.
    Raises :class:`StructuredOutputError`.
    """
    msgs = [dict(m) for m in messages]
    if instruct:
        hint = schema_instruction(schema)
        if msgs and msgs[0].get("role") == "system":
            msgs[0]["content"] = f"{msgs[0]['content']}\n\n{hint}"
        else:
            msgs.insert(0, {"role": "system", "content": hint})
    first = model.chat(msgs, schema=schema, step=step, **params)
    result, error = _attempt(schema, first.text, first.json)
    if result is not None:
        return result
    if salvage and first.json is None and isinstance(first.text, str) and cut_by_budget(first, params.get("max_tokens")):
        # only a reply its token budget cut off: one that ended on its own is damaged, not unfinished, and is re-asked
        closed = close_truncated(first.text)
        if closed is not None:
            result, _ = _attempt(schema, "", closed)
            if result is not None:
                note_salvaged(step, f"{len(first.text)} characters cut off by the token budget, read as "
                                    f"{json.dumps(closed, ensure_ascii=False)[:200]}")
                return result
    retry_msgs = [*msgs, {"role": "assistant", "content": first.text},
                  {"role": "user", "content": f"That reply was not valid: {error}\n"
                                              "Answer again with only the corrected JSON."}]
    second = model.chat(retry_msgs, schema=schema, step=step, **params)
    result, error2 = _attempt(schema, second.text, second.json)
    if result is not None:
        return result
    note_unreadable(step, error2)
    raise StructuredOutputError(
        f"{getattr(model, 'name', 'model')} gave no valid {schema.__name__} for step {step!r} after one re-ask: "
        f"{error2} (reply: {second.text[:200]!r})", text=second.text, retries=1)
