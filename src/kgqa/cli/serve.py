"""``kgqa serve``: the HTTP service and the trace viewer (FastAPI on uvicorn; the ``serve`` extra).

It serves one KG and one model (the same defaults as ``kgqa ask``), asks with any registered method, and the run
directories under ``--runs``. A bearer token is required unless the server is on loopback with ``--no-auth``: the
config's ``serve_token`` (``KGQA_SERVE_TOKEN``), else one generated now and printed. docs/service.md has the rest.
"""

from __future__ import annotations

import secrets
import socket
from pathlib import Path

import click

from kgqa import config
from kgqa.errors import ConfigError


@click.command("serve")
@click.option("--kg", "kg_spec", default=None, help="KG: 'demo' (default: config kg), an embedded directory or a SPARQL URL.")
@click.option("--schema", default=None, help="KG conventions for a SPARQL endpoint: freebase, wikidata, generic.")
@click.option("--llm", "llm_spec", default=None, help="Model spec (default: config llm), e.g. openai:gpt-4.1-mini, "
                                                      "scripted:FILE.jsonl.")
@click.option("--embedder", default="minilm", show_default=True, help="Embedder, loaded when a method needs one.")
@click.option("--runs", "runs_dir", type=click.Path(path_type=Path), default=None,
              help="Directory whose subdirectories are kgqa eval run directories, shown by the page and /v1/runs.")
@click.option("--artifacts", "artifact_dirs", multiple=True, type=click.Path(path_type=Path), metavar="DIR",
              help="Directory (repeatable) whose subdirectories an ask may name in a method setting (scorer=NAME, "
                   "answer_types=NAME, references=NAME; default: config serve_artifacts). Asks never name paths.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True)
@click.option("--no-auth", is_flag=True, help="No bearer token (allowed only on a loopback --host).")
@click.option("--max-body", type=click.IntRange(min=256), default=64 * 1024, show_default=True,
              help="Largest request body in bytes (413 beyond).")
@click.option("--rate-limit", type=click.IntRange(min=0), default=300, show_default=True,
              help="API requests per minute per client address (429 beyond; 0: no limit).")
@click.option("--ask-timeout", type=click.FloatRange(min=0.1), default=120.0, show_default=True,
              help="Seconds an ask may take before it is answered 504 (it finishes in the background).")
@click.option("--max-asks", type=click.IntRange(min=1), default=4, show_default=True, help="Asks answered at once.")
@click.option("--max-queued", type=click.IntRange(min=0), default=32, show_default=True,
              help="Asks waiting for a slot (503 beyond).")
@click.option("--keep-traces", type=click.IntRange(min=1), default=256, show_default=True,
              help="Ask traces kept in memory (the newest).")
@click.option("--log-level", type=click.Choice(["critical", "error", "warning", "info", "debug"]), default="info",
              show_default=True)
def serve_command(kg_spec: str | None, schema: str | None, llm_spec: str | None, embedder: str, runs_dir: Path | None,
                  artifact_dirs: tuple[Path, ...], host: str, port: int, no_auth: bool, max_body: int, rate_limit: int,
                  ask_timeout: float, max_asks: int, max_queued: int, keep_traces: int, log_level: str) -> None:
    """Serve the API and the trace viewer: kgqa serve [--kg KG] [--llm SPEC] [--runs DIR] [--port 8765]."""
    try:
        import uvicorn

        from kgqa.service import ServiceSettings, create_app
    except ModuleNotFoundError as exc:
        if exc.name in ("fastapi", "uvicorn", "starlette"):
            raise ConfigError(f"kgqa serve needs {exc.name}: pip install 'kgqa[serve]'") from None
        raise

    from kgqa.llm.oracle import is_oracle_spec

    if is_oracle_spec(config.get("llm", llm_spec)):
        raise ConfigError("--llm oracle answers from a question's gold answers and chains, which a served ask does not "
                          "have; serve a real model")
    configured = config.get("serve_token")
    token = None if no_auth else (str(configured) if configured else secrets.token_urlsafe(24))
    configured_dirs = config.get("serve_artifacts", list(artifact_dirs) or None) or []
    if isinstance(configured_dirs, str):
        configured_dirs = [d for d in configured_dirs.split(",") if d.strip()]
    settings = ServiceSettings(kg=kg_spec, llm=llm_spec, runs=runs_dir, schema=schema, embedder=embedder,
                               artifacts=tuple(Path(str(d).strip()).expanduser() for d in configured_dirs), host=host,
                               token=token, max_body_bytes=max_body, rate_limit=rate_limit, ask_timeout_s=ask_timeout,
                               max_asks=max_asks, max_queued_asks=max_queued, keep_traces=keep_traces)
    settings.check()
    _check_port(host, port)
    app = create_app(settings, open_now=True)  # a bad KG or model spec stops here, before listening
    asks = app.state.asks
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/"
    click.echo(f"kgqa serve: {url}  (KG {asks.kg_spec}, model {asks.llm_spec}, runs {runs_dir or '(none)'})")
    if token is None:
        click.echo("auth: none (--no-auth, loopback only)")
    elif configured:
        click.echo("auth: bearer token from the config (serve_token / KGQA_SERVE_TOKEN)")
    else:
        click.echo(f"token: {token}")
        click.echo(f"page: {url}#token={token}")
    click.echo(f"API docs: {url}docs", nl=True)
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=log_level == "debug",
                                           server_header=False, timeout_graceful_shutdown=5))
    server.run()


def _check_port(host: str, port: int) -> None:
    """A clear error when the address is taken or cannot be bound (uvicorn would exit with a log line)."""
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
