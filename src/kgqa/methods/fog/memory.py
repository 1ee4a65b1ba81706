"""FoG with the LLM (``mode=llm``, the paper's Sec. 3.1 and 3.3): one call decomposes the question into standalone
sub-questions (they guide the scorer); then per round one memory-manager call reads the question, the memory subgraph
and the potential subgraph and replies {selected_triplets, predict_answer, subsequent_question}. Selected triples are
absorbed into memory: later expansions neither score nor walk them again, and go on from the memory's entities at the
depths they were reached (so the evidence beyond them stays in reach). The potential triples it did not select are
masked for good; new sub-questions drive the next round; at most ``rounds`` rounds and ``rounds`` + 1 calls (a re-ask
counts; a round that would exceed the budget is skipped).

The answer is the model's: the first round whose reply names an entity of a triple it was shown (memory, selected, or
shown and not selected: that triple then joins the memory as the answer's evidence) answers. Only when no round gives
such an answer does graph mode's reading of a fresh expansion answer: a counted fallback (the ``fog.fallback`` trace
event names the graph reader and the cause; ``stats["graph_fallback"]`` is 1, 0 when the model answered, so a run's
summary.json holds the share under ``stats.graph_fallback.mean`` and the LLM-mode questions under ``.n``).

Both steps' signatures (prompt, reply model, step) are declared here.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any

from pydantic import Field

from kgqa.core import Grounding, MethodContext, Prediction, Question
from kgqa.llm.base import LLMError
from kgqa.llm.prompts import PromptBook, Signature
from kgqa.llm.structured import Reply
from kgqa.methods.fog.details import FoGDetails, MemoryRound
from kgqa.normalize import normalize_label
from kgqa.steps.answers import answer_items
from kgqa.steps.foresight.graph import ExpandedGraph, Triple
from kgqa.steps.losses import note_entities, note_stop
from kgqa.steps.reply import BudgetedModel, ask_reply

if TYPE_CHECKING:
    from kgqa.llm.oracle import OracleAsk
    from kgqa.methods.fog.config import FoGConfig
    from kgqa.methods.fog.method import FoG

PROMPTS = PromptBook.for_package("kgqa.methods.fog")


class SubQuestions(Reply):
    sub_questions: list[str] = Field(min_length=1)


class MemoryReply(Reply):
    selected_triplets: list[str | list[str]]
    predict_answer: list[str] | str
    subsequent_question: list[str] = Field(default_factory=list)


class MemoryIndexReply(Reply):
    """A reply cut off in its list of numbers is read as far as it got, so only the selection is required."""

    selected_triplets: list[int | str]
    predict_answer: list[str] | str = Field(default_factory=list)
    subsequent_question: list[str] = Field(default_factory=list)


#: A triple as the memory manager's prompt shows it: ``(head, relation, tail)`` (names may hold commas; relations not).
_TRIPLE_RE = re.compile(r"^\((.*), ([^\s,]+), (.*)\)$")


def _oracle_decomposition(ask: OracleAsk) -> dict[str, Any]:
    """The oracle's decomposition: the question is its own sub-question (the gold chain guides no text here)."""
    return {"sub_questions": [str(ask.inputs["question"])]}


def _on_gold_walk(ask: OracleAsk, triple: str) -> bool:
    """Whether a shown triple is one of a gold walk: a gold relation between nodes of a gold walk."""
    found = _TRIPLE_RE.match(triple.strip())
    if found is None:
        return False
    head, relation, tail = found.groups()
    nodes = ask.gold.path_names | ask.gold.answer_names
    return relation in ask.gold.relations and (normalize_label(head) in nodes or normalize_label(tail) in nodes)


def _oracle_memory(ask: OracleAsk) -> dict[str, Any]:
    """The oracle's memory manager: select the shown triples of gold walks (by number, or copied), and answer with the
    gold answers the memory and the selected triples show; ask nothing more."""
    by_index = ask.signature.prompt == "memory_index"
    listed = ask.numbered("candidates") if by_index else list(enumerate(str(ask.inputs["candidates"]).splitlines(), 1))
    right = [n for n, triple in listed if _on_gold_walk(ask, triple)]
    chosen = ask.choose([n for n, _ in listed], right)
    shown = dict(listed)
    evidence = "\n".join([str(ask.inputs.get("memory", "")), *(shown[n] for n in chosen)])
    answers = ask.answers_in(evidence)
    return {"selected_triplets": chosen if by_index else [shown[n] for n in chosen],
            "predict_answer": ask.choose(ask.path_in(evidence), answers), "subsequent_question": []}


