"""Merge the packaged MetaQA templates with the four styles written for the thirteenth session's experiment.

Union per chain of ``metaqa_templates.json`` and ``style1..4.json`` (this folder); a template equal to a wording of
the reworded dev or test sets (``kgqa.normalize.wording_key``, as the package's test compares them) is
dropped, and so is a repeat. Prints what each file added and what was dropped; writes one template file for
``kgqa train fog --template-wordings FILE`` (docs/fog.md, "December 5, the thirteenth session"). Its output is the
packaged ``metaqa_many`` (``src/kgqa/methods/fog/wordings/metaqa_many_templates.json``; a test checks it).

    python benchmarks/data/fog_many_authors/merge_templates.py --out /tmp/many.json

``--also FILE`` (repeatable) merges more style files after the four, in order: the sixteenth session's two authors
(``style5.json`` conversational, ``style6.json`` written; same brief, neither had read any reworded question) make
the packaged ``metaqa_many2`` (``--also style5.json --also style6.json``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kgqa.data.metaqa_reworded as reworded
from kgqa.datasets.metaqa_chains import iter_metaqa_questions
from kgqa.methods.fog.wordings.templates import ChainTemplates
from kgqa.normalize import wording_key

HERE = Path(__file__).parent
STYLES = ("style1.json", "style2.json", "style3.json", "style4.json")


def reworded_questions(split: str, hops: int) -> Iterator[dict[str, Any]]:
    """Each reworded question of a split and hop count."""
    yield from iter_metaqa_questions(Path(reworded.__file__).parent, hops, split)


def reworded_wordings() -> set[str]:
    return {wording_key(q["question"]) for split in ("dev", "dev2", "test") for hops in (1, 2, 3)
            for q in reworded_questions(split, hops)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="template file to write (JSON)")
    parser.add_argument("--also", action="append", default=[], help="another style file (in this folder) to merge")
    args = parser.parse_args()
    theirs = reworded_wordings()
    packaged = ChainTemplates.load("metaqa")
    merged = {",".join(str(h) for h in chain): list(texts) for chain, texts in packaged.templates.items()}
    dropped: list[str] = []
    for name in (*STYLES, *args.also):
        written = json.loads((HERE / name).read_text(encoding="utf-8"))
        if set(written) != set(merged):
            raise SystemExit(f"{name}: its chains differ from the packaged file's: {sorted(set(written) ^ set(merged))}")
        added = repeats = 0
        for key, texts in written.items():
            seen = {wording_key(t) for t in merged[key]}
            for text in texts:
                if wording_key(text) in theirs:
                    dropped.append(text)
                elif wording_key(text) in seen:
                    repeats += 1
                else:
                    seen.add(wording_key(text))
                    merged[key].append(text)
                    added += 1
        print(f"{name}: {added} added, {repeats} repeats")
    args.out.write_text(json.dumps(merged, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    total = sum(len(t) for t in ChainTemplates.load(str(args.out)).templates.values())
    print(f"dropped as a reworded wording: {len(dropped)} {dropped}")
    print(f"wrote {args.out}: {total} templates over {len(merged)} chains")


if __name__ == "__main__":
    main()
