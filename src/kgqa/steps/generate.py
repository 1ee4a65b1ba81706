"""Answers from the LLM alone: the IO and CoT baselines, and the last fallback layer of KG methods."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

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