DECOMPOSE = Signature(PROMPTS, "decompose", SubQuestions, "fog.decompose", _oracle_decomposition)
#: The memory manager copying the triples it keeps (``selection=copy``, the paper's).
MEMORY = Signature(PROMPTS, "memory", MemoryReply, "fog.memory", _oracle_memory)
#: The memory manager naming the numbered triples it keeps (``selection=index``).
MEMORY_INDEX = Signature(PROMPTS, "memory_index", MemoryIndexReply, "fog.memory", _oracle_memory)
SIGNATURES = (DECOMPOSE, MEMORY, MEMORY_INDEX)


def _spent(budget: int) -> LLMError:
    return LLMError(f"FoG's call budget is spent ({budget} calls = rounds + 1)")


def answer_with_llm(method: FoG, question: Question, seeds: list[str], scorer: Any, labels: Any,
                    ctx: MethodContext) -> Prediction:
    """The decomposition, then the memory rounds; when none answers, graph mode's reading of a fresh expansion guided
    by the question alone (the rounds' graphs left out what memory absorbed or masked, and a small model's
    sub-questions can steer the scorer off the question)."""
    cfg: FoGConfig = method.config
    details: FoGDetails = method.account(ctx)
    llm = BudgetedModel(ctx.llm, cfg.rounds + 1, _spent)
    sub_questions = _decompose(llm, question, cfg, ctx)
    details.sub_questions = sub_questions
    memory: list[Triple] = []
    rejected: set[Triple] = set()
    ends: dict[str, int] = {}
    for round_ in range(1, cfg.rounds + 1):
        # absorbed triples are not expanded again (the walk goes on from the memory's entities); rejected ones are
        # masked for good
        graph = method.expand(question.text, sub_questions, seeds, scorer, labels, ctx, round_=round_, skip=rejected,
                              absorbed=memory, starts=ends)
        if not cfg.memory:
            return _fallback(method, graph, question, labels, ctx, source="w/o memory manager: read from the graph",
                             cause="the memory manager is off (memory=false)")
        if llm.calls >= llm.budget:
            failure = f"call budget spent ({llm.calls} of rounds + 1 = {llm.budget}, re-asks included)"
            ctx.trace.add("fog.memory", round=round_, ok=False, skipped=True, failure=failure)
            details.rounds.append(MemoryRound(round=round_, ok=False, failure=failure))
            break
        held = len(memory)
        try:
            outcome = _memory_round(llm, question, graph, memory, rejected, seeds, round_, cfg, ctx, details)
        except LLMError as exc:
            ctx.trace.add("fog.memory", round=round_, ok=False, failure=f"{type(exc).__name__}: {exc}")
            details.rounds.append(MemoryRound(round=round_, ok=False, failure=f"{type(exc).__name__}: {exc}"))
            break
        if isinstance(outcome, Prediction):
            return outcome.model_copy(update={"stats": {**outcome.stats, "graph_fallback": 0.0}})
        for entity, depth in _depths(graph, memory[held:]).items():
            ends[entity] = min(depth, ends.get(entity, depth))
        sub_questions = outcome or sub_questions
    note_stop("fog.rounds", "budget_limit")
    graph = method.expand(question.text, [question.text], seeds, scorer, labels, ctx, round_=cfg.rounds + 1,
                          skip=set())
    return _fallback(method, graph, question, labels, ctx, source="graph reading after the memory rounds",
                     cause=f"no answer from the memory manager in {cfg.rounds} rounds ({llm.calls} calls)")


def _fallback(method: FoG, graph: ExpandedGraph, question: Question, labels: Any, ctx: MethodContext, *,
              source: str, cause: str) -> Prediction:
    """Graph mode's reading answers in LLM mode: counted (``stats["graph_fallback"]``) and traced (``fog.fallback``)."""
    ctx.trace.add("fog.fallback", reader="graph reading (kgqa.methods.fog.reading)", cause=cause)
    prediction = method.graph_answer(graph, ctx, source=source, prior=method.answer_prior(question, labels, ctx),
                                     fallback=cause)
    return prediction.model_copy(update={"stats": {**prediction.stats, "graph_fallback": 1.0}})


