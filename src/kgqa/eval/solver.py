"""One question of a run: answered with its trace, topics, details and usage attached, scored, and turned into its
results.jsonl row and traces.jsonl line. A failing method or a malformed answer is that question's error, never the
run's. The question's gold reasoning is read first (outside the question's clock): the oracle reasoner answers from it,
and the question's candidate log reads the method's notes against it, so the row of a missed question says where the
gold left the candidates (``loss``, ``loss_step``, ``loss_depth``; :mod:`kgqa.steps.losses`).
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from collections.abc import Mapping
from typing import Any

from kgqa.core import GoldReasoning, MethodContext, Prediction, Question
from kgqa.datasets.gold_chains import answer_keys
from kgqa.datasets.gold_reasoning import gold_reasoning
from kgqa.deadline import question_deadline
from kgqa.eval.kg_timing import KGClock, TimedKG, kg_clock
from kgqa.eval.metrics import QuestionScore, score_prediction
from kgqa.llm.accounting import Recorder
from kgqa.llm.oracle import oracle_question
from kgqa.methods.base import Method, attach_run_facts, solve
from kgqa.steps.losses import CandidateLog, Loss, candidate_log

__all__ = ["UNREADABLE_ERROR", "QuestionSolver", "question_row", "unreadable_error"]

#: The kind of error (the text before the first colon of a row's ``error``) of a question that got a reply still
#: unreadable after its re-ask: it is scored as it stands, and ``--resume --retry-errors`` asks it again.
UNREADABLE_ERROR = "UnreadableReply"


_SCORE_FIELDS = tuple(f.name for f in dataclasses.fields(QuestionScore))


def question_row(question: Question, prediction: Prediction, score: QuestionScore) -> dict[str, Any]:
    """The results.jsonl row of one scored question: question, answers, gold, every score, and the breakdown facts
    (``hops``, ``qtype``). A run adds its timings; an imported run (``kgqa eval import-run``) its source line."""
    scores = {name: getattr(score, name) for name in _SCORE_FIELDS}  # dataclasses.asdict deep-copies: slow per row
    scores["groups"] = dict(score.groups)
    row: dict[str, Any] = {
        "id": question.id,
        "question": question.text,
        "answers": [a.name for a in prediction.answers],
        "answer_ids": [a.id for a in prediction.answers],
        "gold": [g.name for g in question.answers],
        "gold_ids": [g.id for g in question.answers],
    }
    row.update(scores)
    for key in ("hops", "qtype"):
        if question.metadata.get(key) is not None:
            row[key] = question.metadata[key]
    return row


def _row(question: Question, prediction: Prediction, score: QuestionScore, clock: KGClock, usage: Mapping[str, Any]) -> dict:
    row = question_row(question, prediction, score)
    row["llm_latency_s"] = float(usage.get("latency_s", 0.0))
    row["cache_hits"] = int(usage.get("cache_hits", 0))
    row["retries"] = int(usage.get("retries", 0))
    row["unreadable_replies"] = int(usage.get("unreadable_replies", 0))
    row["salvaged_replies"] = int(usage.get("salvaged_replies", 0))
    row["kg_time_s"] = clock.seconds
    row["kg_calls"] = clock.calls
    row["kg_timeouts"] = clock.timeouts
    return row


def unreadable_error(unreadable: list[tuple[str | None, str]]) -> str:
    """The ``error`` of a row whose question got replies still unreadable after their re-ask ((step, error) each)."""
    step, error = unreadable[0]
    count = f"{len(unreadable)} replies" if len(unreadable) > 1 else "a reply"
    return (f"{UNREADABLE_ERROR}: {count} still unreadable after the re-ask (first at step {step or '?'}: "
            f"{' '.join(error.split())[:300]}); the answer was scored as it stands")


def _loss(log: CandidateLog, prediction: Prediction, score: QuestionScore, *, reads_kg: bool) -> Loss:
    """Where a missed question's gold left the candidates (:mod:`kgqa.steps.losses`); no loss for a hit."""
    if score.hit > 0:
        return Loss("none")
    if prediction.error is not None:
        return Loss("error")
    return log.attribute(topics=prediction.topics, reads_kg=reads_kg)


