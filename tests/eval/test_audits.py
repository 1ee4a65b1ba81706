"""Verdict audits, method statistics and reliable answering, scored by the harness against gold.

A method records its own verdicts (``Prediction.audits``) and numbers (``Prediction.stats``); the harness decides, with
the strict matching rule of the answers, whether each audited node set holds a gold answer. Unit tests on hand-built
predictions (every expected number is counted by hand in the comments), then one run through ``run_eval`` on the
packaged demo dataset and the real demo KG with a method defined here, down to summary.json, report.md and
``compare_runs``. No LLM is involved.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from kgqa.core import AnswerItem, Audit, GoldAnswer, Grounding, MethodContext, Prediction, Question
from kgqa.datasets import load_dataset
from kgqa.errors import DataError
from kgqa.eval.metrics import AUDIT_COUNTS, QuestionScore, score_prediction, summarize, supported_by_evidence
from kgqa.eval.report import compare_runs
from kgqa.eval.rundir import RESULTS_FILE, SUMMARY_FILE
from kgqa.eval.runner import read_results, run_eval, summarize_run
from kgqa.kg.base import parse_chain
from kgqa.kg.demo import build_demo_kg
from kgqa.methods.base import Needs
from kgqa.steps.answers import answer_items, chain_evidence

YEAR = "http://www.w3.org/2001/XMLSchema#gYear"
Y2010 = f'"2010"^^<{YEAR}>'
Y2009 = f'"2009"^^<{YEAR}>'


def question(*golds: GoldAnswer, qid: str = "q") -> Question:
    return Question(id=qid, text="?", answers=list(golds))


def paris() -> Question:
    return question(GoldAnswer(id="m.0paris", name="Paris"))


def counts(q: Question, *audits: Audit) -> dict[str, dict[str, int]]:
    return score_prediction(q, Prediction(audits=list(audits))).audits


def contains(q: Question, **audit: Any) -> bool:
    """Whether one audit claiming its nodes hold the answer is counted as containing gold."""
    result = counts(q, Audit(check="c", claim=True, **audit))["c"]
    assert result["n"] == result["claims"] == 1 and result["tp"] + result["fp"] == 1
    return bool(result["contained"])


# ---------------------------------------------------------------------------------------------------------------------
# One audit against gold


def test_audit_nodes_match_gold_by_id_with_the_strict_rule() -> None:
    q = paris()
    assert contains(q, nodes=["m.0paris"])
    assert contains(q, nodes=["m.0lyon", "ns:m.0paris"])  # one node of the set is enough; prefixes do not matter
    assert not contains(q, nodes=["m.0lyon"])
    # Both sides have Freebase ids: the id decides, a right name on a wrong id does not count (as for answers).
    assert not contains(q, nodes=["m.0lyon"], names=["Paris"])
    assert not contains(q, nodes=[])


def test_audit_names_match_name_only_gold() -> None:
    q = question(GoldAnswer(id=None, name="Ginger Rogers"))
    assert contains(q, nodes=["m.0ginger"], names=["ginger  ROGERS"])  # normalised
    assert not contains(q, nodes=["m.0ginger"])  # no name given: an id cannot match a gold without one
    assert not contains(q, nodes=["m.0fred", "m.0ginger"], names=["Fred Astaire"])  # names pair with nodes in order
    assert contains(q, nodes=["m.0fred", "m.0ginger"], names=["Fred Astaire", "Ginger Rogers"])
    assert contains(q, nodes=[], names=["Ginger Rogers"])  # names beyond the nodes are name-only items


def test_audit_literals_match_by_value() -> None:
    by_name = question(GoldAnswer(id=None, name="2010"))
    assert contains(by_name, nodes=[Y2010])  # a nameless literal is matched by its value
    assert contains(by_name, nodes=['"2010"'])
    assert not contains(by_name, nodes=[Y2009])
    assert contains(by_name, nodes=[Y2009], names=["2010"])  # a given name wins over the value, as for answers
    by_literal_id = question(GoldAnswer(id=Y2010, name="2010"))
    assert contains(by_literal_id, nodes=[Y2010])
    assert not contains(by_literal_id, nodes=[Y2009])


def test_unknown_gold_counts_only_under_n_unknown() -> None:
    result = counts(question(), Audit(check="j", claim=True, nodes=["m.0paris"], step=0),
                    Audit(check="j", claim=False, nodes=[], step=1), Audit(check="r", nodes=["m.0x"]))
    assert result == {"j": {**dict.fromkeys(AUDIT_COUNTS, 0), "n_unknown": 2},
                      "r": {**dict.fromkeys(AUDIT_COUNTS, 0), "n_unknown": 1}}


def test_claim_none_records_retrieval_only() -> None:
    result = counts(paris(), Audit(check="srp.retrieved", nodes=["m.0lyon", "m.0paris"], step=0),
                    Audit(check="srp.retrieved", nodes=["m.0lyon"], step=1))
    assert result == {"srp.retrieved": {**dict.fromkeys(AUDIT_COUNTS, 0), "n": 2, "contained": 1}}


def test_the_final_audit_is_the_highest_step_else_the_last_listed() -> None:
    # Listed out of order: the final verdict is step 2 (a claim without gold), not the last one listed.
    result = counts(paris(), Audit(check="j", claim=True, nodes=["m.0lyon"], step=2),
                    Audit(check="j", claim=True, nodes=["m.0paris"], step=1))["j"]
    assert (result["final_claim"], result["final_wrong"]) == (1, 1)
    assert (result["tp"], result["fp"]) == (1, 1)
    # Without steps: the last listed, here a correct claim.
    result = counts(paris(), Audit(check="j", claim=True, nodes=["m.0lyon"]),
                    Audit(check="j", claim=True, nodes=["m.0paris"]))["j"]
    assert (result["final_claim"], result["final_wrong"]) == (1, 0)
    # A final "no" is no stop on a wrong answer, even after a wrong "yes".
    result = counts(paris(), Audit(check="j", claim=True, nodes=["m.0lyon"], step=0),
                    Audit(check="j", claim=False, nodes=["m.0lyon"], step=1))["j"]
    assert (result["final_claim"], result["final_wrong"], result["claims"], result["tn"]) == (0, 0, 1, 1)


# ---------------------------------------------------------------------------------------------------------------------
# Rates over a hand-made set


def hand_made_set() -> list[tuple[Question, Prediction]]:
    j, r = "srp.judge", "srp.retrieved"
    return [
        # A: no (tn), yes on a wrong node (fp), yes on the answer (tp); final: step 2, right. Retrieved holds it.
        (question(GoldAnswer(id="m.0paris", name="Paris"), qid="A"), Prediction(
            audits=[Audit(check=j, claim=False, nodes=["m.0london"], step=0),
                    Audit(check=j, claim=True, nodes=["m.0lyon"], step=1),
                    Audit(check=j, claim=True, nodes=["m.0paris"], step=2),
                    Audit(check=r, nodes=["m.0paris", "m.0lyon"], step=0)],
            stats={"edits": 2})),
        # B (literal gold by name): listed first, step 1 says yes on 2009 (fp) and is final: stopped without the
        # answer; step 0 said no on 2010 (fn). Retrieved misses it.
        (question(GoldAnswer(id=None, name="2010"), qid="B"), Prediction(
            audits=[Audit(check=j, claim=True, nodes=[Y2009], step=1),
                    Audit(check=j, claim=False, nodes=[Y2010], step=0),
                    Audit(check=r, nodes=[Y2009], step=0)],
            stats={"edits": 0, "sequences": 3})),
        # C (name-only gold): one "no" on a node named as the answer (fn); final is a "no". No retrieval audit.
        (question(GoldAnswer(id=None, name="Ginger Rogers"), qid="C"), Prediction(
            audits=[Audit(check=j, claim=False, nodes=["m.0ginger"], names=["Ginger Rogers"])])),
        # D: gold unknown: both checks only under n_unknown.
        (question(qid="D"), Prediction(
            audits=[Audit(check=j, claim=True, nodes=["m.0a"]), Audit(check=r, nodes=["m.0a"])])),
        # E: one right "yes" (tp), final.
        (question(GoldAnswer(id="m.0berlin", name="Berlin"), qid="E"), Prediction(
            audits=[Audit(check=j, claim=True, nodes=["m.0berlin"], step=0)], stats={"edits": 1})),
        # F: a method that recorded nothing.
        (question(GoldAnswer(id="m.0rome", name="Rome"), qid="F"), Prediction()),
    ]


def test_precision_recall_stops_and_searching_success_counted_by_hand() -> None:
    scores = [score_prediction(q, p) for q, p in hand_made_set()]
    assert scores[5].audits == {} and scores[5].stats == {}
    summary = summarize(scores)
    judge = summary["audits"]["srp.judge"]
    # n: A3 + B2 + C1 + E1; claims: A2 + B1 + E1; tp: A, E; fp: A, B; fn: B, C; tn: A; contained: A, B, C, E;
    # final claims: A, B, E; final wrong: B.
    assert {k: judge[k] for k in AUDIT_COUNTS} == {"n": 7, "n_unknown": 1, "claims": 4, "tp": 2, "fp": 2, "fn": 2,
                                                   "tn": 1, "contained": 4, "final_claim": 3, "final_wrong": 1}
    assert (judge["questions"], judge["questions_known"], judge["questions_claimed"], judge["questions_contained"]) \
        == (5, 4, 3, 4)
    assert judge["precision"] == pytest.approx(2 / 4)
    assert judge["recall"] == pytest.approx(2 / 4)
    assert judge["stopped_without_answer"] == pytest.approx(1 / 3)  # B of A, B, E (C never claimed)
    assert judge["searching_success"] == pytest.approx(4 / 4)
    retrieved = summary["audits"]["srp.retrieved"]
    assert (retrieved["n"], retrieved["n_unknown"], retrieved["contained"], retrieved["claims"]) == (2, 1, 1, 0)
    assert retrieved["precision"] is None and retrieved["recall"] is None
    assert retrieved["stopped_without_answer"] is None
    assert retrieved["searching_success"] == pytest.approx(1 / 2)  # A of A, B
    assert list(summary["audits"]) == ["srp.judge", "srp.retrieved"]
    # Stats: the mean over the questions reporting each key.
    assert summary["stats"] == {"edits": {"mean": pytest.approx(1.0), "n": 3},
                                "sequences": {"mean": pytest.approx(3.0), "n": 1}}
    # Every existing key is still there, and breakdown groups carry the new ones too.
    assert {"hits@1", "kgr", "faithful_f1", "legacy_f1", "tokens_total", "breakdowns"} <= set(summary)
    # Rows as a results file holds them give the same summary.
    rows = [json.loads(json.dumps(s.to_dict())) for s in scores]
    assert summarize(rows)["audits"] == summary["audits"] and summarize(rows)["stats"] == summary["stats"]


def test_a_summary_without_audits_has_empty_sections() -> None:
    summary = summarize([score_prediction(paris(), Prediction(answers=["Paris"]))])
    assert summary["audits"] == {} and summary["stats"] == {}
    assert summary["reliable_answering"] == 0.0  # correct, but no evidence
    assert summarize([])["reliable_answering"] is None


# ---------------------------------------------------------------------------------------------------------------------
# Reliable answering


def supported_hit1(q: Question, answers: list[Any], evidence: list[list[str]]) -> float | None:
    return score_prediction(q, Prediction(answers=answers, evidence=evidence)).supported_hit1


def test_supported_hit1_needs_a_correct_first_answer_in_the_evidence() -> None:
    q = paris()
    capital = [["m.0france", "location.country.capital", "m.0paris"]]
    assert supported_hit1(q, [("m.0paris", "Paris")], capital) == 1.0
    assert supported_hit1(q, [("ns:m.0paris", "Paris")], capital) == 1.0
    # Correct but unsupported: no evidence, or evidence about something else.
    assert supported_hit1(q, [("m.0paris", "Paris")], []) == 0.0
    assert supported_hit1(q, [("m.0paris", "Paris")], [["m.0france", "location.country.capital", "m.0lyon"]]) == 0.0
    # A node at a relation position is no support.
    assert supported_hit1(q, [("m.0paris", "Paris")], [["m.0france", "m.0paris", "m.0lyon"]]) == 0.0
    # Supported but wrong: the first answer is in the triples and is not the gold.
    assert supported_hit1(q, [("m.0lyon", "Lyon"), ("m.0paris", "Paris")],
                          [*capital, ["m.0france", "location.location.contains", "m.0lyon"]]) == 0.0
    # A longer path row: every node at an even position counts.
    assert supported_hit1(q, [("m.0paris", "Paris")],
                          [["m.0france", "location.country.capital", "m.0paris", "location.location.contains",
                            "m.0x"]]) == 1.0
    # No gold and no answer: hit1 is 1, but nothing is supported.
    assert supported_hit1(question(), [], capital) == 0.0


def test_supported_hit1_of_literal_and_name_only_answers() -> None:
    q = question(GoldAnswer(id=None, name="2010"))
    release = [["m.0inception", "film.film.initial_release_date", Y2010]]
    assert supported_hit1(q, [AnswerItem(id=None, name="2010")], release) == 1.0  # as answer_items makes a literal
    assert supported_hit1(q, [AnswerItem(id=Y2010, name="2010")], release) == 1.0
    assert supported_hit1(q, [AnswerItem(id=Y2010, name="")], release) == 1.0
    assert supported_hit1(q, ["2010"], [["m.0inception", "film.film.initial_release_date", Y2009]]) == 0.0
    # Evidence written with names: an answer without id is found by name.
    names = question(GoldAnswer(id=None, name="Ginger Rogers"))
    assert supported_hit1(names, ["Ginger Rogers"], [["Top Hat", "starred_actors", "Ginger Rogers"]]) == 1.0
    assert supported_by_evidence(AnswerItem(id=None, name=""), [["", "r", ""]]) is False


def test_supported_hit1_through_a_cvt_on_the_demo_kg(tmp_path: Path) -> None:
    kg = build_demo_kg(tmp_path / "demo")
    q = next(q for q in load_dataset("demo") if q.id == "demo-018")  # Inception's actors, through performance CVTs
    chain = parse_chain(q.metadata["chain"])
    assert len(chain) == 2
    reached = kg.run_chain(q.topic_ids, chain).entities
    answers = answer_items(kg, reached)
    evidence = chain_evidence(kg, q.topic_ids, chain, [reached[0]])
    assert len(evidence) == 2 and evidence[0][0] == q.topic_ids[0] and evidence[1][2] == reached[0]
    assert evidence[0][2] == evidence[1][0] and not kg.names([evidence[0][2]]).get(evidence[0][2])  # a nameless CVT
    assert supported_hit1(q, answers, evidence) == 1.0
    assert supported_hit1(q, answers, evidence[:1]) == 0.0  # only the hop to the CVT: the answer is not in it


# ---------------------------------------------------------------------------------------------------------------------
# Serialisation


def test_prediction_with_audits_and_stats_round_trips_through_json() -> None:
    prediction = Prediction(answers=["Paris"], evidence=[["m.0france", "location.country.capital", "m.0paris"]],
                            audits=[Audit(check="srp.judge", claim=True, nodes=["m.0paris", Y2010],
                                          names=["Paris", ""], step=3),
                                    Audit(check="srp.retrieved", nodes=["m.0paris"])],
                            stats={"edits": 2, "sequences": 1.5})
    line = prediction.model_dump_json()
    back = Prediction.model_validate_json(line)
    assert back == prediction
    assert back.audits[0].names == ["Paris", ""] and back.audits[1].claim is None and back.audits[1].step is None
    assert back.stats == {"edits": 2.0, "sequences": 1.5}
    with pytest.raises(ValidationError, match="frozen"):
        back.audits[0].claim = False  # type: ignore[misc]
    # A row written before audits existed still loads.
    old = Prediction.model_validate_json('{"answers": [{"id": null, "name": "Paris"}], "grounding": "structured"}')
    assert old.audits == [] and old.stats == {}
    with pytest.raises(ValidationError, match="finite"):
        Prediction(stats={"edits": float("nan")})
    with pytest.raises(ValidationError, match="check"):
        Audit(check="", claim=True)


def test_question_score_round_trips_and_old_rows_load() -> None:
    q, prediction = hand_made_set()[0]
    score = score_prediction(q, prediction)
    back = QuestionScore.from_dict(json.loads(json.dumps(score.to_dict())))
    assert back == score and back.audits["srp.judge"]["tp"] == 1 and back.stats == {"edits": 2.0}
    old_row = {k: v for k, v in score.to_dict().items() if k not in ("audits", "stats", "supported_hit1")}
    old = QuestionScore.from_dict(old_row)
    assert old.audits == {} and old.stats == {} and old.supported_hit1 is None
    assert summarize([old_row])["reliable_answering"] is None  # never measured: not a rate of 0
    with pytest.raises(DataError, match="not a question score"):
        QuestionScore.from_dict({**old_row, "audits": {"j": {"n": "many"}}})


# ---------------------------------------------------------------------------------------------------------------------
# End to end: run_eval on the demo dataset and KG


class ChainJudge:
    """Follows each demo question's gold chain and records the verdicts a judge loop would: a "no" on the topic, then a
    "yes" on the chain's end with the triples behind the answer. For the ids in ``early`` it stops after the first hop
    instead, claiming (wrongly) that the answer is there; for ids in ``bare`` it answers without evidence or audits."""

    name = "chain-judge"

    def __init__(self, early: set[str], bare: set[str]) -> None:
        self.early, self.bare = early, bare

    def needs(self, llm: str | None = None) -> Needs:
        return Needs(kg=True, llm=False)

    def answer(self, question: Question, ctx: MethodContext) -> Prediction:
        chain = parse_chain(question.metadata["chain"])
        topics = question.topic_ids
        stats = {"hops": float(len(chain))}
        if question.id in self.bare:
            return Prediction(answers=answer_items(ctx.kg, ctx.kg.run_chain(topics, chain).entities),
                              grounding=Grounding.STRUCTURED, stats=stats)
        first = list(ctx.kg.run_chain(topics, chain[:1]).entities)
        audits = [Audit(check="test.judge", claim=False, nodes=list(topics), step=0)]
        if question.id in self.early:
            audits = [Audit(check="test.judge", claim=True, nodes=first, step=0)]
            reached, used = first, chain[:1]
        else:
            reached, used = list(ctx.kg.run_chain(topics, chain).entities), chain
            audits.append(Audit(check="test.judge", claim=True, nodes=reached, step=1))
        audits.append(Audit(check="test.retrieved", nodes=reached))
        answers = answer_items(ctx.kg, reached)
        return Prediction(answers=answers, grounding=Grounding.STRUCTURED, audits=audits,
                          evidence=chain_evidence(ctx.kg, topics, used, [reached[0]]) if reached else [],
                          stats={**stats, "edits": float(len(audits) - 2)})


def test_run_eval_scores_audits_stats_and_reliable_answering(tmp_path: Path) -> None:
    kg = build_demo_kg(tmp_path / "demo-kg")
    wanted = ["demo-001", "demo-004", "demo-005", "demo-018", "demo-022", "demo-006"]
    by_id = {q.id: q for q in load_dataset("demo")}
    questions = [by_id[i] for i in wanted]
    # demo-022 (who directed X, then where were they born) stops on the director; demo-006 answers bare.
    method = ChainJudge(early={"demo-022"}, bare={"demo-006"})
    run = run_eval("demo", questions=questions, out=tmp_path / "run", method=method, kg=kg, progress=False)
    rows = {r["id"]: r for r in read_results(run.out_dir)}
    assert rows["demo-018"]["supported_hit1"] == 1.0  # through a CVT
    assert rows["demo-005"]["supported_hit1"] == 1.0  # a date literal
    assert rows["demo-006"]["hit1"] == 1.0 and rows["demo-006"]["supported_hit1"] == 0.0 and \
        rows["demo-006"]["audits"] == {}
    assert rows["demo-022"]["audits"]["test.judge"] == {**dict.fromkeys(AUDIT_COUNTS, 0), "n": 1, "claims": 1,
                                                        "fp": 1, "final_claim": 1, "final_wrong": 1}
    assert rows["demo-001"]["stats"] == {"hops": 1.0, "edits": 1.0}

    summary = json.loads((run.out_dir / SUMMARY_FILE).read_text())
    assert summary["hits@1"] == pytest.approx(5 / 6)  # all but demo-022
    assert summary["reliable_answering"] == pytest.approx(4 / 6)  # and demo-006 has no evidence
    judge = summary["audits"]["test.judge"]
    # Four questions say no (tn) then yes on the answer (tp); demo-022 says yes on the director (fp) and stops.
    assert (judge["n"], judge["claims"], judge["tp"], judge["fp"], judge["fn"], judge["tn"]) == (9, 5, 4, 1, 0, 4)
    assert judge["precision"] == pytest.approx(0.8) and judge["recall"] == 1.0
    assert judge["stopped_without_answer"] == pytest.approx(1 / 5)
    assert judge["searching_success"] == pytest.approx(4 / 5) and judge["questions"] == 5
    retrieved = summary["audits"]["test.retrieved"]
    assert retrieved["searching_success"] == pytest.approx(4 / 5) and retrieved["precision"] is None
    assert summary["stats"]["hops"] == {"mean": pytest.approx(8 / 6), "n": 6}
    assert summary["stats"]["edits"] == {"mean": pytest.approx(4 / 5), "n": 5}
    assert summary["breakdowns"]["hops"]["2"]["audits"]["test.judge"]["fp"] == 1

    report = (run.out_dir / "report.md").read_text()
    assert "| Reliable answering |" in report and "| 66.7 |" in report
    verdicts = report.split("## Verdicts", 1)[1].split("## Cost", 1)[0]
    assert "| test.judge | 5 | 80.0 | 100.0 | 20.0 | 80.0 | 5 |" in verdicts
    assert "| test.retrieved | 0 | - | - | - | 80.0 | 5 |" in verdicts
    assert "## Method statistics" in verdicts and "| edits | 0.8 | 5 |" in verdicts

    # A resumed run rebuilds all of it from results.jsonl.
    (run.out_dir / SUMMARY_FILE).unlink()
    rebuilt = summarize_run(run.out_dir, report=False)
    assert rebuilt["audits"] == summary["audits"] and rebuilt["stats"] == summary["stats"]
    assert rebuilt["reliable_answering"] == summary["reliable_answering"]

    # Compare with a run without audits or evidence, and with an old run whose rows predate all three fields.
    plain = run_eval("demo", questions=questions, out=tmp_path / "plain", method=ChainJudge(set(), set(wanted)),
                     kg=kg, progress=False, report=False)
    old = tmp_path / "old"
    old.mkdir()
    lines = (plain.out_dir / RESULTS_FILE).read_text().splitlines()
    stripped = [{k: v for k, v in json.loads(line).items() if k not in ("audits", "stats", "supported_hit1")}
                for line in lines]
    (old / RESULTS_FILE).write_text("".join(json.dumps(r) + "\n" for r in stripped))
    header, table = compare_runs([run.out_dir, plain.out_dir, old])
    assert header == ["metric", "run", "plain", "old (partial)"]
    labels = [row[0] for row in table]
    assert labels.index("Hits@1 %") < labels.index("latency s / q") < labels.index("reliable answering %")
    assert labels[-11:] == ["reliable answering %", "test.judge precision %", "test.judge recall %",
                            "test.judge stopped w/o answer %", "test.judge searching success %",
                            "test.retrieved precision %", "test.retrieved recall %",
                            "test.retrieved stopped w/o answer %", "test.retrieved searching success %",
                            "stat edits", "stat hops"]
    by_label = {row[0]: row[1:] for row in table}
    assert by_label["reliable answering %"] == ["66.7", "0.0", "-"]
    assert by_label["test.judge precision %"] == ["80.0", "-", "-"]
    assert by_label["test.judge stopped w/o answer %"] == ["20.0", "-", "-"]
    assert by_label["test.retrieved searching success %"] == ["80.0", "-", "-"]
    assert by_label["stat edits"] == ["0.8", "-", "-"]
    assert by_label["stat hops"] == ["1.33", "1.33", "-"]
