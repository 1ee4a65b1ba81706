"""Run reports: RUNDIR/report.md (tables), PNG plots, and side-by-side comparison of runs.

Plots (matplotlib with the Agg canvas, no display and no pyplot global state): ``accuracy.png`` (strict and legacy
scores of the run), ``accuracy_by_<key>.png`` per breakdown (hops, question type, ...), ``llm_calls_hist.png`` and
``tokens_hist.png`` (per-question cost). matplotlib is optional (``pip install kgqa[plots]``): without it the report
says the plots were skipped.

The metrics listed come from :mod:`kgqa.eval.metric_registry`: report.md's first table holds those of the answers and
verdicts sections shown in the report, then a table per section (legacy, cost); its tables by breakdown key, the
one-line :func:`headline` and the comparison's rows (by section, the verdicts after the breakdowns) follow the same
registrations, so a registered metric shows up in each without an edit here.

Every place names a run's method by summary.json's ``method``, the name its figures are reported under
(:func:`reported_method`; FoG's graph mode is ``fog[graph]``); a summary written before that key held labels is read
under its method's label.

This module reads run directories through :mod:`kgqa.eval.rundir` and scores with :mod:`kgqa.eval.metrics`; it never
imports the runner or the summary (they call it), so the eval modules form no import cycle.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from kgqa.errors import ConfigError
from kgqa.eval.losses import MEANINGS
from kgqa.eval.metric_registry import METRICS, Format, Metric, Place, Section, shown_in
from kgqa.eval.metrics import summarize
from kgqa.eval.rundir import CONFIG_FILE, REPORT_FILE, RESULTS_FILE, SUMMARY_FILE, read_results
from kgqa.methods.base import KGQAMethod, method_label
from kgqa.methods.registry import METHODS

__all__ = ["REPORT_FILE", "compare_runs", "format_table", "headline", "load_summary", "render_loss_table", "render_report",
           "reported_method", "write_plots", "write_report"]

#: The rates of one audit check: (key in the check's summary, label suffix in the comparison), in the comparison's order.
AUDIT_RATES: tuple[tuple[str, str], ...] = (
    ("precision", "precision"), ("recall", "recall"), ("stopped_without_answer", "stopped w/o answer"),
    ("searching_success", "searching success"),
)
#: The metric a breakdown row of the comparison shows per group.
BREAKDOWN_METRIC = "hits@1"


def _cell(value: Any, fmt: Format) -> str:
    """A table cell: a rate as a percentage with one decimal, a number with the digits its size deserves, None as -."""
    if value is None:
        return "-"
    if fmt is Format.RATE:
        return f"{100 * float(value):.1f}"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) >= 100):
        return f"{int(value):,}"
    number = float(value)
    if abs(number) >= 100:
        return f"{number:,.0f}"
    if abs(number) >= 1:
        return f"{number:.2f}"
    return f"{number:.3g}"


def _line_value(value: Any, fmt: Format) -> str:
    """A value on one line: a number with fixed decimals (two, none for a whole number) so a line reads evenly."""
    if value is None or fmt is Format.RATE:
        return _cell(value, fmt)
    return f"{float(value):.0f}" if fmt is Format.WHOLE else f"{float(value):.2f}"


def headline(summary: Mapping[str, Any], *, sections: Collection[Section] | None = None) -> str:
    """The run in one line: each headline metric (of ``sections`` only, if given) as ``short label value``."""
    return "  ".join(f"{m.short_label} {_line_value(summary.get(m.name), m.format)}"
                     for m in shown_in(Place.HEADLINE, sections))


def _metric_table(summary: Mapping[str, Any], metrics: Sequence[Metric]) -> list[str]:
    """A one-row table of ``metrics`` (headed by their labels, capitalised as report.md's headers are) and a blank
    line; nothing for no metrics."""
    if not metrics:
        return []
    return [format_table([_capitalised(m.label) for m in metrics],
                         [[_cell(summary.get(m.name), m.format) for m in metrics]]), ""]


def _capitalised(label: str) -> str:
    return label[:1].upper() + label[1:]


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]], *, markdown: bool = True) -> str:
    """A markdown table, or a plain aligned text table (first column left-aligned, the others right-aligned)."""
    cells = [list(map(str, header)), *[list(map(str, r)) for r in rows]]
    if markdown:
        lines = ["| " + " | ".join(c.replace("|", "\\|") for c in cells[0]) + " |",
                 "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in cells[1:]]
        return "\n".join(lines)
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    out = []
    for n, row in enumerate(cells):
        out.append("  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(row)).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------------------------------
# The loss table


def _share(count: int, total: int) -> str:
    return f"{100.0 * count / total:.1f}" if total else "-"


def render_loss_table(table: Mapping[str, Any], *, markdown: bool = True, steps: int = 10) -> str:
    """The loss table as text: losses with counts and shares (of the missed and of all questions), the steps that
    lost most, and a column per loss for each breakdown."""
    n, missed = int(table["questions"]), int(table["missed"])
    counts: Mapping[str, int] = table["counts"]
    lines = [f"{missed:,} of {n:,} questions missed (no gold answer among the answers).", ""]
    if not missed:
        return "\n".join(lines).rstrip() + "\n"
    rows = [[loss, f"{count:,}", _share(count, missed), _share(count, n), MEANINGS.get(loss, "")]
            for loss, count in counts.items()]
    lines += [format_table(["loss", "questions", "% of missed", "% of all", "meaning"], rows, markdown=markdown), ""]
    top = list(table.get("steps", {}).items())[:steps]
    if top:
        lines += [format_table(["loss @ step", "questions"], [[k, f"{v:,}"] for k, v in top], markdown=markdown), ""]
    present = list(counts)
    for key, groups in (table.get("by") or {}).items():
        body = [[value, f"{g['questions']:,}", f"{g['missed']:,}",
                 *[_share(int(g["counts"].get(loss, 0)), int(g["questions"])) for loss in present]]
                for value, g in groups.items()]
        lines += [f"By {key} (% of the questions of each {key}):", "",
                  format_table([key, "questions", "missed", *present], body, markdown=markdown), ""]
    return "\n".join(lines).rstrip() + "\n"


# ---------------------------------------------------------------------------------------------------------------------
# Plots


def write_plots(run_dir: str | os.PathLike[str], summary: Mapping[str, Any],
                rows: Sequence[Mapping[str, Any]]) -> list[Path]:
    """Write the PNG plots of a run; returns the files written (none without matplotlib)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return []
    out = Path(run_dir)
    written: list[Path] = []

    def save(fig: Any, name: str) -> None:
        FigureCanvasAgg(fig)
        fig.tight_layout()
        path = out / name
        fig.savefig(path, dpi=110)
        written.append(path)

    # Overall: strict and legacy side by side.
    labels = ["Hits@1", "Hit", "Precision", "Recall", "F1"]
    strict = [summary.get(k) or 0.0 for k in ("hits@1", "hit", "precision", "recall", "f1")]
    legacy = [summary.get(k) or 0.0 for k in ("legacy_hits@1", "legacy_hit", "legacy_precision", "legacy_recall",
                                               "legacy_f1")]
    fig = Figure(figsize=(7, 3.6))
    ax = fig.add_subplot()
    xs = range(len(labels))
    ax.bar([x - 0.2 for x in xs], [100 * v for v in strict], width=0.4, label="strict")
    ax.bar([x + 0.2 for x in xs], [100 * v for v in legacy], width=0.4, label="legacy (substring)", alpha=0.6)
    ax.set_xticks(list(xs), labels)
    ax.set_ylim(0, 100)
    ax.set_ylabel("%")
    ax.set_title(f"{summary.get('method', '')} on {summary.get('dataset', '')} (n={summary.get('n', 0)}); "
                 f"KGR {100 * (summary.get('kgr') or 0):.1f}%")
    ax.legend(loc="upper right", fontsize=8)
    save(fig, "accuracy.png")

    for key, groups in (summary.get("breakdowns") or {}).items():
        values = list(groups)
        if not values:
            continue
        height = max(2.6, 0.32 * len(values) + 1.2)
        fig = Figure(figsize=(7, height))
        ax = fig.add_subplot()
        ys = range(len(values))
        ax.barh([y - 0.2 for y in ys], [100 * (groups[v].get("hits@1") or 0) for v in values], height=0.4,
                label="Hits@1")
        ax.barh([y + 0.2 for y in ys], [100 * (groups[v].get("f1") or 0) for v in values], height=0.4, label="F1",
                alpha=0.7)
        ax.set_yticks(list(ys), [f"{v} (n={groups[v].get('n', 0)})" for v in values], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, 100)
        ax.set_xlabel("%")
        ax.set_title(f"accuracy by {key}")
        ax.legend(loc="lower right", fontsize=8)
        save(fig, f"accuracy_by_{_safe(key)}.png")

    for name, values, title in (
            ("llm_calls_hist.png", [int(r.get("llm_calls", 0)) for r in rows], "LLM calls per question"),
            ("tokens_hist.png", [int(r.get("prompt_tokens", 0)) + int(r.get("completion_tokens", 0)) for r in rows],
             "tokens per question (prompt + completion)")):
        fig = Figure(figsize=(6, 3.4))
        ax = fig.add_subplot()
        if values:
            low, high = min(values), max(values)
            if name.startswith("llm_calls") and high - low <= 60:
                bins: Any = [b - 0.5 for b in range(low, high + 2)]  # one bar per call count
            else:
                bins = min(40, max(1, len(set(values))))
            ax.hist(values, bins=bins)
        ax.set_title(title)
        ax.set_ylabel("questions")
        save(fig, name)
    return written


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in str(text))


