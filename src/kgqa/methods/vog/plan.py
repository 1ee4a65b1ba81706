"""VoG's plan and its replies: the steps a plan holds (Thought / Action / Predicted observation), the verifier's verdict,
the signatures of every VoG prompt and the oracle's rule for each.

A plan is ``{"steps": [{"thought", "action", "predicted"}, ...]}``; an action is ``Search[what to look up]`` or, last,
``Finish[answer; another answer]``. A revision replies with a plan of the same form that starts at the step that
disagreed (that step restated as the graph showed it, then the steps still needed); the answer of a plan is what its
Finish step names (:func:`finish_answers`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from kgqa.llm.prompts import PromptBook, Signature
from kgqa.llm.structured import Reply, is_placeholder
from kgqa.methods.llm_only import ReasonedAnswer, answer_from_evidence
from kgqa.steps.answers import FilterChoice, keep_gold_candidates
from kgqa.steps.pruning import RelationChoice, choose_gold_relations

if TYPE_CHECKING:
    from kgqa.llm.oracle import OracleAsk

PROMPTS = PromptBook.for_package("kgqa.methods.vog")
_ACTION_RE = re.compile(r"^\s*(Search|Finish)\s*\[(.*)\]\s*$", re.S | re.I)
_OPEN_ACTION_RE = re.compile(r"^\s*(Search|Finish)\s*\[[^\]]*$", re.S | re.I)
#: How a Finish step separates several answers (the prompts ask for "; ").
_ANSWER_SEPARATORS = re.compile(r"\s*(?:;|\|)\s*")
#: Characters of a thought, a predicted observation or a verdict's reasoning (about 40 tokens: two or three triples).
THOUGHT_CHARS = 160
#: Characters of an action (Finish[...] may name several answers).
ACTION_CHARS = 120
#: Steps of a plan: the authors' planning prompt asks for no more than 10.
MAX_PLAN_STEPS = 10


def _bounded(limit: int, description: str) -> Any:
    """A required text field of at most ``limit`` characters: the bound is in the JSON schema, so a grammar-constrained
    local model closes the field there instead of rambling to the reply budget, and a longer reply is cut to it."""
    return Field(description=description, json_schema_extra={"maxLength": limit})


def _cut(value: Any, limit: int) -> Any:
    return value[:limit] if isinstance(value, str) else value


class PlanStep(Reply):
    # Every field is required, so a grammar-constrained model writes them in the paper's order (thought, action,
    # observation): llama.cpp's grammar puts required fields first and may skip optional ones.
    thought: str = _bounded(THOUGHT_CHARS, "why this step")
    action: str = _bounded(ACTION_CHARS, "Search[what to look up] or Finish[the answer]")
    predicted: str = _bounded(THOUGHT_CHARS, "what the KG should show for this step")

    @field_validator("action", mode="before")
    @classmethod
    def _action(cls, value: Any) -> Any:
        text = _cut(str(value).strip(), ACTION_CHARS)
        if _OPEN_ACTION_RE.match(text) and not _ACTION_RE.match(text):
            text += "]"  # "Finish[..." cut off before its bracket is still a Finish
        return text if _ACTION_RE.match(text) else f"Search[{text}]"

    @field_validator("thought", "predicted", mode="before")
    @classmethod
    def _no_placeholder(cls, value: Any) -> Any:
        return "" if value is None or is_placeholder(str(value)) else _cut(value, THOUGHT_CHARS)

    @property
    def kind(self) -> str:
        found = _ACTION_RE.match(self.action)
        return found.group(1).lower() if found else "search"

    @property
    def target(self) -> str:
        """What the action names; "" when it is an echoed format placeholder ("Search[...]")."""
        found = _ACTION_RE.match(self.action)
        text = found.group(2).strip() if found else self.action
        return "" if is_placeholder(text) else text

    @property
    def empty(self) -> bool:
        """Nothing but the reply format echoed back: no target, no thought, no prediction."""
        return not (self.target or self.thought.strip() or self.predicted.strip())

    def render(self) -> str:
        return f"Thought: {self.thought}\nAction: {self.action}\nPredicted observation: {self.predicted}"


class Plan(Reply):
    steps: list[PlanStep] = Field(json_schema_extra={"maxItems": MAX_PLAN_STEPS})

    @field_validator("steps", mode="before")
    @classmethod
    def _whole_steps(cls, steps: Any) -> Any:
        # A reply cut off by its budget ends in a step cut short ({"thought": "Answer.", "): the steps before it are
        # the plan, the one without an action is no step. The schema asks for all three fields; a step that has its
        # action reads with a missing thought or prediction as empty.
        if not isinstance(steps, list):
            return steps
        return [{"thought": "", "predicted": "", **s} if isinstance(s, dict) else s
                for s in steps if not (isinstance(s, dict) and "action" not in s)]

    @field_validator("steps")
    @classmethod
    def _drop_empty(cls, steps: list[PlanStep]) -> list[PlanStep]:
        # The 135M model's plans were mostly "Search[...]" / "Finish[...]" copied from the format (e2 dev at 5a6d306:
        # 13 such steps on one question, each retrieved, verified and revised 4 times, 60 calls for nothing).
        return [step for step in steps if not step.empty][:MAX_PLAN_STEPS]


class Verification(Reply):
    """The verifier's verdict on one step, its reasoning first (as the paper's verifier analyses, then decides)."""

    reasoning: str = _bounded(THOUGHT_CHARS, "what the graph shows against the prediction, before the verdict")
    revise: bool
    revised_observation: str = Field(default="", json_schema_extra={"maxLength": THOUGHT_CHARS})

    @field_validator("reasoning", "revised_observation", mode="before")
    @classmethod
    def _short(cls, value: Any) -> Any:
        return _cut(value, THOUGHT_CHARS)


def finish_answers(plan: list[PlanStep]) -> list[str]:
    """The answers a plan ends with: what its first Finish step names, split at ";" (none: no Finish, or one that names
    nothing or only the format's placeholder)."""
    finish = next((s for s in plan if s.kind == "finish"), None)
    if finish is None or not finish.target:
        return []
    names = [part.strip().strip("\"'") for part in _ANSWER_SEPARATORS.split(finish.target)]
    return list(dict.fromkeys(n for n in names if n and not is_placeholder(n)))


def candidate_answers(plan: list[PlanStep]) -> list[str]:
    """The answer a candidate plan predicts, for the consistency of the candidates: its Finish answers, else the last
    step's predicted observation."""
    return finish_answers(plan) or ([plan[-1].predicted] if plan and plan[-1].predicted else [])


# -- the oracle's rules ---------------------------------------------------------------------------------------------


def _gold_steps(ask: OracleAsk, start: int = 0, answers: list[str] | None = None) -> list[dict[str, str]]:
    """The oracle's plan from gold hop ``start`` on: one Search per hop of the (first) gold chain, then Finish naming
    ``answers`` (the plan cannot know the answer before the graph shows it, so the first plan's Finish names none)."""
    chain = ask.gold.chains[0] if ask.gold.chains else ()
    steps = [{"thought": f"Follow {relation}{' backwards' if backward else ''}.", "action": f"Search[{relation}]",
              "predicted": ""} for relation, backward in chain[start:]]
    return [*steps, {"thought": "Answer from what the graph showed.", "action": f"Finish[{'; '.join(answers or [])}]",
                     "predicted": ""}]


def _oracle_plan(ask: OracleAsk) -> dict[str, Any]:
    """The oracle's plan: the gold chain's hops as searches, then Finish."""
    return {"steps": _gold_steps(ask)}


def _oracle_revision(ask: OracleAsk) -> dict[str, Any]:
    """The oracle's revision: the gold plan again from the hop the disagreeing step searched for; at the chain's last
    hop its Finish names the gold answers the context shows (what a perfect reader of the observation writes)."""
    current = str(ask.inputs.get("current", ""))
    chain = ask.gold.chains[0] if ask.gold.chains else ()
    start = next((i for i, (relation, _) in enumerate(chain) if f"Search[{relation}]" in current), 0)
    last = start >= len(chain) - 1
    return {"steps": _gold_steps(ask, start, ask.answers_in(ask.text("context")) if last else None)}


def _oracle_verification(ask: OracleAsk) -> dict[str, Any]:
    """The oracle's verification: consistent when the observation shows a node of a gold walk, else revise."""
    observation = str(ask.inputs.get("observation", ""))
    revise = ask.judge(not ask.on_path(observation))
    return {"reasoning": "The graph shows nothing on the way to the answer." if revise else
            "The graph shows the way on.", "revise": revise, "revised_observation": ""}


PLAN = Signature(PROMPTS, "plan", Plan, "vog.plan", _oracle_plan)
RELATIONS = Signature(PROMPTS, "prune_relations", RelationChoice, "vog.relations", choose_gold_relations)
SELECT_ENTITIES = Signature(PROMPTS, "select_entities", FilterChoice, "vog.entities", keep_gold_candidates)
VERIFY = Signature(PROMPTS, "verify", Verification, "vog.verify", _oracle_verification)
REVISE = Signature(PROMPTS, "revise", Plan, "vog.revise", _oracle_revision)
ANSWER = Signature(PROMPTS, "answer", ReasonedAnswer, "vog.answer", answer_from_evidence)
GENERATE = Signature(PROMPTS, "direct_generation", ReasonedAnswer, "vog.generate", answer_from_evidence)
SIGNATURES = (PLAN, RELATIONS, SELECT_ENTITIES, VERIFY, REVISE, ANSWER, GENERATE)
