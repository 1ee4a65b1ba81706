"""docs/adding-a-method.md, proved: a method written in a throwaway package outside kgqa, registered by an entry point
(or named as a plugin module), runs under `kgqa methods`, `kgqa eval` and `kgqa ask` with no edit to kgqa.

Everything is real: the package is a directory on PYTHONPATH with its own dist-info (so importlib.metadata finds the
entry point), the CLI runs in a subprocess, the KG is the packaged demo KG and the dataset the packaged demo questions.
The method needs no LLM, so none is loaded: that its needs are honoured is part of what is tested.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

METHOD_SOURCE = '''
"""A graph-only method: follow the topic's relation whose words overlap the question most; a trained table of which
relation each question word led to (``kgqa train throwaway-onehop``) breaks ties."""

import json
from collections import Counter
from pathlib import Path

from pydantic import Field

from kgqa.core import Grounding, MethodContext, Prediction, Question
from kgqa.kg.base import Direction
from kgqa.methods import Explanation, KGQAMethod, MethodConfig, MethodDetails, Needs
from kgqa.methods.trainer import Trainer, TrainerSettings, TrainingReport, new_out_dir, setting
from kgqa.steps.answers import answer_items


class WordTableSettings(TrainerSettings):
    dataset: list[str] = setting(metavar="NAME", help="dataset whose gold chains are counted (repeatable)")
    split: str = setting("test", help="split to count")
    out: Path = setting(help="directory to write words.json into", directory=True)
    min_count: int = setting(1, ge=1, help="keep a word seen at least this often")


class WordTable(Trainer):
    """Count which relation each question word led to in the gold chains of DATASETs."""

    name = "throwaway-onehop"
    summary = "which relation each question word led to, from gold chains"
    Settings = WordTableSettings

    def train(self, settings, session):
        from kgqa.datasets.gold_chains import training_questions

        out = new_out_dir(settings.out)
        data = training_questions(settings.dataset, settings.split)
        counts = Counter((word, q.chain[0].relation) for q in data.questions
                         for word in q.text.lower().replace("?", " ").split())
        table = {f"{w} {r}": n for (w, r), n in counts.items() if n >= settings.min_count}
        session.say(f"{len(data.questions)} questions counted")
        out.mkdir(parents=True, exist_ok=True)
        (out / "words.json").write_text(json.dumps(table), encoding="utf-8")
        return TrainingReport(out, (f"wrote {out}",))


class OneHopConfig(MethodConfig):
    max_answers: int = Field(default=10, ge=1, description="answers returned at most")
    words: str | None = Field(default=None, description="directory written by kgqa train throwaway-onehop")


class OneHopDetails(MethodDetails):
    relation: str | None = None


class OneHop(KGQAMethod):
    name = "throwaway-onehop"
    summary = "Follows the topic relation that shares the most words with the question (graph only, no LLM)"
    Config = OneHopConfig
    Details = OneHopDetails
    trainers = (WordTable,)

    def needs(self, llm=None):
        return Needs(kg=True, llm=False)

    def answer(self, question: Question, ctx: MethodContext) -> Prediction:
        assert ctx.llm is None, "the runner must not load an LLM for a method that needs none"
        table = {}
        if self.config.words:
            table = json.loads((Path(self.config.words) / "words.json").read_text(encoding="utf-8"))
        words = set(question.text.lower().replace("?", " ").split())
        best = None
        for topic in question.topic_ids:
            for relation in ctx.kg.relations(topic, Direction.OUT):
                score = len(words & set(relation.replace(".", " ").replace("_", " ").split()))
                learnt = sum(table.get(f"{w} {relation}", 0) for w in words)
                if best is None or (score, learnt) > best[0]:
                    best = ((score, learnt), topic, relation)
        if best is None:
            ctx.trace.add("onehop.pick", relation=None)
            return Prediction()
        _, topic, relation = best
        ctx.trace.add("onehop.pick", relation=relation, topic=topic)
        self.account(ctx).relation = relation
        tails = ctx.kg.neighbors(topic, relation, Direction.OUT, limit=self.config.max_answers)
        return Prediction(answers=answer_items(ctx.kg, tails), grounding=Grounding.STRUCTURED,
                          evidence=[[topic, relation, t] for t in tails])

    def explain(self, prediction: Prediction) -> Explanation:
        relation = self.details_of(prediction).relation
        return Explanation(fields={"relation": relation}, lines=[f"relation: {relation}"])
'''


def _package(root: Path, *, entry_point: bool) -> Path:
    site = root / "site"
    pkg = site / "throwaway_kgqa_method"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(METHOD_SOURCE, encoding="utf-8")
    if entry_point:
        info = site / "throwaway_kgqa_method-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: throwaway-kgqa-method\nVersion: 0.1\n",
                                       encoding="utf-8")
        (info / "entry_points.txt").write_text(
            "[kgqa.methods]\nthrowaway-onehop = throwaway_kgqa_method:OneHop\n", encoding="utf-8")
    else:  # registered on import by a one-line module named in KGQA_PLUGINS
        (site / "throwaway_kgqa_plugin.py").write_text(
            "from kgqa.methods import register_method\n"
            "from throwaway_kgqa_method import OneHop\n\n"
            "register_method('throwaway-onehop')(OneHop)\n", encoding="utf-8")
    return site


def _kgqa(args: list[str], site: Path, tmp: Path, **extra_env: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KGQA_")}
    env.update({"PYTHONPATH": os.pathsep.join([str(site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
                "KGQA_CACHE_DIR": os.environ.get("KGQA_CACHE_DIR") or str(tmp / "cache"), **extra_env})
    return subprocess.run([sys.executable, "-m", "kgqa", *args], capture_output=True, text=True, env=env,
                          timeout=600, cwd=tmp)


@pytest.fixture(scope="module")
def entry_point_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _package(tmp_path_factory.mktemp("throwaway"), entry_point=True)


def test_kgqa_methods_lists_the_throwaway_method_with_its_settings(entry_point_site: Path, tmp_path: Path) -> None:
    proc = _kgqa(["methods", "--json"], entry_point_site, tmp_path)
    assert proc.returncode == 0, proc.stderr
    listing = {m["name"]: m for m in json.loads(proc.stdout)["methods"]}
    mine = listing["throwaway-onehop"]
    assert mine["summary"].startswith("Follows the topic relation")
    assert mine["settings"] == [{"name": "max_answers", "type": "int", "default": 10,
                                 "description": "answers returned at most"},
                                {"name": "words", "type": "str | None", "default": None,
                                 "description": "directory written by kgqa train throwaway-onehop"}]
    assert mine["needs"] == {"kg": True, "llm": False, "embedder": False, "artifacts": []}
    assert mine["trainers"] == ["throwaway-onehop"]
    assert {"io", "cot", "ccor", "cor"} <= set(listing)  # the built-ins are still there


def test_kgqa_eval_runs_the_throwaway_method(entry_point_site: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _kgqa(["eval", "--dataset", "demo", "--method", "throwaway-onehop", "--method-config", "max_answers=5",
                  "--kg", "demo", "--limit", "6", "--out", str(out), "--no-progress", "--no-report", "--json"],
                 entry_point_site, tmp_path)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["n"] == 6 and summary["method"] == "throwaway-onehop"
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 6 and not any(r["error"] for r in rows)
    assert all(r["llm_calls"] == 0 for r in rows)  # no LLM was loaded or called
    run_config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert run_config["method_config"] == {"max_answers": 5}  # what was given
    assert run_config["method_config_resolved"] == {"max_answers": 5, "words": None}  # the resolved config, whole
    traces = [json.loads(line) for line in (out / "traces.jsonl").read_text(encoding="utf-8").splitlines()]
    assert all(t["trace"][0]["step"] == "onehop.pick" for t in traces)  # the runner attached the method's trace
    assert all(t["details"]["relation"] for t in traces)  # and its typed details


def test_kgqa_eval_refuses_an_unknown_setting_of_the_throwaway_method(entry_point_site: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _kgqa(["eval", "--dataset", "demo", "--method", "throwaway-onehop", "--method-config", "nope=1",
                  "--out", str(out), "--no-progress"], entry_point_site, tmp_path)
    assert proc.returncode == 2
    assert "'nope' is not a setting" in proc.stderr and "max_answers (int)" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists() or not any(out.iterdir())


def test_kgqa_ask_runs_the_throwaway_method_and_prints_its_explanation(entry_point_site: Path, tmp_path: Path) -> None:
    proc = _kgqa(["ask", "Who directed Inception?", "--method", "throwaway-onehop", "--json"], entry_point_site, tmp_path)
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert [a["name"] for a in payload["answers"]] == ["Christopher Nolan"]
    assert payload["relation"] == "film.film.directed_by" and payload["grounding"] == "structured"
    assert payload["usage"].get("calls", 0) == 0
    text = _kgqa(["ask", "Who directed Inception?", "--method", "throwaway-onehop"], entry_point_site, tmp_path)
    assert text.returncode == 0, text.stderr
    assert "answers: Christopher Nolan" in text.stdout and "relation: film.film.directed_by" in text.stdout


def test_a_plugin_module_named_in_the_config_registers_on_import(tmp_path: Path) -> None:
    site = _package(tmp_path, entry_point=False)
    proc = _kgqa(["ask", "Who directed Inception?", "--method", "throwaway-onehop", "--json"], site, tmp_path,
                 KGQA_PLUGINS="throwaway_kgqa_plugin")
    assert proc.returncode == 0, proc.stderr
    assert [a["name"] for a in json.loads(proc.stdout)["answers"]] == ["Christopher Nolan"]
    broken = _kgqa(["methods"], site, tmp_path, KGQA_PLUGINS="no_such_plugin_module_xyz")
    assert broken.returncode == 2 and "plugin module 'no_such_plugin_module_xyz' (from $KGQA_PLUGINS)" in broken.stderr


def test_a_method_that_trains_is_trained_through_kgqa_train(entry_point_site: Path, tmp_path: Path) -> None:
    listed = _kgqa(["train", "--help"], entry_point_site, tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "throwaway-onehop" in listed.stdout and "Trainable methods: fog, srp, throwaway-onehop" in listed.stdout
    helped = _kgqa(["train", "throwaway-onehop", "--help"], entry_point_site, tmp_path)
    assert "--min-count INTEGER" in helped.stdout and "--dataset NAME" in helped.stdout  # options from the settings
    bad = _kgqa(["train", "throwaway-onehop", "--dataset", "demo", "--min-count", "0", "--out", str(tmp_path / "w0")],
                entry_point_site, tmp_path)
    assert bad.returncode == 2 and "--min-count must be at least 1, got 0" in bad.stderr
    assert "Traceback" not in bad.stderr and not (tmp_path / "w0").exists()
    out = tmp_path / "words"
    trained = _kgqa(["train", "throwaway-onehop", "--dataset", "demo", "--out", str(out)], entry_point_site, tmp_path)
    assert trained.returncode == 0, trained.stderr
    assert trained.stdout.strip() == f"wrote {out}" and "questions counted" in trained.stderr
    table = json.loads((out / "words.json").read_text(encoding="utf-8"))
    assert table["directed film.film.directed_by"] >= 1  # the demo's "Who directed ...?" questions
    asked = _kgqa(["ask", "Who directed Inception?", "--method", "throwaway-onehop", "--method-config",
                   f"words={out}", "--json"], entry_point_site, tmp_path)
    assert asked.returncode == 0, asked.stderr
    assert [a["name"] for a in json.loads(asked.stdout)["answers"]] == ["Christopher Nolan"]