# ---------------------------------------------------------------------------------------------------------------------
# report.md


def _errors(rows: Sequence[Mapping[str, Any]], top: int = 8) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for row in rows:
        if row.get("error"):
            kind = str(row["error"]).split(":", 1)[0][:80]
            counts[kind] = counts.get(kind, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]


def _verdict_lines(summary: Mapping[str, Any]) -> list[str]:
    """The sections "Verdicts" (the method's audited checks against gold) and "Method statistics", when present."""
    lines: list[str] = []
    audits = summary.get("audits") or {}
    if audits:
        lines += ["## Verdicts", "",
                  "The method's own verdicts checked against gold by the harness (%). Precision and recall of its "
                  "positive claims; stopped w/o answer: its final verdict claimed the answer without it, among "
                  "questions with a claim; searching success: some audited node set holds a gold answer.", ""]
        table = [[check, f"{a.get('claims', 0):,}", *[_cell(a.get(key), Format.RATE) for key, _ in AUDIT_RATES],
                  f"{a.get('questions', 0):,}"] for check, a in audits.items()]
        lines += [format_table(["check", "claims", "precision", "recall", "stopped w/o answer", "searching success",
                                "questions"], table), ""]
    stats = summary.get("stats") or {}
    if stats:
        lines += ["## Method statistics", ""]
        lines += [format_table(["statistic", "mean", "questions"],
                               [[key, _cell(v.get("mean"), Format.NUMBER), f"{v.get('n', 0):,}"]
                                for key, v in stats.items()]),
                  ""]
    return lines


