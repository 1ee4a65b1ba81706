"""`kgqa methods` lists every method with its settings and needs; `--method-config` is checked against those settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgqa.cli import main


def test_kgqa_methods_lists_the_built_in_methods_with_their_settings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["methods", "--json", "--llm", "openai:gpt-4.1-mini"]) == 0
    listing = {m["name"]: m for m in json.loads(capsys.readouterr().out)["methods"]}
    assert {"io", "cot", "ccor", "cor"} <= set(listing)
    ccor = {s["name"]: s for s in listing["ccor"]["settings"]}
    assert ccor["top_k"]["type"] == "int" and ccor["top_k"]["default"] == 3
    assert ccor["pruner"]["default"] == "auto" and ccor["constraint_chain"]["default"] is True
    assert "constraint_chain" not in {s["name"] for s in listing["cor"]["settings"]}  # CoR has no constraint chain
    io = {s["name"]: s for s in listing["io"]["settings"]}
    assert set(io) == {"few_shot", "max_answers", "answer_tokens"} and io["answer_tokens"]["default"] == 128
    assert {s["name"]: s for s in listing["cot"]["settings"]}["answer_tokens"]["default"] == 384
    assert listing["io"]["needs"] == {"kg": False, "llm": True, "embedder": False, "artifacts": []}
    # with a remote model CCoR prunes with the LLM: no embedder; with a local one it needs the embedder
    assert listing["ccor"]["needs"]["embedder"] is False
    assert main(["methods", "ccor", "--json", "--llm", "local:smollm2"]) == 0
    (local,) = json.loads(capsys.readouterr().out)["methods"]
    assert local["needs"]["embedder"] is True


def test_kgqa_methods_prints_a_readable_listing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["methods", "cot"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cot: Chain-of-thought prompting")
    assert "--method-config few_shot=<bool>  default true" in out and "needs: LLM" in out


@pytest.mark.parametrize(("setting", "message"), [
    ("nope=1", r"'nope' is not a setting of this method\. Valid settings: top_k \(int\)"),
    ("top_k=abc", r"top_k='abc': Input should be a valid integer.*Valid settings: top_k \(int\)"),
    ("pruner=magic", r"pruner='magic': Input should be 'auto', 'llm', 'embedding' or 'hybrid'"),
])
def test_eval_refuses_a_bad_method_setting_before_writing_anything(setting: str, message: str, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    import re

    out = tmp_path / "run"
    assert main(["eval", "--dataset", "demo", "--method", "ccor", "--method-config", setting, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kgqa: error: bad configuration for method 'ccor': ") and re.search(message, err), err
    assert not out.exists()


def test_ask_refuses_a_bad_method_setting(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", "Who directed Inception?", "--method", "io", "--method-config", "max_answers=0"]) == 2
    assert "max_answers=0: Input should be greater than or equal to 1" in capsys.readouterr().err
    assert main(["ask", "Who directed Inception?", "--method", "nope"]) == 2
    assert "unknown method 'nope'; known methods: ccor, chains, cor, cot, fog, io, pog, srp, tog, vog" in capsys.readouterr().err
