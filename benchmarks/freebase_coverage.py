"""The offline Freebase benchmark's coverage: how many questions of webqsp-gog, cwq-gog and cwq can be answered from
the Freebase pieces KG by their gold chain.

For each dataset: the questions whose topic is in the KG, whose gold chain kgqa reads (WebQSP's inferential chain, or
the chain read from the question's SPARQL: ``kgqa.datasets.gold_chains``), and whose gold chain, run from its topic with
``kg.run_chain``, reaches a gold answer: THE coverage ceiling, the share of questions a method following the gold path
on this KG can answer at all. For comparison, the share with some gold answer within 1, 2, 3, 4 hops of a topic (any
relation, either direction: what any path could reach). Then the ceiling by chain length, why each missed question is
missed, which gold constraints of the reached questions the KG holds, and whether every gold answer and topic in the KG
has a name.

    kgqa kg import ../shared/data/freebase --format freebase-pieces --out /work/kgs/freebase
    python benchmarks/freebase_coverage.py --kg /work/kgs/freebase --data-dir ../shared/data

Writes ``benchmarks/results/freebase_coverage.{json,md}`` (``--out-dir``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse

from kgqa.core import Question
from kgqa.datasets import load_dataset, resolve_data_dir
from kgqa.datasets.gold_chains import gold_chain, gold_chain_topic, gold_constraints
from kgqa.datasets.sparql_chains import sparql_problem
from kgqa.kg import open_kg
from kgqa.kg.base import is_literal, literal_value
from kgqa.kg.embedded import EmbeddedKG
from kgqa.normalize import normalize_answer
from kgqa.provenance import source_commit

DATASETS = ("webqsp-gog", "cwq-gog", "cwq")
MAX_HOPS = 4
# run_chain's default cap (1,000 entities) could cut a gold answer off a wide chain; this one never binds here.
CHAIN_LIMIT = 1_000_000


class UndirectedHops:
    """The KG as an undirected adjacency matrix, for the hop distance from topics to answers (a breadth-first search
    is a few sparse products, so a frontier of 100,000 FB15k-237 nodes costs milliseconds)."""

    def __init__(self, kg: EmbeddedKG) -> None:
        self.index: dict[str, int] = {}
        heads, tails = [], []
        for head, _, tail in kg.iter_triples():
            heads.append(self.index.setdefault(head, len(self.index)))
            tails.append(self.index.setdefault(tail, len(self.index)))
        n = len(self.index)
        ones = np.ones(len(heads), dtype=np.int8)
        adjacency = sparse.coo_matrix((ones, (heads, tails)), shape=(n, n)).tocsr()
        self.adjacency = ((adjacency + adjacency.T) > 0).astype(np.int8).tocsr()

    def first_hop_reaching(self, topics: list[str], answers: set[str]) -> int | None:
        """The smallest k <= MAX_HOPS such that some answer is k hops from some topic, else None."""
        targets = [self.index[a] for a in answers if a in self.index]
        start = [self.index[t] for t in topics if t in self.index]
        if not targets or not start:
            return None
        seen = np.zeros(self.adjacency.shape[0], dtype=bool)
        seen[start] = True
        frontier = seen.copy()
        for hops in range(1, MAX_HOPS + 1):
            reached = (self.adjacency.T @ frontier.astype(np.int8)) > 0
            frontier = reached & ~seen
            if not frontier.any():
                return None
            seen |= frontier
            if seen[targets].any():
                return hops
        return None


def reaches_gold(question: Question, reached: list[str]) -> bool:
    """A gold answer among the reached nodes: by id, or by value for a gold literal (an answer without an id)."""
    ids = {a.id for a in question.answers if a.id}
    values = {normalize_answer(a.name) for a in question.answers if not a.id and a.name}
    return any(node in ids or (is_literal(node) and normalize_answer(literal_value(node)) in values) for node in reached)


def miss_reason(question: Question, kg: EmbeddedKG) -> str | None:
    """Why the gold chain reaches no gold answer (None when it reaches one)."""
    chain, start = gold_chain(question), gold_chain_topic(question)
    if chain is None or start is None:
        sparql = question.metadata.get("sparql")
        problem = sparql_problem(sparql, question.topic_ids) if isinstance(sparql, str) else "no SPARQL"
        return f"no gold chain read ({problem or 'no chain'})"
    if not kg.has_entity(start):
        return "the chain's topic is not in the KG"
    if not all(kg.has_relation(hop.relation) for hop in chain):
        return "a relation of the chain is not in the KG"  # run_chain refuses a relation outside the vocabulary
    result = kg.run_chain([start], chain, limit=CHAIN_LIMIT)
    if result.truncated:
        return "the walk was cut by the chain limit"
    if reaches_gold(question, result.entities):
        return None
    if not any(kg.has_entity(a.id) for a in question.answers if a.id):
        return "no gold answer is in the KG"
    if not result.entities:
        stop = next(k for k in range(1, len(chain) + 1) if not kg.run_chain([start], chain[:k]).entities)
        return f"the walk stops at hop {stop} of {len(chain)}"
    return "the walk reaches other nodes only"


def constraint_counts(question: Question, kg: EmbeddedKG) -> Counter[str]:
    """For a question whose chain reaches a gold answer: its gold constraints with a value, and those the KG holds (a
    gold answer survives ``filter_by_constraint``); those without a value (orders, ranges) need literals to check."""
    chain, start = gold_chain(question), gold_chain_topic(question)
    assert chain is not None and start is not None
    gold = {a.id for a in question.answers if a.id}
    counts: Counter[str] = Counter()
    for constraint in gold_constraints(question):
        if constraint.value is None:
            counts["without a value"] += 1
            continue
        counts["with a value"] += 1
        if kg.has_relation(constraint.relation) and (constraint.value.startswith('"') or kg.has_entity(constraint.value)):
            kept = kg.filter_by_constraint([start], chain, constraint.as_constraint_chain(), limit=CHAIN_LIMIT)
            counts["with a value, held by the KG"] += bool(gold & set(kept.entities))
    return counts


def unnamed(kg: EmbeddedKG, ids: set[str]) -> int:
    """How many of ``ids`` are in the KG without a name."""
    present = [i for i in ids if kg.has_entity(i)]
    return sum(1 for name in kg.names(present).values() if not name)


def measure(name: str, questions: list[Question], kg: EmbeddedKG, hops: UndirectedHops) -> dict[str, Any]:
    counts: Counter[str] = Counter()
    misses: Counter[str] = Counter()
    by_length: dict[int, Counter[str]] = {}
    nearest: Counter[int] = Counter()
    constraints: Counter[str] = Counter()
    for question in questions:
        topics = question.topic_ids
        counts["topic in KG"] += any(kg.has_entity(t) for t in topics)
        first = hops.first_hop_reaching(topics, {a.id for a in question.answers if a.id})
        if first is not None:
            nearest[first] += 1
        reason = miss_reason(question, kg)
        if reason is not None:
            misses[reason] += 1
        else:
            constraints += constraint_counts(question, kg)
        chain = gold_chain(question)
        if chain is not None:
            counts["gold chain read"] += 1
            length = by_length.setdefault(len(chain), Counter())
            length["questions"] += 1
            length["reached"] += reason is None
    n = len(questions)
    reached = n - sum(misses.values())
    within = {k: sum(nearest[j] for j in range(1, k + 1)) for k in range(1, MAX_HOPS + 1)}
    return {
        "dataset": name, "questions": n,
        "topic_in_kg": counts["topic in KG"],
        "gold_chain_read": counts["gold chain read"],
        "chain_reaches_gold": reached,
        "not_reached": dict(misses.most_common()),
        "constraints_of_reached_questions": dict(constraints),
        "answer_within_hops": {str(k): v for k, v in within.items()},
        "ceiling_by_chain_length": {str(k): dict(v) for k, v in sorted(by_length.items())},
        "unnamed_in_kg": {"gold answers": unnamed(kg, {a.id for q in questions for a in q.answers if a.id}),
                          "topics": unnamed(kg, {t for q in questions for t in q.topic_ids})},
        "shares": {
            "topic_in_kg": share(counts["topic in KG"], n),
            "gold_chain_read": share(counts["gold chain read"], n),
            "coverage_ceiling": share(reached, n),
            **{f"answer_within_{k}": share(v, n) for k, v in within.items()},
        },
    }


def share(part: int, whole: int) -> float:
    return round(100 * part / whole, 1) if whole else 0.0


def outside(whole: list[Question], part: list[Question]) -> list[Question]:
    ids = {q.id for q in part}
    return [q for q in whole if q.id not in ids]


def render(record: dict[str, Any]) -> str:
    kg = record["kg"]
    lines = [f"# The offline Freebase benchmark: coverage of the Freebase pieces KG ({record['when']}, "
             f"commit {record['commit']})", "",
             f"Command: `{record['command']}`; KG `{kg['directory']}`: {kg['triples']:,} triples, {kg['entities']:,} "
             f"nodes, {kg['relations']} relations, {kg['names']:,} names. {record['seconds']} s.", "",
             "| dataset | questions | topic in KG | gold chain read | **gold chain reaches a gold answer (ceiling)** | "
             "answer within 1 hop | 2 | 3 | 4 hops |", "|---|---|---|---|---|---|---|---|---|"]
    for row in record["rows"]:
        s = row["shares"]
        lines.append(f"| {row['dataset']} | {row['questions']:,} | {s['topic_in_kg']}% | {s['gold_chain_read']}% | "
                     f"**{s['coverage_ceiling']}%** ({row['chain_reaches_gold']:,}) | "
                     + " | ".join(f"{s[f'answer_within_{k}']}%" for k in range(1, MAX_HOPS + 1)) + " |")
    lines += ["", "Shares of all the dataset's questions. Ceiling: the gold chain, run from the topic it starts from "
              "with `kg.run_chain`, reaches a node that is a gold answer. Within k hops: a gold answer id is at most k "
              "edges from some topic, any relation, either direction (FB15k-237's compound relations count two hops, "
              "through their mediator node).", "",
              "The ceiling by gold chain length (questions reached / questions with a chain of that length):", "",
              "| dataset | " + " | ".join(f"{k} hop{'s' if k > 1 else ''}" for k in range(1, MAX_HOPS + 1)) + " |",
              "|---|" + "---|" * MAX_HOPS]
    for row in record["rows"]:
        cells = []
        for k in range(1, MAX_HOPS + 1):
            c = row["ceiling_by_chain_length"].get(str(k), {})
            cells.append(f"{c.get('reached', 0)} / {c.get('questions', 0)}")
        lines.append(f"| {row['dataset']} | " + " | ".join(cells) + " |")
    lines += ["", "Why the gold chain reaches no gold answer:", "", "| dataset | reason | questions |", "|---|---|---|"]
    lines += [f"| {row['dataset']} | {reason} | {count} |" for row in record["rows"]
              for reason, count in row["not_reached"].items()]
    lines += ["", "Gold constraints of the questions whose chain reaches a gold answer (with a value: held by the KG, i.e. "
              "a gold answer survives `filter_by_constraint`, of all; without a value: orders and ranges, which need "
              "literals):", "", "| dataset | with a value: held / all | without a value |", "|---|---|---|"]
    for row in record["rows"]:
        c = row["constraints_of_reached_questions"]
        lines.append(f"| {row['dataset']} | {c.get('with a value, held by the KG', 0)} / {c.get('with a value', 0)} | "
                     f"{c.get('without a value', 0)} |")
    lines += ["", "Ids in the KG without a name (gold answers / topics): "
              + "; ".join(f"{row['dataset']} {row['unnamed_in_kg']['gold answers']} / {row['unnamed_in_kg']['topics']}"
                          for row in record["rows"]) + "."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kg", required=True, help="the embedded import of the Freebase pieces")
    parser.add_argument("--data-dir", default=None, help="kgqa data directory (default: KGQA_DATA_DIR)")
    parser.add_argument("--out-dir", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args(argv)
    started = time.perf_counter()
    kg = open_kg(args.kg)
    if not isinstance(kg, EmbeddedKG):
        parser.error(f"--kg {args.kg} is not an embedded KG directory (the hop distances read its triples)")
    data_dir = resolve_data_dir(args.data_dir)
    hops = UndirectedHops(kg)
    loaded = {name: load_dataset(name, "test", data_dir=data_dir) for name in DATASETS}
    sets = [*loaded.items(), ("cwq outside cwq-gog", outside(loaded["cwq"], loaded["cwq-gog"]))]
    rows = [measure(name, questions, kg, hops) for name, questions in sets]
    stats = kg.stats()
    command = "python benchmarks/freebase_coverage.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    record = {"benchmark": "freebase_coverage", "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
              "commit": source_commit(), "command": command.strip(),
              "seconds": round(time.perf_counter() - started, 1),
              "kg": {"directory": args.kg, "triples": stats.triples, "entities": stats.entities,
                     "relations": stats.relations, "names": stats.names, "literals": stats.literals},
              "rows": rows}
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "freebase_coverage.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    markdown = render(record)
    (out / "freebase_coverage.md").write_text(markdown, encoding="utf-8")
    print(markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
