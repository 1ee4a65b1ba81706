# ruff: noqa: E501 - the fidelity table below keeps one row a line (docs/methods.md copies it)
"""Chain-of-thought prompting: the LLM alone reasons step by step, then answers, in one call (grounding ``parametric``).

This is the CoT baseline of the KGQA papers (Wei et al. 2022, run by ToG, PoG and CCoR, whose Sec. VI-B describes it as
prompting "with the instruction 'Let's think step by step.'").

Fidelity (paper vs kgqa):

| mechanism | paper | kgqa | departs |
|---|---|---|---|
| knowledge | the LLM alone, no KG | same: ``needs()`` says no KG, so neither ``kgqa eval`` nor ``kgqa ask`` opens one | no |
| calls | one per question | same | no |
| instruction | "Let's think step by step." | the same words, after the question | no |
| reasoning | step-by-step reasoning before the answer | the same order: `reasoning` is the reply's first field, the answers after it | no |
| in-context examples | a few questions with worked reasoning | 4 worked examples written for kgqa (multi-hop, Freebase- and MetaQA-style), each reasoning before its answers; `few_shot=false`: the zero-shot prompt, no examples | no |
| reply | free text, the final answer cut out of it afterwards | JSON `{"reasoning": "...", "answers": [...]}` validated and re-asked once when invalid | yes: scoring never depends on how an answer was cut out of a sentence, and several answers are scored as a list |
| temperature | 0.01 in CCoR's runs | 0 | yes: runs repeat and the request cache applies |
| reply budget | not capped | `answer_tokens` (384); a reply cut off by it is read as far as it got | yes: a small model that loops fills any budget |
| grounding | parametric | parametric | no |

The reasoning goes into the trace. A reply that is still not valid JSON after the re-ask gives no answers (a wrong
answer, not a failed question); the trace keeps the reason. Backend errors propagate to the runner.
"""

from __future__ import annotations

from kgqa.llm.prompts import PromptBook
from kgqa.methods.llm_only import ParametricPrompting, ReasonedAnswer, budgeted_config, parametric_signatures
from kgqa.methods.registry import register_method


@register_method("cot")
class CoTPrompting(ParametricPrompting):
    """See the module docstring. Settings: ``few_shot`` (default True), ``max_answers`` (default: keep all),
    ``answer_tokens`` (default 384)."""

    name = "cot"
    summary = "Chain-of-thought prompting: the LLM reasons step by step, then answers, no KG"
    signatures = parametric_signatures(PromptBook.for_package("kgqa.methods.cot"), "cot", ReasonedAnswer)
    # A few sentences of reasoning, then the list of names.
    Config = budgeted_config("CoTConfig", answer_tokens=384)
