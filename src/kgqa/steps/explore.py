"""The relation-centric chain explorer with its memory stack: CCoR's main and constraint chains (paper Sec. IV-A), and
any later method that grows relation chains and judges them.

State ``s_t = (c_t, h_t)``: the current chain and a memory stack of candidate chains. One iteration:

1. relation search: the relations that can extend ``c_t`` from the entities it reaches, intermediates kept as variables;
2. relation pruning: score the candidates, keep the top k;
3. memory update: push ``c_t + r`` for each kept ``r`` in ascending score, so the best is on top;
4. reasoning: pop the top chain and judge it (the caller's two hierarchical questions) into an action.

``Forward`` starts the next iteration from the judged chain; ``Backtrack`` drops it and judges the next chain on the stack
without a new search; a finishing action (``Stop``, ``Constraint``) ends the exploration with that chain. The stack running
empty, or the iteration budget running out, is a failure that the caller turns into a fallback.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kgqa.kg.base import Chain, KnowledgeGraph, format_chain
from kgqa.steps.losses import note_relations, note_stop
from kgqa.steps.pruning import RelationPruner
from kgqa.steps.relations import search_relations

if TYPE_CHECKING:
    from kgqa.core import Trace


class Action(enum.StrEnum):
    FORWARD = "forward"
    BACKTRACK = "backtrack"
    STOP = "stop"
    CONSTRAINT = "constraint"


@dataclass(slots=True)
class Judgement:
    action: Action
    reason: str = ""
    #: Anything the judge decided besides the action (the constraint target, for the constraint chain).
    payload: dict[str, object] = field(default_factory=dict)


@dataclass(slots=True)
class Outcome:
    """How an exploration ended: ``chain`` and ``judgement`` are set on success; ``failure`` says why otherwise."""

    chain: Chain | None
    judgement: Judgement | None
    iterations: int
    failure: str | None = None


Judge = Callable[[Chain, int], Judgement]


class RelationExplorer:
    """Runs the four-step loop from the entities at the end of ``prefix`` (the topics for a main chain, a position of
    the main chain for a constraint chain); chains it builds and judges are relative to that start."""

    def __init__(self, kg: KnowledgeGraph, pruner: RelationPruner, *, topics: Sequence[str], prefix: Chain = (),
                 max_depth: int, max_iterations: int, trace: Trace, label: str, walk_back: bool = False) -> None:
        self.kg = kg
        self.walk_back = walk_back
        self.pruner = pruner
        self.topics = list(topics)
        self.prefix = prefix
        self.max_depth = max_depth
        self.max_iterations = max_iterations
        self.trace = trace
        self.label = label

    def run(self, question: str, topic_names: Sequence[str], judge: Judge, *, prompt_context: str = "",
            backtracking: bool = True) -> Outcome:
        stack: list[Chain] = []
        self._expand((), stack, question, topic_names, prompt_context)
        iterations = 0
        while stack:
            if iterations >= self.max_iterations:
                note_stop(f"{self.label}.iterations", "budget_limit")
                return Outcome(None, None, iterations, f"iteration budget of {self.max_iterations} spent")
            iterations += 1
            chain = stack.pop()
            judgement = judge(chain, len(stack))
            self.trace.add(f"{self.label}.decision", chain=format_chain(chain), action=judgement.action.value,
                           reason=judgement.reason, waiting=len(stack), **judgement.payload)
            # the judge keeps or drops the chain's last relation (loss attribution, kgqa.steps.losses)
            note_relations(f"{self.label}.decision", chain[-1:],
                           chain[-1:] if judgement.action is not Action.BACKTRACK else (),
                           chain=self.prefix + chain[:-1], every=False)
            if judgement.action in (Action.STOP, Action.CONSTRAINT):
                note_stop(f"{self.label}.decision", "judge_stop")
                return Outcome(chain, judgement, iterations)
            if judgement.action is Action.BACKTRACK:
                if not backtracking:  # the "w/o relation backtrack" ablation keeps one branch
                    return Outcome(None, judgement, iterations, "branch judged inconsistent and backtracking is off")
                continue
            if len(chain) >= self.max_depth:
                self.trace.add(f"{self.label}.depth_limit", chain=format_chain(chain), max_depth=self.max_depth)
                note_stop(f"{self.label}.depth_limit", "depth_limit", chain=self.prefix + chain)
                continue
            if not backtracking:
                stack.clear()
            self._expand(chain, stack, question, topic_names, prompt_context)
        return Outcome(None, None, iterations, "every branch was explored or discarded")

    def _expand(self, chain: Chain, stack: list[Chain], question: str, topic_names: Sequence[str],
                prompt_context: str) -> None:
        candidates = search_relations(self.kg, self.topics, self.prefix + chain, walk_back=self.walk_back)
        self.trace.add(f"{self.label}.relation_search", chain=format_chain(chain), candidates=len(candidates))
        pruned = self.pruner.prune(question, topic_names, chain, candidates, trace=self.trace,
                                   from_topic=self.prefix + chain, context=prompt_context)
        for scored in reversed(pruned.value or []):  # ascending score: the best ends on top of the stack
            stack.append((*chain, scored.hop))
