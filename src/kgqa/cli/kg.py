"""``kgqa kg``: import, inspect and query a knowledge graph (embedded directory, SPARQL endpoint URL, or ``demo``)."""

from __future__ import annotations

import difflib
import json
import time
from pathlib import Path
from typing import Any

import click

from kgqa.cli.checks import OutputPath
from kgqa.errors import KGError
from kgqa.kg import Direction, KnowledgeGraph, format_chain, open_kg, parse_chain
from kgqa.kg.base import Chain, is_literal
from kgqa.steps.linking import resolve_entity


def _echo_json(payload: Any) -> None:
    click.echo(json.dumps(payload, ensure_ascii=False, indent=2))


def check_chain(kg: KnowledgeGraph, chain: Chain) -> None:
    """Every relation of ``chain`` must be in the KG's vocabulary: the error names the first that is not."""
    for hop in chain:
        if not kg.has_relation(hop.relation):
            close = difflib.get_close_matches(hop.relation, kg.vocabulary(), n=3)
            hint = f"; close: {', '.join(close)}" if close else ""
            raise KGError(f"relation {hop.relation!r} is not in this KG's vocabulary{hint}")


def _labelled(kg: KnowledgeGraph, ids: list[str]) -> list[dict[str, Any]]:
    names = kg.names(ids)
    return [{"id": i, "name": names.get(i), "literal": is_literal(i)} for i in ids]


@click.group("kg")
def kg_group() -> None:
    """Import, inspect and query knowledge graphs. KG is an embedded directory, an http(s) SPARQL URL, or 'demo'."""


schema_option = click.option("--schema", default=None, help="KG conventions: generic, freebase or wikidata.")
json_option = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")


@kg_group.command("import")
@click.argument("source", type=click.Path(path_type=Path))
@click.option("--format", "fmt", default=None,
              help="metaqa, tsv, nt, ttl, nq, trig or freebase-pieces (guessed from the file name if omitted).")
@click.option("--out", "out_dir", required=True, type=OutputPath(), help="Directory of the embedded KG.")
@click.option("--names", type=click.Path(path_type=Path), default=None, help="Optional id<TAB>name file.")
@schema_option
@click.option("--skip-bad", is_flag=True, help="Count and skip malformed lines instead of stopping at the first.")
@click.option("--force", is_flag=True, help="Replace the embedded KG already in --out.")
@json_option
def kg_import(source: Path, fmt: str | None, out_dir: Path, names: Path | None, schema: str | None, skip_bad: bool,
              force: bool, as_json: bool) -> None:
    """Import SOURCE into an embedded KG directory."""
    from kgqa.cli.checks import check_output_dir
    from kgqa.errors import DataError
    from kgqa.kg.embedded import EmbeddedKGBuilder
    from kgqa.kg.embedded.staging import clean_stale_builds
    from kgqa.kg.loaders import guess_format, load_into

    if not source.exists():
        raise KGError(f"source {source} does not exist")
    check_output_dir(out_dir)
    for stale in clean_stale_builds(out_dir.absolute().parent):
        click.echo(f"kgqa: removed {stale}, left by an import that did not finish", err=True)
    if out_dir.is_dir() and any(out_dir.iterdir()) and not force:
        raise DataError(f"--out {out_dir} is not empty (an earlier import?); give --force to replace it, or another --out")
    fmt = fmt or guess_format(source)
    default_schema = "freebase" if fmt == "freebase-pieces" else "generic"
    builder = EmbeddedKGBuilder(schema=schema or default_schema)
    started = time.perf_counter()
    report = load_into(builder, source, fmt, names=names, skip_bad=skip_bad)
    if report.triples == 0:
        why = f"; first: {report.errors[0]}" if report.errors else ""
        raise DataError(f"no triple was imported from {source} ({report.lines:,} lines read, {report.skipped:,} bad "
                        f"lines skipped{why}); nothing was written to {out_dir}")
    kg = builder.build(out_dir)
    stats = kg.stats()
    payload = {"out": str(out_dir), "format": fmt, "seconds": round(time.perf_counter() - started, 2),
               "load": report.to_dict(), "triples": stats.triples, "entities": stats.entities,
               "relations": stats.relations, "literals": stats.literals, "names": stats.names,
               "build_seconds": stats.extra.get("build_seconds", {})}
    if as_json:
        _echo_json(payload)
    else:
        click.echo(f"imported {stats.triples:,} triples ({stats.entities:,} entities, {stats.relations} relations, "
                   f"{stats.literals:,} literals) into {out_dir} in {payload['seconds']} s")
        if report.skipped:
            click.echo(f"skipped {report.skipped:,} bad lines")
        if report.extra_fields:
            click.echo(f"kgqa: warning: {report.extra_fields:,} lines had fields after the third, which were ignored "
                       f"(first: {report.extra_fields_first})", err=True)


