"""The command line shared by the scripts that read finished run directories (vog_traces, first_reasoning,
placeholder_rescore): check the directories, read each, write the record as JSON plus a markdown table into
``--out-dir``."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kgqa.errors import KGQAError
from kgqa.eval.rundir import CONFIG_FILE, TRACES_FILE
from kgqa.provenance import source_commit


def run_reader_main(argv: list[str] | None, *, name: str, description: str, runs_help: str,
                    read_run: Callable[[Path], dict[str, Any]],
                    table: Callable[[list[dict[str, Any]]], list[str]], title: str, about: str,
                    needs: tuple[str, ...] = (CONFIG_FILE, TRACES_FILE)) -> int:
    """Parse ``RUNDIR... [--out-dir]``, read every run with ``read_run`` and write ``NAME.json`` and ``NAME.md``:
    ``title`` with the time and commit, the command and ``about``, then the lines ``table`` makes of the rows. A
    directory without the files in ``needs``, or that ``read_run`` rejects, is a usage error, not a traceback."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("runs", nargs="+", type=Path, help=runs_help)
    parser.add_argument("--out-dir", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args(argv)
    missing = [str(r) for r in args.runs if not all((r / file).is_file() for file in needs)]
    if missing:
        parser.error(f"not a run directory (no {' or '.join(needs)}): {', '.join(missing)}")
    try:
        rows = [read_run(run) for run in args.runs]
    except (ValueError, KGQAError) as exc:  # a run of another method; a damaged results or traces line
        parser.error(str(exc))
    command = f"python benchmarks/{name}.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    record = {"benchmark": name, "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
              "commit": source_commit(), "command": command, "runs": rows}
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    lines = [f"# {title} ({record['when']}, commit {record['commit']})", "", f"Command: `{command}`. {about}", "",
             *table(rows)]
    (out / f"{name}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0
