"""``kgqa ask``: answer one question with a method over a KG, printing answers, grounding and the method's own account
of how it answered (chains for CCoR, reasoning for CoT, ...).

It shares every default with ``kgqa eval``: the method (config ``method``), the method's settings (its ``Config``,
given with ``--method-config``), the model (config ``llm``), and what gets loaded (the method's ``needs()``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from kgqa import config
from kgqa.core import Question, TopicEntity, check_question_text
from kgqa.errors import ConfigError


def _topics(kg: Any, question: str, given: tuple[str, ...], report: dict[str, Any] | None = None) -> list[TopicEntity]:
    """The topics given with --topic, or else linked in the question; when linking ran, ``report["linking"]`` gets what
    it linked and the runners-up with why each lost (for --json and --trace)."""
    from kgqa.steps.linking import question_topics

    topics, linked = question_topics(kg, question, given)
    if linked is not None and report is not None:
        report["linking"] = linked.to_dict()
    return topics


@click.command("ask")
@click.argument("question")
@click.option("--kg", "kg_spec", default=None, help="KG: 'demo' (default), an embedded directory or a SPARQL URL.")
@click.option("--schema", default=None, help="KG conventions for a SPARQL endpoint: freebase, wikidata, generic.")
@click.option("--method", default=None, help="Method name (default: config `method`; list them with `kgqa methods`).")
@click.option("--method-config", "method_config", multiple=True, metavar="KEY=VALUE",
              help="Method setting (repeatable), checked against the method's settings (`kgqa methods`).")
@click.option("--llm", "llm_spec", default=None, help="Model spec, e.g. local:smollm2 (default), openai:gpt-4.1-mini.")
@click.option("--embedder", default="minilm", show_default=True,
              help="Embedder, loaded only when the method needs one (e.g. embedding relation pruning).")
@click.option("--topic", "topics", multiple=True, help="Topic entity id or exact name (repeatable); linked if omitted.")
@click.option("--seed", default=0, show_default=True)
@click.option("--timeout", "timeout", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
              help="Deadline of the question, shared by entity linking, every KG query and every LLM call and their "
                   "retries (default: KGQA_QUESTION_TIMEOUT / config question_timeout, else 120; 0: none).")
@click.option("--json", "as_json", is_flag=True, help="Print the prediction as JSON.")
@click.option("--trace", "trace_file", type=click.Path(path_type=Path), default=None, help="Write the full trace here.")
def ask_command(question: str, kg_spec: str | None, schema: str | None, method: str | None,
                method_config: tuple[str, ...], llm_spec: str | None, embedder: str, topics: tuple[str, ...], seed: int,
                timeout: float | None, as_json: bool, trace_file: Path | None) -> None:
    """Answer QUESTION over a KG, offline by default (demo KG, local model)."""
    from kgqa.llm.accounting import Recorder
    from kgqa.methods import get_method, parse_method_config
    from kgqa.methods.base import method_explanation, method_label, method_needs, solve
    from kgqa.methods.context import Resources, build_context
    from kgqa.steps.linking import question_text

    check_question_text(question)  # the service's rule too: not empty, at most 2,000 characters, no control characters
    from kgqa.llm.oracle import is_oracle_spec

    if is_oracle_spec(config.get("llm", llm_spec)):
        raise ConfigError("--llm oracle answers from a question's gold answers and chains, which only `kgqa eval` knows; "
                          "ask with a real model (e.g. --llm local:smollm2)")
    chosen, origin = config.get_with_origin("method", method)
    method_name = str(chosen)
    from kgqa.cli.checks import check_method_config
    from kgqa.deadline import ASK_DEFAULT_TIMEOUT, question_deadline, question_timeout

    check_method_config(method_config)
    runner = get_method(method_name, **parse_method_config(method_config, method=method_name))
    seconds = question_timeout(timeout, default=ASK_DEFAULT_TIMEOUT)
    resources = Resources(kg=kg_spec, llm=llm_spec, embedder=embedder, schema=schema,
                          progress=lambda message: click.echo(f"kgqa: {message}", err=True))
    needs = method_needs(runner, resources.llm_spec)
    if not needs.kg and (kg_spec or schema or topics):
        click.echo(f"kgqa: warning: {method_name} uses no KG; --kg, --schema and --topic are ignored", err=True)
    recorder = Recorder()
    ctx = build_context(needs, resources, seed=seed, recorder=recorder)
    prepare = getattr(runner, "prepare_ask", None)  # a method's defaults for ask, said in one line (SRP's references)
    if callable(prepare):
        prepare(ctx, lambda line: click.echo(f"kgqa: {line}", err=True), kg_spec=resources.kg_spec)
    linking: dict[str, Any] = {}  # what entity linking chose and its runners-up, when it ran
    with question_deadline(seconds):  # one deadline from linking to the answer (kgqa.deadline)
        topic_entities = _topics(ctx.kg, question, topics, linking) if needs.kg else []
        q = Question(id="ask", text=question_text(question), topic_entities=topic_entities)
        try:
            prediction = solve(runner, q, ctx, recorder=recorder, scope="ask")
        except ConfigError as exc:
            if origin != "the default":
                raise
            # the default method may need what this KG lacks (a trained scorer): say it was the default, and the way out
            raise ConfigError(f"{exc} ({method_name} is kgqa ask's default method, config `method`; choose another "
                              "with --method: `kgqa methods` lists each method and what it needs)") from None
    explanation = method_explanation(runner, prediction)
    # reported as `kgqa eval` reports it (summary.json): the label (FoG's graph mode is fog[graph]), and the name run
    payload: dict[str, Any] = {"question": question,
                               "method": method_label(runner, resources.llm_spec, method_name),
                               "method_name": method_name,
                               "topics": [t.model_dump() for t in topic_entities],
                               "answers": [a.model_dump() for a in prediction.answers],
                               "grounding": prediction.grounding.value, "usage": prediction.usage,
                               "error": prediction.error}
    payload.update(linking)
    # The method's own fields sit beside these (e.g. CCoR's main_chain), never over them.
    payload.update({k: v for k, v in explanation.fields.items() if k not in payload})
    if trace_file is not None:
        trace_file.parent.mkdir(parents=True, exist_ok=True)
        trace_file.write_text(json.dumps({**payload, "evidence": prediction.evidence, "trace": prediction.trace},
                                         ensure_ascii=False, indent=2, default=str))
    if as_json:
        click.echo(json.dumps(payload, ensure_ascii=False, indent=2, default=str))
        return
    click.echo("answers: " + ("; ".join(a.name for a in prediction.answers[:20]) or "(none)")
               + (f" ... ({len(prediction.answers)} in all)" if len(prediction.answers) > 20 else ""))
    click.echo(f"grounding: {prediction.grounding.value}")
    if topic_entities:
        click.echo(f"topics: {', '.join(f'{t.name} [{t.id}]' for t in topic_entities)}")
    for line in explanation.lines:
        click.echo(line)
    usage = prediction.usage
    click.echo(f"llm: {usage.get('calls', 0)} calls, {usage.get('prompt_tokens', 0)} prompt + "
               f"{usage.get('completion_tokens', 0)} completion tokens")
