"""Answers from the LLM alone: the body of the IO and CoT baselines, and the last fallback layer of KG methods.

It lives with the methods (not in ``steps/``) because it is a whole answering strategy, not a step of one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import ConfigDict, Field, StrictInt, create_model
from pydantic.fields import FieldInfo

from kgqa.core import AnswerItem, Grounding, MethodContext, Prediction, Question
from kgqa.llm.structured import AnswerNames, Reply
from kgqa.methods.base import Explanation, KGQAMethod, MethodConfig, MethodDetails, Needs

if TYPE_CHECKING:
    from kgqa.llm.base import ChatModel
    from kgqa.llm.oracle import OracleAsk
    from kgqa.llm.prompts import PromptBook, Signature


class DirectAnswer(Reply):
    # Models often write years and counts as JSON numbers; they are answers all the same.
    model_config = ConfigDict(coerce_numbers_to_str=True)

    answers: AnswerNames = Field(description="answer names, best first")


class ReasonedAnswer(Reply):
    model_config = ConfigDict(coerce_numbers_to_str=True)

    reasoning: str = Field(default="", description="step-by-step reasoning, written before the answers")
    answers: AnswerNames = Field(description="answer names, best first")


class Sufficiency(Reply):
    """Whether the triples gathered so far suffice, the answers they give, and why: the reasoning reply of ToG and PoG."""

    model_config = ConfigDict(coerce_numbers_to_str=True)

    sufficient: bool
    answers: AnswerNames = Field(description="answer names, best first (empty when not sufficient)")
    reason: str = ""


def _named(ask: OracleAsk, text: str) -> list[str]:
    """The names an answer step gives: the gold answers ``text`` shows, or, on a wrong decision, other nodes of the
    gold walks it shows (a plausible mistake: an intermediate entity)."""
    return ask.choose(ask.path_in(text), ask.answers_in(text))


def answer_from_evidence(ask: OracleAsk) -> dict[str, Any]:
    """The oracle rule of an answer step: the gold answers the prompt's evidence shows (every input but the question),
    none when it shows none (the LLM alone has no evidence at all: a perfect reasoner without it names nothing)."""
    evidence = ask.text()
    answers = _named(ask, evidence)
    reasoning = (f"The evidence shows {'; '.join(answers)}." if answers else
                 "The evidence shown does not hold the answer.")
    return {"reasoning": reasoning, "answers": answers} if ask.signature.reply is ReasonedAnswer else {"answers": answers}


def judge_sufficiency(ask: OracleAsk) -> dict[str, Any]:
    """The oracle rule of a sufficiency verdict: sufficient exactly when the triples (and memory) shown hold a gold
    answer, with those answers."""
    evidence = ask.text()
    answers = _named(ask, evidence)
    sufficient = ask.judge(bool(ask.answers_in(evidence)))
    return {"sufficient": sufficient, "answers": answers if sufficient else [],
            "reason": "a gold answer is in the triples" if sufficient else "no triple shown answers the question"}


def generate_answers(llm: ChatModel, signature: Signature, question: str, *, max_tokens: int | None = None,
                     **inputs: str) -> tuple[list[str], str]:
    """Ask ``signature`` (its reply :class:`DirectAnswer`, or :class:`ReasonedAnswer` with the reasoning first) for
    ``{"answers": [...]}``; returns (answers, reasoning).

    Answers are stripped, empty ones dropped and duplicates removed in order. ``max_tokens`` caps the reply (None: the
    model's default). A reply cut off by that cap is read as far as it got (``salvage``) before the one re-ask: a small
    model that loops on a list of names fills any budget, and at temperature 0 its re-ask loops the same way (IO with
    the 135M model spent 2 x 512 tokens, 33 s, on such questions).
    """
    from kgqa.llm.structured import ask_json

    params = {} if max_tokens is None else {"max_tokens": max_tokens}
    values = {"question": question, **inputs}
    with signature.asking(values):
        reply = ask_json(llm, signature.messages(**values), signature.reply, step=signature.step, salvage=True,
                         **params)
    seen: set[str] = set()
    answers: list[str] = []
    for raw in reply.answers:
        text = str(raw).strip()
        if text and text.casefold() not in seen:
            seen.add(text.casefold())
            answers.append(text)
    return answers, getattr(reply, "reasoning", "")


def answer_alone(question: Question, ctx: MethodContext, signature: Signature, *, cause: str,
                 max_tokens: int | None = None, max_answers: int | None = None) -> Prediction:
    """The fallback of the KG methods (ToG, PoG, SRP, VoG): the LLM answers alone with its reasoning first
    (``signature``: the method's direct-generation prompt, replying :class:`ReasonedAnswer`), grounding
    ``parametric``; the trace says why (``fallback`` event with ``cause``). An unreadable reply gives no answers."""
    from kgqa.llm.structured import StructuredOutputError

    try:
        answers, reasoning = generate_answers(ctx.llm, signature, question.text, max_tokens=max_tokens)
    except StructuredOutputError as exc:
        answers, reasoning = [], f"unreadable reply: {exc}"
    ctx.trace.add("fallback", stage="direct_generation", cause=cause, reasoning=reasoning)
    kept = answers if max_answers is None else answers[:max_answers]
    return Prediction(answers=[AnswerItem(id=None, name=a) for a in kept], grounding=Grounding.PARAMETRIC)


class ParametricDetails(MethodDetails):
    """The one generation: the model's reasoning (CoT) or why its reply could not be read."""

    reasoning: str | None = None
    unreadable: str | None = None


class ParametricConfig(MethodConfig):
    few_shot: bool = Field(default=True, description="the worked examples of the prompt (False: zero-shot prompt)")
    max_answers: Annotated[StrictInt, Field(ge=1)] | None = Field(default=None,
                                                                  description="keep only the best N answers")
    answer_tokens: Annotated[StrictInt, Field(ge=16)] | None = Field(
        default=None, description="reply budget of the answer (None: the backend's default, 512)")


def parametric_signatures(book: PromptBook, method: str, reply: type[DirectAnswer | ReasonedAnswer]
                          ) -> tuple[Signature, Signature]:
    """An LLM-only baseline's two signatures: its few-shot ``answer`` and its ``answer_zero_shot`` prompt, both
    replying ``reply`` and accounted under ``<method>.generate``."""
    from kgqa.llm.prompts import Signature

    return (Signature(book, "answer", reply, f"{method}.generate", answer_from_evidence),
            Signature(book, "answer_zero_shot", reply, f"{method}.generate", answer_from_evidence))


def budgeted_config(name: str, answer_tokens: int) -> type[ParametricConfig]:
    """``ParametricConfig`` whose ``answer_tokens`` defaults to ``answer_tokens``: each baseline budgets its reply, so a
    small model that loops on a list is stopped early instead of filling the backend's 512 tokens."""
    base = ParametricConfig.model_fields["answer_tokens"]  # the same type, bounds and description; another default
    return create_model(name, __base__=ParametricConfig,
                        answer_tokens=(base.annotation, FieldInfo.merge_field_infos(base, default=answer_tokens)))


class ParametricPrompting(KGQAMethod):
    """The body of the LLM-only baselines (IO, CoT): one generation call, grounding ``parametric``, the KG untouched.

    A subclass names itself and declares its two signatures (:func:`parametric_signatures`: the prompts ``answer``
    and ``answer_zero_shot`` of its book, replying :class:`DirectAnswer`, or :class:`ReasonedAnswer` with the reasoning
    first). A reply still invalid after the re-ask gives no answers (a wrong answer, not a failed question); the trace
    keeps the reason.
    """

    Config = ParametricConfig
    Details = ParametricDetails
    needs_kg: ClassVar[bool] = False  # older spelling of needs().kg, kept for callers that read it

    @property
    def signature(self) -> Signature:
        """The few-shot prompt, or the zero-shot one with ``few_shot=False``."""
        few_shot, zero_shot = self.signatures
        return few_shot if self.config.few_shot else zero_shot

    @property
    def reasoning(self) -> bool:
        return self.signature.reply is ReasonedAnswer

    def needs(self, llm: str | None = None) -> Needs:
        return Needs(kg=False, llm=True)

    def answer(self, question: Question, ctx: MethodContext) -> Prediction:
        from kgqa.llm.structured import StructuredOutputError

        event = ctx.trace.add(self.signature.step, prompt=self.signature.prompt)
        details = ctx.details = ParametricDetails()
        try:
            answers, reasoning = generate_answers(ctx.llm, self.signature, question.text,
                                                  max_tokens=self.config.answer_tokens)
        except StructuredOutputError as exc:
            answers, reasoning = [], ""
            event["unreadable"] = details.unreadable = str(exc)
        if self.config.max_answers is not None:
            answers = answers[:self.config.max_answers]
        if self.reasoning:
            event["reasoning"] = details.reasoning = reasoning
        event["answers"] = answers
        return Prediction(answers=[AnswerItem(id=None, name=a) for a in answers], grounding=Grounding.PARAMETRIC)

    def explain(self, prediction: Prediction) -> Explanation:
        details: ParametricDetails = self.details_of(prediction)
        fields: dict[str, Any] = {"reasoning": details.reasoning} if self.reasoning else {}
        lines = [f"reasoning: {details.reasoning}"] if self.reasoning and details.reasoning else []
        if details.unreadable:
            lines.append(f"unreadable reply: {details.unreadable}")
        return Explanation(fields=fields, lines=lines)
