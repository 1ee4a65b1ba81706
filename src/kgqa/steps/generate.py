"""Answers from the LLM alone: the IO and CoT baselines, and the last fallback layer of KG methods."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from kgqa.errors import ConfigError
from kgqa.methods.base import AnswerItem, Grounding, MethodContext, Prediction, Question

if TYPE_CHECKING:
    from kgqa.llm.base import ChatModel
    from kgqa.llm.prompts import PromptBook


class DirectAnswer(BaseModel):
    # Models often write years and counts as JSON numbers; they are answers all the same.
    model_config = ConfigDict(coerce_numbers_to_str=True)

    answers: list[str] = Field(default_factory=list, description="answer names, best first")


class ReasonedAnswer(BaseModel):
    model_config = ConfigDict(coerce_numbers_to_str=True)

    reasoning: str = Field(default="", description="step-by-step reasoning, written before the answers")
    answers: list[str] = Field(default_factory=list, description="answer names, best first")


def generate_answers(llm: ChatModel, prompts: PromptBook, prompt: str, question: str, *, reasoning: bool, step: str,
                     **prompt_vars: str) -> tuple[list[str], str]:
    """Ask for ``{"answers": [...]}`` (with ``"reasoning"`` first when ``reasoning``); returns (answers, reasoning).

    Answers are stripped, empty ones dropped and duplicates removed in order.
    """
    from kgqa.llm.structured import ask_json

    schema = ReasonedAnswer if reasoning else DirectAnswer
    reply = ask_json(llm, prompts.messages(prompt, question=question, **prompt_vars), schema, step=step)
    seen: set[str] = set()
    answers: list[str] = []
    for raw in reply.answers:
        text = str(raw).strip()
        if text and text.casefold() not in seen:
            seen.add(text.casefold())
            answers.append(text)
    return answers, getattr(reply, "reasoning", "")


class ParametricPrompting:
    """The body of the LLM-only baselines (IO, CoT): one generation call, grounding ``parametric``, the KG untouched.

    A subclass names itself, says whether the reply carries ``reasoning`` first, and brings its prompt book (entries
    ``answer`` and ``answer_zero_shot``). Config: ``few_shot`` (default True), ``max_answers`` (default: keep all). A reply
    still invalid after the re-ask gives no answers (a wrong answer, not a failed question); the trace keeps the reason.
    """

    name: ClassVar[str]
    reasoning: ClassVar[bool]
    prompts: ClassVar[PromptBook]
    needs_kg: ClassVar[bool] = False

    def __init__(self, *, few_shot: bool = True, max_answers: int | None = None) -> None:
        if max_answers is not None and (isinstance(max_answers, bool) or not isinstance(max_answers, int)
                                        or max_answers < 1):
            raise ConfigError(f"{self.name}: max_answers must be a positive integer, got {max_answers!r}")
        self.few_shot = bool(few_shot)
        self.max_answers = max_answers
        self.prompt = "answer" if self.few_shot else "answer_zero_shot"

    def answer(self, question: Question, ctx: MethodContext) -> Prediction:
        from kgqa.llm.structured import StructuredOutputError

        step = f"{self.name}.generate"
        event = ctx.trace.add(step, prompt=self.prompt)
        try:
            answers, reasoning = generate_answers(ctx.llm, self.prompts, self.prompt, question.text,
                                                  reasoning=self.reasoning, step=step)
        except StructuredOutputError as exc:
            answers, reasoning = [], ""
            event["unreadable"] = str(exc)
        if self.max_answers is not None:
            answers = answers[:self.max_answers]
        if self.reasoning:
            event["reasoning"] = reasoning
        event["answers"] = answers
        return Prediction(answers=[AnswerItem(id=None, name=a) for a in answers], grounding=Grounding.PARAMETRIC,
                          trace=list(ctx.trace))