def render_report(summary: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], run_config: Mapping[str, Any],
                  plots: Sequence[str]) -> str:
    """The markdown report of a run."""
    lines = [f"# {summary.get('method', run_config.get('method', '?'))} on {summary.get('dataset', '?')} "
             f"/ {summary.get('split', '?')}", ""]
    facts = [("questions scored", f"{summary.get('n', 0):,}"
              + (f" of {summary['selected']:,} selected" if summary.get("selected") else "")),
             ("failed questions", str(summary.get("errors", 0))),
             ("unreadable replies", f"{summary.get('unreadable_replies_total', 0):,} in "
                                    f"{summary.get('questions_with_unreadable', 0):,} questions"),
             ("salvaged replies", f"{summary.get('salvaged_replies_total') or 0:,} in "
                                  f"{summary.get('questions_with_salvaged') or 0:,} questions (cut off by their "
                                  "token budget, read as far as they got)"),
             *([("registered method", f"{summary['method_name']} (its settings make it {summary.get('method')})")]
               if summary.get("method_name") not in (None, summary.get("method")) else []),
             ("method config", json.dumps(run_config.get("method_config") or {})),
             ("LLM", str(run_config.get("llm"))), ("KG", str(run_config.get("kg"))),
             ("seed / shuffle", f"{run_config.get('seed')} / {run_config.get('shuffle')}"),
             ("kgqa", f"{run_config.get('kgqa_version')} ({run_config.get('kgqa_commit') or 'commit unknown'})"),
             ("started", str(run_config.get("started_at")))]
    run = summary.get("run") or {}
    if run.get("questions_per_s"):
        facts.append(("this invocation", f"{run.get('answered', 0)} answered in {run.get('loop_s')} s "
                                         f"({run['questions_per_s']} q/s, {run.get('workers')} workers)"))
    if run.get("stopped"):
        facts.append(("stopped early", str(run["stopped"])))
    looks = run.get("test_ledger")
    if looks:
        facts.append(("test split", f"evaluation {looks.get('evaluations')} of this method on this test split "
                                    f"(`kgqa eval ledger`; choices belong on dev)"))
    lines += [format_table(["run", ""], facts), ""]

    lines += ["## Accuracy and faithfulness (strict matching; rates in %)", "",
              "Strict: normalised names or ids, one-to-one matching. Legacy: the ToG/PoG substring rule, for comparison "
              "with papers that used it. KGR weights structured 1, synthesis 0.5, parametric 0; Faithful-F1 = KGR x F1. "
              "Reliable answering: the first answer is correct and a node of the evidence triples.",
              ""]
    lines += _metric_table(summary, shown_in(Place.REPORT, (Section.ANSWERS, Section.VERDICTS)))
    lines += _metric_table(summary, shown_in(Place.REPORT, (Section.LEGACY,)))
    grounding = summary.get("grounding") or {}
    lines += ["Grounding: " + ", ".join(f"{k} {v}" for k, v in grounding.items()), ""]

    lines += _verdict_lines(summary)

    lines += ["## Cost", ""]
    lines += _metric_table(summary, shown_in(Place.REPORT, (Section.COST,)))
    lines += [f"Totals: {summary.get('llm_calls_total', 0):,} LLM calls, {summary.get('tokens_total', 0):,} tokens, "
              f"{summary.get('cache_hits_total', 0):,} cache hits.", ""]

    columns = shown_in(Place.HEADLINE)
    for key, groups in (summary.get("breakdowns") or {}).items():
        lines += [f"## By {key}", ""]
        table = [[str(v), f"{g.get('n', 0):,}", *[_cell(g.get(m.name), m.format) for m in columns],
                  str(g.get("errors", 0))] for v, g in groups.items()]
        lines += [format_table([key, "n", *[_capitalised(m.short_label) for m in columns], "errors"], table), ""]

    losses = summary.get("losses")
    if losses:
        lines += ["## Where the gold was lost", "",
                  "For each missed question, the step at which the gold left the method's candidates (the harness "
                  "compares each step's candidates with the gold chain; `kgqa eval diagnose` prints the same).", "",
                  render_loss_table(losses).rstrip(), ""]

    errors = _errors(rows)
    if errors:
        lines += ["## Failures", "", format_table(["error", "questions"], [[k, str(v)] for k, v in errors]), "",
                  "Tracebacks are in traces.jsonl.", ""]

    lines += ["## Plots", ""]
    if plots:
        lines += [f"![{Path(p).stem}]({Path(p).name})" for p in plots]
    else:
        lines.append("Plots skipped: matplotlib is not installed (pip install 'kgqa[plots]').")
    return "\n".join(lines).rstrip() + "\n"


