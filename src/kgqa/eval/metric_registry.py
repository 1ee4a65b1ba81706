"""The metric registry: every number summary.json reports about a run's answers and costs is a registered :class:`Metric`.

A metric is a name (its summary.json key), labels, a one-line description of what it measures, a direction, a format,
a section, the places it is shown, and one value function: either ``per_question(question, prediction, score)``, a
number or None (not measured) per question, kept in the question's results.jsonl row under ``metrics`` and averaged
over the questions that measured it; or ``over_rows(rows)``, a value of the run's rows at once (the rows as
results.jsonl holds them: every field of :class:`~kgqa.eval.metrics.QuestionScore` plus what the runner adds, such as
``kg_time_s``). :func:`kgqa.eval.metrics.summarize` computes every registered metric, for the run and for each
breakdown group; report.md, ``kgqa eval compare``, the ``kgqa eval`` headline and the service list the metrics shown
there (:func:`shown_in`), so a new metric is one function and one registration (docs/adding-a-metric.md).

Metrics are one more :class:`kgqa.registry.Registry` (kind ``metric``, entry-point group ``kgqa.metrics``, whose entry
points name :class:`Metric` objects). They are listed in the order they were created: the built-ins below in the order
written (which is the order of the headline), then a plugin's in the order its module creates them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from kgqa.errors import ConfigError
from kgqa.registry import Registry, registry_key

if TYPE_CHECKING:
    from kgqa.core import Prediction, Question
    from kgqa.eval.metrics import QuestionScore

__all__ = [
    "METRICS",
    "Direction",
    "Format",
    "Metric",
    "Place",
    "Section",
    "average",
    "mean_of",
    "measured_mean_of",
    "register_metric",
    "registered_metrics",
    "share_of",
    "shown_in",
    "sum_of",
]

#: A results.jsonl row (or a :class:`~kgqa.eval.metrics.QuestionScore`'s fields, for scores never written to a file).
Row = Mapping[str, Any]
PerQuestion = Callable[["Question", "Prediction", "QuestionScore"], float | None]
OverRows = Callable[[Sequence[Row]], float | int | None]


class Direction(StrEnum):
    """Which way a metric is better."""

    HIGHER = "higher"
    LOWER = "lower"
    NEITHER = "neither"  # a description of the run, not a goal (a share of time, a count of cache hits)


class Format(StrEnum):
    """How a value is written."""

    RATE = "rate"  # a fraction, written as a percentage with one decimal (0.625 -> 62.5)
    NUMBER = "number"  # two decimals on a line; tables: three significant digits below 1, two decimals below 100
    WHOLE = "whole"  # like a number in tables, but a line rounds it to a whole number (tokens per question)


class Section(StrEnum):
    """The group a metric is listed with: report.md's tables and the blocks of ``kgqa eval compare``."""

    ANSWERS = "answers"  # accuracy and faithfulness of the answers (report.md's first table)
    LEGACY = "legacy"  # the legacy substring rule (its own table)
    COST = "cost"  # calls, tokens and time (the cost table)
    VERDICTS = "verdicts"  # the answers checked against the method's evidence: report.md's first table, compare's
    # rows after the breakdowns beside the audit checks


class Place(StrEnum):
    """Where a metric is shown besides summary.json (which holds every metric)."""

    REPORT = "report"  # report.md, in the table of its section
    HEADLINE = "headline"  # the run in one line: `kgqa eval`'s last line, report.md's tables by breakdown, the
    # service's run list
    COMPARE = "compare"  # a row of `kgqa eval compare`
    SERVICE = "service"  # the service's run summary (GET /v1/runs/{run} and the viewer's run page)


#: Where a metric is shown unless its registration says otherwise.
SHOWN_BY_DEFAULT = frozenset({Place.REPORT, Place.COMPARE, Place.SERVICE})

#: Keys of summary.json that are not metrics: a metric may not take one of them.
RESERVED_NAMES = frozenset({"n", "errors", "grounding", "audits", "stats", "breakdowns", "run", "selected", "partial",
                            "dataset", "split", "method", "method_name", "method_config", "method_config_resolved", "llm",
                            "kg", "seed"})

_creation_order = itertools.count()


