"""Loss attribution: hand-made candidate logs name where the gold left the candidates (a relation cut, an entity cap or
sample, an early stop, the answer step, linking), and real runs on the demo KG record it per question, sum it in
summary.json and report.md, and print it with ``kgqa eval diagnose``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgqa.cli import main
from kgqa.core import GoldReasoning
from kgqa.eval.runner import read_results, run_eval
from kgqa.kg.base import Direction, Hop
from kgqa.steps.losses import (
    CandidateLog,
    Loss,
    candidate_log,
    note_answer_cap,
    note_answers,
    note_entities,
    note_relations,
    note_stop,
)

DIRECTED = Hop("directed_by")
WROTE = Hop("written_by")
BORN = Hop("born_in")
#: "Where was the director of Memento born?": Memento -directed_by-> Nolan -born_in-> London.
GOLD = GoldReasoning(chains=((("directed_by", False), ("born_in", False)),), answers=frozenset({"london"}),
                     path_nodes=(frozenset({"memento"}), frozenset({"nolan"}), frozenset({"london"})))


def _attribute(*notes: tuple, topics: tuple[str, ...] = ("memento",), gold: GoldReasoning = GOLD) -> Loss:
    with candidate_log(gold) as log:
        for kind, *args in notes:
            {"relations": note_relations, "entities": note_entities, "stop": note_stop, "answers": note_answers,
             "answer_cap": note_answer_cap}[kind](*args[:-1], **args[-1])
    return log.attribute(topics=topics)


def test_a_relation_cut_is_relation_pruning() -> None:
    loss = _attribute(("relations", "tog.relations", [DIRECTED, WROTE], [DIRECTED], {"at": "memento", "depth": 1}),
                      ("entities", "tog.beam", ["nolan", "someone"], ["nolan"], {"depth": 1}),
                      ("relations", "tog.relations", [BORN, WROTE], [WROTE], {"at": "nolan", "depth": 2}),
                      ("stop", "tog.depth", "depth_limit", {}))
    assert loss == Loss("relation_pruning", "tog.relations", 2)


def test_an_entity_cap_and_a_sample() -> None:
    assert _attribute(("relations", "tog.relations", [DIRECTED], [DIRECTED], {"at": "memento"}),
                      ("entities", "tog.beam", ["nolan", "a", "b"], ["a", "b"], {"depth": 1})) \
        == Loss("entity_cap", "tog.beam", 1)
    assert _attribute(("entities", "tog.sample", ["nolan", "a", "b"], ["a"], {"depth": 1, "loss": "entity_sample"})) \
        == Loss("entity_sample", "tog.sample", 1)


def test_an_early_stop_of_the_judge() -> None:
    loss = _attribute(("relations", "p", [DIRECTED], [DIRECTED], {"chain": ()}),
                      ("entities", "beam", ["nolan"], ["nolan"], {"depth": 1}),
                      ("stop", "reason", "judge_stop", {"depth": 1}))
    assert loss == Loss("judge_stop", "reason", 1)


def test_reached_answers_make_a_miss_the_answer_step() -> None:
    loss = _attribute(("relations", "p", [DIRECTED], [DIRECTED], {"chain": ()}),
                      ("relations", "p", [BORN], [BORN], {"chain": (DIRECTED,)}),
                      ("answers", "execute", ["london", "paris"], {}),
                      ("stop", "judge", "judge_stop", {}))
    assert loss == Loss("answer_step")


def test_a_kept_branch_heals_a_dropped_one_and_a_later_drop_counts() -> None:
    notes = [("relations", "p", [DIRECTED, WROTE], [WROTE], {"chain": ()}),  # one branch drops the gold hop
             ("relations", "p", [DIRECTED, WROTE], [DIRECTED], {"chain": ()})]  # another keeps it
    assert _attribute(*notes) == Loss("unattributed")
    notes.append(("answer_cap", "answer.max_answers", ["london", "paris"], ["paris"], {}))
    assert _attribute(*notes) == Loss("entity_cap", "answer.max_answers")


def test_a_gold_hop_never_offered_is_lost_at_the_search() -> None:
    assert _attribute(("relations", "ccor.prune", [WROTE], [WROTE], {"chain": ()})) \
        == Loss("relation_pruning", "ccor.prune (gold not offered)")
    # a judge's verdict on one branch is not the whole list: a non-gold branch judged says nothing
    assert _attribute(("relations", "main.decision", [WROTE], [], {"chain": (), "every": False})) \
        == Loss("unattributed")


def test_linking_and_no_gold_path() -> None:
    assert _attribute(("relations", "p", [DIRECTED], [DIRECTED], {"chain": ()}), topics=("m.other",)) == Loss("linking")
    bare = GoldReasoning(answers=frozenset({"london"}))
    assert _attribute(("entities", "x", ["paris"], ["paris"], {}), gold=bare) == Loss("no_gold_path")
    # a method that reads no KG misses at the answer step
    assert CandidateLog(GOLD).attribute(topics=(), reads_kg=False) == Loss("answer_step")


def test_a_stop_on_a_branch_off_the_gold_chain_is_ignored() -> None:
    loss = _attribute(("relations", "p", [DIRECTED, WROTE], [DIRECTED, WROTE], {"chain": ()}),
                      ("stop", "main.depth_limit", "depth_limit", {"chain": (WROTE, BORN)}),
                      ("stop", "main.iterations", "budget_limit", {}))
    assert loss == Loss("budget_limit", "main.iterations")


def test_backward_hops_and_constraints_are_gold_too() -> None:
    gold = GoldReasoning(chains=((("directed_by", True),),), constraints=((1, (("year", False),), "2010"),),
                         answers=frozenset({"inception"}),
                         path_nodes=(frozenset({"nolan"}), frozenset({"inception"})))
    back = Hop("directed_by", Direction.IN)
    assert _attribute(("relations", "p", [back, Hop("directed_by")], [Hop("directed_by")], {"chain": ()}),
                      topics=("nolan",), gold=gold) == Loss("relation_pruning", "p")
    # after the whole chain, the constraint's hop is what is on offer
    assert _attribute(("relations", "c", [Hop("year"), Hop("genre")], [Hop("genre")], {"chain": (back,)}),
                      topics=("nolan",), gold=gold) == Loss("relation_pruning", "c")


def test_notes_outside_a_run_cost_nothing() -> None:
    note_relations("p", [DIRECTED], [], chain=())  # no log in this context: nothing happens, nothing fails
    note_stop("s", "judge_stop")


# ---------------------------------------------------------------------------------------------------------------------
# Real runs


@pytest.fixture(scope="module")
def wrong_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """CCoR under an oracle that is always wrong, on the demo's first 24 questions."""
    out = tmp_path_factory.mktemp("losses") / "ccor-wrong"
    run_eval("demo", out=out, method="ccor", llm="oracle:0", kg="demo", limit=24, progress=False)
    return out


