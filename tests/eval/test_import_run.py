"""`kgqa eval import-run`: released runs of PoG, VoG and AoG joined to a dataset and scored into a kgqa run directory.

Small hand-written run files over a six-question WebQSP data directory (written in the public file layout), and the
real released PoG runs from the shared data directory (skipped without it, failing when CI=true).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from kgqa.cli import main
from kgqa.datasets import DATA_DIR_ENV
from kgqa.errors import ConfigError, DataError
from kgqa.eval.import_run import READERS, import_run
from kgqa.eval.rundir import RunDirError, read_results

IN_CI = os.environ.get("CI", "").lower() == "true"

QUESTIONS = [
    ("WebQTest-0", "who influenced samuel taylor coleridge?", ["Immanuel Kant", "Robert Burns"]),
    ("WebQTest-1", "what county is st. louis park in?", ["Hennepin County"]),
    ("WebQTest-2", "where does the columbia river start?", ["Columbia Lake"]),
    ("WebQTest-3", "what type of art does marc chagall do?", ["Painting", "Stained glass"]),
    ("WebQTest-4", "what year did the giants win the world series?", ["2010 World Series", "2014 World Series"]),
    ("WebQTest-5", "who plays ken barlow in coronation street?", ["William Roache"]),
]
CHAIN = [[[["Samuel Taylor Coleridge", "influence.influence_node.influenced_by", "Immanuel Kant"]]]]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A data directory holding a six-question WebQSP test file in AoG's compact layout."""
    root = tmp_path / "data"
    (root / "questions/aog").mkdir(parents=True)
    records = [{"QuestionId": qid, "RawQuestion": text, "answer": answers, "topic_entity": {}}
               for qid, text, answers in QUESTIONS]
    (root / "questions/aog/WebQSP.json").write_text(json.dumps(records), encoding="utf-8")
    return root


def pog_reply(answer: Any, key: str = "Sufficient") -> str:
    return json.dumps({"A": {key: "Yes", "Answer": answer}, "R": "because"}, indent=4)


def pog_row(text: str, answer: Any, *, key: str = "Sufficient", chains: Any = CHAIN, calls: int = 4) -> dict[str, Any]:
    return {"RawQuestion": text, "results": pog_reply(answer, key), "reasoning_chains": chains, "call_num": calls,
            "total_token": 1100, "input_token": 1000, "output_token": 100, "time": 5.0}


def write_lines(path: Path, lines: list[dict[str, Any] | str]) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines),
                    encoding="utf-8")
    return path


def pog_file(tmp_path: Path) -> Path:
    """Eight lines: a clean hit, a join by normalised text with a list answer, a line that is not JSON (question
    still readable), a reply that is not JSON, PoG's LLM-only answer, a repeated question, an unknown question, and
    a line with nothing readable. The sixth dataset question has no line."""
    broken_reply = pog_row(QUESTIONS[3][1], "x")
    broken_reply["results"] = '{\n "A": {"Sufficient": "Yes", "Answer": ["Painting", "Cubi'  # cut off mid-reply
    return write_lines(tmp_path / "PoG_webqsp.jsonl", [
        pog_row(QUESTIONS[0][1], "Immanuel Kant"),
        pog_row("What  county is St. Louis Park in?", ["Hennepin County", "Minnesota"], calls=6),
        '{"RawQuestion": "where does the columbia river start?", "results": "{\\"A\\": {\\"Answer\\": [\\"Colu',
        broken_reply,
        pog_row(QUESTIONS[4][1], "2014", key="Known", chains=[]),
        pog_row(QUESTIONS[0][1], "Robert Burns"),
        pog_row("who is the president of mars?", "Nobody"),
        "this line is not JSON at all",
    ])


def results_by_id(run_dir: Path) -> dict[str, dict[str, Any]]:
    return {row["id"]: row for row in read_results(run_dir)}


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# ---------------------------------------------------------------------------------------------------------------------
# Joining and counting


