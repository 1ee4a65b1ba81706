"""Merge the packaged MetaQA templates with the four styles written for the thirteenth session's experiment.

Union per chain of ``metaqa_templates.json`` and ``style1..4.json`` (this folder); a template equal to a wording of
the reworded dev or test sets (topic abstracted, case and punctuation ignored, as the package's test normalises) is
dropped, and so is a repeat. Prints what each file added and what was dropped; writes one template file for
``kgqa train fog --template-wordings FILE`` (docs/fog.md, "December 5, the thirteenth session"). Its output is the
packaged ``metaqa_many`` (``src/kgqa/steps/foresight/wordings/metaqa_many_templates.json``; a test checks it).

    python benchmarks/data/fog_many_authors/merge_templates.py --out /tmp/many.json
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kgqa.data.metaqa_reworded as reworded
from kgqa.eval.metaqa_chains import iter_metaqa_questions
from kgqa.steps.foresight.wordings.templates import ChainTemplates

HERE = Path(__file__).parent
STYLES = ("style1.json", "style2.json", "style3.json", "style4.json")


def words(text: str) -> list[str]:
    """Lower-cased words, punctuation dropped, as the package's no-reworded-wording test normalises."""
    return re.sub(r"[^a-z0-9{}' ]+", " ", text.lower()).split()


def norm(text: str) -> str:
    return " ".join(words(text))


def reworded_questions(split: str, hops: int) -> Iterator[tuple[dict[str, Any], str]]:
    """Each reworded question of a split and hop count with its wording as a template (topic -> {topic})."""
    for q in iter_metaqa_questions(Path(reworded.__file__).parent, hops, split):
        yield q, q["question"].replace(f"[{q['topic']}]", "{topic}")


def reworded_wordings() -> set[str]:
    return {norm(wording) for split in ("dev", "test") for hops in (1, 2, 3)
            for _, wording in reworded_questions(split, hops)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="template file to write (JSON)")
    args = parser.parse_args()
    theirs = reworded_wordings()
    packaged = ChainTemplates.load("metaqa")
    merged = {",".join(str(h) for h in chain): list(texts) for chain, texts in packaged.templates.items()}
    dropped: list[str] = []
    for name in STYLES:
        written = json.loads((HERE / name).read_text(encoding="utf-8"))
        if set(written) != set(merged):
            raise SystemExit(f"{name}: its chains differ from the packaged file's: {sorted(set(written) ^ set(merged))}")
        added = repeats = 0
        for key, texts in written.items():
            seen = {norm(t) for t in merged[key]}
            for text in texts:
                if norm(text) in theirs:
                    dropped.append(text)
                elif norm(text) in seen:
                    repeats += 1
                else:
                    seen.add(norm(text))
                    merged[key].append(text)
                    added += 1
        print(f"{name}: {added} added, {repeats} repeats")
    args.out.write_text(json.dumps(merged, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    total = sum(len(t) for t in ChainTemplates.load(str(args.out)).templates.values())
    print(f"dropped as a reworded wording: {len(dropped)} {dropped}")
    print(f"wrote {args.out}: {total} templates over {len(merged)} chains")


if __name__ == "__main__":
    main()
