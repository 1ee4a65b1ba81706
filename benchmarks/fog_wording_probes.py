"""Two probes behind FoG's reworded gaps (docs/fog.md, "December 5, the thirteenth session"):

* ``paraphrase``: can an offline local model reword a question template for training copies? Each model is asked to
  reword four templates ("{topic}" kept), at temperature 0.9 with two seeds; every reply is recorded, and a reply
  counts as usable when it is one line of at most 25 words that ends with "?", keeps "{topic}" exactly once, differs
  from the template and does not echo the instruction.
* ``nearest``: does the nearest training wording name the chain? Each reworded question (topic masked) is read as
  the chain of its nearest neighbour by the encoder's cosine among every MetaQA dev wording and the packaged
  templates (topics masked); the share read right per hop, the unseen split's counterpart of a question-type
  classifier.

    python benchmarks/fog_wording_probes.py --data-dir ../shared/data [--llm local:smollm2 ...] [--test]

Writes ``benchmarks/results/{name}.{json,md}`` (``--out-dir``, ``--name``; default fog_wording_probes).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shlex
import sys
from pathlib import Path
from typing import Any

from kgqa.provenance import source_commit

TEMPLATES = ("What other movies did the director of {topic} make?",
             "Who directed the other movies that the actors of {topic} appeared in?",
             "What languages are the movies directed by {topic} in?",
             "Who wrote {topic}?")
INSTRUCTION = ("Rewrite this question in different words. Keep {{topic}} unchanged. Reply with the new question only."
               "\nQuestion: {template}")
MASK = "X"


def usable(reply: str, template: str) -> bool:
    text = reply.strip()
    return ("\n" not in text and len(text.split()) <= 25 and text.endswith("?") and text.count("{topic}") == 1
            and text.lower() != template.lower() and not re.search(r"rewrite|question", text, re.IGNORECASE))


def paraphrase_probe(specs: list[str]) -> list[dict[str, Any]]:
    from kgqa.llm import load

    rows = []
    for spec in specs:
        model = load(spec)
        for template in TEMPLATES:
            for seed in (1, 2):
                reply = model.chat([{"role": "user", "content": INSTRUCTION.format(template=template)}],
                                   max_tokens=40, temperature=0.9, seed=seed).text
                rows.append({"llm": spec, "template": template, "seed": seed, "reply": reply,
                             "usable": usable(reply, template)})
                print(f"{spec} seed {seed}: {template!r} -> {reply!r}", flush=True)
    return rows


def nearest_probe(data_dir: Path, splits: list[str], encoder: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the pool's facts, one row per reworded split and hop count)."""
    import numpy as np

    import kgqa.data.metaqa_reworded as reworded
    from kgqa.eval.metaqa_chains import chain_for_qtype, iter_metaqa_questions
    from kgqa.kg.base import format_chain
    from kgqa.steps.foresight.wordings.templates import ChainTemplates
    from kgqa.text import load_embedder

    def masked(question: dict[str, Any]) -> str:
        return question["question"].replace(f"[{question['topic']}]", MASK)

    pool: dict[str, str] = {}
    for hops in (1, 2, 3):
        for q in iter_metaqa_questions(data_dir / "metaqa", hops, "dev"):
            pool.setdefault(masked(q), format_chain(chain_for_qtype(q["qtype"])))
    for chain, texts in ChainTemplates.load("metaqa").templates.items():
        for text in texts:
            pool.setdefault(text.replace("{topic}", MASK), format_chain(chain))
    texts = list(pool)
    embedder = load_embedder(encoder)

    def unit(rows: Any) -> Any:
        rows = np.asarray(rows, dtype=np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    vectors = unit(embedder.embed(texts))
    base = Path(reworded.__file__).parent
    rows = []
    for split in splits:
        for hops in (1, 2, 3):
            questions = list(iter_metaqa_questions(base, hops, split))
            nearest = (unit(embedder.embed([masked(q) for q in questions])) @ vectors.T).argmax(axis=1)
            right = sum(pool[texts[j]] == format_chain(chain_for_qtype(q["qtype"]))
                        for q, j in zip(questions, nearest, strict=True))
            rows.append({"split": split, "hops": hops, "questions": len(questions), "right": int(right),
                         "accuracy": round(100 * right / len(questions), 1)})
            print(f"reworded {split} {hops}-hop: nearest wording's chain right {right} of {len(questions)}", flush=True)
    return {"pool": len(texts), "encoder": encoder}, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=os.environ.get("KGQA_DATA_DIR"), required=not os.environ.get("KGQA_DATA_DIR"))
    parser.add_argument("--llm", action="append", help="local model specs (default local:gemma3-270m, local:smollm2)")
    parser.add_argument("--encoder", default="minilm")
    parser.add_argument("--test", action="store_true", help="also the reworded test split")
    parser.add_argument("--out-dir", default=str(Path(__file__).resolve().parent / "results"))
    parser.add_argument("--name", default="fog_wording_probes")
    args = parser.parse_args()
    commit = source_commit() or "unknown"
    paraphrases = paraphrase_probe(args.llm or ["local:gemma3-270m", "local:smollm2"])
    pool, nearest = nearest_probe(Path(args.data_dir), ["dev", "test"] if args.test else ["dev"], args.encoder)

    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/fog_wording_probes.py " + shlex.join(sys.argv[1:])
    meta = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "commit": commit, "command": command,
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs", **pool}
    (out_dir / f"{args.name}.json").write_text(json.dumps({"meta": meta, "paraphrases": paraphrases,
                                                           "nearest": nearest}, indent=2) + "\n", encoding="utf-8")
    lines = [f"# FoG wording probes ({meta['date']}, commit {commit})", "", f"Command: `{command}`", "",
             "## Local models rewording templates", "",
             "| model | usable replies | replies |", "|---|---|---|"]
    for spec in dict.fromkeys(r["llm"] for r in paraphrases):
        mine = [r for r in paraphrases if r["llm"] == spec]
        lines.append(f"| {spec} | {sum(r['usable'] for r in mine)} | {len(mine)} |")
    lines += ["", "Every reply (newlines shown as ⏎):", ""]
    lines += [f"- {r['llm']}, seed {r['seed']}: {r['template']} -> "
              f"`{r['reply'].strip().replace(chr(10), ' ⏎ ').replace('`', chr(39))}`" for r in paraphrases]
    lines += ["", f"## The nearest training wording's chain ({pool['pool']} wordings, encoder {pool['encoder']})", "",
              "| reworded split | hops | questions | chain read right |", "|---|---|---|---|"]
    lines += [f"| {r['split']} | {r['hops']} | {r['questions']} | {r['right']} ({r['accuracy']}) |" for r in nearest]
    (out_dir / f"{args.name}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {out_dir / args.name}.md")


if __name__ == "__main__":
    main()