def test_pog_run_is_joined_scored_and_every_stray_row_named(tmp_path: Path, data_dir: Path) -> None:
    source = pog_file(tmp_path)
    run = import_run(source, fmt="pog", dataset="webqsp", out=tmp_path / "run", data_dir=data_dir, report=False)
    out = run.out_dir
    assert run.join == {
        "rows": 8, "joined": 5, "joined_by": {"id": 0, "text": 4, "normalised_text": 1}, "unmatched": 2,
        "duplicates": 1, "missing": 1, "broken": 3, "broken_kept": 2, "no_answer": 2, "with_usage": 4, "scored": 5,
        "dataset_questions": 6,
    }
    rows = read_results(out)
    assert [r["id"] for r in rows] == ["WebQTest-0", "WebQTest-1", "WebQTest-2", "WebQTest-3", "WebQTest-4"]
    by_id = {r["id"]: r for r in rows}
    first = by_id["WebQTest-0"]  # the first of the two rows for it is kept
    assert first["answers"] == ["Immanuel Kant"] and first["gold"] == ["Immanuel Kant", "Robert Burns"]
    assert (first["hit1"], first["recall"], first["grounding"]) == (1.0, 0.5, "synthesis")
    assert (first["llm_calls"], first["prompt_tokens"], first["completion_tokens"], first["latency_s"]) == (4, 1000, 100, 5.0)
    assert first["imported"] == {"line": 1} and first["error"] is None
    county = by_id["WebQTest-1"]  # joined although case and spacing differ; a list answer keeps its order
    assert county["answers"] == ["Hennepin County", "Minnesota"] and county["question"] == QUESTIONS[1][1]
    assert (county["hit1"], county["precision"], county["llm_calls"]) == (1.0, 0.5, 6)
    bad_line = by_id["WebQTest-2"]  # not JSON, but its question was readable: kept without an answer, no usage
    assert bad_line["answers"] == [] and bad_line["hit1"] == 0.0
    assert bad_line["error"].startswith("released row unreadable: unreadable row: not valid JSON")
    assert "llm_calls" not in bad_line and "latency_s" not in bad_line
    bad_reply = by_id["WebQTest-3"]  # a valid line whose reply is cut off: no answer, usage kept
    assert bad_reply["answers"] == [] and bad_reply["llm_calls"] == 4
    assert "results is not valid JSON" in bad_reply["imported"]["note"] and bad_reply["error"]
    known = by_id["WebQTest-4"]  # PoG answered from the LLM alone: parametric; the substring rule forgives "2014"
    assert (known["hit1"], known["legacy_hit1"], known["grounding"]) == (0.0, 1.0, "parametric")

    unmatched = lines_of(out / "unmatched.jsonl")
    assert [(u["line"], u.get("question")) for u in unmatched] == [(7, "who is the president of mars?"), (8, None)]
    assert "no question of the dataset" in unmatched[0]["reason"] and "not valid JSON" in unmatched[1]["reason"]
    assert unmatched[1]["raw"] == "this line is not JSON at all"
    assert lines_of(out / "duplicates.jsonl") == [
        {"line": 6, "id": "WebQTest-0", "question": QUESTIONS[0][1], "first_line": 1}]
    assert (out / "missing.txt").read_text(encoding="utf-8") == "WebQTest-5\twho plays ken barlow in coronation street?\n"

    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert config["imported"] is True and config["format"] == "pog" and config["source_file"] == str(source.resolve())
    assert len(config["source_sha256"]) == 64 and config["join"] == run.join
    assert (config["dataset"], config["split"], config["questions"]) == ("webqsp", "test", 6)
    assert config["usage_recorded"] == run.usage == {"rows": 4, "calls_mean": 4.5, "prompt_tokens_mean": 1000.0,
                                                     "completion_tokens_mean": 100.0, "tokens_mean": 1100.0}
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["n"] == 5 and summary["selected"] == 6 and summary["errors"] == 2
    assert summary["hits@1"] == pytest.approx(2 / 5) and summary["legacy_hits@1"] == pytest.approx(3 / 5)
    assert summary["grounding"] == {"structured": 0, "synthesis": 3, "parametric": 2}
    traces = lines_of(out / "traces.jsonl")
    assert traces[0]["evidence"] == [CHAIN[0][0][0]] and traces[4]["evidence"] == []


