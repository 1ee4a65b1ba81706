"""MetaQA's merged remakes: can any tie-break pick the film a 1-hop question was generated from?

WikiMovies' kb.txt lists each film as a block of consecutive lines; films sharing a title (remakes) are separate blocks
with the same subject, so any KG built from the file merges them into one entity. A question such as "who directed
RoboCop" was generated from one block, and its gold answers are that block's. Every method that reads the merged entity
returns the union, so strict Hits@1 (the first answer) depends on which block's answer comes first.

This script finds, for every 1-hop question about a film (``movie_to_*``) whose title has more than one block, the block
the gold answers come from, and measures how often each tie-break rule a ranker could use picks that block: the first
block in the file, the largest block, the oldest film (smallest release year), the block whose answers have the highest
mean degree in the KB. A rule at about 1 / (number of blocks) carries no signal.

It also measures a rule that picks no block: answers asserted by more of the title's blocks first (what the embedded
store's statement counts give FoG's ranking), against answers in arbitrary order: the expected strict Hits@1 over
every question on a merged title, ties in random order.

    python benchmarks/metaqa_remakes.py --data-dir ../shared/data

Writes ``benchmarks/results/metaqa_remakes.{json,md}`` (``--out-dir``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from kgqa.datasets import load_dataset, resolve_data_dir
from kgqa.datasets.metaqa_chains import QTYPE_CHAINS
from kgqa.kg.base import Direction
from kgqa.provenance import source_commit

RULES = ("first block", "largest block", "oldest film", "best-connected answers")


def read_blocks(kb: Path) -> tuple[dict[str, list[list[tuple[str, str]]]], Counter[str]]:
    """Each subject's blocks of consecutive (relation, object) lines, and every label's degree."""
    blocks: dict[str, list[list[tuple[str, str]]]] = defaultdict(list)
    degree: Counter[str] = Counter()
    previous = None
    with kb.open(encoding="utf-8") as lines:
        for line in lines:
            parts = line.rstrip("\n").split("|")
            if len(parts) != 3:
                continue
            subject, relation, obj = parts
            degree[subject] += 1
            degree[obj] += 1
            if subject != previous:
                blocks[subject].append([])
                previous = subject
            blocks[subject][-1].append((relation, obj))
    return blocks, degree


def rule_choices(blocks: list[list[tuple[str, str]]], degree: Counter[str]) -> dict[str, int | None]:
    """The block each rule picks (None when the rule ties)."""
    def argmax(values: list[float]) -> int | None:
        best = max(values)
        return values.index(best) if values.count(best) == 1 else None

    years = [min((int(o) for r, o in b if r == "release_year" and o.isdigit()), default=None) for b in blocks]
    return {
        "first block": 0,
        "largest block": argmax([float(len(b)) for b in blocks]),
        "oldest film": argmax([-float(y) for y in years]) if None not in years else None,  # type: ignore[misc]
        "best-connected answers": argmax([sum(degree[o] for _, o in b) / len(b) for b in blocks]),
    }


def measure(split: str, data_dir: Path, blocks: dict[str, list[list[tuple[str, str]]]],
            degree: Counter[str]) -> dict[str, Any]:
    questions = load_dataset("metaqa-1hop", split, data_dir)
    counts: Counter[str] = Counter()
    chance = 0.0
    arbitrary = shared_first = 0.0  # expected first-answer hits over the questions on a merged title
    for q in questions:
        chain = QTYPE_CHAINS.get(q.metadata.get("qtype", ""), ())
        # A question about a film: one hop out of it (movie_to_director, movie_to_year ...).
        if len(chain) != 1 or chain[0].direction is not Direction.OUT or len(q.topic_entities) != 1:
            continue
        relation = chain[0].relation
        film = blocks.get(q.topic_entities[0].name, [])
        if len(film) < 2:
            continue
        counts["questions on a merged title"] += 1
        gold = set(q.gold_names)
        answers = [{o for r, o in b if r == relation} for b in film]  # each block's answers
        asserted = Counter(o for block in answers for o in block)
        if asserted:
            most = max(asserted.values())
            first = {o for o, n in asserted.items() if n == most}
            arbitrary += len(gold & set(asserted)) / len(asserted)
            shared_first += len(gold & first) / len(first)
        sources = [i for i, block in enumerate(answers) if gold <= block]
        if len(sources) != 1:
            counts["gold matches several blocks or none"] += 1
            continue
        counts["gold from exactly one block"] += 1
        chance += 1 / len(film)
        for rule, choice in rule_choices(film, degree).items():
            counts[f"{rule}: decided"] += choice is not None
            counts[f"{rule}: right"] += choice == sources[0]
    decided = counts["gold from exactly one block"]
    return {
        "split": split, "questions": len(questions), **counts,
        "chance_right": round(chance, 1),
        "rules": {rule: {"decided": counts[f"{rule}: decided"], "right": counts[f"{rule}: right"],
                         "right_share": round(100 * counts[f"{rule}: right"] / max(counts[f"{rule}: decided"], 1), 1)}
                  for rule in RULES},
        "chance_share": round(100 * chance / max(decided, 1), 1),
        "first_answer_right": {"arbitrary order": round(arbitrary, 1), "shared answers first": round(shared_first, 1),
                               "gain_in_hits1_points": round(100 * (shared_first - arbitrary) / len(questions), 2)},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=None, help="kgqa data directory (default: KGQA_DATA_DIR)")
    parser.add_argument("--out-dir", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args(argv)
    data_dir = resolve_data_dir(args.data_dir)
    blocks, degree = read_blocks(data_dir / "metaqa" / "kb.txt")
    results = [measure(split, data_dir, blocks, degree) for split in ("dev", "test")]
    command = "python benchmarks/metaqa_remakes.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    record = {"benchmark": "metaqa_remakes", "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
              "commit": source_commit(), "command": command.strip(),
              "titles_with_several_blocks": sum(len(b) > 1 for b in blocks.values()), "splits": results}
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "metaqa_remakes.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    lines = [f"# MetaQA 1-hop questions on merged remakes: which film was asked about? ({record['when']}, "
             f"commit {record['commit']})", "", f"Command: `{record['command']}`; kb.txt has "
             f"{record['titles_with_several_blocks']} titles listed as more than one film.", "",
             "| split | questions on a merged title | gold from one film | " + " | ".join(RULES) + " | chance |",
             "|---|---|---|" + "---|" * (len(RULES) + 1)]
    for r in results:
        cells = [f"{v['right']} of {v['decided']} ({v['right_share']})" for v in r["rules"].values()]
        lines.append(f"| {r['split']} | {r['questions on a merged title']} | {r['gold from exactly one block']} | "
                     + " | ".join(cells) + f" | {r['chance_right']} ({r['chance_share']}) |")
    lines += ["", "Each rule cell: questions where the rule picks the film the gold answers come from, of those where "
              "it picks one (no tie); chance: the expected count picking a film at random.", "",
              "Picking no film: the expected number of questions on a merged title whose first answer is right, answers "
              "in arbitrary order against answers asserted by more of the title's films first (ties in random order), "
              "and what that gains in strict Hits@1 over the whole split:", "",
              "| split | arbitrary order | shared answers first | gain (Hits@1 points) |", "|---|---|---|---|"]
    for r in results:
        f = r["first_answer_right"]
        lines.append(f"| {r['split']} | {f['arbitrary order']} | {f['shared answers first']} | "
                     f"{f['gain_in_hits1_points']} |")
    (out / "metaqa_remakes.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
