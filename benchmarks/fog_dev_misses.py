"""Where FoG's graph mode misses on MetaQA dev questions no member of a scorer trained on, and why.

For every scorer given (``--scorer NAME=DIR``, a scorer or an ensemble directory) this answers, in graph mode with
FoG's default reading, the MetaQA dev questions of each hop that none of its members trained on (their scorer.json
lists their training questions; the held-out ones count as trained on) and tabulates:

* Hits@1 and hit per hop;
* the miss rate by what the members did with a question's *template* (its wording with the topic abstracted): trained
  on it, or held it out for validation (``--validation-by template``): one member, another, or every one. A template
  no member trained on is a wording the ensemble never saw;
* for each miss, the answer pattern read against the gold chain (stopped early, went on too far, another relation of
  the same length) and whether any walk of the gold chain to a gold answer survived expansion;
* the answers read with ``continuation="pattern"`` (FoG's ``continuation`` setting: the answer pattern chosen by the
  mean continuation over its walks' ends, FoG's default since 78961b1) beside ``continuation="path"`` (walk by walk,
  the default before), on the same subgraphs. Every other column reads walk by walk, so reports from before and after
  that change line up.

    python benchmarks/fog_dev_misses.py --kg /tmp/kgs/metaqa --data-dir ../shared/data \\
        --scorer recipe=models/fog-metaqa [--per-hop N]

Writes ``benchmarks/results/fog_dev_misses.{json,md}`` (``--out-dir``, ``--name``; the JSON holds the counts and the
misses, ``--rows-out FILE`` every question's row, which ``--include FILE`` adds to a later report).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import shlex
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from kgqa.provenance import source_commit

HOPS = (1, 2, 3)
#: what the members did with a question's template, in the report's column order
TEMPLATE_STATUSES = ("trained by every member", "trained by some members", "trained by no member")


def pattern_names(pattern: Any) -> list[str]:
    return [("^" if backward else "") + relation for relation, backward in pattern]


def kind_of_miss(chosen: tuple | None, gold: tuple) -> str:
    if not chosen:
        return "no answer"
    if len(chosen) < len(gold):
        return "stopped early"
    if len(chosen) > len(gold):
        return "went on too far"
    return "other relations, same length"


def evaluate(name: str, path: Path, args: argparse.Namespace, kg: Any, labels: Any) -> dict[str, Any]:
    from kgqa.datasets.gold_chains import training_questions
    from kgqa.kg.base import Direction
    from kgqa.methods.fog.reading import READING
    from kgqa.methods.fog.training import question_template
    from kgqa.steps.answers import presentable
    from kgqa.steps.foresight.graph import simple_paths
    from kgqa.steps.foresight.scorer import load_scorer

    per_walk = replace(READING, continuation="path")  # the misses' columns, as before 78961b1
    by_pattern = replace(READING, continuation="pattern")
    scorer = load_scorer(path)
    members = scorer.members  # each member's scorer.json lists what it trained on and held out
    trained = [set(m.meta.get("training_questions", [])) for m in members]
    held = [set(m.meta.get("validation_questions", [])) for m in members]
    seen = set().union(*trained)
    rows: list[dict[str, Any]] = []
    for hops in args.hops or HOPS:
        everything = training_questions([f"metaqa-{hops}hop"], "dev", data_dir=args.data_dir).questions
        by_id = {q.source: q for q in everything}
        # the templates each member held out / trained on (over every dev question it was given)
        held_templates = [{question_template(by_id[i]) for i in h if i in by_id} for h in held]
        trained_templates = [{question_template(by_id[i]) for i in t - h if i in by_id}
                             for t, h in zip(trained, held, strict=True)]
        pool = [q for q in everything if q.source not in seen]
        random.Random(args.seed).shuffle(pool)
        if args.per_hop:
            pool = pool[:args.per_hop]
        started = time.perf_counter()
        def answerable(ids: list[str]) -> set[str]:
            return set(presentable(kg, ids))

        for q in pool:
            graph = per_walk.expand(kg, q.topics, scorer.scorer_for(labels, scorer.questions(labels, [q.text])))
            scorer.propagate(graph)
            ranked, _ = per_walk.rank(graph, answerable=answerable)
            names = [a.entity for a in ranked]
            gold = tuple((h.relation, h.direction is Direction.IN) for h in q.chain)
            paths = simple_paths(graph, list(range(len(graph))), combine="min", simple=False)
            pattern_level = [a.entity for a in by_pattern.rank(graph, answerable=answerable)[0]]
            gold_survived = any(
                graph.node_entity[p.end] in q.answers
                and tuple((graph.triples[e][1], graph.backward[e]) for e in p.edges) == gold for p in paths)
            template = question_template(q)
            held_by = [k for k, ts in enumerate(held_templates) if template in ts]
            trained_by = [k for k, ts in enumerate(trained_templates) if template in ts]
            chosen = ranked[0].pattern if ranked else None
            hit = bool(set(names) & q.answers)
            rows.append({
                "id": q.source, "hops": hops, "text": q.text, "template": template,
                "template_status": TEMPLATE_STATUSES[0 if len(trained_by) == len(members) else 2 if not trained_by
                                                     else 1],
                "held_out_by": held_by, "hits1": bool(names) and names[0] in q.answers, "hit": hit,
                "answers": len(names), "chosen": pattern_names(chosen) if chosen else None,
                "gold": pattern_names(gold), "miss": None if hit else kind_of_miss(chosen, gold),
                "gold_walk_survived": gold_survived,
                "pattern_level": {"hits1": bool(pattern_level) and pattern_level[0] in q.answers,
                                  "hit": bool(set(pattern_level) & q.answers)},
            })
        print(f"{name} {hops}-hop: {len(pool)} unseen dev questions in {time.perf_counter() - started:.0f} s",
              flush=True)
    return {"scorer": name, "path": str(path), "members": [str(m.path) for m in members], "rows": rows}


def pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.2f}" if whole else "-"


def compact(result: dict[str, Any]) -> dict[str, Any]:
    """A scorer's result for the results JSON: counts per hop and template status, and the misses' rows."""
    per_hop: dict[str, Any] = {}
    for hops in sorted({r["hops"] for r in result["rows"]}):
        rows = [r for r in result["rows"] if r["hops"] == hops]
        per_hop[str(hops)] = {
            "questions": len(rows), "hits1": sum(r["hits1"] for r in rows), "hit": sum(r["hit"] for r in rows),
            "misses_by_kind": dict(Counter(r["miss"] for r in rows if not r["hit"])),
            "gold_walk_cut": sum(not r["hit"] and not r["gold_walk_survived"] for r in rows),
            "pattern_level": {"hits1": sum(r["pattern_level"]["hits1"] for r in rows),
                              "hit": sum(r["pattern_level"]["hit"] for r in rows)},
            "by_template_status": {status: {"questions": len(part), "misses": sum(not r["hit"] for r in part)}
                                   for status in TEMPLATE_STATUSES
                                   for part in [[r for r in rows if r["template_status"] == status]] if part}}
    return {k: v for k, v in result.items() if k != "rows"} | {
        "per_hop": per_hop, "misses": [r for r in result["rows"] if not r["hit"]]}


def markdown(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [f"# FoG graph mode on unseen MetaQA dev questions: where it misses ({meta['date']}, commit "
             f"{meta['commit']})", "",
             f"Command: `python benchmarks/fog_dev_misses.py {shlex.join(meta['argv'])}`. Questions: every MetaQA dev "
             "question (or a seeded sample) that no member of the scorer trained on or held out. Every column reads the "
             "answers walk by walk (`continuation=path`) but the last, which reads them pattern by pattern "
             "(`continuation=pattern`, FoG's default since 78961b1).",
             *[f"Scorers {', '.join(i['scorers'])} from "
               f"`{i['file']}` ({i['date']}, commit {i['commit']}, `python benchmarks/fog_dev_misses.py "
               f"{shlex.join(i['argv'])}`)." for i in meta.get("included", [])], "",
             "| scorer | hops | questions | Hits@1 | hit | misses (hit) | stopped early | went on too far | "
             "other relations | gold walk cut at expansion | pattern-level reading Hits@1 / hit |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    summaries = [compact(res) for res in results]
    for res in summaries:
        for hops, c in res["per_hop"].items():
            n, kinds = c["questions"], c["misses_by_kind"]
            lines.append(
                f"| {res['scorer']} | {hops} | {n:,} | {pct(c['hits1'], n)} | {pct(c['hit'], n)} | {n - c['hit']} | "
                f"{kinds.get('stopped early', 0)} | {kinds.get('went on too far', 0)} | "
                f"{kinds.get('other relations, same length', 0)} | {c['gold_walk_cut']} | "
                f"{pct(c['pattern_level']['hits1'], n)} / {pct(c['pattern_level']['hit'], n)} |")
    lines += ["", "Misses by what the members did with the question's template (hit misses / questions, percent):", "",
              "| scorer | hops | " + " | ".join(TEMPLATE_STATUSES) + " |", "|---|---|---|---|---|"]
    for res in summaries:
        for hops, c in res["per_hop"].items():
            cells = [f"{part['misses']} / {part['questions']:,} ({pct(part['misses'], part['questions'])})"
                     if (part := c["by_template_status"].get(status)) else "-" for status in TEMPLATE_STATUSES]
            lines.append(f"| {res['scorer']} | {hops} | {' | '.join(cells)} |")
    lines += ["", "Every miss (hit = no answer in gold):", "",
              "| scorer | hops | template | template status | chosen pattern | gold chain | kind |",
              "|---|---|---|---|---|---|---|"]
    for res in summaries:
        for r in res["misses"]:
            chosen = ",".join(r["chosen"]) if r["chosen"] else "-"
            lines.append(f"| {res['scorer']} | {r['hops']} | {r['template']} | {r['template_status']} | "
                         f"{chosen} | {','.join(r['gold'])} | {r['miss']} |")
    lines += ["", "Scorers: " + "; ".join(f"{res['scorer']} = `{res['path']}` (members: "
                                         f"{', '.join('`' + m + '`' for m in res['members'])})" for res in results)]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scorer", action="append", default=[], help="NAME=DIR (repeatable)")
    parser.add_argument("--include", action="append", default=[], type=Path,
                        help="the --rows-out file of an earlier run whose scorers join this report (repeatable)")
    parser.add_argument("--rows-out", type=Path, default=None,
                        help="also write every question's row here (for --include; the results JSON keeps the "
                             "counts and the misses only)")
    parser.add_argument("--kg", required=True, help="an import of MetaQA's kb.txt")
    parser.add_argument("--data-dir", default=os.environ.get("KGQA_DATA_DIR"))
    parser.add_argument("--hops", type=int, action="append", choices=HOPS, help="only these hops (repeatable)")
    parser.add_argument("--per-hop", type=int, default=0, help="a seeded sample per hop (default 0: every one)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-dir", default=str(Path(__file__).resolve().parent / "results"))
    parser.add_argument("--name", default="fog_dev_misses")
    args = parser.parse_args()
    commit = source_commit() or "unknown"  # at the start: the code that ran, even if a commit lands meanwhile
    if not args.scorer and not args.include:
        parser.error("give at least one --scorer NAME=DIR or --include JSON")
    scorers = []
    for item in args.scorer:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            parser.error(f"--scorer {item!r}: expected NAME=DIR")
        scorers.append((name, Path(path)))

    from kgqa.artifacts import ArtifactStore
    from kgqa.kg import open_kg
    from kgqa.steps.foresight.scorer import LabelVectors
    from kgqa.text import load_embedder

    kg = open_kg(args.kg)
    embedder = load_embedder("minilm")
    labels = LabelVectors(kg, embedder, ArtifactStore().get("label-embeddings", kg=kg, embedder=embedder))
    results = [evaluate(name, path, args, kg, labels) for name, path in scorers]
    included = [json.loads(f.read_text(encoding="utf-8")) for f in args.include]
    merged: dict[str, dict[str, Any]] = {}  # one scorer's hops may come from several runs (--hops)
    for r in [r for earlier in included for r in earlier["results"]] + results:
        if r["scorer"] in merged:
            merged[r["scorer"]]["rows"] += r["rows"]
        else:
            merged[r["scorer"]] = dict(r, rows=list(r["rows"]))
    results = list(merged.values())
    meta = {"included": [{"file": str(f), "date": earlier["meta"]["date"], "commit": earlier["meta"]["commit"],
                          "argv": earlier["meta"]["argv"], "scorers": [r["scorer"] for r in earlier["results"]]}
                         for f, earlier in zip(args.include, included, strict=True)],
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "commit": commit,
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "argv": sys.argv[1:], "kg": args.kg,
            "per_hop": args.per_hop, "seed": args.seed}
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{args.name}.json").write_text(json.dumps({"meta": meta, "results": [compact(r) for r in results]},
                                                          indent=1) + "\n", encoding="utf-8")
    if args.rows_out:  # every question's row: what --include reads back
        args.rows_out.write_text(json.dumps({"meta": meta, "results": results}) + "\n", encoding="utf-8")
    (out_dir / f"{args.name}.md").write_text(markdown(results, meta), encoding="utf-8")
    print(f"wrote {out_dir / (args.name + '.md')}")


if __name__ == "__main__":
    main()