def test_broken_lines_of_every_kind_are_counted_and_none_crashes(tmp_path: Path, data_dir: Path) -> None:
    source = tmp_path / "mixed.jsonl"
    lines = [
        json.dumps(pog_row(QUESTIONS[0][1], "Immanuel Kant")).encode(),
        b'["a", "JSON", "list"]',
        json.dumps({"RawQuestion": QUESTIONS[1][1], "results": "Hennepin County", "plan": []}).encode(),  # a VoG row
        json.dumps(pog_row(QUESTIONS[2][1], {"Lake": "Columbia Lake"})).encode(),  # an answer that is an object
        b'{"RawQuestion": "what type of art does marc chagall do?", "results": "\xff\xfe',  # not UTF-8
        json.dumps({"RawQuestion": QUESTIONS[4][1], "results": json.dumps({"A": {"Known": "Yes", "2014": "?"}})}).encode(),
        b"",
    ]
    source.write_bytes(b"\n".join(lines) + b"\n")
    run = import_run(source, fmt="pog", dataset="webqsp", out=tmp_path / "run", data_dir=data_dir, report=False)
    assert (run.join["rows"], run.join["joined"], run.join["broken"], run.join["broken_kept"]) == (6, 5, 5, 4)
    notes = {r["id"]: r["imported"].get("note", "") for r in read_results(run.out_dir)}
    assert notes["WebQTest-0"] == ""
    assert notes["WebQTest-1"].startswith("unreadable row: not a pog row")
    assert notes["WebQTest-2"] == "unreadable answer: results.A.Answer is a dict"
    assert notes["WebQTest-3"].startswith("unreadable row: not UTF-8 text")
    assert notes["WebQTest-4"] == "unreadable answer: results.A has no 'Answer' (keys: Known, 2014)"
    (unmatched,) = lines_of(run.out_dir / "unmatched.jsonl")
    assert unmatched["line"] == 2 and "not a JSON object but a JSON list" in unmatched["reason"]


def test_vog_answers_one_string_and_keeps_usage(tmp_path: Path, data_dir: Path) -> None:
    plan = [{"thought": "...", "answer": "Finish[...]"}]
    source = write_lines(tmp_path / "VoG.jsonl", [
        {"RawQuestion": QUESTIONS[0][1], "results": "Immanuel Kant, Robert Burns", "reasoning_chains": CHAIN,
         "plan": plan, "call_num": 10, "total_token": 4544, "input_token": 4000, "output_token": 544, "time": 20.5},
        {"RawQuestion": QUESTIONS[2][1], "results": "", "reasoning_chains": [], "plan": plan, "call_num": 3,
         "total_token": 900, "input_token": 800, "output_token": 100, "time": 2.0},
    ])
    run = import_run(source, fmt="vog", dataset="webqsp", out=tmp_path / "run", data_dir=data_dir, report=False)
    rows = results_by_id(run.out_dir)
    both = rows["WebQTest-0"]  # one string naming two answers is one answer: only the substring rule credits it
    assert both["answers"] == ["Immanuel Kant, Robert Burns"]
    assert (both["hit1"], both["legacy_hit1"]) == (0.0, 1.0)
    assert (both["llm_calls"], both["prompt_tokens"], both["completion_tokens"]) == (10, 4000, 544)
    empty = rows["WebQTest-2"]  # an empty answer is no answer, not a broken row
    assert empty["answers"] == [] and empty["error"] is None and empty["imported"]["note"] == "no answer (results is empty)"
    assert run.join["missing"] == 4 and run.join["broken"] == 0 and run.join["no_answer"] == 1
    assert run.summary["llm_calls_mean"] == pytest.approx(6.5) and run.summary["tokens_mean"] == pytest.approx(2722)


def test_aog_joins_by_id_keeps_its_own_verdict_and_leaves_out_usage_it_lacks(tmp_path: Path, data_dir: Path) -> None:
    source = write_lines(tmp_path / "AoG.jsonl", [
        {"question": QUESTIONS[1][1], "ground_truth": "Hennepin County", "Sufficient": "Yes",
         "Answer": "Hennepin County", "R": "...", "reasoning_chains": [], "call_num": 9, "total_token": 4905,
         "input_token": 4621, "output_token": 284, "time": 20.4, "correct": True},
        {"id": "WebQTest-3", "question": "Chagall's kind of art?", "ground_truth": "Painting", "Sufficient": "Yes",
         "Answer": "Painting", "R": "...", "reasoning_chains": CHAIN, "correct": True},
    ])
    run = import_run(source, fmt="aog", dataset="webqsp", out=tmp_path / "run", data_dir=data_dir, report=False)
    assert run.join["joined_by"] == {"id": 1, "text": 1, "normalised_text": 0} and run.join["with_usage"] == 1
    rows = results_by_id(run.out_dir)
    assert rows["WebQTest-1"]["imported"] == {"line": 1, "correct": True, "Sufficient": "Yes"}
    assert rows["WebQTest-1"]["grounding"] == "parametric"  # no KG triple behind the answer
    chagall = rows["WebQTest-3"]
    assert chagall["hit1"] == 1.0 and chagall["grounding"] == "synthesis"
    for key in ("llm_calls", "prompt_tokens", "completion_tokens", "latency_s", "kg_time_s", "llm_latency_s"):
        assert key not in chagall  # not recorded by the file: left out, never written as zero


