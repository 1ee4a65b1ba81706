"""``kgqa kg endpoint start|stop|status`` (a private Virtuoso or Oxigraph server in a directory) and ``kgqa kg
freebase-filter`` (a Freebase dump cut down to what KGQA queries). Registered into ``kgqa kg`` by :mod:`kgqa.cli.kg`.

Importing this module also registers the ``endpoint:DIR`` KG spec (``--kg endpoint:DIR`` opens the endpoint of DIR with
the schema and graph it was started with), so ``kgqa eval`` and ``kgqa ask`` can use it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

import kgqa.kg.endpoint as _endpoint
from kgqa.errors import ConfigError


def _echo_json(payload: Any) -> None:
    click.echo(json.dumps(payload, ensure_ascii=False, indent=2))


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    value = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1024 or unit == "TB":
            return f"{value:,.1f} {unit}" if unit != "B" else f"{int(value)} B"
        value /= 1024
    return f"{n} B"


@click.group("endpoint")
def endpoint_group() -> None:
    """A private SPARQL server (Virtuoso or Oxigraph) in a directory: start (and load), stop, status.

    \b
    kgqa kg endpoint start --engine oxigraph --data kg.nt.gz --dir ~/kgs/fb-ox
    kgqa kg endpoint start --engine virtuoso --data demo --dir ~/kgs/demo-vt --memory 4
    kgqa kg endpoint status ~/kgs/fb-ox
    kgqa eval --kg endpoint:~/kgs/fb-ox ...      (or the printed URL with --schema)
    kgqa kg endpoint stop ~/kgs/fb-ox
    """


@endpoint_group.command("start")
@click.option("--engine", type=click.Choice(list(_endpoint.ENGINES)), default=None,
              help="Server engine (required for a new DIR; an existing DIR knows its own).")
@click.option("--data", "data", multiple=True, metavar="FILE|KG",
              help="N-Triples or Turtle file (.nt, .ttl, optionally .gz), or a KG kgqa opens ('demo', an embedded "
                   "directory: exported to N-Triples); repeatable. Files already loaded into DIR are skipped.")
@click.option("--dir", "directory", required=True, type=click.Path(path_type=Path),
              help="Directory of the endpoint: store, settings, log and endpoint.json (how to find it again).")
@click.option("--port", type=click.IntRange(1, 65535), default=None,
              help="HTTP port (default: 8890 for Virtuoso, 7878 for Oxigraph, or the previous one, if free; else any "
                   "free port).")
@click.option("--memory", "memory_gb", type=float, default=None,
              help=f"GB Virtuoso may use; its buffers and limits are derived from it and written to DIR/virtuoso.ini "
                   f"(default {_endpoint.DEFAULT_MEMORY_GB:g}). Oxigraph sizes its own caches.")
@click.option("--schema", default=None, help="KG conventions of the data (freebase, wikidata, generic); default: the "
                                             "exported KG's, else freebase. Recorded for --kg endpoint:DIR.")
@click.option("--host", default=None,
              help="Address the SPARQL port listens on (default 127.0.0.1, or DIR's; Virtuoso's admin port is always "
                   "loopback-only).")
@click.option("--query-timeout", "query_timeout", type=click.IntRange(min=1), default=None,
              help="Server-side query timeout in seconds (Oxigraph only; Virtuoso's would return partial results).")
@click.option("--json", "as_json", is_flag=True, help="Print the endpoint state as JSON at the end.")
def endpoint_start(engine: str | None, data: tuple[str, ...], directory: Path, port: int | None,
                   memory_gb: float | None, schema: str | None, host: str | None, query_timeout: int | None,
                   as_json: bool) -> None:
    """Start the endpoint in DIR (creating it and loading --data), or restart it from DIR; prints the SPARQL URL.

    The server runs on after the command returns. An interrupted load resumes where it stopped when the same command
    is run again: finished inputs are not loaded twice.
    """
    def say(line: str) -> None:
        click.echo(line, err=as_json)

    state = _endpoint.start_endpoint(directory, engine=engine, data=data, port=port, memory_gb=memory_gb,
                                     schema=schema, host=host, query_timeout_s=query_timeout, progress=say)
    if as_json:
        _echo_json(_endpoint.endpoint_status(state.dir))
        return
    click.echo(f"SPARQL endpoint: {state.url}")
    click.echo(f"use it with:     --kg endpoint:{state.dir}   (or --kg '{state.url}' --schema {state.schema})")


@endpoint_group.command("stop")
@click.argument("directory", metavar="DIR", type=click.Path(path_type=Path))
def endpoint_stop(directory: Path) -> None:
    """Stop the endpoint server of DIR; its store stays, and `start --dir DIR` brings it back."""
    _endpoint.stop_endpoint(directory, progress=click.echo)


@endpoint_group.command("status")
@click.argument("directory", metavar="DIR", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def endpoint_status(directory: Path, as_json: bool) -> None:
    """Whether the endpoint of DIR runs, its URL, triples, disk, memory and loaded inputs."""
    status = _endpoint.endpoint_status(directory)
    if as_json:
        _echo_json(status)
        return
    running = "running" if status["running"] and status["answering"] else \
        ("running, not answering" if status["running"] else "stopped")
    click.echo(f"{status['engine']} endpoint in {status['dir']}: {running}")
    click.echo(f"       url: {status['url']}" + ("" if status["running"] else "  (when started)"))
    click.echo(f"    schema: {status['schema']}   (--kg {status['kg_spec']})")
    if status["graph"]:
        click.echo(f"     graph: {status['graph']}")
    triples = f"{status['triples']:,}" + ("" if status["triples_counted"] else " (loaded; not counted)")
    click.echo(f"   triples: {triples}")
    click.echo(f"      disk: {_size(status['disk_bytes'])} store, {_size(status['dir_bytes'])} in DIR")
    if status["memory_bytes"] is not None:
        click.echo(f"    memory: {_size(status['memory_bytes'])} resident (pid {status['pid']})")
    if status["config"]:
        click.echo(f"  settings: {status['config']} (from --memory {status['memory_gb']:g} GB)")
    click.echo(f"       log: {status['log']}")
    for item in status["files"]:
        detail = ""
        if item["status"] == "done" and item["triples"] is not None:
            detail = f"  {item['triples']:,} triples in {item['seconds']} s"
        click.echo(f"  [{item['status']:>7}] {item['source']}{detail}")


@click.command("freebase-filter")
@click.argument("dump", type=click.Path(path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(path_type=Path),
              help="Output N-Triples file (gzipped when it ends in .gz).")
@click.option("--lang", "languages", multiple=True, metavar="TAG",
              help="Language of the literals kept (repeatable; default en). Untagged literals are always kept.")
@click.option("--drop", "drops", multiple=True, metavar="PREDICATE",
              help="Also drop this predicate or predicate prefix (Freebase id like common.topic.description, or a full "
                   "IRI); repeatable.")
@click.option("--keep", "keeps", multiple=True, metavar="PREDICATE",
              help="Keep this predicate or prefix even when a drop rule matches it; repeatable.")
@click.option("--no-default-drops", is_flag=True, help="Start from an empty drop list (only --drop and languages).")
@click.option("--keep-foreign-predicates", is_flag=True,
              help="Keep predicates outside the Freebase namespace (rdf:type, rdfs:label, owl:sameAs ...).")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def freebase_filter_command(dump: Path, out: Path, languages: tuple[str, ...], drops: tuple[str, ...],
                            keeps: tuple[str, ...], no_default_drops: bool, keep_foreign_predicates: bool,
                            no_progress: bool, as_json: bool) -> None:
    """Stream a Freebase RDF dump (gzipped N-Triples, as Google released it) to the subset KGQA work uses.

    Drops non-English names and descriptions, keys and other bulky predicates nobody queries; keeps CVT structure and
    type.object.name. Memory stays constant whatever the dump's size. The drop list is in docs/freebase.md.
    """
    from kgqa.kg.freebase_filter import FilterRules, filter_freebase

    if not dump.is_file():
        raise ConfigError(f"dump {dump} does not exist")
    rules = FilterRules.default(languages=languages or ("en",), drops=drops, keeps=keeps,
                                default_drops=not no_default_drops, keep_foreign=keep_foreign_predicates)
    report = filter_freebase(dump, out, rules, progress=not no_progress)
    if as_json:
        _echo_json(report.to_dict())
        return
    click.echo(f"kept {report.kept:,} of {report.read:,} lines ({report.kept / max(report.read, 1):.1%}) into {out} "
               f"in {report.seconds:.1f} s ({report.read / max(report.seconds, 1e-9):,.0f} lines/s)")
    for reason, count in sorted(report.dropped.items(), key=lambda kv: -kv[1]):
        click.echo(f"  dropped {count:>12,}  {reason}")


COMMANDS = [endpoint_group, freebase_filter_command]
