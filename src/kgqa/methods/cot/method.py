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
* The KG is never touched: ``needs_kg`` is False, so ``kgqa eval`` does not open one for this method.

The reasoning goes into the trace. A reply that is still not valid JSON after the re-ask gives no answers (a wrong
answer, not a failed question); the trace keeps the reason. Backend errors propagate to the runner.
"""

from __future__ import annotations

from kgqa.errors import ConfigError
from kgqa.llm.prompts import PromptBook
from kgqa.llm.structured import StructuredOutputError
from kgqa.methods.base import AnswerItem, Grounding, MethodContext, Prediction, Question, register_method
from kgqa.steps.generate import generate_answers

PROMPTS = PromptBook.for_package("kgqa.methods.cot")


class CoTPrompting:
    """See the module docstring. Config: ``few_shot`` (default True), ``max_answers`` (default: keep all)."""

    name = "cot"
    needs_kg = False

    def __init__(self, *, few_shot: bool = True, max_answers: int | None = None) -> None:
        if max_answers is not None and (isinstance(max_answers, bool) or not isinstance(max_answers, int)
                                        or max_answers < 1):
            raise ConfigError(f"cot: max_answers must be a positive integer, got {max_answers!r}")
        self.few_shot = bool(few_shot)
        self.max_answers = max_answers
        self.prompt = "answer" if self.few_shot else "answer_zero_shot"

    def answer(self, question: Question, ctx: MethodContext) -> Prediction:
        event = ctx.trace.add("cot.generate", prompt=self.prompt)
        try:
            answers, reasoning = generate_answers(ctx.llm, PROMPTS, self.prompt, question.text, reasoning=True,
                                                  step="cot.generate")
        except StructuredOutputError as exc:
            answers, reasoning = [], ""
            event["unreadable"] = str(exc)
        if self.max_answers is not None:
            answers = answers[:self.max_answers]
        event["reasoning"] = reasoning
        event["answers"] = answers
        return Prediction(answers=[AnswerItem(id=None, name=a) for a in answers], grounding=Grounding.PARAMETRIC,
                          trace=list(ctx.trace))


@register_method("cot")
def make_cot(*, few_shot: bool = True, max_answers: int | None = None) -> CoTPrompting:
    """Chain-of-thought prompting: one call, reasoning then answers."""
    return CoTPrompting(few_shot=few_shot, max_answers=max_answers)