def test_every_format_refuses_another_formats_file(tmp_path: Path, data_dir: Path) -> None:
    rows = {
        "pog": pog_row(QUESTIONS[0][1], "Immanuel Kant"),
        "vog": {"RawQuestion": QUESTIONS[0][1], "results": "Immanuel Kant", "plan": [], "reasoning_chains": []},
        "aog": {"question": QUESTIONS[0][1], "Answer": "Immanuel Kant", "ground_truth": "x", "reasoning_chains": []},
    }
    assert set(rows) == set(READERS)
    for actual, row in rows.items():
        source = write_lines(tmp_path / f"{actual}.jsonl", [row])
        for asked in READERS:
            out = tmp_path / f"{actual}-as-{asked}"
            if asked == actual:
                assert import_run(source, fmt=asked, dataset="webqsp", out=out, data_dir=data_dir, report=False).join[
                    "joined"] == 1
                continue
            with pytest.raises(ConfigError, match=rf"line 1 is not a row of the {asked} format .*try --format {actual}"):
                import_run(source, fmt=asked, dataset="webqsp", out=out, data_dir=data_dir, report=False)
            assert not out.exists()


# ---------------------------------------------------------------------------------------------------------------------
# The command


def test_cli_imports_then_report_and_compare_read_the_run(tmp_path: Path, data_dir: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    source = pog_file(tmp_path)
    out = tmp_path / "pog-run"
    args = ["eval", "import-run", str(source), "--format", "pog", "--dataset", "webqsp", "--out", str(out),
            "--data-dir", str(data_dir)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "joined 5 rows (by id 0, by text 4, by normalised text 1); unmatched rows 2, duplicate rows 1" in printed
    assert "broken rows 3 (2 scored without an answer), dataset questions missing 1" in printed
    assert "scored on 5 of 6 questions: Hits@1 40.0" in printed and "legacy Hits@1 60.0" in printed
    assert ("calls/q 4.50  tokens/q 1,100.0 over the 4 rows that record them (summary.json counts the others as 0: "
            "3.60 / 880.0)") in printed
    assert f"unmatched: {out / 'unmatched.jsonl'}" in printed and f"missing: {out / 'missing.txt'}" in printed
    report = (out / "report.md").read_text(encoding="utf-8")
    assert report.startswith("# pog (imported) on webqsp / test") and "| 5 of 6 selected |" in report

    assert main(["eval", "report", str(out)]) == 0
    assert "5 questions, Hits@1 40.0" in capsys.readouterr().out
    other = tmp_path / "vog-run"
    vog = write_lines(tmp_path / "VoG.jsonl", [{"RawQuestion": QUESTIONS[5][1], "results": "William Roache",
                                                "plan": [], "reasoning_chains": CHAIN}])
    assert main(["eval", "import-run", str(vog), "--format", "vog", "--dataset", "webqsp", "--out", str(other),
                 "--data-dir", str(data_dir)]) == 0
    assert "calls/q and tokens/q: not recorded by this file" in capsys.readouterr().out
    assert main(["eval", "compare", str(out), str(other), "--no-breakdowns"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert any(line.split()[:3] == ["method", "pog", "(imported)"] and "vog (imported)" in line for line in table)
    assert any(line.split() == ["Hits@1", "%", "40.0", "100.0"] for line in table)
    # --by-run: the same table turned round, a row per run
    assert main(["eval", "compare", str(out), str(other), "--no-breakdowns", "--by-run", "--markdown"]) == 0
    header, _, *rows = capsys.readouterr().out.splitlines()
    columns = [cell.strip() for cell in header.strip("|").split("|")]
    assert columns[:4] == ["run", "dataset", "split", "method"] and "Hits@1 %" in columns
    cells = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]
    assert [row[0] for row in cells] == ["pog-run", "vog-run"]
    assert [row[columns.index("Hits@1 %")] for row in cells] == ["40.0", "100.0"]


@pytest.mark.parametrize(("case", "message"), [
    ("missing file", "released run {tmp}/nope.jsonl not found"),
    ("unknown format", "unknown released-run format 'tog'; known formats: aog, pog, vog"),
    ("other format", "line 1 is not a row of the vog format"),
    ("not jsonl", "none of its 2 lines is a JSON object"),
    ("empty file", "the file holds no rows"),
    ("wrong dataset", "only 0 of the 2 rows of"),
    ("out not empty", "run directory {tmp}/full is not empty (files: keep.txt); import-run writes a new run directory"),
])
def test_bad_input_is_one_line_error_and_writes_nothing(case: str, message: str, tmp_path: Path, data_dir: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    good = write_lines(tmp_path / "pog.jsonl", [pog_row(QUESTIONS[0][1], "Immanuel Kant")])
    source, fmt, out = good, "pog", tmp_path / "out"
    if case == "missing file":
        source = tmp_path / "nope.jsonl"
    elif case == "unknown format":
        fmt = "tog"
    elif case == "other format":
        fmt = "vog"
    elif case == "not jsonl":
        source = tmp_path / "list.json"
        source.write_text("[\n]\n", encoding="utf-8")
    elif case == "empty file":
        source = tmp_path / "empty.jsonl"
        source.write_text("\n", encoding="utf-8")
    elif case == "wrong dataset":
        source = write_lines(tmp_path / "other.jsonl", [pog_row("what is love?", "x"), pog_row("why?", "y")])
    elif case == "out not empty":
        out = tmp_path / "full"
        out.mkdir()
        (out / "keep.txt").write_text("mine", encoding="utf-8")
    before = sorted(p.name for p in out.iterdir()) if out.is_dir() else None
    code = main(["eval", "import-run", str(source), "--format", fmt, "--dataset", "webqsp", "--out", str(out),
                 "--data-dir", str(data_dir)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("kgqa: error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert message.format(tmp=tmp_path) in err, err
    assert (sorted(p.name for p in out.iterdir()) if out.is_dir() else None) == before
    if case in ("missing file", "empty file"):
        with pytest.raises(DataError):
            import_run(source, fmt=fmt, dataset="webqsp", out=out, data_dir=data_dir)
    if case == "out not empty":
        with pytest.raises(RunDirError):
            import_run(source, fmt=fmt, dataset="webqsp", out=out, data_dir=data_dir)


# ---------------------------------------------------------------------------------------------------------------------
# The real released runs


def _data() -> Path:
    default = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
    path = Path(os.environ.get(DATA_DIR_ENV) or default)
    if not (path / "results/pog").is_dir() or not (path / "questions").is_dir():
        if IN_CI:
            pytest.fail(f"benchmark data {path} is missing (CI=true, so this is an error)")
        pytest.skip(f"benchmark data {path} is missing")
    return path


@pytest.mark.parametrize(("dataset", "strict", "legacy", "tokens"), [
    ("webqsp", 56.7, 76.3, 5517.7),  # 5,517.7 is also the tokens per question the VoG paper reports for PoG
    ("cwq", 45.6, 59.8, 8441.3),
    ("grailqa", 68.3, 77.2, 3595.4),
])
def test_released_pog_runs_reproduce_the_strict_and_legacy_figures(dataset: str, strict: float, legacy: float,
                                                                   tokens: float, tmp_path: Path) -> None:
    data = _data()
    source = data / f"results/pog/PoG_{dataset}_gpt-3.5-turbo-0125.jsonl"
    run = import_run(source, fmt="pog", dataset=dataset, out=tmp_path / "run", data_dir=data, report=False)
    n = {"webqsp": 1_639, "cwq": 3_531, "grailqa": 1_000}[dataset]
    assert run.join["rows"] == run.join["joined"] == run.join["scored"] == run.join["with_usage"] == n
    assert run.join["unmatched"] == run.join["duplicates"] == run.join["missing"] == 0
    summary = run.summary
    assert (round(100 * summary["hits@1"], 1), round(100 * summary["legacy_hits@1"], 1)) == (strict, legacy)
    assert round(summary["tokens_mean"], 1) == tokens
    if dataset == "webqsp":
        assert round(summary["llm_calls_mean"], 2) == 9.03  # the VoG paper reports 9.0 calls for PoG on WebQSP
        broken = [r for r in read_results(run.out_dir) if r["error"]]  # line 827: the reply was cut off mid-list
        assert [(r["id"], r["imported"]["line"], r["answers"]) for r in broken] == [("WebQTest-1459", 827, [])]
