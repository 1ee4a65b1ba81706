"""FoG's answer-type prior at several weights, on the MetaQA dev questions a scorer never saw (and, with
``--reworded``, on kgqa's reworded test sets): how many graph-mode misses each weight leaves.

Every question is expanded and propagated once; the answers are then read with FoG's default reading and the prior
of ``--answer-types DIR`` at each ``--weight`` (0 = no prior, the reading without answer types). The dev questions
are those of ``metaqa-{k}hop`` dev that no member of ``--scorer`` trained on or held out (their scorer.json lists
them), so the weight is chosen on questions neither the scorer nor (with ``kgqa train answer-types --like SCORER``)
the answer-type model saw.

    python benchmarks/fog_answer_types.py --kg /work/kgs/metaqa --data-dir ../shared/data \\
        --scorer /work/models/fog-c --answer-types /work/models/types-c --hops 2 [--reworded]

Writes ``benchmarks/results/{name}_{split}_{hops}.{json,md}`` (``--out-dir``, ``--name``, kept as it is when it
already ends so; split is ``dev`` or ``reworded``): per hop and weight Hits@1, hit and misses, and each question
whose hit changed with the weight chosen.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from kgqa.provenance import source_commit

WEIGHTS = (0.0, 0.1, 0.25, 0.5, 1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kg", required=True, help="an import of MetaQA's kb.txt")
    parser.add_argument("--data-dir", default=os.environ.get("KGQA_DATA_DIR"))
    parser.add_argument("--scorer", required=True, help="a FoG scorer or ensemble directory")
    parser.add_argument("--answer-types", required=True, help="a `kgqa train answer-types` directory")
    parser.add_argument("--also-types", action="append", default=[], metavar="NAME=DIR",
                        help="another answer-type model read at the --compare weight on the same expanded graphs "
                             "(a column NAME; repeatable), e.g. one trained with another --containment")
    parser.add_argument("--hops", type=int, action="append", help="hops to run (repeatable; default 1, 2, 3)")
    parser.add_argument("--weight", type=float, action="append", help=f"weights (repeatable; default {WEIGHTS})")
    parser.add_argument("--compare", type=float, default=1.0, help="the weight whose changed questions are listed")
    parser.add_argument("--parts", action="store_true",
                        help="also read --answer-types at the --compare weight with its end type only, and with the "
                             "end type plus only its junctions or only its topic head (columns end, +junctions, "
                             "+topic); the weight columns read it whole, as FoG does by default")
    parser.add_argument("--reworded", action="store_true", help="the reworded test sets instead of unseen dev")
    parser.add_argument("--typed-retry", action="store_true",
                        help="also run FoG itself at the --compare weight with its typed retry (a column 'retry')")
    parser.add_argument("--typed-retry-tau-e", type=float, default=None,
                        help="with --typed-retry: FoG's typed_retry_tau_e (the retry's second expansion; default none)")
    parser.add_argument("--out-dir", default=str(Path(__file__).resolve().parent / "results"))
    parser.add_argument("--name", default="fog_answer_types")
    args = parser.parse_args()
    commit = source_commit() or "unknown"  # at the start: the code that ran, even if a commit lands meanwhile
    weights = tuple(args.weight or WEIGHTS)
    hops = tuple(args.hops or (1, 2, 3))
    if 0.0 not in weights or args.compare not in weights:
        parser.error("--weight must include 0 and the --compare weight")

    from kgqa.artifacts import ArtifactStore
    from kgqa.core import GoldAnswer, MethodContext, Question, TopicEntity
    from kgqa.datasets.gold_chains import training_questions
    from kgqa.kg import open_kg
    from kgqa.methods.fog.method import FoG
    from kgqa.methods.fog.reading import READING
    from kgqa.steps.answers import presentable
    from kgqa.steps.foresight.answer_types import AnswerTypes, end_name
    from kgqa.steps.foresight.scorer import LabelVectors, load_scorer
    from kgqa.text import load_embedder

    scorer = load_scorer(args.scorer)
    types = AnswerTypes.load(args.answer_types)
    # (column, model, prior options): the other models read whole, and --parts' readings of the main one
    also: list[tuple[str, Any, dict[str, bool]]] = []
    for item in args.also_types:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            parser.error(f"--also-types {item!r}: expected NAME=DIR")
        also.append((name, AnswerTypes.load(path), {}))
    if args.parts:
        also += [("end", types, {"topic": False, "junctions": False}),
                 ("+junctions", types, {"topic": False, "junctions": True}),
                 ("+topic", types, {"topic": True, "junctions": False})]
    seen = set().union(*[set(m.meta.get("training_questions", [])) for m in scorer.members])
    kg = open_kg(args.kg)
    embedder = load_embedder(types.encoder)
    labels = LabelVectors(kg, embedder, ArtifactStore().get("label-embeddings", kg=kg, embedder=embedder))

    def answerable(ids: list[str]) -> set[str]:
        return set(presentable(kg, ids))

    fog = FoG(scorer=args.scorer, mode="graph", answer_types=args.answer_types, answer_type_weight=args.compare,
              typed_retry=True, typed_retry_tau_e=args.typed_retry_tau_e) if args.typed_retry else None
    fog_ctx = MethodContext(kg=kg, llm=None, artifacts=ArtifactStore()) if fog else None  # type: ignore[arg-type]

    def fog_reading(q: Any) -> tuple[bool, bool, list[str] | None, bool]:
        """FoG's own graph-mode answer: (hit@1, hit, pattern, whether the typed retry was read)."""
        question = Question(id=q.source, text=q.text, answers=[GoldAnswer(id=a, name=a) for a in q.answers],
                            topic_entities=[TopicEntity(id=t, name=q.mentions[i] if i < len(q.mentions) else t)
                                            for i, t in enumerate(q.topics)])
        assert fog is not None and fog_ctx is not None
        ctx = fog_ctx.for_question()
        prediction = fog.answer(question, ctx)
        names = [a.id for a in prediction.answers]
        details = fog.account(ctx)  # FoG's account of the answer: its pattern and the typed retry
        pattern = details.pattern
        used = bool(details.typed_retry and details.typed_retry.used)
        return (bool(names) and names[0] in q.answers, bool(set(names) & q.answers),
                pattern.replace(" -> ", " ").split() if pattern else None, used)

    def whole(model: Any, rows: tuple[Any, Any], i: int, weight: float, topic: bool = True,
              junctions: bool = True) -> Any:
        """The model's prior for question i as FoG reads it (its topic head and junctions when it has them)."""
        answer_rows, topic_rows = rows
        return model.prior(answer_rows[i], weight, topic=topic_rows[i] if topic and topic_rows is not None else None,
                           junctions=junctions)

    split = "reworded" if args.reworded else "dev"
    results: list[dict[str, Any]] = []
    for k in hops:
        if args.reworded:
            questions = training_questions([f"metaqa-reworded-{k}hop"], "test", data_dir=args.data_dir).questions
        else:
            questions = [q for q in training_questions([f"metaqa-{k}hop"], "dev", data_dir=args.data_dir).questions
                         if q.source not in seen]
        started = time.perf_counter()
        texts, mentions = [q.text for q in questions], [q.mentions for q in questions]
        probabilities, topics = types.read(embedder, texts, mentions)
        counts: dict[Any, list[int]] = {w: [0, 0] for w in weights}
        if fog is not None:
            counts["retry"] = [0, 0]
        also_rows = {}
        for name, other, _ in also:
            counts[name] = [0, 0]
            also_rows[name] = other.read(embedder, texts, mentions)

        retried = []
        changed = []
        for i, (q, row) in enumerate(zip(questions, probabilities, strict=True)):
            graph = READING.expand(kg, q.topics, scorer.scorer_for(labels, scorer.questions(labels, [q.text])))
            scorer.propagate(graph)
            read = {}
            for w in weights:
                ranked, _ = READING.rank(graph, answerable=answerable,
                                         pattern_prior=whole(types, (probabilities, topics), i, w) if w else None)
                names = [a.entity for a in ranked]
                hit1, hit = bool(names) and names[0] in q.answers, bool(set(names) & q.answers)
                counts[w][0] += hit1
                counts[w][1] += hit
                read[w] = (hit, [end_name(hop) for hop in ranked[0].pattern] if ranked else None)
            for name, other, options in also:
                ranked, _ = READING.rank(graph, answerable=answerable,
                                         pattern_prior=whole(other, also_rows[name], i, args.compare, **options))
                names = [a.entity for a in ranked]
                counts[name][0] += bool(names) and names[0] in q.answers
                counts[name][1] += bool(set(names) & q.answers)
            if fog is not None:
                hit1, hit, pattern, used = fog_reading(q)
                counts["retry"][0] += hit1
                counts["retry"][1] += hit
                if used or hit != read[args.compare][0]:
                    retried.append({"id": q.source, "text": q.text, "fixed": hit, "was": read[args.compare][0],
                                    "before": read[args.compare][1], "after": pattern, "used": used,
                                    "type": types.classes[int(row.argmax())]})
            if read[0.0][0] != read[args.compare][0]:
                changed.append({"id": q.source, "text": q.text, "fixed": read[args.compare][0],
                                "before": read[0.0][1], "after": read[args.compare][1],
                                "type": types.classes[int(row.argmax())]})
        n = len(questions)
        result = {"hops": k, "questions": n, "seconds": round(time.perf_counter() - started, 1),
                  "weights": {str(w): {"hits1": round(100 * c[0] / n, 2), "hit": round(100 * c[1] / n, 2),
                                       "misses": n - c[1]} for w, c in counts.items()},
                  "changed": changed, "retried": retried}
        results.append(result)
        print(f"{split} {k}-hop: {n} questions, {result['seconds']:.0f} s; misses by weight "
              + ", ".join(f"{w}: {n - c[1]}" for w, c in counts.items()), flush=True)
    kg.close()
    meta = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "commit": commit,
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "argv": sys.argv[1:], "split": split}
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    suffix = f"_{split}_{''.join(str(k) for k in hops)}"
    stem = args.name if args.name.endswith(suffix) else args.name + suffix  # a name that says it is not doubled
    (out_dir / f"{stem}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n",
                                          encoding="utf-8")
    what = "reworded test sets" if args.reworded else "MetaQA dev questions no scorer member saw"
    lines = [f"# FoG answer-type prior by weight: {what} ({meta['date']}, commit {commit})", "",
             f"Command: `python benchmarks/fog_answer_types.py {shlex.join(sys.argv[1:])}`", "",
             "| hops | questions | " + " | ".join(f"weight {w}: Hits@1 / hit (misses)" for w in weights)
             + (f" | FoG, weight {args.compare} + typed retry" if fog is not None else "")
             + "".join(f" | {name}, weight {args.compare}" for name, _, _ in also) + " |",
             "|---|---|" + "---|" * (len(weights) + (fog is not None) + len(also))]
    for r in results:
        cells = [f"{v['hits1']:.2f} / {v['hit']:.2f} ({v['misses']})" for v in r["weights"].values()]
        lines.append(f"| {r['hops']} | {r['questions']} | " + " | ".join(cells) + " |")
    lines += ["", f"Questions whose hit changed between weight 0 and {args.compare}:", "",
              "| hops | question | predicted type | pattern before | after | |", "|---|---|---|---|---|---|"]
    for r in results:
        for c in r["changed"]:
            lines.append(f"| {r['hops']} | {c['text']} | {c['type']} | {' '.join(c['before'] or ['-'])} | "
                         f"{' '.join(c['after'] or ['-'])} | {'fixed' if c['fixed'] else 'broken'} |")
    if fog is not None:
        lines += ["", f"Questions the typed retry was read for, or whose hit differs from weight {args.compare}'s "
                  "reading (retry column):", "",
                  "| hops | question | predicted type | pattern before | FoG's | retry read | |",
                  "|---|---|---|---|---|---|---|"]
        for r in results:
            for c in r["retried"]:
                verdict = "fixed" if c["fixed"] and not c["was"] else "broken" if c["was"] and not c["fixed"] \
                    else "still right" if c["fixed"] else "still wrong"
                lines.append(f"| {r['hops']} | {c['text']} | {c['type']} | {' '.join(c['before'] or ['-'])} | "
                             f"{' '.join(c['after'] or ['-'])} | {'yes' if c['used'] else 'no'} | {verdict} |")
    (out_dir / f"{stem}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {out_dir / (stem + '.md')}")


if __name__ == "__main__":
    main()
