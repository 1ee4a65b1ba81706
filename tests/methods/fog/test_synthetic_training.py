"""``kgqa train fog --synthetic`` end to end on the packaged demo KG (hashing encoder, a tiny network, one epoch): a
scorer trained on questions made from the KG alone, with or without a dataset's, paraphrased by a scripted model
when one is given; the model directory, its config and its card say what it trained on."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kgqa.cli import main

TINY = ["--encoder", "hash", "--hidden", "16", "--epochs", "1", "--propagation-epochs", "1",
        "--propagation-questions", "10"]


def test_train_fog_on_synthetic_questions_alone_writes_a_usable_model_and_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "scorer"
    code = main(["train", "fog", "--synthetic", "--kg", "demo", "--questions", "30", *TINY, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "synthetic questions: 30 made" in err
    # the propagation phase's expansion says how far it is (hours on Freebase): ten lines at most, the last at the end
    expanded = re.findall(r"expanded (\d+) of (\d+) subgraphs \(\d+ s; about \d+ s left\)", err)
    assert expanded and len(expanded) <= 11 and expanded[-1][0] == expanded[-1][1]
    for name in ("weights.pt", "scorer.json", "config.json", "history.json", "MODEL_CARD.md", "scorer-phase.pt"):
        assert (out / name).is_file(), name
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert config["datasets"] == [] and config["data"]["per_dataset"] == {"synthetic": 30}
    synthetic = config["synthetic"]
    assert synthetic["questions"] == synthetic["requested"] == 30 and synthetic["paraphrase_llm"] is None
    assert synthetic["relation_keys"] == 96 and 0 < synthetic["keys_covered"] <= 30 * 3
    meta = json.loads((out / "scorer.json").read_text(encoding="utf-8"))
    assert meta["training_questions"] == [f"synthetic-{i:06d}" for i in range(30)]
    card = (out / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "- Data: 30 synthetic questions generated from the KG (of 30 asked; no labelled question;" in card
    assert "not paraphrased) (30 questions in all: {'synthetic': 30})" in card

    from kgqa.steps.foresight.scorer import load_scorer

    assert load_scorer(out).members  # the directory loads as a scorer
    # its scorer phase can be reused: the same questions are made again from the recorded settings
    again = tmp_path / "again"
    code = main(["train", "fog", "--reuse-scorer-phase", str(out), "--propagation-epochs", "1", "--out", str(again)])
    err = capsys.readouterr().err
    assert code == 0, err
    reused = json.loads((again / "config.json").read_text(encoding="utf-8"))
    assert reused["synthetic"] == synthetic
    assert json.loads((again / "scorer.json").read_text(encoding="utf-8"))["training_questions"] == \
        meta["training_questions"]

    # answer types trained like it: the same synthetic questions, made again from the KG (no dataset needed)
    types = tmp_path / "types"
    code = main(["train", "answer-types", "--like", str(out), "--out", str(types)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "30 questions in all, synthetic ones made again from the KG" in err
    from kgqa.steps.foresight.answer_types import AnswerTypes

    trained_on = AnswerTypes.load(types).meta["trained_on"]
    assert trained_on["synthetic"] == synthetic and trained_on["datasets"] == []


def test_synthetic_questions_mix_with_a_datasets_and_a_model_paraphrases_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the scripted model answers every prompt with one fixed question, which names no topic: each is kept as made
    script = tmp_path / "paraphrase.jsonl"
    script.write_text(json.dumps({"reply": {"question": "What is it?"}}) + "\n", encoding="utf-8")
    out = tmp_path / "mixed"
    code = main(["train", "fog", "--synthetic", "--dataset", "demo", "--split", "test", "--kg", "demo",
                 "--questions", "20", "--paraphrase-llm", f"scripted:{script}", *TINY, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    per_dataset = config["data"]["per_dataset"]
    assert per_dataset["synthetic"] == 20 and per_dataset["demo"] > 0
    assert config["synthetic"]["paraphrase_llm"] == f"scripted:{script}"
    assert config["synthetic"]["paraphrased"] == 0
    assert config["synthetic"]["paraphrase_failed"] == {"topic not named exactly": 20}
    card = (out / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert f"demo (test split): {per_dataset['demo']} labelled questions with gold chains" in card
    assert (f"paraphrased by `scripted:{script}`: 0 reworded, kept as generated {{'topic not named exactly': 20}}"
            in card)


def test_synthetic_options_are_checked_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["train", "fog", "--kg", "demo", "--out", str(tmp_path / "a")])
    err = capsys.readouterr().err
    assert code == 2 and "--synthetic" in err and "Traceback" not in err
    code = main(["train", "fog", "--dataset", "demo", "--split", "test", "--kg", "demo", "--paraphrase-llm",
                 "scripted:x.jsonl", "--out", str(tmp_path / "b")])
    err = capsys.readouterr().err
    assert code == 2 and "--paraphrase-llm" in err and "needs --synthetic" in err
    code = main(["train", "fog", "--synthetic", "--kg", "demo", "--synthetic-hops", "5:1", "--out", str(tmp_path / "c")])
    err = capsys.readouterr().err
    assert code == 2 and "hops go from 1 to 3" in err
    code = main(["train", "fog", "--synthetic", "--kg", "demo", "--questions", "0", "--out", str(tmp_path / "d")])
    err = capsys.readouterr().err
    assert code == 2 and "--questions must be at least 1, got 0" in err
    assert not any((tmp_path / name).exists() for name in "abcd")