def _depths(graph: ExpandedGraph, triples: list[Triple]) -> dict[str, int]:
    """The entities of ``triples`` at the least depth ``graph`` reached each (both ends of every edge holding one)."""
    wanted = set(triples)
    depths: dict[str, int] = {}
    for e, triple in enumerate(graph.triples):
        if triple in wanted:
            for node in (graph.near[e], graph.far[e]):
                entity, depth = graph.node_entity[node], graph.node_depth[node]
                depths[entity] = min(depth, depths.get(entity, depth))
    return depths


def _decompose(llm: BudgetedModel, question: Question, cfg: FoGConfig, ctx: MethodContext) -> list[str]:
    """The sub-questions that guide the scorer: the decomposition's usable ones, else the question itself."""
    sub_questions = [question.text]
    try:
        reply = ask_reply(llm, DECOMPOSE, max_tokens=cfg.decompose_tokens, question=question.text,
                          max_sub_questions=cfg.max_sub_questions)
    except LLMError as exc:
        ctx.trace.add("fog.decompose", ok=False, failure=f"{type(exc).__name__}: {exc}")
        return sub_questions
    dropped: list[str] = []
    if reply.ok and reply.value is not None:
        kept, dropped = _usable_questions(reply.value.sub_questions, cfg.max_sub_questions)
        sub_questions = kept or sub_questions
    ctx.trace.add("fog.decompose", ok=reply.ok, sub_questions=sub_questions, dropped=dropped, failure=reply.failure)
    return sub_questions


def _memory_round(llm: BudgetedModel, question: Question, graph: ExpandedGraph, memory: list[Triple],
                  rejected: set[Triple], seeds: list[str], round_: int, cfg: FoGConfig, ctx: MethodContext,
                  details: FoGDetails) -> Prediction | list[str]:
    """One memory-manager call over the round's potential subgraph: the answer when it names an entity of a triple it
    was shown (not the topic), else the next sub-questions (``memory`` and ``rejected`` are updated in place)."""
    shown = _potential(graph, cfg.tau_p, cfg.max_potential, exclude=set(memory))
    note_entities("fog.potential", graph.node_entity, _entities(memory + shown))
    display = _display(ctx.kg, memory + shown)
    if cfg.selection == "index":
        signature, budget = MEMORY_INDEX, cfg.memory_tokens or min(400, 96 + 4 * len(shown))
        candidates = "\n".join(f"{i}. {display[t]}" for i, t in enumerate(shown, 1))
    else:
        signature, budget = MEMORY, cfg.memory_tokens or min(800, 64 + 20 * len(shown))
        candidates = "\n".join(display[t] for t in shown)
    step = ask_reply(llm, signature, max_tokens=budget, question=question.text,
                     memory="\n".join(display[t] for t in memory) or "(none)", candidates=candidates or "(none)")
    if not step.ok or step.value is None:
        ctx.trace.add("fog.memory", round=round_, ok=False, shown=len(shown), failure=step.failure)
        details.rounds.append(MemoryRound(round=round_, ok=False, shown=len(shown), failure=step.failure))
        return []
    value = step.value
    selected, invented = _selected(value.selected_triplets, shown, memory, display)
    note_entities("fog.memory", _entities(memory + shown), _entities(memory + selected))
    memory.extend(t for t in selected if t in shown)
    # an answer is resolved against the memory first, then against the shown triples it did not select: an entity of
    # a triple the model was shown is grounded, and that triple joins the memory as the answer's evidence
    names = ctx.kg.names(list({x for t in memory + shown for x in (t[0], t[2])}))
    # names are matched as kgqa matches labels (case, accents and punctuation folded): "Quebec" names Québec
    entity_by_name: dict[str, tuple[str, Triple | None]] = {}
    for t in memory:
        for node in (t[0], t[2]):
            entity_by_name.setdefault(normalize_label(names.get(node) or node), (node, None))
    for t in shown:
        for node in (t[0], t[2]):
            entity_by_name.setdefault(normalize_label(names.get(node) or node), (node, t))
    raw_answers = [value.predict_answer] if isinstance(value.predict_answer, str) else value.predict_answer
    keys = {a: normalize_label(a) for a in raw_answers}
    resolved = [entity_by_name[keys[a]] for a in raw_answers if keys[a] and keys[a] in entity_by_name]
    resolved = [(a, t) for a, t in resolved if a not in seeds]
    answers = list(dict.fromkeys(a for a, _ in resolved))
    unselected = list(dict.fromkeys(t for _, t in resolved if t is not None and t not in memory))
    memory.extend(unselected)
    rejected.update(t for t in shown if t not in memory)
    invalid = [a for a in raw_answers if keys[a] and keys[a] not in entity_by_name]
    next_questions, _ = _usable_questions(value.subsequent_question, 3)
    shown_names = [names.get(a) or a for a in answers]
    ctx.trace.add("fog.memory", round=round_, ok=True, shown=len(shown), selected=len(selected), invented=invented,
                  memory=len(memory), rejected=len(rejected), answers=shown_names, invalid_answers=invalid,
                  answer_triples_unselected=len(unselected), next=next_questions)
    details.rounds.append(MemoryRound(round=round_, shown=len(shown), selected=len(selected), invented=invented,
                                      answers=shown_names, next=next_questions))
    if not answers:
        return next_questions
    items = answer_items(ctx.kg, answers, limit=cfg.max_answers)
    paths = [display[t] for t in memory][:5]
    ctx.trace.add("fog.answer", mode="llm", source=f"memory manager, round {round_}", answers=[i.name for i in items],
                  pattern=None, paths=paths, fallback=None)
    details.mode, details.source, details.paths = "llm", f"memory manager, round {round_}", paths
    return Prediction(answers=items, grounding=Grounding.SYNTHESIS, evidence=[list(t) for t in memory])


