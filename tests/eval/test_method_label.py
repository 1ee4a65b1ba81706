"""A method reports its figures under its label (issue 51): FoG's graph mode, kgqa's method and not the paper's FoG, is
``fog[graph]`` in summary.json, report.md, ``kgqa eval compare`` and the ledger's table, however its settings reach
graph mode (``mode=graph``, or ``auto`` with a local model); LLM-mode FoG keeps ``fog``. config.json and
summary.json's ``method_name`` keep the registered name, so runs written before labels resume and compare as before.

Real ``kgqa eval`` runs on the packaged demo KG with its demo scorer (the session's artifact store, built there on first
use); the oracle is the only model.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from kgqa.cli import cli
from kgqa.config import cache_dir
from kgqa.eval.ledger import LEDGER_FILE, read_ledger
from kgqa.methods import get_method
from kgqa.methods.base import method_label


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A cache of this module's own (its test-split ledger starts empty), whose artifact store is the session's: the
    demo scorer is built once per session's cache, not once per test."""
    session = Path(os.environ["KGQA_CACHE_DIR"]) if os.environ.get("KGQA_CACHE_DIR") else cache_dir()
    (session / "artifacts").mkdir(parents=True, exist_ok=True)
    path = tmp_path_factory.mktemp("label") / "cache"
    path.mkdir()
    (path / "artifacts").symlink_to((session / "artifacts").resolve(), target_is_directory=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KGQA_CACHE_DIR", str(path))
        patch.setenv("KGQA_LLM", "local:smollm2")  # the shipped default, whatever the machine configures
        yield path


def _kgqa(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def _eval(out: Path, *args: str, limit: int = 3) -> None:
    _kgqa("eval", "--dataset", "demo", "--method", "fog", "--kg", "demo", "--limit", str(limit), "--no-progress",
          "--out", str(out), *args)


def _json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def runs(cache: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("label-runs")
    made = {"graph": root / "graph", "auto": root / "auto", "llm": root / "llm"}
    _eval(made["graph"], "--method-config", "mode=graph")
    _eval(made["auto"])  # mode auto, no --llm: the configured local model resolves to graph mode
    _eval(made["llm"], "--llm", "oracle")  # mode auto with a model that is not local: LLM mode, the paper's FoG
    return made


def _compare_methods(*run_dirs: Path) -> list[str]:
    table = _kgqa("eval", "compare", *map(str, run_dirs))
    row = next(line.split() for line in table.splitlines() if line.split()[:1] == ["method"])
    return row[1:]


def test_fogs_label_follows_its_resolved_mode() -> None:
    assert get_method("fog", mode="graph").label("oracle") == "fog[graph]"
    assert get_method("fog").label("local:smollm2") == "fog[graph]"
    assert get_method("fog").label(None) == "fog[graph]"
    assert get_method("fog").label("oracle") == "fog"
    assert get_method("fog", mode="llm").label("local:smollm2") == "fog"
    # a method without a label of its own is reported under the name it was run as
    assert method_label(get_method("ccor"), "oracle", "ccor") == "ccor"


def test_graph_mode_is_reported_as_fog_graph(runs: dict[str, Path]) -> None:
    for name in ("graph", "auto"):
        summary, config = _json(runs[name] / "summary.json"), _json(runs[name] / "config.json")
        assert (summary["method"], summary["method_name"]) == ("fog[graph]", "fog"), name
        assert (config["method"], config["method_label"]) == ("fog", "fog[graph]"), name
        assert config["llm"] is None  # no model was loaded: graph mode
        report = (runs[name] / "report.md").read_text(encoding="utf-8")
        assert report.startswith("# fog[graph] on demo / test\n"), name
        assert "| registered method | fog (its settings make it fog[graph]) |" in report


def test_llm_mode_keeps_fog(runs: dict[str, Path]) -> None:
    summary, config = _json(runs["llm"] / "summary.json"), _json(runs["llm"] / "config.json")
    assert (summary["method"], summary["method_name"], config["method_label"]) == ("fog", "fog", "fog")
    assert summary["llm_calls_mean"] > 0  # the model was asked: LLM mode
    report = (runs["llm"] / "report.md").read_text(encoding="utf-8")
    assert report.startswith("# fog on demo / test\n") and "registered method" not in report


def test_compare_and_the_ledger_show_the_label(runs: dict[str, Path], cache: Path) -> None:
    assert _compare_methods(runs["graph"], runs["auto"], runs["llm"]) == ["fog[graph]", "fog[graph]", "fog"]
    # the ledger counts per registered method (graph and LLM mode share the scorer) and keeps each run's label
    entries = read_ledger(cache / LEDGER_FILE)
    assert [(e["method"], e["label"]) for e in entries] == [("fog", "fog[graph]"), ("fog", "fog[graph]"),
                                                            ("fog", "fog")]
    listed = _kgqa("eval", "ledger", "--method", "fog")
    assert "3 test-split evaluations" in listed and listed.count("fog[graph]") == 2


def test_a_run_written_before_labels_compares_and_resumes_under_its_label(runs: dict[str, Path],
                                                                         tmp_path: Path) -> None:
    old = tmp_path / "old"
    shutil.copytree(runs["graph"], old)
    config, summary = _json(old / "config.json"), _json(old / "summary.json")
    del config["method_label"], summary["method_name"]
    summary["method"] = "fog"  # what a graph-mode run said before labels
    (old / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (old / "summary.json").write_text(json.dumps(summary), encoding="utf-8")

    assert _compare_methods(old, runs["llm"]) == ["fog[graph]", "fog"]
    _eval(old, "--method-config", "mode=graph", "--resume", limit=4)
    summary, config = _json(old / "summary.json"), _json(old / "config.json")
    assert summary["n"] == 4 and (summary["method"], summary["method_name"]) == ("fog[graph]", "fog")
    assert (config["method"], config["method_label"]) == ("fog", "fog[graph]")
    assert (old / "report.md").read_text(encoding="utf-8").startswith("# fog[graph] on demo / test\n")