def write_report(run_dir: str | os.PathLike[str], summary: Mapping[str, Any], rows: Sequence[Mapping[str, Any]],
                 run_config: Mapping[str, Any]) -> Path:
    """Write the plots and RUNDIR/report.md; returns the report's path."""
    out = Path(run_dir)
    plots = write_plots(out, summary, rows)
    path = out / REPORT_FILE
    tmp = out / f".{REPORT_FILE}.tmp"
    tmp.write_text(render_report(summary, rows, run_config, [p.name for p in plots]), encoding="utf-8")
    os.replace(tmp, path)
    return path


# ---------------------------------------------------------------------------------------------------------------------
# Comparison


def reported_method(record: Mapping[str, Any]) -> str:
    """The name a run's figures are reported under (summary.json's ``method``), from its config.json or a summary.json
    written before ``method_name`` was kept apart: its ``method_label`` (e.g. ``fog[graph]``); for a run written
    before labels were recorded, the label its method gives (:meth:`~kgqa.methods.base.KGQAMethod.label`) for the
    recorded resolved config and model; else the recorded method."""
    label = record.get("method_label")
    if isinstance(label, str) and label:
        return label
    name = str(record.get("method") or "?")
    try:
        factory = METHODS.get(name)
        if not (isinstance(factory, type) and issubclass(factory, KGQAMethod)) or factory.label is KGQAMethod.label:
            return name  # no label of its own: nothing to build
        resolved = record.get("method_config_resolved")
        # built without validation: a file the config named then (a scorer, a model) need not exist now
        config = factory.Config.model_construct(**(resolved if isinstance(resolved, dict) else {}))
        llm = record.get("llm")
        return method_label(factory(config), str(llm) if llm else None, name)
    except Exception:  # an unknown method (an imported run), a config this kgqa cannot read: the recorded name
        return name


