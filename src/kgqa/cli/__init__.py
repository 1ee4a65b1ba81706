"""The ``kgqa`` command. Each command group lives in its own module; user errors print one clear line, never a traceback."""

from __future__ import annotations

import os
import sys

# Idle torch/OpenMP threads sleep instead of spinning: on a busy 2-core machine spinning made the scorer and the
# embedder about 3x slower (benchmarks/results/fog_bench.md). Set before anything imports torch; a user's value wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import click

from kgqa import __version__
from kgqa.errors import KGQAError


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="kgqa")
def cli() -> None:
    """Question answering over knowledge graphs with LLM agents grounded in KG facts."""


def _register() -> None:
    from kgqa.cli.kg import kg_group

    cli.add_command(kg_group)
    # Command groups whose modules may not exist yet in a partial install are added when importable.
    for module, attr in (("kgqa.cli.eval", "eval_group"), ("kgqa.cli.ask", "ask_command"),
                         ("kgqa.cli.methods", "methods_command"), ("kgqa.cli.artifacts", "artifacts_group"),
                         ("kgqa.cli.train", "train_group"), ("kgqa.cli.serve", "serve_command")):
        try:
            mod = __import__(module, fromlist=[attr])
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            continue
        cli.add_command(getattr(mod, attr))


_register()


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script: maps user errors to exit code 2 with a one-line message."""
    from kgqa.cli.checks import check_arguments

    try:
        check_arguments(sys.argv[1:] if argv is None else argv)
        cli.main(args=argv, prog_name="kgqa", standalone_mode=False)
    except KGQAError as exc:
        click.echo(f"kgqa: error: {exc}", err=True)
        return exc.exit_code
    except OSError as exc:
        # A file or directory the user named that cannot be read or written (permissions, a file where a directory
        # is expected, a name too long for the file system): one line, not a traceback.
        if os.environ.get("KGQA_DEBUG"):
            raise
        where = f": {exc.filename}" if exc.filename else ""
        click.echo(f"kgqa: error: {exc.strerror or exc}{where} (set KGQA_DEBUG=1 for the traceback)", err=True)
        return 2
    except click.UsageError as exc:
        # a flag or argument of the wrong form: one line that names it, and where to read more
        where = f" (see: {exc.ctx.command_path} --help)" if exc.ctx is not None else ""
        click.echo(f"kgqa: error: {exc.format_message()}{where}", err=True)
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("kgqa: aborted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except KeyboardInterrupt:
        click.echo("kgqa: interrupted", err=True)
        return 130
    except BrokenPipeError:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
