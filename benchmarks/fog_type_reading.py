"""How often FoG's answer-type models misread the type a question asks for, without running FoG: each model's answer
head (the type of the gold chain's last hop) and topic head (the type its first hop starts from), argmax against the
gold chain, on

* the MetaQA dev questions no member of ``--scorer`` trained on or held out (its scorer.json lists them; the answer
  types trained ``--like`` it saw none of them either),
* the reworded dev split (200 per hop, for choosing) and, with ``--test``, the reworded test split (100 per hop).

A misread type is where most of FoG's misses on other wordings start, but not all of them: FoG reads the type as a
prior on the patterns its scorer kept, so a right type cannot bring back a hop the scorer cut, and a wrong one can be
outweighed (benchmarks/fog_wordings.py measures the method).

    python benchmarks/fog_type_reading.py --data-dir ../shared/data --scorer /work/models/fog-c \\
        --types sentence=/work/models/types-t70tj-w6 --types focus=/work/models/types-w6f [--test]

Writes ``benchmarks/results/{name}.{json,md}`` (``--out-dir``, ``--name``): per model and question set the questions
read and the answer and topic heads' misreadings, and the distinct misread wordings of the reworded splits.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import sys
from pathlib import Path
from typing import Any

from kgqa.provenance import source_commit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=os.environ.get("KGQA_DATA_DIR"))
    parser.add_argument("--scorer", required=True, help="the FoG scorer (or ensemble) the answer types were trained "
                                                        "like: its training questions are left out of MetaQA dev")
    parser.add_argument("--types", action="append", required=True, metavar="NAME=DIR",
                        help="an answer-type model (repeatable; a column NAME)")
    parser.add_argument("--test", action="store_true", help="also the reworded test split")
    parser.add_argument("--out-dir", default=str(Path(__file__).resolve().parent / "results"))
    parser.add_argument("--name", default="fog_type_reading")
    args = parser.parse_args()
    commit = source_commit() or "unknown"
    models: list[tuple[str, str]] = []
    for item in args.types:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            parser.error(f"--types {item!r}: write NAME=DIR")
        models.append((name, path))

    import numpy as np

    from kgqa.datasets.gold_chains import training_questions
    from kgqa.steps.foresight.answer_types import AnswerTypes, hop_end, mask_mentions, reverse
    from kgqa.steps.foresight.scorer import load_scorer
    from kgqa.text import load_embedder

    scorer = load_scorer(args.scorer)
    seen = set().union(*[set(m.meta.get("training_questions", [])) for m in scorer.members])
    metaqa = training_questions([f"metaqa-{k}hop" for k in (1, 2, 3)], "dev", data_dir=args.data_dir).questions
    sets: dict[str, list[Any]] = {"MetaQA dev, unseen": [q for q in metaqa if q.source not in seen]}
    splits = ["dev", "test"] if args.test else ["dev"]
    for split in splits:
        for k in (1, 2, 3):
            sets[f"reworded {split} {k}-hop"] = training_questions([f"metaqa-reworded-{k}hop"], split,
                                                                   data_dir=args.data_dir).questions
    rows: list[dict[str, Any]] = []
    misread: dict[str, dict[str, int]] = {}
    for name, path in models:
        model = AnswerTypes.load(path)
        embedder = load_embedder(model.encoder)
        misread[name] = {}
        for label, questions in sets.items():
            answer, topic = model.read(embedder, [q.text for q in questions], [list(q.mentions) for q in questions])
            wrong_answer = wrong_topic = 0
            for i, q in enumerate(questions):
                gold = model.types.get(hop_end(q.chain[-1]))
                if gold is not None and model.classes[int(np.argmax(answer[i]))] != gold:
                    wrong_answer += 1
                    if label.startswith("reworded"):
                        key = f"{label}: {mask_mentions(q.text, q.mentions)} (asks {gold}, read " \
                              f"{model.classes[int(np.argmax(answer[i]))]})"
                        misread[name][key] = misread[name].get(key, 0) + 1
                start = model.types.get(reverse(hop_end(q.chain[0])))
                if topic is not None and model.topic_classes is not None and start is not None and \
                        model.topic_classes[int(np.argmax(topic[i]))] != start:
                    wrong_topic += 1
            rows.append({"model": name, "set": label, "questions": len(questions), "answer_misread": wrong_answer,
                         "topic_misread": wrong_topic if topic is not None else None,
                         "features": list(model.features)})
            print(f"{name} {label}: {len(questions)} questions, answer type misread {wrong_answer}, topic "
                  f"{wrong_topic if topic is not None else '-'}", flush=True)

    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/fog_type_reading.py " + shlex.join(sys.argv[1:])
    meta = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "commit": commit, "command": command,
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "models": dict(models)}
    (out_dir / f"{args.name}.json").write_text(json.dumps({"meta": meta, "rows": rows, "misread": misread},
                                                          indent=2) + "\n", encoding="utf-8")
    names = [n for n, _ in models]
    lines = [f"# FoG answer types: misread question types ({meta['date']}, commit {commit})", "",
             f"Command: `{command}`", "",
             "| questions | " + " | ".join(f"{n}: answer / topic misread" for n in names) + " |",
             "|---|" + "---|" * len(names)]
    for label, questions in sets.items():
        cells = []
        for n in names:
            (row,) = [r for r in rows if r["model"] == n and r["set"] == label]
            topic = "-" if row["topic_misread"] is None else str(row["topic_misread"])
            cells.append(f"{row['answer_misread']} / {topic}")
        lines.append(f"| {label} ({len(questions)}) | " + " | ".join(cells) + " |")
    lines += ["", "Models: " + "; ".join(f"{n} = `{p}`" for n, p in models), ""]
    for n in names:
        lines += [f"Reworded wordings {n} misreads (questions):", ""]
        lines += [f"- {key}: {count}" for key, count in sorted(misread[n].items())] or ["- none"]
        lines.append("")
    (out_dir / f"{args.name}.md").write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {out_dir / args.name}.md")


if __name__ == "__main__":
    main()
