"""Loss attribution: where, in a method's search, the gold left the candidates.

Every step that narrows a method's candidates notes what it was offered and what it kept (:func:`note_relations`,
:func:`note_entities`), and every step that ends a search says why (:func:`note_stop`). While the evaluation runner
answers a question it holds the question's :class:`CandidateLog` (:func:`candidate_log`), which compares each note
with the question's gold reasoning (:class:`~kgqa.core.GoldReasoning`) as it arrives; outside a run the notes cost
nothing. The model never sees the gold: this works the same for the oracle and for any real model.

A note touches the gold when what was offered holds a gold candidate: a hop of a gold chain (or constraint) taken from
a node of the gold path, or from a gold chain's prefix; a node of the gold path at the note's depth. Relations offered
from the gold path that miss the gold hop lose it there too (``loss_step`` says "gold not offered"). It *keeps* the
gold when what was kept still holds one, and *loses* it otherwise; when a gold answer is on offer, only the answers
count (a step that keeps the path but drops the answer loses it). A kept gold answer marks the answer *reached*.

:meth:`CandidateLog.attribute` names the loss of a question the method missed (no gold answer among its answers), one of
:data:`LOSSES`:

* ``linking``: no gold topic among the topics the method found in the KG;
* the loss of the last note that lost the gold and was not followed by one that kept it (``relation_pruning``,
  ``entity_cap``, ``entity_sample``): where the gold left the candidates for good (a beam search may drop a gold
  branch and keep another; only the branch that ends the search counts);
* ``answer_step``: a gold answer was reached and kept, and the step that answers chose wrong (or the judge kept
  searching past it); also every miss of a method that reads no KG;
* the last stop after the gold was last kept (``depth_limit``, ``budget_limit``, ``judge_stop``): the search ended
  before it reached an answer;
* ``no_gold_path``: the harness knows no gold path for the question in this KG (no chain in the data, or the chain
  does not reach a gold answer in it: the coverage ceiling), and nothing else applies;
* ``error``: the method failed on the question (the row's ``error`` says how);
* ``unattributed``: none of the above (a method that notes too little).

A question the method answered (a gold answer among its answers) has the loss ``none``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from kgqa.core import GoldReasoning
from kgqa.kg.base import Direction, Hop

__all__ = [
    "LOSSES", "CandidateLog", "Loss", "candidate_log", "note_answer_cap", "note_answers", "note_entities", "note_relations",
    "note_stop",
]

#: Every loss a missed question can be given, in the order a search meets them.
LOSSES = ("linking", "relation_pruning", "entity_cap", "entity_sample", "judge_stop", "depth_limit", "budget_limit",
          "answer_step", "no_gold_path", "error", "unattributed")
#: Losses a narrowing step may name; :func:`note_stop` names one of ``STOPS``.
NARROWING = ("relation_pruning", "entity_cap", "entity_sample")
STOPS = ("judge_stop", "depth_limit", "budget_limit")

GoldHop = tuple[str, bool]  # (relation, backward), as GoldReasoning holds a hop


def _gold_hop(hop: Hop) -> GoldHop:
    return hop.relation, hop.direction is Direction.IN


@dataclass(frozen=True)
class Loss:
    """Where a missed question's gold left the candidates: one of :data:`LOSSES`, the method's step that lost it (its
    trace event's name, when a step noted it) and the depth there (hops from the topic, when known)."""

    loss: str
    step: str | None = None
    depth: int | None = None

    def as_row(self) -> dict[str, object]:
        return {"loss": self.loss, "loss_step": self.step, "loss_depth": self.depth}


@dataclass
class CandidateLog:
    """One question's notes, read against its gold as they arrive (only the outcome of each note is kept)."""

    gold: GoldReasoning
    #: (outcome, loss, step, depth) per note that touched the gold: outcome "kept", "lost" or "stop"
    events: list[tuple[str, str, str, int | None]] = field(default_factory=list)
    reached: bool = False
    _by_depth: list[frozenset[GoldHop]] = field(default_factory=list, init=False)
    _after_prefix: dict[tuple[GoldHop, ...], set[GoldHop]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        longest = max((len(c) for c in self.gold.chains), default=0)
        by_depth: list[set[GoldHop]] = [set() for _ in range(longest + 1)]
        for chain in self.gold.chains:
            for depth, hop in enumerate(chain):
                by_depth[depth].add(hop)
                self._after_prefix.setdefault(tuple(chain[:depth]), set()).add(hop)
        for position, hops, _ in self.gold.constraints:
            if hops and position < len(by_depth):
                by_depth[position].add(hops[0])
            for chain in self.gold.chains:
                if position <= len(chain):
                    for k, hop in enumerate(hops):
                        self._after_prefix.setdefault((*chain[:position], *hops[:k]), set()).add(hop)
        self._by_depth = [frozenset(s) for s in by_depth]

    # -- notes ---------------------------------------------------------------------------------------------------------

    def _gold_hops(self, at: str | Collection[str] | None,
                   chain: Sequence[Hop] | None) -> frozenset[GoldHop] | set[GoldHop]:
        if at is not None:
            nodes = {at} if isinstance(at, str) else set(at)
            hops: set[GoldHop] = set()
            for depth, layer in enumerate(self.gold.path_nodes):
                if depth < len(self._by_depth) and not layer.isdisjoint(nodes):
                    hops |= self._by_depth[depth]
            return hops
        if chain is not None:
            return self._after_prefix.get(tuple(_gold_hop(h) for h in chain), set())
        return frozenset().union(*self._by_depth) if self._by_depth else frozenset()

    def relations(self, step: str, offered: Iterable[Hop], kept: Iterable[Hop], *,
                  at: str | Collection[str] | None = None,
                  chain: Sequence[Hop] | None = None, depth: int | None = None,
                  loss: str = "relation_pruning", every: bool = True) -> None:
        gold = self._gold_hops(at, chain)
        if not gold:
            return  # the candidates leave the gold path: nothing of the gold is at stake
        offered = list(offered)
        if not any(_gold_hop(h) in gold for h in offered):
            if not every:
                return  # one branch of the candidates, not the gold one
            # on the gold path, but the search never offered the gold hop (a walk back not allowed, a relation missing)
            self.events.append(("lost", loss, f"{step} (gold not offered)", depth))
            return
        outcome = "kept" if any(_gold_hop(h) in gold for h in kept) else "lost"
        self.events.append((outcome, loss, step, depth))

    def entities(self, step: str, offered: Iterable[str] | None, kept: Iterable[str] | None, *,
                 depth: int | None = None, loss: str = "entity_cap", answers_only: bool = False) -> None:
        layers = self.gold.path_nodes
        if answers_only:
            gold = self.gold.answers
        elif depth is not None and 0 <= depth < len(layers):
            gold = layers[depth] | self.gold.answers
        else:
            gold = self.gold.nodes.difference(layers[0] if layers else ()) | self.gold.answers
        offered_gold = gold if offered is None else gold.intersection(offered)
        if not offered_gold:
            return
        kept_gold = offered_gold if kept is None else offered_gold.intersection(kept)
        if offered_gold & self.gold.answers:
            # an answer on offer decides: kept, the answer is reached; dropped, the gold left here, whatever else of
            # the path stayed
            self.reached = bool(kept_gold & self.gold.answers)
            kept_gold = kept_gold & self.gold.answers
        self.events.append(("kept" if kept_gold else "lost", loss, step, depth))

    def answers(self, step: str, nodes: Iterable[str]) -> None:
        if not self.gold.answers.isdisjoint(nodes):
            self.reached = True
            self.events.append(("kept", "answer_step", step, None))

    def stop(self, step: str, loss: str, depth: int | None = None, chain: Sequence[Hop] | None = None) -> None:
        if chain is not None and self.gold.chains and not self._after_prefix.get(tuple(_gold_hop(h) for h in chain)):
            return  # a branch off the gold chains stopped: nothing of the gold was on it
        self.events.append(("stop", loss, step, depth))

    # -- the verdict ---------------------------------------------------------------------------------------------------

    def attribute(self, *, topics: Iterable[str], reads_kg: bool = True) -> Loss:
        """The loss of a question the method missed (see the module docstring)."""
        if not reads_kg:
            return Loss("answer_step")
        gold_topics = self.gold.path_nodes[0] if self.gold.path_nodes else frozenset()
        if gold_topics and not gold_topics.intersection(topics):
            return Loss("linking")
        lost: tuple[str, str, int | None] | None = None
        stopped: tuple[str, str, int | None] | None = None
        for outcome, loss, step, depth in self.events:
            if outcome == "lost":
                lost, stopped = (loss, step, depth), None
            elif outcome == "kept":
                lost, stopped = None, None
            elif lost is None:
                stopped = (loss, step, depth)
        if lost is not None:
            return Loss(*lost)
        if self.reached:
            return Loss("answer_step")
        if not self.gold.path_nodes:
            return Loss("no_gold_path")
        if stopped is not None:
            return Loss(*stopped)
        return Loss("unattributed")


#: The log of the question being answered, in this context (set by the evaluation runner; None elsewhere).
CANDIDATE_LOG: ContextVar[CandidateLog | None] = ContextVar("kgqa_candidate_log", default=None)


@contextmanager
def candidate_log(gold: GoldReasoning) -> Iterator[CandidateLog]:
    """While a question is answered, the log its steps' notes go to."""
    log = CandidateLog(gold)
    token = CANDIDATE_LOG.set(log)
    try:
        yield log
    finally:
        CANDIDATE_LOG.reset(token)


def note_relations(step: str, offered: Iterable[Hop], kept: Iterable[Hop], *,
                   at: str | Collection[str] | None = None, chain: Sequence[Hop] | None = None,
                   depth: int | None = None, loss: str = "relation_pruning", every: bool = True) -> None:
    """A step narrowed candidate hops: taken from node ``at`` or from any of the nodes ``at`` (ToG, PoG, SRP's walk),
    or after the relations of ``chain`` from the topic (CCoR's chains; ``()`` at the topic); neither: anywhere on the
    gold path. ``every``: ``offered`` is every candidate there (False: one branch, as a judge's verdict on a chain),
    so a gold hop missing from it was never offered."""
    log = CANDIDATE_LOG.get()
    if log is not None:
        log.relations(step, list(offered), list(kept), at=at, chain=chain, depth=depth, loss=loss, every=every)


def note_entities(step: str, offered: Iterable[str] | None, kept: Iterable[str] | None = None, *,
                  depth: int | None = None, loss: str = "entity_cap") -> None:
    """A step narrowed candidate nodes ``depth`` hops from the topic (None: any depth) from ``offered`` (None:
    everything within reach, as an expansion from the topics is offered the whole neighbourhood) to ``kept`` (None:
    it kept all it was offered). ``loss``: what losing the gold here is, ``entity_cap`` unless said."""
    log = CANDIDATE_LOG.get()
    if log is not None:
        log.entities(step, None if offered is None else list(offered), None if kept is None else list(kept),
                     depth=depth, loss=loss)


def note_answers(step: str, nodes: Iterable[str]) -> None:
    """A step produced candidate answers ``nodes`` (a chain's execution): a gold answer among them is reached; other
    nodes of the gold path among them count for nothing (a chain stopped short reaches them)."""
    log = CANDIDATE_LOG.get()
    if log is not None:
        log.answers(step, list(nodes))


def note_answer_cap(step: str, offered: Iterable[str], kept: Iterable[str], *, loss: str = "entity_cap") -> None:
    """A step cut the candidate answers ``offered`` to ``kept`` (a cap on the answers returned, a filter on them):
    only gold answers count (what a chain stopped short reaches is no answer)."""
    log = CANDIDATE_LOG.get()
    if log is not None:
        log.entities(step, list(offered), list(kept), loss=loss, answers_only=True)


def note_stop(step: str, loss: str, *, depth: int | None = None, chain: Sequence[Hop] | None = None) -> None:
    """A step ended the search: ``judge_stop`` (a judge said the evidence was enough), ``depth_limit`` or
    ``budget_limit``. With ``chain`` (from the topic), only the branch of that chain ended: it counts when the chain
    is a prefix of a gold chain."""
    log = CANDIDATE_LOG.get()
    if log is not None:
        log.stop(step, loss, depth, chain)
