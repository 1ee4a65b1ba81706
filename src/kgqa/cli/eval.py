"""``kgqa eval``: run a method on a benchmark into a resumable run directory; ``kgqa eval compare``, ``report`` and
``metrics``.

``kgqa eval --dataset metaqa-2hop --split dev --method NAME --llm SPEC --limit 200 --out RUNDIR`` runs questions
(the group itself is the run command); ``kgqa eval compare RUNDIR...`` prints runs side by side; ``kgqa eval report
RUNDIR`` rebuilds summary.json, report.md and the plots from a run's results.jsonl (e.g. after a crash); ``kgqa eval
metrics`` lists the registered metrics (:mod:`kgqa.eval.metric_registry`), whose headline ones close a run's output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from kgqa.cli.checks import OutputPath, check_method_config
from kgqa.errors import ConfigError

RUN_EPILOG = """\b
Methods, their settings (--method-config) and what each needs: `kgqa methods`.
KG: methods that need one use --kg, default: the config's `kg` (KGQA_KG);
methods that need none never open it. For MetaQA the KG is an embedded
import of the dataset's kb.txt:
  kgqa kg import DATA/metaqa/kb.txt --format metaqa --out kgs/metaqa
  kgqa eval --dataset metaqa-2hop --split dev --kg kgs/metaqa ...
Freebase/Wikidata datasets need a SPARQL endpoint URL or an embedded import
of a Freebase dump.

\b
Run directory: results.jsonl (one line per finished question, fsynced),
traces.jsonl, config.json, summary.json, report.md and PNG plots. An existing,
non-empty --out is refused unless --resume is given; --resume skips the
questions already finished (a crash loses at most the questions in flight).

