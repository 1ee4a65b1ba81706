"""``kgqa ask``: answer one question with a method over a KG, printing answers, grounding and the chains behind them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from kgqa import config
from kgqa.errors import ConfigError, KGError
from kgqa.methods.base import MethodContext, Prediction, Question, TopicEntity


def _pruner_for(llm_spec: str, pruner: str) -> str:
    # The tiny offline models rank relations worse than MiniLM cosine does (docs/llm.md): default to the embedding scorer.
    if pruner != "auto":
        return pruner
    return "embedding" if llm_spec.startswith("local:") else "llm"


def _topics(kg: Any, question: str, given: tuple[str, ...]) -> list[TopicEntity]:
    from kgqa.cli.kg import resolve_entity
    from kgqa.steps.linking import link_entities

    if given:
        ids = [resolve_entity(kg, g) for g in given]
        names = kg.names(ids)
        return [TopicEntity(id=i, name=names.get(i) or i) for i in ids]
    found = link_entities(kg, question)
    if not found:
        raise KGError("no entity of the KG is mentioned in the question (by exact name); name one with --topic, "
                      "or put its name in [brackets]")
    return [TopicEntity(id=m.id, name=m.name) for m in found]


def _chains(prediction: Prediction) -> dict[str, Any]:
    answer = next((e for e in prediction.trace if e.get("step") == "answer"), None)
    fallback = next((e for e in prediction.trace if e.get("step") == "fallback"), None)
    main = (answer or {}).get("main_chain") or (fallback or {}).get("main_chain")
    return {"main_chain": main, "constraint_chain": (answer or {}).get("constraint_chain"),
            "fallback": None if fallback is None else {"layer": fallback.get("layer"), "stage": fallback.get("stage"),
                                                       "cause": fallback.get("cause")}}


@click.command("ask")
@click.argument("question")
@click.option("--kg", "kg_spec", default=None, help="KG: 'demo' (default), an embedded directory or a SPARQL URL.")
@click.option("--schema", default=None, help="KG conventions for a SPARQL endpoint: freebase, wikidata, generic.")
@click.option("--method", default="ccor", show_default=True, help="Method name (see `kgqa eval --help`).")
@click.option("--llm", "llm_spec", default=None, help="Model spec, e.g. local:smollm2 (default), openai:gpt-4.1-mini.")
@click.option("--pruner", type=click.Choice(["auto", "llm", "embedding", "hybrid"]), default="auto", show_default=True,
              help="Relation pruning; auto = embedding for local models, llm otherwise.")
@click.option("--embedder", default="minilm", show_default=True, help="Embedder spec for embedding/hybrid pruning.")
@click.option("--topic", "topics", multiple=True, help="Topic entity id or exact name (repeatable); linked if omitted.")
@click.option("--seed", default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the prediction as JSON.")
@click.option("--trace", "trace_file", type=click.Path(path_type=Path), default=None, help="Write the full trace here.")
def ask_command(question: str, kg_spec: str | None, schema: str | None, method: str, llm_spec: str | None, pruner: str,
                embedder: str, topics: tuple[str, ...], seed: int, as_json: bool, trace_file: Path | None) -> None:
    """Answer QUESTION over a KG, offline by default (demo KG, local model)."""
    from kgqa import llm as llm_layer
    from kgqa.kg import open_kg
    from kgqa.llm.accounting import Recorder
    from kgqa.methods import get_method

    if not question.strip():
        raise ConfigError("the question is empty")
    kg = open_kg(str(config.get("kg", kg_spec)), schema=schema)
    spec = str(config.get("llm", llm_spec))
    method_config: dict[str, Any] = {}
    chosen_pruner = _pruner_for(spec, pruner)
    if method in ("ccor", "cor"):
        method_config["pruner"] = chosen_pruner
    runner = get_method(method, **method_config)
    recorder = Recorder()
    model = llm_layer.load(spec, recorder=recorder)
    text_embedder = None
    if chosen_pruner in ("embedding", "hybrid"):
        from kgqa.text import load_embedder

        text_embedder = load_embedder(embedder)
    topic_entities = _topics(kg, question, topics)
    q = Question(id="ask", text=question, topic_entities=topic_entities)
    ctx = MethodContext(kg=kg, llm=model, embedder=text_embedder, seed=seed, recorder=recorder)
    with recorder.scope("ask"):
        prediction = runner.answer(q, ctx)
    prediction.usage = recorder.totals("ask").to_dict()
    chains = _chains(prediction)
    payload = {"question": question, "topics": [t.model_dump() for t in topic_entities],
               "answers": [a.model_dump() for a in prediction.answers], "grounding": prediction.grounding.value,
               **chains, "usage": prediction.usage, "error": prediction.error}
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
    click.echo(f"topics: {', '.join(f'{t.name} [{t.id}]' for t in topic_entities)}")
    click.echo(f"main chain: {chains['main_chain'] or '(none)'}")
    cc = chains["constraint_chain"]
    click.echo("constraint chain: " + (f"from position {cc['source']}: {cc['chain']} = {cc['target']}" if cc else "(none)"))
    if chains["fallback"]:
        fb = chains["fallback"]
        click.echo(f"fallback: layer {fb['layer']} ({fb['stage']}): {fb['cause']}")
    usage = prediction.usage
    click.echo(f"llm: {usage.get('calls', 0)} calls, {usage.get('prompt_tokens', 0)} prompt + "
               f"{usage.get('completion_tokens', 0)} completion tokens")
