"""SRP as the paper has it (issue 50): references never from the split being evaluated (``kgqa eval`` refuses them
unless ``allow_same_split=true``, which labels the run an ablation), the judge reading the references and reasoning
before its verdict, grounding ``structured`` only after a have-answer verdict, ``kgqa ask`` saying where its references
come from (the demo KG's default base), 3-5 worked examples per prompt and the fidelity table."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kgqa.cli import main
from kgqa.core import Grounding
from kgqa.datasets import load_dataset
from kgqa.errors import ConfigError
from kgqa.eval.runner import run_eval
from kgqa.kg import open_kg
from kgqa.methods import get_method, solve
from kgqa.methods.srp import method as srp_module
from kgqa.methods.srp.method import JUDGE, SRP, Judgement
from kgqa.methods.srp.references import SOURCE_IDS_FILE, ReferenceBase
from kgqa.methods.srp.trainer import draw_reference_base
from kgqa.testing import by_step, context, question, shared_movie_kg

INCEPTION = ("m.inception", "Inception")


@pytest.fixture(scope="module")
def demo_refs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A base drawn by ``kgqa train srp`` from the demo questions (demo/test), offline embedder."""
    out = tmp_path_factory.mktemp("srp") / "refs"
    assert main(["train", "srp", "--dataset", "demo", "--split", "test", "--kg", "demo", "--embedder", "hash",
                 "--size", "20", "--clusters", "4", "--out", str(out)]) == 0
    return out


def _eval(out: Path, refs: Path | str, **kwargs):  # type: ignore[no-untyped-def]
    config = {"references": str(refs), **kwargs.pop("method_config", {})}
    return run_eval("demo", out=out, split="test", method="srp", method_config=config, llm="oracle", kg="demo",
                    embedder="hash", progress=False, report=False, **kwargs)


# -- 1. references never from the split being evaluated ---------------------------------------------------------------


