"""Prompt files and the one renderer every method uses.

A method keeps its prompts in ``prompts.toml`` beside its ``__init__.py``::

    [prune]
    system = "You rank knowledge-graph relations."
    user = "Question: {question}\\nRelations:\\n{relations}"

Fields are ``{name}`` placeholders only (``{{`` and ``}}`` are literal braces). Anything else inside braces, such as
attribute access, indexing or format specs, is rejected when the file is loaded, so templates cannot run code.

Worked examples are kept with their prompt as a list of plain texts (not templates: braces in them are literal, which
suits JSON replies)::

    examples = [
        'Question: Who directed Heat?\nRelations: 1. film.film.directed_by\n{"relations": ["..."]}',
    ]

They are rendered after the system text (after the user text when a prompt has no system part) under one
``Examples:`` heading, separated by blank lines, so every method shows its examples the same way and a test can count
them (the papers use 3-5 per prompt).

Each prompt a method asks is declared once as a :class:`Signature` (as DSPy's): the prompt, the reply model its answer
must validate against and the step its calls are accounted under, so a prompt and its reply model are paired in one
place (and a test renders every method's signatures against their reply models).
"""

from __future__ import annotations

import importlib.util
import re
import tomllib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from kgqa.errors import ConfigError, KGQAError

PROMPT_FILE = "prompts.toml"
ROLE_KEYS = ("system", "user")
EXAMPLES_KEY = "examples"
_TOKEN_RE = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class PromptError(KGQAError):
    """A prompt file or a rendering request is wrong (bad placeholder, missing variable, unknown prompt)."""


@dataclass(frozen=True)
class _Piece:
    literal: str | None = None
    field: str | None = None


def _compile(template: str, where: str) -> tuple[tuple[_Piece, ...], frozenset[str]]:
    pieces: list[_Piece] = []
    fields: set[str] = set()
    pos = 0
    for match in _TOKEN_RE.finditer(template):
        if match.start() > pos:
            pieces.append(_Piece(literal=template[pos:match.start()]))
        token = match.group(0)
        if token in ("{{", "}}"):
            pieces.append(_Piece(literal=token[0]))
        elif token in ("{", "}"):
            raise PromptError(f"{where}: unbalanced {token!r} at offset {match.start()} (write {token * 2} for a "
                              "literal brace)")
        else:
            name = match.group(1).strip()
            if not _NAME_RE.match(name):
                raise PromptError(f"{where}: placeholder {token!r} is not a plain name; only {{name}} fields are "
                                  "allowed (no attributes, indexes, conversions or format specs)")
            pieces.append(_Piece(field=name))
            fields.add(name)
        pos = match.end()
    if pos < len(template):
        pieces.append(_Piece(literal=template[pos:]))
    return tuple(pieces), frozenset(fields)


@dataclass(frozen=True)
class PromptTemplate:
    """One named prompt: compiled system and user templates."""

    name: str
    parts: Mapping[str, tuple[tuple[_Piece, ...], frozenset[str]]]
    source: str
    #: worked examples, plain text, rendered after the system part (see the module docstring)
    examples: tuple[str, ...] = ()

    @property
    def fields(self) -> frozenset[str]:
        out: set[str] = set()
        for _, names in self.parts.values():
            out |= names
        return frozenset(out)

    def render(self, variables: Mapping[str, Any]) -> list[dict[str, str]]:
        missing = sorted(self.fields - set(variables))
        if missing:
            raise PromptError(f"prompt {self.name!r} ({self.source}) needs {missing}; given {sorted(variables)}")
        messages = []
        for role in ROLE_KEYS:
            if role in self.parts:
                pieces, _ = self.parts[role]
                text = "".join(p.literal if p.literal is not None else str(variables[p.field])  # type: ignore[index]
                               for p in pieces)
                messages.append({"role": role, "content": text})
        if self.examples:
            shown = "Examples:\n\n" + "\n\n".join(example.strip() for example in self.examples)
            messages[0]["content"] = messages[0]["content"].rstrip() + "\n\n" + shown
        return messages


