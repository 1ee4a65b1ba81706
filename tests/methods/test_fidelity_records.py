"""Issue 50's "every method" record: each prompt shows 3-5 worked examples kept with it (the papers' few-shot prompts;
zero-shot variants show none, by definition), and each method's docstring and docs/methods.md keep a fidelity table
(mechanism | paper | kgqa | departs) whose every "departs" cell says no or yes with the reason.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from kgqa.llm.prompts import Signature
from kgqa.methods import METHODS, method_names

DOCS = Path(__file__).resolve().parents[2] / "docs" / "methods.md"
HEADER = "| mechanism | paper | kgqa | departs |"
_ROW = re.compile(r"^\|(.+)\|\s*$")


def _signatures() -> list[tuple[str, Signature]]:
    seen: set[tuple[str, str]] = set()
    out = []
    for name in method_names():
        for sig in getattr(METHODS.get(name), "signatures", ()):
            if (sig.book.source, sig.prompt) not in seen:
                seen.add((sig.book.source, sig.prompt))
                out.append((name, sig))
    return out


@pytest.mark.parametrize(("method", "signature"), [pytest.param(m, s, id=f"{m}:{s.prompt}") for m, s in _signatures()])
def test_every_prompt_shows_three_to_five_worked_examples(method: str, signature: Signature) -> None:
    count = len(signature.examples)
    if "zero_shot" in signature.prompt:
        assert count == 0, f"{method}:{signature.prompt} is zero-shot and shows {count} examples"
    else:
        assert 3 <= count <= 5, f"{method}:{signature.prompt} shows {count} worked examples, not 3-5"
        rendered = "\n".join(m["content"] for m in signature.messages(**{k: f"<{k}>" for k in signature.inputs}))
        assert rendered.count("Examples:") == 1


def _fidelity_rows(text: str, where: str) -> list[list[str]]:
    assert HEADER in text, f"{where} keeps no fidelity table ({HEADER})"
    lines = text[text.index(HEADER):].splitlines()[2:]
    rows = []
    for line in lines:
        match = _ROW.match(line.strip())
        if not match:
            break
        rows.append([cell.strip() for cell in match.group(1).split("|")])
    return rows


@pytest.mark.parametrize("method", method_names())
def test_every_method_docstring_keeps_a_fidelity_table(method: str) -> None:
    module = importlib.import_module(METHODS.get(method).__module__)
    rows = _fidelity_rows(module.__doc__ or "", f"{method}'s module docstring")
    assert len(rows) >= 3, f"{method}'s fidelity table has {len(rows)} rows"
    for row in rows:
        assert len(row) == 4, f"{method}: fidelity row {row} has not 4 cells"
        departs = row[3].lower()
        assert departs == "no" or re.match(r"yes\W+\w", departs), f"{method}: departs cell {row[3]!r} is neither no nor yes: why"


def test_docs_methods_keeps_every_method_fidelity_table_as_its_docstring_does() -> None:
    text = DOCS.read_text(encoding="utf-8")
    for method in method_names():
        heading = f"### Fidelity: {method}"
        assert heading in text, f"docs/methods.md has no '{heading}' section"
        documented = _fidelity_rows(text[text.index(heading):], f"docs/methods.md {heading}")
        module = importlib.import_module(METHODS.get(method).__module__)
        assert documented == _fidelity_rows(module.__doc__ or "", method), (
            f"docs/methods.md's fidelity table of {method} differs from its docstring's")
