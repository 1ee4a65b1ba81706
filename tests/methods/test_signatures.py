"""Every prompt of every registered method is declared once with its reply model (a Signature), and each renders
against that model: its placeholders are all filled, every field the reply model requires is asked for in the prompt,
and every JSON example the prompt shows of that reply validates against the model.

A prompt nobody declares, an example reply the parser would refuse, or a prompt that asks for other keys than its reply
model takes fails here, before a model ever sees it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from kgqa.llm.prompts import PROMPT_FILE, Signature
from kgqa.methods import METHODS, method_names

#: The JSON objects written out in a rendered prompt: a ``{`` that opens a line or follows a space or a colon, up to
#: its matching brace (nested braces allowed).
_OBJECT_START = re.compile(r"(?:^|[\s:])(\{)", re.M)


def _json_objects(text: str) -> list[Any]:
    """Every ``{...}`` span of ``text`` that parses as a JSON object (the examples a prompt shows)."""
    found = []
    for match in _OBJECT_START.finditer(text):
        start, depth = match.start(1), 0
        for end in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            if depth == 0:
                try:
                    value = json.loads(text[start:end + 1])
                except ValueError:
                    break
                if isinstance(value, dict):
                    found.append(value)
                break
    return found


def _method_classes() -> list[tuple[str, type]]:
    return [(name, METHODS.get(name)) for name in method_names()]


def _rendered(signature: Signature) -> str:
    messages = signature.messages(**{name: f"<{name}>" for name in signature.inputs})
    return "\n".join(m["content"] for m in messages)


SIGNATURES = [pytest.param(sig, id=f"{name}:{sig.prompt}@{sig.step}") for name, cls in _method_classes()
              for sig in getattr(cls, "signatures", ())]


def test_every_method_declares_every_prompt_of_its_prompt_file() -> None:
    checked = 0
    for name, cls in _method_classes():
        package = Path(__import__(cls.__module__, fromlist=["x"]).__file__).parent
        if not (package / PROMPT_FILE).is_file():
            continue
        declared = {(sig.book.source, sig.prompt) for sig in cls.signatures}
        books = {sig.book.source: sig.book for sig in cls.signatures}
        assert str(package / PROMPT_FILE) in books, f"{name} declares no signature over its own {PROMPT_FILE}"
        for source, book in books.items():
            missing = [p for p in book.names() if (source, p) not in declared]
            assert not missing, f"{name}: prompts of {source} no signature declares: {missing}"
        checked += 1
    assert checked >= 9  # ccor, cor, chains, io, cot, fog, tog, pog, srp, vog


@pytest.mark.parametrize("signature", SIGNATURES)
def test_each_signature_renders_and_agrees_with_its_reply_model(signature: Signature) -> None:
    model: type[BaseModel] = signature.reply
    text = _rendered(signature)
    assert all(f"<{name}>" in text for name in signature.inputs)  # every input lands in the prompt
    required = [name for name, field in model.model_fields.items() if field.is_required()]
    for name in required:
        assert f'"{name}"' in text or f"{name}:" in text, (
            f"prompt {signature.prompt!r} ({signature.step}) never asks for {name!r}, which {model.__name__} requires")
    examples = [obj for obj in _json_objects(text) if set(obj) & set(model.model_fields)]
    for example in examples:
        try:
            model.model_validate(example)
        except ValidationError as exc:
            pytest.fail(f"prompt {signature.prompt!r} ({signature.step}) shows an example {example} that "
                        f"{model.__name__} refuses: {exc.errors()[0]['msg']}")


def test_a_signature_names_a_prompt_its_book_holds() -> None:
    from kgqa.llm.prompts import PromptBook, PromptError
    from kgqa.llm.structured import Reply

    book = PromptBook.from_string('[ask]\nuser = "Q: {question}"')
    assert Signature(book, "ask", Reply, "t.ask").inputs == frozenset({"question"})
    with pytest.raises(PromptError, match="no prompt named 'nope'"):
        Signature(book, "nope", Reply, "t.ask")