def test_eval_refuses_references_from_the_runs_dataset_and_split_in_one_line(
        demo_refs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    code = main(["eval", "--dataset", "demo", "--split", "test", "--method", "srp", "--method-config",
                 f"references={demo_refs}", "--llm", "oracle", "--kg", "demo", "--embedder", "hash", "--limit", "2",
                 "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert f"the reference base {demo_refs} was drawn from demo/test and this run evaluates demo/test" in err
    assert "allow_same_split=true" in err and "kgqa train srp" in err
    assert not out.exists()  # refused before anything was written


def test_allow_same_split_runs_as_a_labelled_ablation_and_no_question_sees_itself(demo_refs: Path,
                                                                                   tmp_path: Path) -> None:
    base = ReferenceBase.load(demo_refs)
    in_base = {r.id for r in base.references}
    questions = [q for q in load_dataset("demo", "test") if q.id in in_base][:4]  # each one IS a reference
    run = _eval(tmp_path / "run", demo_refs, method_config={"allow_same_split": True}, questions=questions)
    summary = run.summary
    assert summary["ablation"].startswith("srp references from the evaluated split (the reference base ")
    assert "demo/test" in summary["ablation"] and "allow_same_split=true" in summary["ablation"]
    assert summary["method_checks"]["references"]["relation"] == "the run's split"
    config = json.loads((tmp_path / "run" / "config.json").read_text(encoding="utf-8"))
    assert config["ablation"] == summary["ablation"]
    traces = [json.loads(line) for line in (tmp_path / "run" / "traces.jsonl").read_text().splitlines()]
    assert len(traces) == 4
    for trace in traces:
        event = next(e for e in trace["trace"] if e["step"] == "srp.references")
        assert event["used"] and len(event["ids"]) == 4 and trace["id"] not in event["ids"]


def test_references_from_a_disjoint_subset_of_the_split_run_unlabelled_and_an_overlap_is_refused(
        tmp_path: Path) -> None:
    questions = load_dataset("demo", "test")
    pool, rest = questions[:30], questions[30:]
    base = draw_reference_base([("demo", pool)], split="test", kg="demo", embedder="hash", size=12, clusters=3,
                               subset="the first 30 demo questions")
    base.save(tmp_path / "refs")
    assert (tmp_path / "refs" / SOURCE_IDS_FILE).read_text().split() == [q.id for q in pool]
    assert ReferenceBase.load(tmp_path / "refs").source_ids == [q.id for q in pool]
    run = _eval(tmp_path / "run", tmp_path / "refs", questions=rest[:3])
    assert "ablation" not in run.summary
    assert run.summary["method_checks"]["references"]["relation"] == ("a subset of the split (30 questions) disjoint "
                                                                       "from the run's questions")
    with pytest.raises(ConfigError, match=r"drawn from demo/test \(1 of the run's questions among the 30 it read\) "
                                          r"and this run evaluates demo/test"):
        _eval(tmp_path / "overlap", tmp_path / "refs", questions=[pool[0], *rest[:2]])


def test_references_from_another_dataset_or_split_are_recorded_and_the_ablations_named(demo_refs: Path) -> None:
    questions = load_dataset("demo", "test")[:3]
    other = SRP(references=str(demo_refs)).check_run(dataset="metaqa-1hop", split="dev", questions=questions)
    assert other == {"references": {"base": str(demo_refs), "datasets": ["demo"], "split": "test",
                                    "relation": "another dataset or split"}}
    none = SRP(relation_check=False).check_run(dataset="demo", split="test", questions=questions)
    assert none["ablation"] == "srp: the paper's w/o references, w/o relation check ablation (Table 3)"


# -- 2. the judge reads the references and reasons before its verdict -------------------------------------------------


def _keep_all(prompt):  # type: ignore[no-untyped-def]
    numbers = [int(n) for n in re.findall(r"^(\d+)\. ", prompt.request, re.M)]
    return {"reasoning": "every sequence reaches a director", "verdict": "have_answer", "keep": numbers,
            "message": "found"}


def _answer_tails(prompt):  # type: ignore[no-untyped-def]
    tails = [line.rsplit(" -> ", 1)[-1] for line in re.findall(r"^\d+\. (.+)$", prompt.request, re.M)]
    return {"reasoning": "copied", "answers": list(dict.fromkeys(tails))}


BASE = {
    "srp.relation_check": lambda p: {"relations": list(p.options().values())[:3]},
    "srp.plan": {"paths": [["film.film.directed_by"]]},
    "srp.judge": _keep_all,
    "srp.answer": _answer_tails,
    "srp.generate": {"reasoning": "memory", "answers": ["Guess"]},
}


def test_the_judge_reads_the_references_and_reasons_before_its_verdict(demo_refs: Path) -> None:
    kg = open_kg("demo")
    asked = next(q for q in load_dataset("demo", "test") if q.text == "Who directed Inception?")
    ctx, model, _ = context(kg, by_step(BASE), embedder="hash")
    prediction = solve(get_method("srp", references=str(demo_refs), relation_scorer="llm"), asked, ctx)
    judge = model.prompts("srp.judge")[0]
    assert judge.request.startswith("References:\nQuestion: ")
    assert judge.request.count("\nPath: ") == 4 and f"Question: {asked.text}\nPath:" not in judge.request
    assert list(Judgement.model_fields)[:2] == ["reasoning", "verdict"]
    examples = re.findall(r'^\{"reasoning".*$', judge.system, re.M)
    assert len(examples) == len(JUDGE.book.template("judge").examples)
    assert all(e.index('"reasoning"') < e.index('"verdict"') for e in examples)
    event = next(e for e in prediction.trace if e["step"] == "srp.judge")
    assert event["reasoning"] == "every sequence reaches a director"


# -- 3. grounding: structured only after a have-answer verdict --------------------------------------------------------


def _run(policy, **settings):  # type: ignore[no-untyped-def]
    ctx, model, _ = context(shared_movie_kg(), policy, embedder="hash")
    q = question("Who directed Inception?", INCEPTION, answers=[("m.nolan", "Christopher Nolan")])
    return solve(get_method("srp", relation_scorer="llm", **settings), q, ctx), model


def test_an_answer_after_no_answer_verdicts_is_never_structured() -> None:
    no = {"reasoning": "unsure", "verdict": "no_answer", "keep": [], "message": "not sure"}
    prediction, _ = _run(by_step({**BASE, "srp.judge": no, "srp.edit": {"paths": [["film.film.directed_by"]]}}),
                         max_edits=1)
    assert prediction.names == ["Christopher Nolan"]  # a node of the last sequences shown ...
    assert prediction.grounding is Grounding.SYNTHESIS  # ... which the judge never confirmed
    confirmed, _ = _run(by_step(BASE))
    assert confirmed.names == ["Christopher Nolan"] and confirmed.grounding is Grounding.STRUCTURED
    unreflected, _ = _run(by_step(BASE), reflection=False)
    assert unreflected.grounding is Grounding.SYNTHESIS  # no judge: nothing confirmed the sequences


def test_the_answer_step_may_use_the_models_own_knowledge_which_is_parametric() -> None:
    memory = {"reasoning": "from what I know", "answers": ["Emma Thomas"]}
    prediction, model = _run(by_step({**BASE, "srp.answer": memory}))
    assert "own knowledge" in model.prompts("srp.answer")[0].system
    assert prediction.names == ["Emma Thomas"] and prediction.grounding is Grounding.PARAMETRIC


# -- 4. kgqa ask says where its references come from -------------------------------------------------------------------


SCRIPT = [
    {"match": r"Choose \d", "reply": {"relations": ["film.film.directed_by"]}},
    {"match": "Checked relations", "reply": {"paths": [["film.film.directed_by"]]}},
    {"match": "Instantiation error", "reply": {"reasoning": "Sequence 1 reaches the director.",
                                               "verdict": "have_answer", "keep": [1], "message": "found"}},
    {"match": "Relations where the path stopped", "reply": {"paths": [["film.film.directed_by"]]}},
    {"reply": {"reasoning": "Sequence 1 names the director.", "answers": ["Christopher Nolan"]}},
]


def _ask(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[str, str, dict]:
    script = tmp_path / "script.jsonl"
    script.write_text("".join(json.dumps(rule) + "\n" for rule in SCRIPT), encoding="utf-8")
    trace = tmp_path / "trace.json"
    assert main(["ask", "Who directed Inception?", "--method", "srp", "--llm", f"scripted:{script}", "--embedder",
                 "hash", "--trace", str(trace), *args]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err, json.loads(trace.read_text(encoding="utf-8"))


def test_ask_on_the_demo_kg_uses_the_default_demo_reference_base_and_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, err, trace = _ask(tmp_path, capsys, "--kg", "demo")
    # a fresh cache first builds the base (one line saying so); then exactly one line names where references come from
    said = [line for line in err.splitlines() if line.startswith("kgqa: srp: ") and "building" not in line]
    assert len(said) == 1 and said[0].startswith("kgqa: srp: references from the default demo reference base ")
    assert "(artifact srp-demo-references, drawn from demo/test)" in said[0]
    event = next(e for e in trace["trace"] if e["step"] == "srp.references")
    assert event["used"] and event["base"] == "demo" and len(event["ids"]) == 4
    assert "answers: Christopher Nolan" in out and "references: demo-" in out


def test_ask_names_a_given_reference_base(demo_refs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, err, _ = _ask(tmp_path, capsys, "--kg", "demo", "--method-config", f"references={demo_refs}")
    assert f"kgqa: srp: references from {demo_refs} (demo/test, 20 references)" in err.splitlines()


def test_ask_on_another_kg_without_references_says_none_were_found_and_how_to_build_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kg = shared_movie_kg()
    out, err, trace = _ask(tmp_path, capsys, "--kg", str(kg.directory), "--topic", "m.inception")
    (said,) = [line for line in err.splitlines() if line.startswith("kgqa: srp: ")]
    assert said.startswith(f"kgqa: srp: no reference base found for KG {kg.directory}")
    assert f"kgqa train srp --dataset NAME --split dev --kg {kg.directory} --out DIR" in said
    assert "answering without references" in said and "answers: Christopher Nolan" in out  # it runs
    event = next(e for e in trace["trace"] if e["step"] == "srp.references")
    assert event == {"step": "srp.references", "used": False, "reason": "no reference base configured"}


# -- 5 and 6. worked examples and the fidelity table -------------------------------------------------------------------


def test_every_srp_prompt_shows_three_to_five_worked_examples_that_its_reply_model_reads() -> None:
    for signature in SRP.signatures:
        examples = signature.book.template(signature.prompt).examples
        assert 3 <= len(examples) <= 5, (signature.prompt, len(examples))
        system = signature.messages(**{name: "" for name in signature.inputs})[0]["content"]
        assert "Examples:\n\n" in system
        for example in examples:
            reply = json.loads(example[example.index("{"):])
            signature.reply.model_validate(reply)


def test_the_module_docstring_carries_the_fidelity_table() -> None:
    doc = srp_module.__doc__ or ""
    header = "Fidelity (paper vs kgqa):\n\n| mechanism | paper | kgqa | departs |\n|---|---|---|---|\n"
    assert header in doc
    rows = [line for line in doc.split(header, 1)[1].splitlines() if line.startswith("| ")]
    assert 8 <= len(rows) <= 15
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        assert len(cells) == 4 and (cells[3] == "no" or cells[3].startswith("yes: ")), row
