"""Chain-of-thought prompting: the LLM alone reasons step by step, then answers, in one call (grounding ``parametric``).

This is the CoT baseline of the KGQA papers (Wei et al. 2022, run by ToG, PoG and CCoR, whose Sec. VI-B describes it as
prompting "with the instruction 'Let's think step by step.'"); the instruction is kept. Where kgqa differs from the
prompts those papers ran, and why:

* The reply is a JSON object ``{"reasoning": "...", "answers": [...]}`` with the reasoning first (so the model still
  reasons before it commits to answers), validated by :func:`kgqa.llm.structured.ask_json` and re-asked once when
  invalid, instead of free text whose final answer is cut out afterwards; several answers are scored as a list.
* Two in-context examples written for kgqa (a two-step question with one answer, a two-step question with several)
  instead of the papers' longer few-shot blocks; ``few_shot=False`` uses a zero-shot prompt.
* Temperature 0 (the LLM layer's default), so runs repeat and the request cache applies.
* The KG is never touched: ``needs()`` says no KG, so neither ``kgqa eval`` nor ``kgqa ask`` opens one.

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