\b
Examples (METHOD: a name from `kgqa methods`; default: the config's `method`):
  kgqa eval --dataset metaqa-1hop --split dev --method METHOD --llm local:smollm2 --limit 100 --out runs/a
  kgqa eval --dataset cwq --llm openai:gpt-4.1-mini --kg http://127.0.0.1:8890/sparql \\
            --method-config top_k=5 --workers 8 --out runs/b
  kgqa eval compare runs/a runs/b
  kgqa eval metrics        (what summary.json measures; docs/adding-a-metric.md)
"""


@click.group("eval", invoke_without_command=True, short_help="Evaluate a method on a benchmark; compare runs.", epilog=RUN_EPILOG,
             context_settings={"max_content_width": 110})
@click.option("--dataset", default=None, help="Benchmark name (metaqa-1hop/2hop/3hop, cwq, webqsp, webqsp-gog, grailqa, "
                                              "qald10-en, webquestions, simplequestions).")
@click.option("--split", default="test", show_default=True, help="Split (MetaQA: dev or test; others: test).")
@click.option("--method", default=None, help="Method name (default: config `method`; list them with `kgqa methods`).")
@click.option("--method-config", "method_config", multiple=True, metavar="KEY=VALUE",
              help="Method setting (repeatable), checked against the method's settings (`kgqa methods`); numbers and "
                   "true/false are converted.")
@click.option("--llm", "llm_spec", default=None,
              help="Model spec: local:smollm2, openai:MODEL[@URL], scripted:FILE.jsonl (default: config llm).")
@click.option("--kg", "kg_spec", default=None,
              help="KG for methods that need one: an embedded directory, a SPARQL URL or 'demo' (default: config kg).")
@click.option("--embedder", default="minilm", show_default=True,
              help="Embedder, loaded only when the method needs one (e.g. embedding relation pruning).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the first N questions (see --shuffle).")
@click.option("--shuffle", is_flag=True, help="Draw the questions in a random order seeded by --seed (with --limit: a "
                                              "random sample).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the shuffle and of the method.")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="Questions answered concurrently (threads).")
@click.option("--out", "out_dir", type=OutputPath(), default=None,
              help="Run directory (default: runs/DATASET-SPLIT-METHOD-TIMESTAMP).")
@click.option("--resume", is_flag=True, help="Continue the run in --out, skipping finished questions.")
@click.option("--retry-errors", is_flag=True, help="With --resume: run the failed questions again.")
@click.option("--data-dir", type=click.Path(path_type=Path), default=None,
              help="Benchmark data directory (default: KGQA_DATA_DIR / config data_dir).")
@click.option("--max-failures", type=click.IntRange(min=0), default=25, show_default=True,
              help="Stop after this many consecutive failed questions (0: never).")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the LLM cache in this run.")
@click.option("--refresh-cache", is_flag=True, help="Ask the model again instead of reading the LLM cache, and store "
                                                    "the new replies (replaces entries of an earlier, faulty run).")
@click.option("--kg-timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds per SPARQL request attempt (default: KGQA_KG_TIMEOUT / config kg_timeout, else 30).")
@click.option("--kg-retries", type=click.IntRange(min=0), default=None,
              help="Extra attempts per SPARQL request (default: KGQA_KG_RETRIES / config kg_retries, else 2).")
@click.option("--timeout", "timeout", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
              help="Deadline of each question, shared by its KG queries and LLM calls and their retries; a question "
                   "past it fails (--retry-errors runs it again). Default: KGQA_QUESTION_TIMEOUT / config "
                   "question_timeout, else none; 0: none.")
@click.option("--record-calls", is_flag=True, help="Keep every LLM call's prompt and reply in traces.jsonl (the trace "
                                                   "viewer of `kgqa serve` shows them; traces grow accordingly).")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--no-report", is_flag=True, help="Write summary.json only (no report.md, no plots).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON at the end.")
@click.pass_context
def eval_group(ctx: click.Context, dataset: str | None, split: str, method: str | None, method_config: tuple[str, ...],
               llm_spec: str | None, kg_spec: str | None, embedder: str, limit: int | None, shuffle: bool, seed: int,
               workers: int, out_dir: Path | None, resume: bool, retry_errors: bool, data_dir: Path | None,
               max_failures: int, no_cache: bool, refresh_cache: bool, kg_timeout: float | None, kg_retries: int | None,
               timeout: float | None, record_calls: bool, no_progress: bool, no_report: bool, as_json: bool) -> None:
    """Evaluate METHOD on a benchmark: kgqa eval --dataset NAME --method NAME --llm SPEC [--kg KG] --out RUNDIR."""
    if ctx.invoked_subcommand is not None:
        given = [p.name for p in ctx.command.params
                 if ctx.get_parameter_source(p.name) == click.core.ParameterSource.COMMANDLINE]  # type: ignore[arg-type]
        if given:
            raise ConfigError(f"run options ({', '.join('--' + g.replace('_', '-') for g in given)}) cannot be combined "
                              f"with `kgqa eval {ctx.invoked_subcommand}`")
        return
    if dataset is None:
        click.echo(ctx.get_help(), err=True)
        raise ConfigError("--dataset is required to run an evaluation (or use `kgqa eval compare RUNDIR...`)")
    from datetime import datetime

    from kgqa import config
    from kgqa.deadline import question_timeout
    from kgqa.eval.runner import run_eval
    from kgqa.methods import parse_method_config

    method = str(config.get("method", method))
    check_method_config(method_config)
    settings = parse_method_config(method_config, method=method)
    deadline = question_timeout(timeout)
    if out_dir is None:
        if resume:
            raise ConfigError("--resume needs --out RUNDIR (the run to continue)")
        out_dir = Path("runs") / f"{dataset}-{split}-{method}-{datetime.now():%Y%m%d-%H%M%S}"
    from kgqa.cli.checks import check_output_dir

    check_output_dir(out_dir)
    run = run_eval(dataset, out=out_dir, split=split, method=method, method_config=settings, llm=llm_spec, kg=kg_spec,
                   embedder=embedder, limit=limit, seed=seed, shuffle=shuffle, workers=workers, resume=resume,
                   retry_errors=retry_errors, data_dir=data_dir, progress=not no_progress, report=not no_report,
                   max_consecutive_failures=max_failures, llm_options=cache_options(no_cache, refresh_cache),
                   kg_options=kg_options(kg_timeout, kg_retries), record_calls=record_calls, timeout=deadline)
    summary = run.summary
    if as_json:
        click.echo(json.dumps(summary, ensure_ascii=False, indent=2))
        _fail_if_all_failed(run)
        return
    unreadable = f", {run.unreadable} of them for an unreadable reply" if run.unreadable else ""
    click.echo(f"{run.out_dir}: {run.answered} answered now ({run.failed} failed{unreadable}), {run.skipped} finished "
               f"before; {summary.get('n', 0)} in results")
    from kgqa.eval.report import headline

    click.echo(headline(summary))
    _say_unreadable(summary)
    looks = (summary.get("run") or {}).get("test_ledger")
    if looks:
        counted = summary.get("method_name", summary.get("method"))  # the ledger counts per registered method
        click.echo(f"test split: evaluation {looks['evaluations']} of {counted} on {summary.get('dataset')}/test "
                   "(`kgqa eval ledger` lists them; make choices on dev)")
    if not no_report:
        click.echo(f"report: {run.out_dir / 'report.md'}")
    _fail_if_all_failed(run)


def cache_options(no_cache: bool, refresh_cache: bool) -> dict[str, Any]:
    """The LLM options of ``--no-cache`` / ``--refresh-cache`` (none: the configured cache mode)."""
    if no_cache and refresh_cache:
        raise ConfigError("--no-cache and --refresh-cache cannot be combined (one skips the cache, one rewrites it)")
    if no_cache:
        return {"cache": False}
    return {"cache": "refresh"} if refresh_cache else {}


def kg_options(timeout: float | None, retries: int | None) -> dict[str, Any]:
    """The SPARQL options of ``--kg-timeout`` / ``--kg-retries`` (unset ones come from the environment or config)."""
    options: dict[str, Any] = {}
    if timeout is not None:
        options["timeout"] = timeout
    if retries is not None:
        options["retries"] = retries
    return options


def _say_unreadable(summary: dict[str, Any]) -> None:
    """When some questions got a reply still unreadable after its re-ask (marked as errors): the score with and
    without them, and how to ask them again."""
    marked = int(summary.get("questions_with_unreadable") or 0)
    if not marked:
        return

    def rate(value: Any) -> str:
        return "n/a" if value is None else f"{100 * float(value):.1f}"

    click.echo(f"{marked} questions got a reply still unreadable after its re-ask (errors that --resume --retry-errors "
               f"asks again): Hits@1 {rate(summary.get('hits@1'))} with them, {rate(summary.get('hits@1_readable'))} "
               "without")


def _fail_if_all_failed(run: Any) -> None:
    """A run in which every question failed is a failed command (exit 1), with its first error named. A question
    marked only for an unreadable reply was answered (badly): it does not make the command fail."""
    if not run.answered or run.failed - getattr(run, "unreadable", 0) < run.answered:
        return
    from kgqa.errors import RunFailed
    from kgqa.eval.rundir import read_results

    errors = [str(r["error"]) for r in read_results(run.out_dir) if r.get("error")]
    first = errors[-1][:300] if errors else "unknown"
    raise RunFailed(f"every question of this invocation failed ({run.failed} of {run.answered}); last error: {first}. "
                    f"The rows are saved in {run.out_dir}: fix the cause, then `--resume --retry-errors`.")


@eval_group.command("compare")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--markdown", is_flag=True, help="Print a markdown table.")
@click.option("--no-breakdowns", is_flag=True, help="Only the overall metrics.")
@click.option("--json", "as_json", is_flag=True, help="Print {run: summary} as JSON.")
@click.option("--by-run", is_flag=True, help="One row per RUNDIR and one column per metric (many runs read better).")
def compare_command(run_dirs: tuple[Path, ...], markdown: bool, no_breakdowns: bool, as_json: bool,
                    by_run: bool) -> None:
    """Print runs side by side: one column per RUNDIR, one row per metric (rates in %); --by-run turns it round."""
    from kgqa.eval.report import compare_runs, format_table, load_summary

    if as_json:
        payload: dict[str, Any] = {str(d): load_summary(d) for d in run_dirs}
        click.echo(json.dumps(payload, ensure_ascii=False, indent=2))
        return
    header, rows = compare_runs(list(run_dirs), breakdowns=not no_breakdowns)
    if by_run:
        header, rows = ["run", *[row[0] for row in rows]], [
            [run, *[row[column] for row in rows]] for column, run in enumerate(header[1:], start=1)]
    click.echo(format_table(header, rows, markdown=markdown))


#: How `kgqa eval metrics` says which way a metric is better.
DIRECTION_WORDS = {"higher": "higher is better", "lower": "lower is better", "neither": "no direction"}


@eval_group.command("metrics")
@click.option("--json", "as_json", is_flag=True, help="Print every field of each metric (but its value function) as JSON.")
def metrics_command(as_json: bool) -> None:
    """List every registered metric, one a line: name, label, which way is better, what it measures."""
    from kgqa.eval.metric_registry import METRICS, registered_metrics

    metrics = registered_metrics()
    unloadable = METRICS.errors()
    if as_json:
        click.echo(json.dumps({"metrics": [m.describe() for m in metrics], "unloadable": unloadable},
                              ensure_ascii=False, indent=2))
        return
    lines = [(m.name, m.label, DIRECTION_WORDS[m.direction], m.description) for m in metrics]
    widths = [max(len(line[column]) for line in lines) for column in range(3)]
    for *named, description in lines:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(named, widths, strict=True)) + "  " + description)
    for name, error in sorted(unloadable.items()):
        click.echo(f"{name}: could not be loaded: {error}")


@eval_group.command("report")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--no-plots", is_flag=True, help="summary.json only.")
def report_command(run_dir: Path, no_plots: bool) -> None:
    """Rebuild summary.json, report.md and the plots of RUN_DIR from its results.jsonl."""
    from kgqa.eval.report import headline
    from kgqa.eval.runner import summarize_run

    if not run_dir.is_dir():
        raise ConfigError(f"run directory {run_dir} does not exist")
    summary = summarize_run(run_dir, report=not no_plots)
    click.echo(f"{run_dir}: {summary.get('n', 0)} questions, {headline(summary)}")


@eval_group.command("ledger")
@click.option("--dataset", default=None, help="Only this dataset's test-split evaluations.")
@click.option("--method", default=None, help="Only this method's.")
@click.option("--markdown", is_flag=True, help="Markdown tables.")
@click.option("--json", "as_json", is_flag=True, help="The entries as JSON.")
def ledger_command(dataset: str | None, method: str | None, markdown: bool, as_json: bool) -> None:
    """Every evaluation on a test split made with this cache directory (kgqa eval appends one per run)."""
    from kgqa.eval.ledger import ledger_path, read_ledger, render_ledger

    entries = [e for e in read_ledger() if (dataset is None or e.get("dataset") == dataset)
               and (method is None or e.get("method") == method)]
    if as_json:
        click.echo(json.dumps({"ledger": str(ledger_path()), "entries": entries}, ensure_ascii=False, indent=2))
        return
    click.echo(f"{ledger_path()}: {len(entries)} test-split evaluations")
    click.echo(render_ledger(entries, markdown=markdown), nl=False)


@eval_group.command("diagnose")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--markdown", is_flag=True, help="Markdown tables instead of aligned text.")
@click.option("--json", "as_json", is_flag=True, help="The loss table as JSON.")
def diagnose_command(run_dir: Path, markdown: bool, as_json: bool) -> None:
    """Where the gold was lost in RUN_DIR: for each missed question, the step at which the gold left the method's
    candidates (relation pruning, an entity cap or sample, a depth or budget limit, a judge that stopped early, the
    answer step, linking), counted with shares, by the step that lost it and per hop count and question type."""
    from kgqa.eval.losses import diagnose_run
    from kgqa.eval.report import render_loss_table

    if not run_dir.is_dir():
        raise ConfigError(f"run directory {run_dir} does not exist")
    table = diagnose_run(run_dir)
    if table is None:
        raise ConfigError(f"{run_dir}: its results carry no loss attribution (a run scored before kgqa recorded it, "
                          "or an imported run); run it again with kgqa eval")
    if as_json:
        click.echo(json.dumps(table, ensure_ascii=False, indent=2))
        return
    click.echo(render_loss_table(table, markdown=markdown), nl=False)


@eval_group.command("import-run")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--format", "fmt", required=True, metavar="pog|vog|aog",
              help="The project whose released run FILE is (docs/released-runs.md describes each format).")
@click.option("--dataset", required=True, help="The dataset FILE answers (cwq, webqsp, grailqa, webquestions, ...).")
@click.option("--out", "out_dir", required=True, type=OutputPath(),
              help="The new run directory (must not exist or be empty).")
@click.option("--split", default="test", show_default=True, help="The dataset's split FILE answers.")
@click.option("--data-dir", type=click.Path(path_type=Path), default=None,
              help="Benchmark data directory (default: KGQA_DATA_DIR / config data_dir).")
def import_run_command(file: Path, fmt: str, dataset: str, out_dir: Path, split: str, data_dir: Path | None) -> None:
    """Score another project's released run FILE against a dataset's gold answers into a kgqa run directory.

    Rows are joined to the dataset's questions by id or question text; rows matching no question are listed in
    RUNDIR/unmatched.jsonl, repeated rows (first kept) in duplicates.jsonl, and dataset questions the file lacks in
    missing.txt (they are not scored). Then `kgqa eval report` and `kgqa eval compare` treat RUNDIR like any run.
    """
    from kgqa.eval.import_run import import_run
    from kgqa.eval.metric_registry import Section
    from kgqa.eval.report import headline

    run = import_run(file, fmt=fmt, dataset=dataset, out=out_dir, split=split, data_dir=data_dir)
    join, summary = run.join, run.summary
    by = join["joined_by"]
    click.echo(f"{run.out_dir}: imported {fmt} run {file} ({join['rows']:,} rows) on {dataset}/{split}")
    click.echo(f"joined {join['joined']:,} rows (by id {by['id']:,}, by text {by['text']:,}, by normalised text "
               f"{by['normalised_text']:,}); unmatched rows {join['unmatched']:,}, duplicate rows {join['duplicates']:,}, "
               f"broken rows {join['broken']:,} ({join['broken_kept']:,} scored without an answer), dataset questions missing "
               f"{join['missing']:,}")
    usage = run.usage
    cost = "calls/q and tokens/q: not recorded by this file"
    if usage["rows"]:
        cost = f"calls/q {usage['calls_mean']:.2f}  tokens/q {usage['tokens_mean']:,.1f}"
        if usage["rows"] < join["scored"]:
            cost += (f" over the {usage['rows']:,} rows that record them (summary.json counts the others as 0: "
                     f"{summary.get('llm_calls_mean', 0):.2f} / {summary.get('tokens_mean', 0):,.1f})")
    # The headline's cost metrics count a row without usage as 0; `cost` above says how many rows recorded any.
    scores = headline(summary, sections=[section for section in Section if section is not Section.COST])
    click.echo(f"scored on {join['scored']:,} of {join['dataset_questions']:,} questions: {scores}  {cost}")
    for key, name in (("unmatched", "unmatched.jsonl"), ("duplicates", "duplicates.jsonl"), ("missing", "missing.txt")):
        if join[key]:
            click.echo(f"{key}: {run.out_dir / name}")
    click.echo(f"report: {run.out_dir / 'report.md'}")
