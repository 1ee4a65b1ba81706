"""Before and after: two oracle benchmark records (benchmarks/oracle_bench.py) side by side, per dataset and method.

    python benchmarks/oracle_compare.py --before c63d115 --after benchmarks/results/oracle_bench.json \\
        --out benchmarks/results/oracle_compare

``--before``/``--after`` each name a record file or a git commit (read from ``benchmarks/results/oracle_bench.json`` at
that commit). Per dataset x method at oracle accuracy 1.0: hit, F1, KGR, Faithful-F1 and LLM calls per question before
and after, with the difference; on webqsp-gog and cwq-gog the paper's calls per question beside them. Writes
``OUT.json`` and ``OUT.md``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RECORD = "benchmarks/results/oracle_bench.json"
FIGURES = ("hit", "f1", "kgr", "faithful_f1", "calls_per_q")
#: LLM calls per question the papers report on WebQSP / CWQ.
PAPER_CALLS = {"tog": (15.9, 22.6), "pog": (9.0, 13.3), "vog": (9.4, 14.5), "ccor": (4.51, 10.20), "fog": (2.3, 2.8)}


def load_record(where: str) -> dict[str, Any]:
    """A record from a file, or from ``RECORD`` at git commit ``where``."""
    path = Path(where)
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    shown = subprocess.run(["git", "--no-optional-locks", "-C", str(REPO), "show", f"{where}:{RECORD}"],
                           capture_output=True, text=True, check=False)
    if shown.returncode != 0:
        raise SystemExit(f"oracle_compare: {where!r} is neither a record file nor a commit holding {RECORD}")
    return json.loads(shown.stdout)


def cells(record: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(c["dataset"], c["method"]): c for c in record["cells"] if c["accuracy"] == 1.0}


def compare(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    old, new = cells(before), cells(after)
    order = [*after.get("datasets", {}), *before.get("datasets", {})]
    rows = []
    for key in sorted(set(old) | set(new), key=lambda k: (order.index(k[0]) if k[0] in order else len(order), k[1])):
        row: dict[str, Any] = {"dataset": key[0], "method": key[1]}
        for figure in FIGURES:
            b, a = old.get(key, {}).get(figure), new.get(key, {}).get(figure)
            row[figure] = {"before": b, "after": a,
                           "change": round(a - b, 2) if isinstance(a, int | float) and isinstance(b, int | float) else None}
        paper = PAPER_CALLS.get(key[1])
        if paper and key[0] in ("webqsp-gog", "cwq-gog"):
            row["paper_calls_per_q"] = paper[0 if key[0] == "webqsp-gog" else 1]
        rows.append(row)
    return rows


def _cell(figure: dict[str, Any]) -> str:
    b, a, d = figure["before"], figure["after"], figure["change"]
    if b is None or a is None:
        return f"{'-' if b is None else b} → {'-' if a is None else a}"
    return f"{b} → {a}" + (f" ({d:+g})" if d else "")


def render(rows: list[dict[str, Any]], before: dict[str, Any], after: dict[str, Any], command: str) -> str:
    lines = [f"# The oracle benchmark, before ({before.get('commit')}) and after ({after.get('commit')})", "",
             f"Command: `{command}`. Before: `{before.get('command')}` ({before.get('when')}). After: "
             f"`{after.get('command')}` ({after.get('when')}). Oracle accuracy 1.0, the same held-out samples.", ""]
    dataset = None
    for row in rows:
        if row["dataset"] != dataset:
            dataset = row["dataset"]
            lines += ["", f"## {dataset}", "", "| method | hit | F1 | KGR | Faithful-F1 | calls/q | paper calls/q |",
                      "|---|---|---|---|---|---|---:|"]
        lines.append(f"| {row['method']} | " + " | ".join(_cell(row[f]) for f in FIGURES)
                     + f" | {row.get('paper_calls_per_q', '')} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="a record file or a git commit")
    parser.add_argument("--after", default=str(REPO / RECORD), help="a record file or a git commit")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "oracle_compare")
    args = parser.parse_args(argv)
    before, after = load_record(args.before), load_record(args.after)
    rows = compare(before, after)
    command = "python benchmarks/oracle_compare.py " + " ".join(argv if argv is not None else sys.argv[1:])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps({"before": {k: before.get(k) for k in ("commit", "when", "command")},
                                                         "after": {k: after.get(k) for k in ("commit", "when", "command")},
                                                         "command": command, "rows": rows}, indent=2) + "\n",
                                             encoding="utf-8")
    args.out.with_suffix(".md").write_text(render(rows, before, after, command), encoding="utf-8")
    print(args.out.with_suffix(".md").read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
