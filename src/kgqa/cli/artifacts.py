"""``kgqa artifacts``: list, show, build and locate trained and built artifacts (docs/artifacts.md)."""

from __future__ import annotations

import json
import shlex
from typing import Any

import click

from kgqa.artifacts import ARTIFACTS, ArtifactRef, ArtifactStore, get_kind
from kgqa.errors import ConfigError

param_option = click.option("--param", "-p", "params", multiple=True, metavar="KEY=VALUE",
                            help="A build parameter (repeatable), e.g. --param kg=demo --param embedder=hash.")
json_option = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")


def parse_params(items: tuple[str, ...]) -> dict[str, str]:
    """``("kg=demo", "embedder=hash")`` -> ``{"kg": "demo", "embedder": "hash"}``; a malformed or repeated one is refused."""
    params: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--param {item!r} is not KEY=VALUE")
        if key in params:
            raise ConfigError(f"--param {key} is given twice")
        params[key] = value.strip()
    return params


def _command(action: str, name: str, params: dict[str, str]) -> list[str]:
    return ["kgqa", "artifacts", action, name, *(arg for k, v in params.items() for arg in ("--param", f"{k}={v}"))]


def _store(command: list[str] | None = None) -> ArtifactStore:
    return ArtifactStore(command=command, progress=lambda message: click.echo(message, err=True))


def human_size(size: int) -> str:
    """``55343`` -> ``54.0 KiB``."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _params_text(params: Any) -> str:
    if not isinstance(params, dict) or not params:
        return "-"
    return " ".join(f"{k}={v}" for k, v in params.items())


def _is_digest(text: str) -> bool:
    return len(text) >= 4 and all(c in "0123456789abcdef" for c in text.lower())


def _lookup(store: ArtifactStore, name_or_digest: str, params: dict[str, str]) -> ArtifactRef:
    """The built artifact named by kind and parameters, or by digest (prefix); a clear error when it is not built."""
    if name_or_digest in ARTIFACTS:
        ref = store.find(name_or_digest, params)
        if ref is None:
            digest = store.digest(name_or_digest, params)
            build = shlex.join(_command("build", name_or_digest, params))
            raise ConfigError(f"{name_or_digest} ({_params_text(params)}; digest {digest}) is not built yet; "
                              f"build it with: {build}")
        return ref
    if _is_digest(name_or_digest):
        if params:
            raise ConfigError("--param goes with an artifact name, not with a digest")
        return store.by_digest(name_or_digest)
    get_kind(name_or_digest)  # raises: unknown artifact, with the known ones
    raise AssertionError("unreachable")


def format_manifest(ref: ArtifactRef) -> list[str]:
    """A manifest as aligned lines for people."""
    m = ref.manifest
    lines = [f"{ref.name} {ref.digest}",
             f"  path:      {ref.path}",
             f"  kind:      {ref.name} version {m.get('kind_version', '?')}: {m.get('summary', '')}",
             f"  params:    {_params_text(m.get('params'))}"]
    inputs = m.get("inputs") or {}
    for i, (key, value) in enumerate(inputs.items()):
        label = "  inputs:    " if i == 0 else "             "
        shown = _params_text(value) if isinstance(value, dict) else str(value)
        lines.append(f"{label}{key}: {shown}")
    command = m.get("command")
    command_text = shlex.join(command) if isinstance(command, list) else str(command)
    lines += [f"  command:   {command_text}",
              f"  created:   {m.get('created', '?')} by kgqa {m.get('kgqa_version', '?')} (Python {m.get('python', '?')}),"
              f" in {m.get('build_seconds', '?')} s",
              f"  metrics:   {_params_text(m.get('metrics'))}"]
    files = m.get("files") or {}
    listed = ", ".join(f"{name} {human_size(int(size))}" for name, size in files.items())
    lines.append(f"  files:     {listed} (total {human_size(int(m.get('size_bytes', 0)))})")
    return lines


@click.group("artifacts")
def artifacts_group() -> None:
    """Trained and built artifacts (relation embeddings, scorer weights ...): cached by content digest under the cache
    directory, each with a manifest of how it was made."""


@artifacts_group.command("list")
@json_option
def list_command(as_json: bool) -> None:
    """List the artifact kinds and the artifacts built in the store."""
    store = ArtifactStore()
    kinds = [{"name": name, "version": kind.version, "summary": kind.summary, "params": dict(kind.params)}
             for name, kind in ARTIFACTS.items()]
    broken = ARTIFACTS.errors()
    built = store.list()
    if as_json:
        click.echo(json.dumps({"store": str(store.root), "kinds": kinds, "broken_kinds": broken,
                               "built": [{"name": r.name, "digest": r.digest, "path": str(r.path),
                                          "size_bytes": r.size_bytes, "created": r.created,
                                          "params": r.manifest.get("params", {})} for r in built]},
                              ensure_ascii=False, indent=2))
        return
    click.echo("Artifact kinds:")
    for kind in kinds:
        click.echo(f"  {kind['name']} (version {kind['version']}): {kind['summary']}")
        for key, help_text in kind["params"].items():
            click.echo(f"      --param {key}=...  {help_text}")
    for name, error in sorted(broken.items()):
        click.echo(f"  {name}: could not be loaded: {error}")
    click.echo(f"Built artifacts in {store.root}:")
    if not built:
        click.echo("  (none)")
        return
    rows = [(r.name, r.digest, human_size(r.size_bytes), r.created, _params_text(r.manifest.get("params")))
            for r in built]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        click.echo("  " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4])


@artifacts_group.command("show")
@click.argument("name")
@param_option
@json_option
def show_command(name: str, params: tuple[str, ...], as_json: bool) -> None:
    """Show how the artifact NAME (with --param) or the artifact with digest NAME was made."""
    ref = _lookup(ArtifactStore(), name, parse_params(params))
    if as_json:
        click.echo(json.dumps({"path": str(ref.path), **ref.manifest}, ensure_ascii=False, indent=2))
        return
    for line in format_manifest(ref):
        click.echo(line)


@artifacts_group.command("build")
@click.argument("name")
@param_option
@click.option("--rebuild", is_flag=True, help="Build again even if the store holds it, and replace it.")
@json_option
def build_command(name: str, params: tuple[str, ...], rebuild: bool, as_json: bool) -> None:
    """Build the artifact NAME for the given --param values (unless already built); progress goes to stderr."""
    values = parse_params(params)
    store = _store(_command("build", name, values))
    existing = None if rebuild else store.find(name, values)
    ref = existing or store.build(name, values, rebuild=rebuild)
    if as_json:
        click.echo(json.dumps({"path": str(ref.path), "built_now": existing is None, **ref.manifest},
                              ensure_ascii=False, indent=2))
        return
    state = "already built" if existing is not None else f"built in {ref.manifest.get('build_seconds')} s"
    click.echo(f"{ref.name} {ref.digest}: {state} ({_params_text(ref.manifest.get('metrics'))})")
    click.echo(str(ref.path))


@artifacts_group.command("path")
@click.argument("name")
@param_option
@click.option("--build", "build_missing", is_flag=True, help="Build the artifact first if the store does not hold it.")
def path_command(name: str, params: tuple[str, ...], build_missing: bool) -> None:
    """Print the directory of the artifact NAME (with --param) or of the artifact with digest NAME."""
    values = parse_params(params)
    if build_missing and name in ARTIFACTS:
        click.echo(str(_store(_command("build", name, values)).build(name, values).path))
        return
    click.echo(str(_lookup(ArtifactStore(), name, values).path))
