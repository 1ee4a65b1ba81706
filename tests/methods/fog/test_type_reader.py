"""The fine-tuned answer-type reader (kgqa.steps.foresight.type_reader): the real packaged MiniLM fine-tuned on a few
wordings, read on wordings it never saw, saved and loaded; ``kgqa train answer-types --fine-tune`` on the demo KG
and FoG reading with it; the errors a user can make."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from kgqa.cli import main
from kgqa.errors import ConfigError
from kgqa.steps.foresight.answer_types import AnswerTypes, mask_mentions
from kgqa.steps.foresight.type_reader import ReaderSettings, TypeReader, fine_tune_reader, soft_labels

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "text"))
from text_support import require_minilm

PERSON = ["who directed X", "who wrote the script of X", "which person made X", "who is the writer of X",
          "name the director of X", "who was behind the camera for X"]
FILM = ["which films did X direct", "what movies did X write", "name the films of X", "list the pictures X made",
        "what did X direct", "which titles did X write"]


def test_soft_labels_keep_each_text_once_with_its_class_shares_and_largest_weight() -> None:
    texts, targets, weights = soft_labels(["a", "b", "a", "a"], [0, 1, 1, 0], 2)
    assert texts == ["a", "b"] and weights.tolist() == [1.0, 1.0]
    assert np.allclose(targets, [[2 / 3, 1 / 3], [0.0, 1.0]])
    # a question in its own wording (weight 6) keeps its weight however many copies (weight 1) share its text
    _, _, weights = soft_labels(["a", "a", "b"], [0, 0, 1], 2, [6.0, 1.0, 1.0])
    assert weights.tolist() == [6.0, 1.0]


def test_a_heavier_text_is_fitted_first() -> None:
    require_minilm()
    # two wordings of one text with opposite labels: the weighted one wins
    texts = ["who made X", "who made X "]  # distinct strings, the same tokens
    targets = np.asarray([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    settings = ReaderSettings(epochs=3, lr=1e-4, batch_size=2, seed=0)
    heavy_first = fine_tune_reader("minilm", texts, targets, ["a", "b"], settings, weights=np.asarray([9.0, 1.0]))
    heavy_second = fine_tune_reader("minilm", texts, targets, ["a", "b"], settings, weights=np.asarray([1.0, 9.0]))
    assert heavy_first.probabilities(["who made X"])[0].argmax() == 0
    assert heavy_second.probabilities(["who made X"])[0].argmax() == 1
    assert heavy_first.meta["training"]["weighted_texts"] == 1  # the one text not weighing 1


def test_a_fine_tuned_reader_reads_new_wordings_and_survives_a_save(tmp_path: Path) -> None:
    require_minilm()
    texts = PERSON + FILM
    targets = np.asarray([[1.0, 0.0]] * len(PERSON) + [[0.0, 1.0]] * len(FILM), dtype=np.float32)
    settings = ReaderSettings(epochs=6, lr=1e-4, batch_size=4, seed=1)
    reader = fine_tune_reader("minilm", texts, targets, ["person", "film"], settings)
    unseen = ["who is the filmmaker of X", "which features did X helm"]
    read = reader.probabilities(unseen)
    assert read.shape == (2, 2) and np.allclose(read.sum(1), 1.0, atol=1e-5)
    assert read[0].argmax() == 0 and read[1].argmax() == 1  # person, then film
    assert reader.meta["training"]["texts"] == 12 and len(reader.meta["training"]["losses"]) == 6
    entry = reader.save(tmp_path)
    assert (tmp_path / "reader" / "config.json").is_file()
    again = TypeReader.from_entry(json.loads(json.dumps(entry)), tmp_path)
    assert np.allclose(again.probabilities(unseen), read, atol=1e-5)
    # seeded: the same settings train the same head
    same = fine_tune_reader("minilm", texts, targets, ["person", "film"], settings)
    assert np.allclose(same.weight, reader.weight, atol=1e-5)


def test_a_reader_needs_a_transformer_and_sound_settings() -> None:
    with pytest.raises(ConfigError, match="encoder 'hash' cannot be fine-tuned"):
        fine_tune_reader("hash", ["who"], np.ones((1, 1), dtype=np.float32), ["person"])
    with pytest.raises(ConfigError, match="epochs must be at least 1"):
        ReaderSettings(epochs=0).check()
    with pytest.raises(ConfigError, match="2 texts for 1 targets"):
        fine_tune_reader("minilm", ["a", "b"], np.ones((1, 1), dtype=np.float32), ["person"])


def test_train_answer_types_with_a_reader_on_the_demo_kg_and_fog_reads_with_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    require_minilm()
    out = tmp_path / "types"
    code = main(["train", "answer-types", "--dataset", "demo", "--split", "test", "--kg", "demo", "--encoder",
                 "minilm", "--fine-tune", "--fine-tune-epochs", "1", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    assert "reader epoch 1/1" in capsys.readouterr().err
    model = AnswerTypes.load(out)
    assert model.reader is not None and model.reader.classes == model.classes
    assert model.meta["trained_on"]["reader_wordings"] is None
    from kgqa.text import load_embedder

    embedder = load_embedder("minilm")
    texts, mentions = ["Who directed Inception?", "When was Heat released?"], [["Inception"], ["Heat"]]
    answer, topic = model.read(embedder, texts, mentions)
    masked = [mask_mentions(t, m) for t, m in zip(texts, mentions, strict=True)]
    assert np.allclose(answer, model.reader.probabilities(masked), atol=1e-6)
    assert np.allclose(model.probabilities(embedder, texts, mentions), answer, atol=1e-6)
    assert topic is not None and topic.shape == (2, len(model.topic_classes or []))
    # FoG reads the type with the reader and says so
    trace = tmp_path / "trace.json"
    code = main(["ask", "Who directed Inception?", "--kg", "demo", "--method", "fog", "--method-config",
                 "mode=graph", "--method-config", f"answer_types={out}", "--json", "--trace", str(trace)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Christopher Nolan" in [a["name"] for a in json.loads(captured.out)["answers"]]
    (typing,) = [s for s in json.loads(trace.read_text(encoding="utf-8"))["trace"] if s["step"] == "fog.answer_types"]
    assert typing["reader"] is True
    # a model folder copied without its reader is a clear error
    broken = tmp_path / "broken"
    broken.mkdir()
    shutil.copy(out / "answer_types.json", broken / "answer_types.json")
    with pytest.raises(ConfigError, match=r"is missing \(copy the model folder whole\)"):
        AnswerTypes.load(broken)


def test_fine_tune_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "answer-types", "--dataset", "demo", "--split", "test", "--kg", "demo", "--encoder", "hash",
                 "--fine-tune", "--out", str(tmp_path / "a")]) == 2
    assert "encoder 'hash' cannot be fine-tuned" in capsys.readouterr().err and not (tmp_path / "a").exists()
    assert main(["train", "answer-types", "--dataset", "demo", "--kg", "demo", "--fine-tune-wordings", "metaqa",
                 "--out", str(tmp_path / "b")]) == 2
    assert "--fine-tune-wordings needs --fine-tune" in capsys.readouterr().err
    assert main(["train", "answer-types", "--dataset", "demo", "--kg", "demo", "--fine-tune",
                 "--fine-tune-epochs", "0", "--out", str(tmp_path / "c")]) == 2
    assert "epochs must be at least 1" in capsys.readouterr().err