def load_summary(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """RUNDIR/summary.json, or (for a run that never wrote one) a summary computed from its results, marked partial."""
    path = Path(run_dir)
    if not path.is_dir():
        raise ConfigError(f"run directory {path} does not exist")
    summary_file = path / SUMMARY_FILE
    if summary_file.is_file():
        try:
            summary = json.loads(summary_file.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ConfigError(f"{summary_file} is not valid JSON ({exc})") from None
        if isinstance(summary, dict) and summary.get("method") and "method_name" not in summary:
            # written before summaries kept the registered name apart: report it under its method's label
            summary["method_name"], summary["method"] = summary["method"], reported_method(summary)
        return summary
    if not (path / RESULTS_FILE).is_file():
        raise ConfigError(f"{path} is not a kgqa eval run directory (no {SUMMARY_FILE} or {RESULTS_FILE})")
    summary = summarize(read_results(path))
    if (path / CONFIG_FILE).is_file():
        try:
            run_config = json.loads((path / CONFIG_FILE).read_text(encoding="utf-8"))
        except ValueError:
            run_config = {}
        for key in ("dataset", "split", "method", "llm", "kg"):
            summary.setdefault(key, run_config.get(key))
        if run_config.get("method"):
            summary["method_name"], summary["method"] = run_config["method"], reported_method(run_config)
    summary["partial"] = True
    return summary


def compare_runs(run_dirs: Sequence[str | os.PathLike[str]], *,
                 breakdowns: bool = True) -> tuple[list[str], list[list[str]]]:
    """A table with one column per run and one row per metric (rates in %): (header, rows)."""
    if not run_dirs:
        raise ConfigError("name at least one run directory to compare")
    summaries = [load_summary(d) for d in run_dirs]
    names = [Path(d).name or str(d) for d in run_dirs]
    if len(set(names)) < len(names):  # same last component: show the paths
        names = [str(d) for d in run_dirs]
    header = ["metric", *[n + (" (partial)" if s.get("partial") else "") for n, s in zip(names, summaries, strict=True)]]
    rows: list[list[str]] = []
    for key, label in (("dataset", "dataset"), ("split", "split"), ("method", "method"), ("llm", "LLM"),
                       ("kg", "KG")):
        rows.append([label, *[str(s.get(key) if s.get(key) is not None else "-") for s in summaries]])
    rows.append(["n", *[f"{s.get('n', 0):,}" for s in summaries]])
    rows.append(["errors", *[str(s.get("errors", 0)) for s in summaries]])
    rows.append(["questions with unreadable replies", *[str(s.get("questions_with_unreadable", 0)) for s in summaries]])
    rows += _metric_rows(summaries, (Section.ANSWERS, Section.LEGACY, Section.COST))
    if breakdowns:
        metric = METRICS.get(BREAKDOWN_METRIC)
        keys: list[str] = []
        for s in summaries:
            keys += [k for k in (s.get("breakdowns") or {}) if k not in keys]
        for key in keys:
            values: list[str] = []
            for s in summaries:
                values += [v for v in (s.get("breakdowns") or {}).get(key, {}) if v not in values]
            for value in values:
                cells = []
                for s in summaries:
                    group = (s.get("breakdowns") or {}).get(key, {}).get(value)
                    cells.append("-" if group is None else
                                 f"{_cell(group.get(metric.name), metric.format)} ({group.get('n', 0)})")
                rows.append([f"{_compare_label(metric)} {key}={value} (n)", *cells])
    rows += _verdict_rows(summaries)
    return header, rows


def _compare_label(metric: Metric) -> str:
    return metric.label + (" %" if metric.format is Format.RATE else "")


def _metric_rows(summaries: Sequence[Mapping[str, Any]], sections: Collection[Section]) -> list[list[str]]:
    """A comparison row per metric of ``sections`` shown in the comparison: its label, then its value in each run."""
    return [[_compare_label(m), *[_cell(s.get(m.name), m.format) for s in summaries]]
            for section in sections for m in shown_in(Place.COMPARE, (section,))]


def _verdict_rows(summaries: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """The comparison rows of the verdict metrics (reliable answering), then of each audit check and each method
    statistic present in some run ("-" for a run without it)."""
    rows = _metric_rows(summaries, (Section.VERDICTS,))
    checks: list[str] = []
    stats: list[str] = []
    for s in summaries:
        checks += [c for c in (s.get("audits") or {}) if c not in checks]
        stats += [k for k in (s.get("stats") or {}) if k not in stats]
    for check in checks:
        for key, label in AUDIT_RATES:
            rows.append([f"{check} {label} %", *[_cell(((s.get("audits") or {}).get(check) or {}).get(key),
                                                              Format.RATE) for s in summaries]])
    for key in stats:
        rows.append([f"stat {key}", *[_cell(((s.get("stats") or {}).get(key) or {}).get("mean"), Format.NUMBER)
                                      for s in summaries]])
    return rows
