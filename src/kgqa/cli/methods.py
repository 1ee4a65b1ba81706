"""``kgqa methods``: every registered method with its one-line summary, its settings (type, default), its needs and
the ``kgqa train`` commands of its trainers."""

from __future__ import annotations

import json

import click


@click.command("methods")
@click.argument("names", nargs=-1)
@click.option("--llm", "llm_spec", default=None,
              help="Model spec the needs are computed for (some defaults depend on it; default: config llm).")
@click.option("--json", "as_json", is_flag=True, help="Print the listing as JSON.")
def methods_command(names: tuple[str, ...], llm_spec: str | None, as_json: bool) -> None:
    """List methods (or only NAMES): summary, settings for --method-config, and what each needs."""
    from kgqa import config
    from kgqa.methods.registry import METHODS, method_info, method_names

    spec = str(config.get("llm", llm_spec))
    chosen = list(names) or method_names()
    infos = [method_info(n, llm=spec) for n in chosen]
    broken = {n: e for n, e in METHODS.errors().items() if not names}
    if as_json:
        click.echo(json.dumps({"llm": spec, "methods": [i.to_dict() for i in infos], "unloadable": broken},
                              ensure_ascii=False, indent=2))
        return
    for info in infos:
        click.echo(f"{info.name}: {info.summary}")
        needs = info.needs.describe() if info.needs is not None else f"unknown ({info.error})"
        click.echo(f"  needs: {needs} (with llm {spec})")
        if info.trainers:
            click.echo("  trained by: " + ", ".join(f"kgqa train {name}" for name in info.trainers))
        if not info.settings:
            click.echo("  settings: (none)")
        for setting in info.settings:
            default = json.dumps(setting.default) if setting.default is not None else "none"
            text = f"  --method-config {setting.name}=<{setting.type}>  default {default}"
            click.echo(text + (f"  {setting.description}" if setting.description else ""))
        click.echo("")
    for name, error in sorted(broken.items()):
        click.echo(f"{name}: could not be loaded: {error}")