@kg_group.command("info")
@click.argument("kg_spec", metavar="KG")
@schema_option
@json_option
def kg_info(kg_spec: str, schema: str | None, as_json: bool) -> None:
    """Statistics and relation vocabulary of KG."""
    kg = open_kg(kg_spec, schema=schema)
    stats = kg.stats()
    vocab = kg.vocabulary()
    payload = {"backend": stats.backend, "schema": stats.schema, "triples": stats.triples, "entities": stats.entities,
               "relations": stats.relations, "literals": stats.literals, "names": stats.names,
               "vocabulary": vocab, **{k: v for k, v in stats.extra.items() if isinstance(v, str | int | float)}}
    if as_json:
        _echo_json(payload)
        return
    for key in ("backend", "schema", "triples", "entities", "relations", "literals", "names"):
        value = payload[key]
        click.echo(f"{key:>10}: {value:,}" if isinstance(value, int) else f"{key:>10}: {value}")
    shown = vocab[:30]
    click.echo(f"vocabulary: {', '.join(shown)}" + (f", ... ({len(vocab) - 30} more)" if len(vocab) > 30 else ""))


@kg_group.command("relations")
@click.argument("kg_spec", metavar="KG")
@click.argument("entity")
@click.option("--direction", type=click.Choice(["out", "in", "both"]), default="both")
@schema_option
@json_option
def kg_relations(kg_spec: str, entity: str, direction: str, schema: str | None, as_json: bool) -> None:
    """Relations incident to ENTITY (an id or an exact name), noise relations filtered."""
    kg = open_kg(kg_spec, schema=schema)
    entity_id = resolve_entity(kg, entity)
    directions = [Direction.OUT, Direction.IN] if direction == "both" else [Direction.parse(direction)]
    result = {d.value: kg.relations(entity_id, d) for d in directions}
    if as_json:
        _echo_json({"entity": {"id": entity_id, "name": kg.names([entity_id]).get(entity_id)}, **result})
        return
    for d, rels in result.items():
        marker = "" if d == "out" else "^"
        click.echo(f"{d} ({len(rels)}):")
        for rel in rels:
            click.echo(f"  {marker}{rel}")


@kg_group.command("chain")
@click.argument("kg_spec", metavar="KG")
@click.option("--from", "sources", multiple=True, required=True, help="Topic entity (id or exact name); repeatable.")
@click.option("--path", "path", required=True, help='Relations separated by commas; "^" marks an incoming edge: "r1,^r2".')
@click.option("--limit", type=click.IntRange(min=1), default=1000, show_default=True, help="Most entities returned.")
@click.option("--paths", "with_paths", is_flag=True, help="Also return the paths (bindings of every position).")
@schema_option
@json_option
def kg_chain(kg_spec: str, sources: tuple[str, ...], path: str, limit: int, with_paths: bool, schema: str | None,
             as_json: bool) -> None:
    """Follow a relation chain from the topic entities; intermediate entities are variables."""
    chain = parse_chain(path)
    if not chain:  # '' would follow nothing and print the start entities back
        raise KGError(f"--path {path!r} has no relations; give relations separated by commas, e.g. 'r1,^r2'")
    kg = open_kg(kg_spec, schema=schema)
    topics = [resolve_entity(kg, s) for s in sources]
    check_chain(kg, chain)
    result = kg.run_chain(topics, chain, bindings=with_paths, limit=limit)
    payload: dict[str, Any] = {"from": topics, "path": format_chain(chain), "entities": _labelled(kg, result.entities),
                               "truncated": result.truncated}
    if with_paths:
        payload["paths"] = [list(p) for p in result.paths or []]
    if as_json:
        _echo_json(payload)
        return
    click.echo(f"{len(result.entities)} entities" + (" (truncated)" if result.truncated else ""))
    for item in payload["entities"]:
        click.echo(f"  {item['name'] if item['name'] is not None else '(no name)'}  [{item['id']}]")
    for p in payload.get("paths", []):
        click.echo("  path: " + " -> ".join(p))


@kg_group.command("search")
@click.argument("kg_spec", metavar="KG")
@click.argument("label")
@click.option("--exact", is_flag=True, help="Exact (normalised) names only.")
@click.option("--limit", type=click.IntRange(min=1), default=10, show_default=True, help="Most matches shown.")
@schema_option
@json_option
def kg_search(kg_spec: str, label: str, exact: bool, limit: int, schema: str | None, as_json: bool) -> None:
    """Entities whose name is LABEL or close to it (fuzzy unless --exact)."""
    kg = open_kg(kg_spec, schema=schema)
    matches = kg.search(label, fuzzy=not exact, limit=limit)
    if as_json:
        _echo_json({"query": label, "matches": [{"id": m.id, "name": m.name, "score": round(m.score, 4)}
                                                for m in matches]})
        return
    if not matches:
        click.echo("no match")
    for m in matches:
        click.echo(f"{m.score:5.2f}  {m.name}  [{m.id}]")


def _register_server_commands() -> None:
    """``kgqa kg endpoint`` and ``kgqa kg freebase-filter`` live in their own module (private SPARQL servers for users)."""
    import importlib

    try:
        endpoint = importlib.import_module("kgqa.cli.endpoint")
    except ModuleNotFoundError as exc:
        if exc.name != "kgqa.cli.endpoint":
            raise
        return
    for command in endpoint.COMMANDS:
        kg_group.add_command(command)


_register_server_commands()