def _selected(items: list[Any], shown: list[Triple], memory: list[Triple], display: dict[Triple, str]
              ) -> tuple[list[Triple], int]:
    """The triples a reply selects (by number, or copied as written) that are new, and how many it invented (a
    number out of range, a triple not shown)."""
    by_text = {_norm(display[t]): t for t in memory + shown}
    selected: list[Triple] = []
    invented = 0
    for item in items:
        number = item if isinstance(item, int) else int(item) if (
            isinstance(item, str) and item.strip().isdigit()) else None
        if number is not None:  # selected by its number (selection=index); out of range counts as invented
            triple = shown[number - 1] if 1 <= number <= len(shown) else None
        else:
            text = item if isinstance(item, str) else "(" + ", ".join(item) + ")"
            triple = by_text.get(_norm(text))
        if triple is None:
            invented += 1
        elif triple not in memory and triple not in selected:
            selected.append(triple)
    return selected, invented


def _entities(triples: list[Triple]) -> list[str]:
    return [x for t in triples for x in (t[0], t[2])]


def _potential(graph: ExpandedGraph, tau_p: float, limit: int, exclude: set[Triple] | frozenset[Triple] = frozenset()
               ) -> list[Triple]:
    """The best-scored potential triples (s_t > tau_p) not already in memory, at most ``limit``; when none passes
    tau_p, the best-scored expanded triples, so a round never asks about an empty subgraph."""
    order = sorted((e for e in range(len(graph)) if graph.triples[e] not in exclude), key=lambda e: -graph.scores[e])
    passing = [e for e in order if graph.scores[e] > tau_p] or order
    shown: list[Triple] = []
    for e in passing:
        if len(shown) >= limit:
            break
        if graph.triples[e] not in shown:
            shown.append(graph.triples[e])
    return shown


@functools.cache
def _example_text() -> str:
    """Every prompt's own text (examples included), normalised: a sub-question found in it is an echo, not a question."""
    texts = [m["content"] for signature in SIGNATURES
             for m in signature.messages(question="", memory="", candidates="", max_sub_questions=3)]
    return _norm(" ".join(texts))


def _usable_questions(texts: list[str], limit: int) -> tuple[list[str], list[str]]:
    """(kept, dropped): sub-questions with at least two words that are not copied from a prompt's example or
    placeholders ("..."), each once, at most ``limit``. Small models echo the example and repeat themselves; an echoed
    sub-question steers the scorer toward the example's relations."""
    kept: list[str] = []
    dropped: list[str] = []
    seen: set[str] = set()
    for text in texts:
        text = text.strip()
        norm = _norm(text)
        words = [w for w in norm.split() if any(c.isalpha() for c in w)]
        if len(words) < 2 or norm in _example_text():
            dropped.append(text)
        elif norm not in seen and len(kept) < limit:
            seen.add(norm)
            kept.append(text)
    return kept, dropped


def _display(kg: Any, triples: list[Triple]) -> dict[Triple, str]:
    names = kg.names(list({x for t in triples for x in (t[0], t[2])}))
    return {t: f"({names.get(t[0]) or t[0]}, {t[1]}, {names.get(t[2]) or t[2]})" for t in triples}


def _norm(text: str) -> str:
    return " ".join(text.strip().strip("\"'").lower().replace("(", " ").replace(")", " ").replace(",", " , ").split())
