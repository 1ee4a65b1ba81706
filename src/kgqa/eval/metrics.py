"""Scoring: one question's scores (:func:`score_prediction`) and their summary over a run (:func:`summarize`).

A question is scored with the rules of :mod:`kgqa.eval.matching` (strict and legacy answer matching, evidence support,
the method's audits against gold) into a :class:`QuestionScore`, the fields of its results.jsonl row. The summary
computes every metric of :mod:`kgqa.eval.metric_registry` over the rows (Hits@1, F1, KGR, Faithful-F1, the legacy
rates, cost ...), plus the grounding counts, the audit checks, the method's statistics and the same per breakdown group.

Faithfulness (CCoR paper, Sec. V)
    Each prediction carries a grounding state with weight w = 1.0 (structured), 0.5 (synthesis), 0 (parametric).
    ``KGR = (1/N) * sum_i w(a_i)`` over the evaluated questions (Eq. 11) and ``Faithful-F1 = KGR x F1`` (Eq. 12), where
    F1 is the dataset-level mean F1: both are **aggregate** quantities, computed over the rows (the paper's Table IV
    checks out this way, e.g. ToG 57.5 F1 x 56.5 KGR = 32.5). Per question we keep only the weight.

Reliable answering (SRP paper)
    ``supported_hit1`` is 1 when the first-ranked answer is correct under the strict rule **and** supported by the
    prediction's evidence (:func:`~kgqa.eval.matching.supported_by_evidence`); the summary's ``reliable_answering`` is
    its mean: a correct answer supported by KG triples.

Verdict audits
    Per question, the counts of :func:`~kgqa.eval.matching.audit_counts`. :func:`summarize` sums them per check and
    derives ``precision`` = tp / (tp + fp), ``recall`` = tp / (tp + fn), ``stopped_without_answer`` = questions whose
    final audit claimed True without gold / questions with at least one claim, and ``searching_success`` = questions
    where some audit contains gold / questions with known gold carrying the check (None when a denominator is 0).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from kgqa.core import GROUNDING_WEIGHTS, Grounding, Prediction, Question
from kgqa.errors import DataError
from kgqa.eval.matching import (
    AUDIT_COUNTS,
    MatchResult,
    audit_counts,
    canonical_id,
    clear_caches,
    match_answers,
    match_strict_and_legacy,
    supported_by_evidence,
)
from kgqa.eval.metric_registry import average, registered_metrics

__all__ = [
    "AUDIT_COUNTS",
    "DEFAULT_BREAKDOWN_KEYS",
    "MatchResult",
    "QuestionScore",
    "canonical_id",
    "clear_caches",
    "match_answers",
    "score_prediction",
    "summarize",
    "supported_by_evidence",
]

#: Metadata keys a summary is broken down by (when the questions carry them).
DEFAULT_BREAKDOWN_KEYS: tuple[str, ...] = ("hops", "qtype", "compositionality", "constrained", "level")


# ---------------------------------------------------------------------------------------------------------------------
# Per question


def _number(value: Any, kind: type = float) -> Any:
    try:
        number = kind(value)
    except (TypeError, ValueError):
        return kind(0)
    if isinstance(number, float) and not math.isfinite(number):
        return 0.0
    return number


@dataclass(slots=True)
class QuestionScore:
    """The scores of one question, plus what the summary needs (grounding, usage, breakdown values).

    ``to_dict`` / ``from_dict`` round-trip through JSON, so a runner can write one line per question and rebuild the
    summary from its results file. ``supported_hit1`` is None for a row scored before it existed; ``audits`` (per
    check, the counts of :data:`AUDIT_COUNTS`) and ``stats`` (the method's own numbers) are empty for a method that
    records none; ``metrics`` holds the values of the registered per-question metrics (empty when none is registered).
    """

    id: str
    hit1: float
    hit: float
    precision: float
    recall: float
    f1: float
    legacy_hit1: float
    legacy_hit: float
    legacy_precision: float
    legacy_recall: float
    legacy_f1: float
    grounding: str
    kgr: float  # this question's grounding weight w(a_i)
    n_pred: int
    n_gold: int
    n_matched: int
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    error: str | None = None
    groups: dict[str, Any] = field(default_factory=dict)
    supported_hit1: float | None = None  # hit1 and the first answer is a node of the evidence; None: not measured
    audits: dict[str, dict[str, int]] = field(default_factory=dict)
    stats: dict[str, float] = field(default_factory=dict)
    metrics: dict[str, float | None] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QuestionScore:
        """Rebuild from :meth:`to_dict` output (extra keys, e.g. a runner's ``answers``, are ignored)."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        try:
            values["groups"] = dict(values.get("groups") or {})
            values["audits"] = {str(check): {str(k): int(v) for k, v in dict(counts).items()}
                                for check, counts in dict(values.get("audits") or {}).items()}
            values["stats"] = {str(k): float(v) for k, v in dict(values.get("stats") or {}).items()}
            values["metrics"] = {str(k): _optional_float(v) for k, v in dict(values.get("metrics") or {}).items()}
            return cls(**values)
        except (TypeError, ValueError) as exc:
            raise DataError(f"score row {data.get('id')!r} is not a question score: {exc}") from exc


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _usage(usage: Mapping[str, Any]) -> tuple[int, int, int, float]:
    calls = usage.get("calls", usage.get("llm_calls", 0))
    return (_number(calls, int), _number(usage.get("prompt_tokens", 0), int),
            _number(usage.get("completion_tokens", 0), int), _number(usage.get("latency_s", 0.0)))


def score_prediction(question: Question, prediction: Prediction, *,
                     breakdown_keys: Sequence[str] = DEFAULT_BREAKDOWN_KEYS,
                     latency_s: float | None = None) -> QuestionScore:
    """Score one prediction: strict and legacy matching, grounding weight, usage, its breakdown values, whether the
    first answer is correct and supported by the evidence, its audits against gold (the module docstring), and the
    registered per-question metrics (each given the question, the prediction and this score).

    ``latency_s`` overrides the prediction's ``usage["latency_s"]`` (a runner passes the wall time of the question).
    """
    strict, lenient = match_strict_and_legacy(prediction.answers, question.answers)
    supported = bool(strict.hit1 and strict.n_gold and prediction.answers
                     and supported_by_evidence(prediction.answers[0], prediction.evidence))
    audits = audit_counts(question.answers, prediction.audits) if prediction.audits else {}
    grounding = Grounding(prediction.grounding)
    calls, prompt_tokens, completion_tokens, usage_latency = _usage(prediction.usage)
    groups = {k: question.metadata[k] for k in breakdown_keys if question.metadata.get(k) is not None}
    score = QuestionScore(
        id=question.id,
        hit1=strict.hit1, hit=strict.hit, precision=strict.precision, recall=strict.recall, f1=strict.f1,
        legacy_hit1=lenient.hit1, legacy_hit=lenient.hit, legacy_precision=lenient.precision,
        legacy_recall=lenient.recall, legacy_f1=lenient.f1,
        grounding=grounding.value, kgr=GROUNDING_WEIGHTS[grounding],
        n_pred=strict.n_pred, n_gold=strict.n_gold, n_matched=strict.n_matched,
        llm_calls=calls, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
        latency_s=float(latency_s) if latency_s is not None else usage_latency,
        error=prediction.error, groups=groups,
        supported_hit1=1.0 if supported else 0.0, audits=audits, stats=dict(prediction.stats),
    )
    score.metrics = {metric.name: _optional_float(metric.per_question(question, prediction, score))
                     for metric in registered_metrics() if metric.per_question is not None}
    return score


# ---------------------------------------------------------------------------------------------------------------------
# Aggregation


def _aggregate(scores: Sequence[QuestionScore], rows: Sequence[Mapping[str, Any]], *, whole_run: bool) -> dict[str, Any]:
    """The summary of ``scores`` (without breakdowns); ``rows`` are the same questions as results.jsonl rows. A
    breakdown group (not ``whole_run``) leaves out the metrics kept to the whole run."""
    grounding = {g.value: 0 for g in Grounding}
    for s in scores:
        grounding[s.grounding] = grounding.get(s.grounding, 0) + 1
    summary: dict[str, Any] = {"n": len(scores), "errors": sum(1 for s in scores if s.error)}
    summary.update({metric.name: metric.value(rows) for metric in registered_metrics()
                    if whole_run or metric.in_breakdowns})
    summary.update(grounding=grounding, audits=_aggregate_audits(scores), stats=_aggregate_stats(scores))
    return summary


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _aggregate_audits(scores: Sequence[QuestionScore]) -> dict[str, dict[str, Any]]:
    """Per check (sorted): the summed counts, how many questions carry it (with known gold, with a claim, with an audit
    containing gold), and the rates ``precision``, ``recall``, ``stopped_without_answer``, ``searching_success``."""
    checks: dict[str, dict[str, Any]] = {}
    for s in scores:
        for check, counts in s.audits.items():
            total = checks.get(check)
            if total is None:
                total = checks[check] = {**dict.fromkeys(AUDIT_COUNTS, 0), "questions": 0, "questions_known": 0,
                                         "questions_claimed": 0, "questions_contained": 0}
            for key in AUDIT_COUNTS:
                total[key] += int(counts.get(key, 0))
            total["questions"] += 1
            if counts.get("n", 0) > 0:  # audits are counted under n only when the gold is known
                total["questions_known"] += 1
                total["questions_claimed"] += int(counts.get("claims", 0) > 0)
                total["questions_contained"] += int(counts.get("contained", 0) > 0)
    result: dict[str, dict[str, Any]] = {}
    for check in sorted(checks):
        total = checks[check]
        total["precision"] = _ratio(total["tp"], total["tp"] + total["fp"])
        total["recall"] = _ratio(total["tp"], total["tp"] + total["fn"])
        total["stopped_without_answer"] = _ratio(total["final_wrong"], total["questions_claimed"])
        total["searching_success"] = _ratio(total["questions_contained"], total["questions_known"])
        result[check] = total
    return result


def _aggregate_stats(scores: Sequence[QuestionScore]) -> dict[str, dict[str, float | int]]:
    """Per stats key (sorted): the mean over the questions that report it and how many do."""
    values: dict[str, list[float]] = {}
    for s in scores:
        for key, value in s.stats.items():
            values.setdefault(key, []).append(float(value))
    return {key: {"mean": average(values[key]), "n": len(values[key])} for key in sorted(values)}


def _group_order(value: str) -> tuple[int, float, str]:
    try:
        return (0, float(value), value)
    except ValueError:
        return (1, 0.0, value)


def _row_of(score: QuestionScore) -> dict[str, Any]:
    """A score as its results.jsonl row holds it (the fields only; no deep copy, unlike ``to_dict``)."""
    return {name: getattr(score, name) for name in _FIELD_NAMES}


_FIELD_NAMES = tuple(f.name for f in fields(QuestionScore))


def summarize(scores: Iterable[QuestionScore | Mapping[str, Any]], *,
              breakdown_keys: Sequence[str] | None = None) -> dict[str, Any]:
    """Aggregate per-question scores into one summary (all rates are fractions in [0, 1]).

    Keys: ``n``, ``errors``, every registered metric under its name (:mod:`kgqa.eval.metric_registry`, listed by
    ``kgqa eval metrics``: ``hits@1``, ``f1``, ``kgr``, ``faithful_f1``, ``legacy_*``, ``llm_calls_mean``,
    ``tokens_mean``, ``reliable_answering`` ...), ``grounding`` (counts per state), ``audits`` (per check: the summed
    :data:`AUDIT_COUNTS`, ``questions``, ``questions_known``, ``questions_claimed``, ``questions_contained`` and the
    rates ``precision``, ``recall``, ``stopped_without_answer``, ``searching_success``, each None when its denominator
    is 0), ``stats`` (per key: ``mean`` over the questions reporting it and their count ``n``) and ``breakdowns``: for
    each breakdown key that some question carries, the same (without nested breakdowns and the metrics kept to the
    whole run) per value, e.g. ``breakdowns["hops"]["2"]``. Rows may be :class:`QuestionScore` objects or their
    ``to_dict()`` form; rows read from results.jsonl also carry the runner's timings, which the cost metrics read.
    """
    scored: list[QuestionScore] = []
    rows: list[Mapping[str, Any]] = []
    for item in scores:
        if isinstance(item, QuestionScore):
            scored.append(item)
            rows.append(_row_of(item))
        else:
            scored.append(QuestionScore.from_dict(item))
            rows.append(item)
    summary = _aggregate(scored, rows, whole_run=True)
    keys = list(breakdown_keys) if breakdown_keys is not None else list(
        dict.fromkeys([*DEFAULT_BREAKDOWN_KEYS, *(k for s in scored for k in s.groups)]))
    breakdowns: dict[str, dict[str, Any]] = {}
    for key in keys:
        groups: dict[str, list[int]] = {}
        for index, s in enumerate(scored):
            value = s.groups.get(key)
            if value is not None:
                groups.setdefault(str(value), []).append(index)
        if groups:
            breakdowns[key] = {value: _aggregate([scored[i] for i in groups[value]], [rows[i] for i in groups[value]],
                                                 whole_run=False)
                               for value in sorted(groups, key=_group_order)}
    summary["breakdowns"] = breakdowns
    return summary