@dataclass(frozen=True)
class Metric:
    """One metric (the module docstring; docs/adding-a-metric.md describes each field).

    Exactly one of ``per_question`` and ``over_rows`` is given. ``short_label`` (default: ``label``) is what the
    headline and the tables by breakdown print. ``in_breakdowns=False`` keeps a metric to the whole run, as the
    runner's timings and counters always were (a group's share of wall time differs between two equal runs).
    ``direction``, ``format``, ``section`` and ``shown`` also take their values as strings (``"lower"``,
    ``"number"``, ``"cost"``, ``{"report", "compare"}``).
    """

    name: str
    label: str
    description: str
    per_question: PerQuestion | None = None
    over_rows: OverRows | None = None
    direction: Direction = Direction.HIGHER
    format: Format = Format.RATE
    section: Section = Section.ANSWERS
    shown: Collection[Place] = SHOWN_BY_DEFAULT
    short_label: str = ""
    in_breakdowns: bool = True
    created: int = field(default_factory=lambda: next(_creation_order), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name or registry_key(self.name) != self.name:
            raise ValueError(f"metric name {self.name!r} must be lower case without surrounding spaces "
                             f"(it is the key of summary.json)")
        if self.name in RESERVED_NAMES:
            raise ValueError(f"metric name {self.name!r} is a key summary.json already uses for something else")
        if not self.label.strip() or not self.description.strip() or "\n" in self.description:
            raise ValueError(f"metric {self.name!r} needs a label and a one-line description")
        if (self.per_question is None) == (self.over_rows is None):
            raise ValueError(f"metric {self.name!r} needs exactly one of per_question and over_rows")
        set_field = object.__setattr__  # frozen: the enums are normalised once, here
        set_field(self, "direction", Direction(self.direction))
        set_field(self, "format", Format(self.format))
        set_field(self, "section", Section(self.section))
        set_field(self, "shown", frozenset(Place(place) for place in self.shown))
        set_field(self, "short_label", self.short_label or self.label)

    def value(self, rows: Sequence[Row]) -> float | int | None:
        """The metric of ``rows``: ``over_rows(rows)``, or the mean of the per-question values the rows measured
        (None when none did, e.g. rows scored before the metric was registered)."""
        if self.over_rows is not None:
            return self.over_rows(rows)
        return _measured_mean([(row.get("metrics") or {}).get(self.name) for row in rows])

    def describe(self) -> dict[str, Any]:
        """The metric as JSON (``kgqa eval metrics --json``, the service)."""
        return {"name": self.name, "label": self.label, "short_label": self.short_label,
                "description": self.description, "direction": self.direction.value, "format": self.format.value,
                "section": self.section.value, "kind": "per_question" if self.per_question else "over_rows",
                "shown": sorted(place.value for place in self.shown), "in_breakdowns": self.in_breakdowns}


#: Every metric by name: the built-ins below, those added by :func:`register_metric`, and the ``kgqa.metrics`` entry
#: points.
METRICS: Registry[Metric] = Registry("metric")


def register_metric(metric: Metric, *, replace: bool = False) -> Metric:
    """Add ``metric`` to the registry; a second metric under a taken name is refused unless ``replace``."""
    return METRICS.add(metric.name, metric, replace=replace)


def registered_metrics() -> list[Metric]:
    """Every registered metric, in the order they were created; an entry point naming something else than a
    :class:`Metric` of its own name is a :class:`ConfigError`."""
    metrics = []
    for key, entry in METRICS.items():
        if not isinstance(entry, Metric) or entry.name != key:
            raise ConfigError(f"metric {key!r} is registered as {entry!r}, not a Metric named {key!r} "
                              f"(entry point group {METRICS.entry_point_group})")
        metrics.append(entry)
    return sorted(metrics, key=lambda metric: metric.created)


def shown_in(place: Place, sections: Collection[Section] | None = None) -> list[Metric]:
    """The metrics shown in ``place`` (of ``sections`` only, if given), in the order they were created."""
    return [m for m in registered_metrics() if place in m.shown and (sections is None or m.section in sections)]


# ---------------------------------------------------------------------------------------------------------------------
# Value functions over rows


def average(values: Sequence[float]) -> float:
    """The mean of ``values`` (0.0 for none), summed with ``math.fsum`` so it does not depend on the rows' order."""
    return math.fsum(values) / len(values) if values else 0.0


def _measured_mean(values: Sequence[float | None]) -> float | None:
    measured = [float(v) for v in values if v is not None]
    return average(measured) if measured else None


def mean_of(key: str) -> OverRows:
    """The mean of ``row[key]`` over the rows, a missing value counted as 0 (0.0 for no rows)."""

    def mean(rows: Sequence[Row]) -> float:
        return average([float(row.get(key) or 0) for row in rows])

    return mean


def measured_mean_of(key: str) -> OverRows:
    """The mean of ``row[key]`` over the rows that have it; None when none has."""

    def mean(rows: Sequence[Row]) -> float | None:
        return _measured_mean([row.get(key) for row in rows])

    return mean


def sum_of(key: str) -> OverRows:
    """The sum of the whole numbers ``row[key]``, a missing value counted as 0."""

    def total(rows: Sequence[Row]) -> int:
        return sum(int(row.get(key) or 0) for row in rows)

    return total


def share_of(part: str, whole: str) -> OverRows:
    """``sum(row[part]) / sum(row[whole])``; 0.0 when the whole is 0."""

    def share(rows: Sequence[Row]) -> float:
        total = math.fsum(float(row.get(whole) or 0) for row in rows)
        return math.fsum(float(row.get(part) or 0) for row in rows) / total if total > 0 else 0.0

    return share


# ---------------------------------------------------------------------------------------------------------------------
# The built-in metrics (their order is the headline's: `kgqa eval` prints Hits@1, F1, legacy Hits@1, KGR, ...)


def _tokens(row: Row) -> int:
    return int(row.get("prompt_tokens") or 0) + int(row.get("completion_tokens") or 0)


def _tokens_mean(rows: Sequence[Row]) -> float:
    return average([_tokens(row) for row in rows])


def _tokens_total(rows: Sequence[Row]) -> int:
    return sum(_tokens(row) for row in rows)


def _faithful_f1(rows: Sequence[Row]) -> float:
    """Eq. 12 of the CCoR paper: the product of the run's KGR and F1 (not a mean of per-question products)."""
    return average([float(row["kgr"]) for row in rows]) * average([float(row["f1"]) for row in rows])


def _questions_with_unreadable(rows: Sequence[Row]) -> int:
    return sum(1 for row in rows if int(row.get("unreadable_replies") or 0) > 0)


def _questions_with_salvaged(rows: Sequence[Row]) -> int:
    return sum(1 for row in rows if int(row.get("salvaged_replies") or 0) > 0)


def readable_mean_of(key: str) -> OverRows:
    """The mean of ``row[key]`` over the rows whose question got no reply left unreadable after its re-ask (those rows
    are errors that ``--retry-errors`` asks again); None when every row got one."""

    def mean(rows: Sequence[Row]) -> float | None:
        kept = [float(row.get(key) or 0) for row in rows if int(row.get("unreadable_replies") or 0) == 0]
        return average(kept) if kept else None

    return mean


_EVERYWHERE = frozenset({Place.REPORT, Place.HEADLINE, Place.COMPARE, Place.SERVICE})
_TABLES = frozenset({Place.REPORT, Place.COMPARE})
_SUMMARY_ONLY: frozenset[Place] = frozenset()

for _metric in (
    Metric("hits@1", "Hits@1", "share of questions whose first answer matches a gold answer (strict rule)",
           over_rows=mean_of("hit1"), shown=_EVERYWHERE),
    Metric("hit", "Hit", "share of questions where some answer matches a gold answer (strict rule)",
           over_rows=mean_of("hit")),
    Metric("precision", "Precision", "mean share of a question's answers that match a gold answer one-to-one (strict)",
           over_rows=mean_of("precision")),
    Metric("recall", "Recall", "mean share of a question's gold answers that some answer matches one-to-one (strict)",
           over_rows=mean_of("recall")),
    Metric("f1", "F1", "mean per-question F1 of that precision and recall (strict)", over_rows=mean_of("f1"),
           shown=_EVERYWHERE),
    Metric("legacy_hits@1", "legacy Hits@1", "Hits@1 under the ToG/PoG substring rule, to compare with papers using it",
           over_rows=mean_of("legacy_hit1"), section=Section.LEGACY, shown=_EVERYWHERE),
    Metric("kgr", "KGR", "mean grounding weight of the answers: structured 1, synthesis 0.5, parametric 0 (CCoR)",
           over_rows=mean_of("kgr"), shown=_EVERYWHERE),
    Metric("faithful_f1", "Faithful-F1", "the run's KGR x the run's F1 (CCoR, Eq. 12)", over_rows=_faithful_f1,
           shown=_EVERYWHERE),
    Metric("reliable_answering", "reliable answering",
           "share of questions whose first answer is correct and a node of the evidence (SRP), of those measured",
           over_rows=measured_mean_of("supported_hit1"), section=Section.VERDICTS),
    Metric("legacy_hit", "legacy Hit", "Hit under the legacy substring rule", over_rows=mean_of("legacy_hit"),
           section=Section.LEGACY),
    Metric("legacy_precision", "legacy Precision", "precision under the legacy substring rule",
           over_rows=mean_of("legacy_precision"), section=Section.LEGACY, shown=_TABLES),
    Metric("legacy_recall", "legacy Recall", "recall under the legacy substring rule",
           over_rows=mean_of("legacy_recall"), section=Section.LEGACY, shown=_TABLES),
    Metric("legacy_f1", "legacy F1", "F1 under the legacy substring rule", over_rows=mean_of("legacy_f1"),
           section=Section.LEGACY),
    Metric("llm_calls_mean", "LLM calls / q", "mean LLM calls per question", over_rows=mean_of("llm_calls"),
           direction=Direction.LOWER, format=Format.NUMBER, section=Section.COST, shown=_EVERYWHERE,
           short_label="calls/q"),
    Metric("prompt_tokens_mean", "prompt tokens / q", "mean prompt tokens per question",
           over_rows=mean_of("prompt_tokens"), direction=Direction.LOWER, format=Format.WHOLE, section=Section.COST,
           shown=_TABLES),
    Metric("completion_tokens_mean", "completion tokens / q", "mean completion tokens per question",
           over_rows=mean_of("completion_tokens"), direction=Direction.LOWER, format=Format.WHOLE,
           section=Section.COST, shown=_TABLES),
    Metric("tokens_mean", "tokens / q", "mean tokens (prompt and completion) per question", over_rows=_tokens_mean,
           direction=Direction.LOWER, format=Format.WHOLE, section=Section.COST, shown=_EVERYWHERE,
           short_label="tokens/q"),
    Metric("latency_s_mean", "latency s / q", "mean wall time per question, in seconds",
           over_rows=mean_of("latency_s"), direction=Direction.LOWER, format=Format.NUMBER, section=Section.COST),
    Metric("kg_time_s_mean", "KG time s / q", "mean time per question spent waiting for the KG, in seconds",
           over_rows=mean_of("kg_time_s"), direction=Direction.LOWER, format=Format.NUMBER, section=Section.COST,
           shown=_TABLES, in_breakdowns=False),
    Metric("kg_time_share", "KG share of time", "share of the questions' wall time spent waiting for the KG",
           over_rows=share_of("kg_time_s", "latency_s"), direction=Direction.NEITHER, section=Section.COST,
           shown=_TABLES, in_breakdowns=False),
    Metric("llm_time_share", "LLM share of time", "share of the questions' wall time spent waiting for the LLM",
           over_rows=share_of("llm_latency_s", "latency_s"), direction=Direction.NEITHER, section=Section.COST,
           shown=_TABLES, in_breakdowns=False),
    Metric("kg_calls_mean", "KG calls / q", "mean KG queries per question", over_rows=mean_of("kg_calls"),
           direction=Direction.LOWER, format=Format.NUMBER, section=Section.COST, shown=_SUMMARY_ONLY,
           in_breakdowns=False),
    Metric("llm_calls_total", "LLM calls", "LLM calls of all questions", over_rows=sum_of("llm_calls"),
           direction=Direction.LOWER, format=Format.WHOLE, section=Section.COST, shown=_SUMMARY_ONLY),
    Metric("tokens_total", "tokens", "tokens (prompt and completion) of all questions", over_rows=_tokens_total,
           direction=Direction.LOWER, format=Format.WHOLE, section=Section.COST, shown=_SUMMARY_ONLY),
    Metric("cache_hits_total", "cache hits", "LLM calls answered from the cache", over_rows=sum_of("cache_hits"),
           direction=Direction.NEITHER, format=Format.WHOLE, section=Section.COST, shown=_SUMMARY_ONLY,
           in_breakdowns=False),
    Metric("unreadable_replies_total", "unreadable replies",
           "replies still invalid after the re-ask (the step went on without them)",
           over_rows=sum_of("unreadable_replies"), direction=Direction.LOWER, format=Format.WHOLE,
           section=Section.COST, shown=_SUMMARY_ONLY,
           in_breakdowns=False),
    Metric("questions_with_unreadable", "questions with unreadable replies",
           "questions that got at least one unreadable reply", over_rows=_questions_with_unreadable,
           direction=Direction.LOWER, format=Format.WHOLE, section=Section.COST, shown=_SUMMARY_ONLY,
           in_breakdowns=False),
    # The score without the questions an unreadable reply marked as errors (Hits@1 and F1 above count them as they
    # stand): both are reported, so a run with a faulty endpoint can be read either way.
    Metric("hits@1_readable", "Hits@1 without unreadable",
           "Hits@1 over the questions that got no reply still unreadable after its re-ask",
           over_rows=readable_mean_of("hit1"), shown=_TABLES),
    Metric("f1_readable", "F1 without unreadable",
           "F1 over the questions that got no reply still unreadable after its re-ask",
           over_rows=readable_mean_of("f1"), shown=_TABLES),
    Metric("salvaged_replies_total", "salvaged replies",
           "replies cut off by their token budget and read as far as they got (what they had not finished is lost)",
           over_rows=sum_of("salvaged_replies"), direction=Direction.LOWER, format=Format.WHOLE,
           section=Section.COST, shown=_SUMMARY_ONLY, in_breakdowns=False),
    Metric("questions_with_salvaged", "questions with salvaged replies",
           "questions that got at least one reply cut off by its token budget and salvaged",
           over_rows=_questions_with_salvaged, direction=Direction.LOWER, format=Format.WHOLE, section=Section.COST,
           shown=_SUMMARY_ONLY, in_breakdowns=False),
):
    register_metric(_metric)