class QuestionSolver:
    """Answers and scores one question at a time (thread-safe: per-question state lives in locals)."""

    def __init__(self, method: Method, base: MethodContext, recorder: Recorder, *, record_calls: bool = False,
                 timeout: float | None = None) -> None:
        self.method = method
        self.timeout = timeout  # the deadline of each question (kgqa.deadline), None: none
        self.kg = base.kg  # the gold reasoning is read here, outside the question's KG time
        # every KG call's time counts against the question being answered
        self.base = dataclasses.replace(base, kg=TimedKG(base.kg)) if base.kg is not None else base
        self.recorder = recorder
        self.record_calls = record_calls

    def __call__(self, question: Question) -> tuple[dict[str, Any], dict[str, Any]]:
        if not self.record_calls:
            return self._solve(question)
        from kgqa.llm.calls import CALLS, CallLog

        log = CallLog()
        token = CALLS.set(log)
        try:
            row, trace_row = self._solve(question)
        finally:
            CALLS.reset(token)
        trace_row["llm_calls"] = log.calls
        if log.dropped:
            trace_row["llm_calls_dropped"] = log.dropped
        return row, trace_row

    def _solve(self, question: Question) -> tuple[dict[str, Any], dict[str, Any]]:
        ctx = self.base.for_question()
        tb: str | None = None
        # what the harness knows of the question's gold reasoning: the oracle reasoner answers from it (no other model
        # reads it); computed before the clock starts, so it costs the method nothing
        try:
            gold = gold_reasoning(question, self.kg)
        except Exception as exc:  # the gold is the harness's, not the method's: a KG that cannot walk it costs the
            # oracle and the loss table this question's path, never the question
            gold = GoldReasoning(answers=frozenset(answer_keys(question)))
            gold_error = f"{type(exc).__name__}: {exc}"
        else:
            gold_error = None
        started = time.perf_counter()
        with (kg_clock() as clock, oracle_question(gold, seed=self.base.seed, question_id=question.id),
              candidate_log(gold) as log, question_deadline(self.timeout)):
            try:
                # solve() answers inside the recorder's scope of the question and attaches the trace and the usage.
                prediction = solve(self.method, question, ctx, recorder=self.recorder, scope=question.id)
            except Exception as exc:  # a failing question is recorded, never fatal to the run
                tb = traceback.format_exc()
                prediction = attach_run_facts(Prediction.failed(f"{type(exc).__name__}: {exc}", trace=list(ctx.trace)),
                                              ctx, recorder=self.recorder, scope=question.id)
        latency = time.perf_counter() - started
        self.recorder.release(question.id)
        try:
            score = score_prediction(question, prediction, latency_s=latency)
        except Exception as exc:  # e.g. a method returned a malformed answer: record it as that question's failure
            tb = traceback.format_exc()
            prediction = Prediction.failed(f"scoring failed: {type(exc).__name__}: {exc}", usage=prediction.usage,
                                           trace=prediction.trace)
            score = score_prediction(question, prediction, latency_s=latency)
        row = _row(question, prediction, score, clock, prediction.usage)
        row.update(_loss(log, prediction, score, reads_kg=self.kg is not None).as_row())
        unreadable = self.recorder.unreadable(question.id)
        if unreadable and not row.get("error"):
            # the method went on without the reply (an empty answer, a fallback): scored as it stands, but an error
            # that --retry-errors asks again, and the summary also scores the run without such questions
            row["error"] = unreadable_error(unreadable)
        trace_row: dict[str, Any] = {"id": question.id, "trace": prediction.trace, "evidence": prediction.evidence,
                                     "topics": prediction.topics, "details": prediction.details}
        salvaged = self.recorder.salvaged(question.id)
        if salvaged:  # replies cut off by their token budget, read as far as they got
            trace_row["salvaged_replies"] = [{"step": step, "kept": kept} for step, kept in salvaged]
        if tb is not None:
            trace_row["traceback"] = tb
        if gold_error is not None:
            trace_row["gold_error"] = gold_error
        return row, trace_row
