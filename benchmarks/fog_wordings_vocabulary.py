"""Which reworded questions a FoG scorer misses: those with words its training wordings lack, or the others.

Reads the run directories that ``benchmarks/fog_wordings.py --runs DIR`` keeps (``DIR/NAME-reworded-{1,2,3}``) and
splits each hop's 100 reworded questions by whether they contain one of ``--words`` (whole words, case ignored; by
default the words the composed-wordings table leaves out on purpose, docs/fog.md), with Hits@1 on each part.

    python benchmarks/fog_wordings_vocabulary.py --runs /tmp/fog/w-c --scorer ensemble-c3-c3s1

Writes ``benchmarks/results/fog_wordings_vocabulary.{json,md}`` (``--out-dir``, ``--name``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import shlex
import sys
from pathlib import Path

from kgqa.provenance import source_commit

LEFT_OUT = ("helmed", "penned", "whoever", "pictures", "featuring", "screenwriter", "cast")


def split(rows: list[dict], words: tuple[str, ...]) -> dict:
    pattern = re.compile(r"\b(" + "|".join(re.escape(w) for w in words) + r")", re.I)
    with_words: list[dict] = []
    without: list[dict] = []
    for row in rows:
        (with_words if pattern.search(row["question"]) else without).append(row)

    def hits1(part: list[dict]) -> float | None:
        return round(100 * sum(float(r["hit1"]) for r in part) / len(part), 1) if part else None

    return {"n": len(rows), "misses": sum(1 for r in rows if float(r["hit1"]) < 1),
            "with_words": {"n": len(with_words), "hits1": hits1(with_words),
                           "misses": sum(1 for r in with_words if float(r["hit1"]) < 1)},
            "without_words": {"n": len(without), "hits1": hits1(without),
                              "misses": sum(1 for r in without if float(r["hit1"]) < 1)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", required=True, help="the --runs directory of benchmarks/fog_wordings.py")
    parser.add_argument("--scorer", action="append", required=True, help="a scorer NAME of that run (repeatable)")
    parser.add_argument("--words", default=",".join(LEFT_OUT), help="comma-separated words (default: %(default)s)")
    parser.add_argument("--out-dir", default=str(Path(__file__).resolve().parent / "results"))
    parser.add_argument("--name", default="fog_wordings_vocabulary")
    args = parser.parse_args()
    words = tuple(w.strip() for w in args.words.split(",") if w.strip())
    table: dict[str, dict[int, dict]] = {}
    for scorer in args.scorer:
        table[scorer] = {}
        for hops in (1, 2, 3):
            path = Path(args.runs) / f"{scorer}-reworded-{hops}" / "results.jsonl"
            if not path.is_file():
                raise SystemExit(f"fog_wordings_vocabulary: {path}: no such file (a --runs directory of "
                                 f"benchmarks/fog_wordings.py, and a scorer name it ran?)")
            rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
            table[scorer][hops] = split(rows, words)
    command = "python benchmarks/fog_wordings_vocabulary.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    meta = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "commit": source_commit(),
            "command": command, "words": list(words)}
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.name}.json").write_text(json.dumps({"meta": meta, "results": table}, indent=2) + "\n",
                                           encoding="utf-8")
    lines = [f"# FoG on the reworded sets: questions with and without given words ({meta['date']}, commit "
             f"{meta['commit']})", "", f"Command: `{command}`; words: {', '.join(words)}.", "",
             "| scorer | hops | questions | misses | with a word: n / Hits@1 / misses | without: n / Hits@1 / misses |",
             "|---|---|---|---|---|---|"]
    for scorer, per_hop in table.items():
        for hops, r in per_hop.items():
            w, o = r["with_words"], r["without_words"]
            lines.append(f"| {scorer} | {hops} | {r['n']} | {r['misses']} | {w['n']} / {w['hits1']} / {w['misses']} | "
                         f"{o['n']} / {o['hits1']} / {o['misses']} |")
    (out / f"{args.name}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines[4:]))


if __name__ == "__main__":
    main()
