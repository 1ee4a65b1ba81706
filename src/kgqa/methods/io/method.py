# ruff: noqa: E501 - the fidelity table below keeps one row a line (docs/methods.md copies it)
"""IO prompting: the LLM alone answers the question in one call, from its parametric knowledge (grounding ``parametric``).

This is the "IO prompting" baseline of the KGQA papers (ToG, PoG, CCoR Sec. VI-B: direct question answering without
intermediate reasoning steps).

Fidelity (paper vs kgqa):

| mechanism | paper | kgqa | departs |
|---|---|---|---|
| knowledge | the LLM alone, no KG | same: ``needs()`` says no KG, so neither ``kgqa eval`` nor ``kgqa ask`` opens one | no |
| calls | one per question | same | no |
| reasoning | none: the answer directly | same | no |
| in-context examples | a few question-answer pairs | 4 worked examples written for kgqa (Freebase- and MetaQA-style questions, one and several answers); `few_shot=false`: the zero-shot prompt, no examples | no |
| reply | free text, the answer cut out of it afterwards | JSON `{"answers": [...]}` validated and re-asked once when invalid | yes: scoring never depends on how an answer was cut out of a sentence, and several answers are scored as a list |
| temperature | 0.01 in CCoR's runs | 0 | yes: runs repeat and the request cache applies |
| reply budget | not capped | `answer_tokens` (128); a reply cut off by it is read as far as it got | yes: a small model that loops on a list fills any budget |
| grounding | parametric | parametric | no |

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
