"""How close template files come to the reworded sets: for each reworded question (topic -> {topic}), the largest
share of its word trigrams found in one template of its own chain; the mean share and the questions at 0.5 or more,
per split and hop.

    python benchmarks/data/fog_many_authors/overlap.py FILE [FILE ...]   (metaqa: the packaged templates)
"""

from __future__ import annotations

import argparse

from merge_templates import reworded_questions  # this folder's script: run as a script, its folder is on the path

from kgqa.datasets.metaqa_chains import chain_for_qtype
from kgqa.methods.fog.wordings.templates import ChainTemplates
from kgqa.normalize import wording_words


def trigrams(text: str) -> set[tuple[str, ...]]:
    found = wording_words(text)
    return {tuple(found[i:i + 3]) for i in range(len(found) - 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="template files (or 'metaqa')")
    args = parser.parse_args()
    for spec in args.files:
        templates = ChainTemplates.load(spec).templates
        grams = {chain: [trigrams(t) for t in texts] for chain, texts in templates.items()}
        for split in ("dev", "test"):
            cells = []
            for hops in (1, 2, 3):
                shares = []
                for q in reworded_questions(split, hops):
                    own = trigrams(q["question"])  # its topic read as {topic}, as in the templates
                    best = max((len(own & t) / len(own) for t in grams.get(chain_for_qtype(q["qtype"]), [])),
                               default=0.0) if own else 0.0
                    shares.append(best)
                cells.append(f"{hops}-hop {100 * sum(shares) / len(shares):.1f} ({sum(s >= 0.5 for s in shares)} "
                             f"of {len(shares)} at >= 0.5)")
            print(f"{spec} {split}: " + " | ".join(cells))


if __name__ == "__main__":
    main()
