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

from kgqa.errors import ConfigError
from kgqa.llm.prompts import PromptBook
from kgqa.llm.structured import StructuredOutputError
from kgqa.methods.base import AnswerItem, Grounding, MethodContext, Prediction, Question, register_method
from kgqa.steps.generate import generate_answers

PROMPTS = PromptBook.for_package("kgqa.methods.io")


class IOPrompting:
    """See the module docstring. Config: ``few_shot`` (default True), ``max_answers`` (default: keep all)."""

    name = "io"
    needs_kg = False

    def __init__(self, *, few_shot: bool = True, max_answers: int | None = None) -> None:
        if max_answers is not None and (isinstance(max_answers, bool) or not isinstance(max_answers, int)
                                        or max_answers < 1):
            raise ConfigError(f"io: max_answers must be a positive integer, got {max_answers!r}")
        self.few_shot = bool(few_shot)
        self.max_answers = max_answers
        self.prompt = "answer" if self.few_shot else "answer_zero_shot"

    def answer(self, question: Question, ctx: MethodContext) -> Prediction:
        event = ctx.trace.add("io.generate", prompt=self.prompt)
        try:
            answers, _ = generate_answers(ctx.llm, PROMPTS, self.prompt, question.text, reasoning=False,
                                          step="io.generate")
        except StructuredOutputError as exc:
            answers = []
            event["unreadable"] = str(exc)
        if self.max_answers is not None:
            answers = answers[:self.max_answers]
        event["answers"] = answers
        return Prediction(answers=[AnswerItem(id=None, name=a) for a in answers], grounding=Grounding.PARAMETRIC,
                          trace=list(ctx.trace))


@register_method("io")
def make_io(*, few_shot: bool = True, max_answers: int | None = None) -> IOPrompting:
    """IO prompting: one call, answers only."""
    return IOPrompting(few_shot=few_shot, max_answers=max_answers)