class PromptBook:
    """All prompts of one file. ``book.messages(name, **vars)`` renders chat messages."""

    def __init__(self, data: Mapping[str, Any], *, source: str = "<string>") -> None:
        self.source = source
        self._templates: dict[str, PromptTemplate] = {}
        for name, section in data.items():
            where = f"{source} [{name}]"
            if not isinstance(section, Mapping):
                raise PromptError(f"{where}: a prompt must be a table with 'system' and/or 'user' strings")
            unknown = set(section) - set(ROLE_KEYS) - {EXAMPLES_KEY}
            if unknown:
                raise PromptError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: {[*ROLE_KEYS, EXAMPLES_KEY]}")
            if "user" not in section:
                raise PromptError(f"{where}: a prompt needs a 'user' template")
            parts = {}
            for role in ROLE_KEYS:
                if role in section:
                    if not isinstance(section[role], str):
                        raise PromptError(f"{where}: '{role}' must be a string")
                    parts[role] = _compile(section[role], f"{where}.{role}")
            examples = section.get(EXAMPLES_KEY, [])
            if not isinstance(examples, list) or not all(isinstance(e, str) and e.strip() for e in examples):
                raise PromptError(f"{where}: '{EXAMPLES_KEY}' must be a list of non-empty strings")
            self._templates[name] = PromptTemplate(name, parts, source, tuple(examples))

    @classmethod
    def from_file(cls, path: str | Path) -> PromptBook:
        file = Path(path)
        if not file.is_file():
            raise PromptError(f"prompt file {file} does not exist")
        try:
            data = tomllib.loads(file.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise PromptError(f"prompt file {file} is not valid TOML: {exc}") from None
        return cls(data, source=str(file))

    @classmethod
    def from_string(cls, text: str, *, source: str = "<string>") -> PromptBook:
        try:
            return cls(tomllib.loads(text), source=source)
        except tomllib.TOMLDecodeError as exc:
            raise PromptError(f"prompts from {source} are not valid TOML: {exc}") from None

    @classmethod
    def for_package(cls, package: str) -> PromptBook:
        """The ``prompts.toml`` beside ``package``'s ``__init__.py``."""
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            raise ConfigError(f"cannot find the package {package!r} to load its {PROMPT_FILE}")
        return cls.from_file(Path(next(iter(spec.submodule_search_locations))) / PROMPT_FILE)

    def names(self) -> list[str]:
        return sorted(self._templates)

    def template(self, name: str) -> PromptTemplate:
        try:
            return self._templates[name]
        except KeyError:
            raise PromptError(f"no prompt named {name!r} in {self.source}; available: {self.names()}") from None

    def fields(self, name: str) -> frozenset[str]:
        return self.template(name).fields

    def examples(self, name: str) -> tuple[str, ...]:
        """The worked examples kept with prompt ``name``."""
        return self.template(name).examples

    def messages(self, name: str, /, **variables: Any) -> list[dict[str, str]]:
        """Render prompt ``name`` with ``variables`` into chat messages (system first when present)."""
        return self.template(name).render(variables)

    def __contains__(self, name: object) -> bool:
        return name in self._templates


#: An oracle rule: the reply a perfect reasoner gives to one ask (see :mod:`kgqa.llm.oracle`), as the reply model's
#: JSON data. It reads the ask (the signature, the inputs the prompt was filled with, the question's gold reasoning).
OracleRule = Callable[[Any], Mapping[str, Any]]


@dataclass(frozen=True)
class Signature:
    """One LLM step of a method, declared once: the prompt it renders (``prompt`` in ``book``), the reply model its
    answer must validate against (``reply``), the step its calls are accounted and traced under (``step``, such as
    ``"fog.decompose"``) and its oracle rule (``oracle``: what the oracle reasoner replies, from the prompt's inputs and
    the question's gold; :mod:`kgqa.llm.oracle`). Its inputs are the prompt's placeholders.
    ``kgqa.steps.reply.ask_reply(llm, signature, **inputs)`` asks it; a prompt the book does not hold is an error when
    the signature is declared."""

    book: PromptBook
    prompt: str
    reply: type[BaseModel]
    step: str
    oracle: OracleRule | None = None

    def __post_init__(self) -> None:
        self.book.template(self.prompt)  # an unknown prompt fails when the method's module is imported

    @property
    def inputs(self) -> frozenset[str]:
        """The names the prompt is filled with."""
        return self.book.fields(self.prompt)

    @property
    def examples(self) -> tuple[str, ...]:
        """The worked examples the prompt shows."""
        return self.book.examples(self.prompt)

    def messages(self, /, **inputs: Any) -> list[dict[str, str]]:
        """The rendered chat messages (a missing input is a :class:`PromptError`; inputs the prompt does not use are
        left out, so a shared step may offer more than one method's wording needs)."""
        return self.book.messages(self.prompt, **inputs)

    def labelled(self, step: str) -> Signature:
        """The same prompt, reply model and oracle rule accounted under another step (one prompt asked at two places)."""
        return Signature(self.book, self.prompt, self.reply, step, self.oracle)

    @contextmanager
    def asking(self, inputs: Mapping[str, Any]) -> Iterator[None]:
        """While this signature is asked with ``inputs`` (:data:`ASKING`: what a model that reads more than the
        messages, the oracle reasoner, answers from)."""
        token = ASKING.set((self, dict(inputs)))
        try:
            yield
        finally:
            ASKING.reset(token)


#: The signature being asked in this context and the inputs its prompt was filled with (None outside an ask).
ASKING: ContextVar[tuple[Signature, dict[str, Any]] | None] = ContextVar("kgqa_asking", default=None)
