"""IO prompting: the LLM alone answers the question in one call, from its parametric knowledge (grounding ``parametric``).

This is the "IO prompting" baseline of the KGQA papers (ToG, PoG, CCoR Sec. VI-B: direct question answering without
intermediate reasoning steps). Where kgqa differs from the prompts those papers ran, and why:

* The reply is a JSON object ``{"answers": [...]}`` validated by :func:`kgqa.llm.structured.ask_json` (re-asked once
  when invalid), not free text with the answer picked out afterwards, so scoring never depends on how an answer
  string was cut out of a sentence, and a list of several answers is scored as a list.
* Two in-context examples written for kgqa (one single-answer, one multi-answer question) instead of the papers'
  longer few-shot blocks; ``few_shot=False`` uses a zero-shot prompt.
* Temperature 0 (the LLM layer's default), so runs repeat and the request cache applies.
* The KG is never touched: ``needs()`` says no KG, so neither ``kgqa eval`` nor ``kgqa ask`` opens one.

A reply that is still not valid JSON after the re-ask gives no answers (a wrong answer, not a failed question); the
trace keeps the reason. Errors of the model backend itself propagate, and the runner records the question as failed.
"""

from __future__ import annotations

from kgqa.llm.prompts import PromptBook
from kgqa.methods.llm_only import DirectAnswer, ParametricPrompting, budgeted_config, parametric_signatures
from kgqa.methods.registry import register_method


@register_method("io")
class IOPrompting(ParametricPrompting):
    """See the module docstring. Settings: ``few_shot`` (default True), ``max_answers`` (default: keep all),
    ``answer_tokens`` (default 128)."""

    name = "io"
    summary = "IO prompting: the LLM answers from its own knowledge in one call, no KG"
    signatures = parametric_signatures(PromptBook.for_package("kgqa.methods.io"), "io", DirectAnswer)
    # About 20 short names fit in 128 tokens.
    Config = budgeted_config("IOConfig", answer_tokens=128)