def test_every_missed_question_of_a_run_has_its_loss(wrong_run: Path) -> None:
    rows = read_results(wrong_run)
    assert len(rows) == 24
    missed = [r for r in rows if r["hit"] == 0]
    assert missed
    assert all(r["loss"] not in (None, "none") for r in missed)
    assert all(r["loss"] == "none" and r["loss_step"] is None for r in rows if r["hit"] > 0)
    # a model that always decides wrong drops the gold hop at its relation choice, or (when the pruner's top-up kept
    # it) its judge stops on a wrong chain first
    assert {(r["loss"], r["loss_step"]) for r in missed} == {("relation_pruning", "ccor.prune"),
                                                             ("judge_stop", "main.decision")}


def test_summary_report_and_diagnose_show_the_table(wrong_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary = json.loads((wrong_run / "summary.json").read_text())
    losses = summary["losses"]
    rows = read_results(wrong_run)
    assert losses["questions"] == 24 and losses["missed"] == sum(r["hit"] == 0 for r in rows)
    assert sum(losses["counts"].values()) == losses["missed"]
    assert set(losses["by"]) == {"hops", "qtype"}
    assert "## Where the gold was lost" in (wrong_run / "report.md").read_text()

    assert main(["eval", "diagnose", str(wrong_run)]) == 0
    text = capsys.readouterr().out
    assert f"{losses['missed']} of 24 questions missed" in text and "relation_pruning" in text and "By hops" in text
    assert main(["eval", "diagnose", str(wrong_run), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == losses


def test_diagnose_refuses_runs_without_losses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "diagnose", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "results.jsonl").write_text(json.dumps({"id": "q1", "hit": 0.0}) + "\n")
    assert main(["eval", "diagnose", str(tmp_path / "old")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no loss attribution" in err
