"""IO prompting: the LLM alone answers the question in one call, from its parametric knowledge (grounding ``parametric``).

This is the "IO prompting" baseline of the KGQA papers (ToG, PoG, CCoR Sec. VI-B: direct question answering without
intermediate reasoning steps). Where kgqa differs from the prompts those papers ran, and why:

* The reply is a JSON object ``{"answers": [...]}`` validated by :func:`kgqa.llm.structured.ask_json` (re-asked once
  when invalid), not free text with the answer picked out afterwards, so scoring never depends on how an answer
  string was cut out of a sentence, and a list of several answers is scored as a list.
* Two in-context examples written for kgqa (one single-answer, one multi-answer question) instead of the papers'
  longer few-shot blocks; ``few_shot=False`` uses a zero-shot prompt.
* Temperature 0 (the LLM layer's default), so runs repeat and the request cache applies.
* The KG is never touched: ``needs_kg`` is False, so ``kgqa eval`` does not open one for this method.

A reply that is still not valid JSON after the re-ask gives no answers (a wrong answer, not a failed question); the
trace keeps the reason. Errors of the model backend itself propagate, and the runner records the question as failed.
"""

from __future__ import annotations

from kgqa.llm.prompts import PromptBook
from kgqa.methods.base import register_method
from kgqa.steps.generate import ParametricPrompting


class IOPrompting(ParametricPrompting):
    """See the module docstring. Config: ``few_shot`` (default True), ``max_answers`` (default: keep all)."""

    name = "io"
    reasoning = False
    prompts = PromptBook.for_package("kgqa.methods.io")


@register_method("io")
def make_io(*, few_shot: bool = True, max_answers: int | None = None) -> IOPrompting:
    """IO prompting: one call, answers only."""
    return IOPrompting(few_shot=few_shot, max_answers=max_answers)
