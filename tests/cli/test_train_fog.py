"""``kgqa train fog`` end to end on the packaged demo KG (hashing encoder, a tiny network): the word-dropout,
template-validation and propagation-weighting settings reach the model directory, and a held-out template has no
question in training."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgqa.cli import main
from kgqa.datasets import load_dataset
from kgqa.datasets.gold_chains import training_questions
from kgqa.methods.fog.training import question_template


def test_train_fog_with_word_dropout_and_template_validation_writes_a_usable_model(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "scorer"
    code = main([
        "train", "fog", "--dataset", "demo", "--split", "test", "--kg", "demo", "--encoder", "hash", "--hidden", "16",
        "--epochs", "1", "--propagation-epochs", "1", "--propagation-questions", "20", "--word-dropout", "0.3",
        "--validation-by", "template", "--validation-share", "0.2", "--propagation-weighting", "question",
        "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert config["settings"]["word_dropout"] == 0.3 and config["settings"]["validation_by"] == "template"
    assert config["settings"]["propagation_weighting"] == "question"
    history = json.loads((out / "history.json").read_text(encoding="utf-8"))
    assert [row["epoch"] for row in history if row["phase"] == "propagation"] == [1]
    card = (out / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "expanded subgraphs (loss a mean over\n  questions; lr 0.001;\n  epoch kept by validation loss)" in card
    assert "Word dropout: 0.3" in card and "every question of a held-out template" in card
    meta = json.loads((out / "scorer.json").read_text(encoding="utf-8"))
    held, trained = set(meta["validation_questions"]), set(meta["training_questions"])
    assert held and held < trained  # training_questions lists every question given, the held-out ones included
    by_id = {q.source: q for q in training_questions(["demo"], "test").questions}
    held_templates = {question_template(by_id[i]) for i in held}
    assert not held_templates & {question_template(by_id[i]) for i in trained - held}
    assert len(load_dataset("demo", "test")) >= len(trained)


def test_word_dropout_out_of_range_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["train", "fog", "--dataset", "demo", "--split", "test", "--kg", "demo", "--word-dropout", "1.5",
                 "--out", str(tmp_path / "s")])
    err = capsys.readouterr().err
    assert code == 2 and "--word-dropout must be in [0, 1)" in err and "Traceback" not in err


def test_validation_fold_out_of_range_is_a_one_line_error(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["train", "fog", "--dataset", "demo", "--split", "test", "--kg", "demo", "--validation-share", "0.2",
                 "--validation-fold", "5", "--out", str(tmp_path / "s")])
    err = capsys.readouterr().err
    assert code == 2 and "--validation-fold must be in [0, 5)" in err and "Traceback" not in err
    assert not (tmp_path / "s").exists()


@pytest.mark.filterwarnings("error::UserWarning")  # no empty-legend warning for the phase with no epochs
def test_train_fog_with_composed_wordings_records_the_table(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    # A table for two of the demo KG's relations; the demo questions on other chains keep their own wording.
    table = tmp_path / "demo-wordings.toml"
    table.write_text('frames = ["Name {np}.", "{np}?"]\n[out]\n"film.film.directed_by" = ["the director of {x}"]\n'
                     '"people.person.place_of_birth" = ["the birthplace of {x}"]\n', encoding="utf-8")
    out = tmp_path / "scorer"
    code = main([
        "train", "fog", "--dataset", "demo", "--split", "test", "--kg", "demo", "--encoder", "hash", "--hidden", "16",
        "--epochs", "1", "--propagation-epochs", "0", "--composed-wordings", str(table), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "with composed-wording copies" in err
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert config["settings"]["composed_wordings"] == str(table)
    assert f"Composed wordings: {table}" in (out / "MODEL_CARD.md").read_text(encoding="utf-8")


@pytest.mark.filterwarnings("error::UserWarning")
def test_train_fog_with_template_wordings_records_the_file(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    templates = tmp_path / "demo_templates.json"
    templates.write_text(json.dumps({"film.film.directed_by": ["Whose film is {topic}?", "{topic}: made by whom?"]}),
                         encoding="utf-8")
    out = tmp_path / "scorer"
    code = main([
        "train", "fog", "--dataset", "demo", "--split", "test", "--kg", "demo", "--encoder", "hash", "--hidden", "16",
        "--epochs", "1", "--propagation-epochs", "0", "--template-wordings", str(templates), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "with template-wording copies" in err
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert config["settings"]["template_wordings"] == str(templates)
    assert f"Template wordings: {templates}" in (out / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert config["settings"]["question_weight"] == 1.0
    # the question as written can weigh more than each copy: recorded, and a non-positive weight is refused first
    weighted = tmp_path / "weighted"
    code = main([
        "train", "fog", "--dataset", "demo", "--split", "test", "--kg", "demo", "--encoder", "hash", "--hidden", "16",
        "--epochs", "1", "--propagation-epochs", "0", "--template-wordings", str(templates), "--question-weight", "3",
        "--out", str(weighted)])
    assert code == 0, capsys.readouterr().err
    assert json.loads((weighted / "config.json").read_text(encoding="utf-8"))["settings"]["question_weight"] == 3.0
    assert "Question weight: 3.0" in (weighted / "MODEL_CARD.md").read_text(encoding="utf-8")
    code = main(["train", "fog", "--dataset", "demo", "--split", "test", "--kg", "demo", "--question-weight", "0",
                 "--out", str(tmp_path / "s")])
    err = capsys.readouterr().err
    assert code == 2 and "--question-weight must be positive, got 0.0" in err and not (tmp_path / "s").exists()
    code = main(["train", "fog", "--dataset", "demo", "--split", "test", "--kg", "demo", "--template-wordings",
                 "nosuch", "--out", str(tmp_path / "s")])
    err = capsys.readouterr().err
    assert code == 2 and "template wordings 'nosuch': not a packaged file" in err and "Traceback" not in err
    assert not (tmp_path / "s").exists()


def test_template_copies_fall_back_to_the_question_where_its_chain_has_no_template() -> None:
    import random

    from kgqa.kg.base import parse_chain
    from kgqa.methods.fog.training import TrainingQuestion, template_copies
    from kgqa.methods.fog.wordings.templates import ChainTemplates

    covered = TrainingQuestion("who directed Heat", ("m.heat",), parse_chain("directed_by"), frozenset({"x"}),
                               mentions=("Heat",))
    uncovered = TrainingQuestion("who produced Heat", ("m.heat",), parse_chain("produced_by"), frozenset({"x"}),
                                 mentions=("Heat",))
    copies = template_copies([covered, uncovered], "metaqa", random.Random(0))
    options = ChainTemplates.load("metaqa").templates[covered.chain]
    assert copies[0] in {t.replace("{topic}", "Heat") for t in options}
    assert copies[1] == uncovered.text


def test_composed_copies_fall_back_to_the_question_where_the_table_has_no_phrase() -> None:
    import random

    from kgqa.kg.base import parse_chain
    from kgqa.methods.fog.training import TrainingQuestion, composed_copies

    covered = TrainingQuestion("who directed Heat", ("m.heat",), parse_chain("directed_by"), frozenset({"x"}),
                               mentions=("Heat",))
    uncovered = TrainingQuestion("who produced Heat", ("m.heat",), parse_chain("produced_by"), frozenset({"x"}),
                                 mentions=("Heat",))
    copies = composed_copies([covered, uncovered], "metaqa", random.Random(0))
    from kgqa.methods.fog.wordings import ChainWordings

    assert copies[0] in set(ChainWordings.load("metaqa").every(covered.chain, "Heat"))
    assert copies[1] == uncovered.text


def test_an_unknown_composed_wordings_table_is_a_one_line_error(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["train", "fog", "--dataset", "demo", "--split", "test", "--kg", "demo", "--composed-wordings",
                 "nosuch", "--out", str(tmp_path / "s")])
    err = capsys.readouterr().err
    assert code == 2 and "composed wordings 'nosuch': not a packaged table (metaqa)" in err and "Traceback" not in err


def test_train_fog_with_synonym_copies_records_the_database_and_share(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # a two-synset WordNet database in WordNet 3.0's file format, words of the demo questions
    wordnet = tmp_path / "wordnet"
    wordnet.mkdir()
    (wordnet / "data.noun").write_text("03338821 06 n 03 movie 0 film 0 picture 0 000 | a motion picture\n",
                                       encoding="utf-8")
    (wordnet / "data.verb").write_text("02000002 41 v 02 direct 0 helm 0 000 | be in charge of\n", encoding="utf-8")
    out = tmp_path / "scorer"
    code = main([
        "train", "fog", "--dataset", "demo", "--split", "test", "--kg", "demo", "--encoder", "hash", "--hidden", "16",
        "--epochs", "1", "--propagation-epochs", "0", "--synonyms", str(wordnet), "--synonym-share", "0.7",
        "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "with synonym copies" in err
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert config["settings"]["synonyms"] == str(wordnet) and config["settings"]["synonym_share"] == 0.7
    card = (out / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert f"Synonym copies: {wordnet}, each word swapped with probability 0.7" in card


def test_a_missing_synonym_database_or_share_out_of_range_is_a_one_line_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["train", "fog", "--dataset", "demo", "--split", "test", "--kg", "demo", "--out", str(tmp_path / "s")]
    code = main([*base, "--synonyms", str(tmp_path / "nowhere")])
    err = capsys.readouterr().err
    assert code == 2 and "no WordNet database (data.noun and data.verb)" in err and "Traceback" not in err
    code = main([*base, "--synonyms", "wordnet", "--synonym-share", "1.5"])
    err = capsys.readouterr().err
    assert code == 2 and "--synonym-share must be in (0, 1], got 1.5" in err and "Traceback" not in err
    assert not (tmp_path / "s").exists()


_DEMO_TRAINING = ["train", "fog", "--dataset", "demo", "--split", "test", "--kg", "demo", "--encoder", "hash",
                  "--hidden", "16", "--epochs", "1", "--propagation-epochs", "1", "--propagation-questions", "20",
                  "--validation-by", "template", "--validation-share", "0.2"]
_PROPAGATION_PARAMETERS = ("message", "attend", "phi", "head")  # what the propagation phase trains


def _weights(directory: Path) -> dict[str, object]:
    import torch

    return torch.load(directory / "weights.pt", map_location="cpu", weights_only=True)


def _losses(directory: Path, phase: str) -> list[tuple[float, float]]:
    history = json.loads((directory / "history.json").read_text(encoding="utf-8"))
    return [(row["train_loss"], row["val_loss"]) for row in history if row["phase"] == phase]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reuse") / "source"
    assert main([*_DEMO_TRAINING, "--out", str(out)]) == 0
    return out


def test_reusing_the_scorer_phase_with_the_same_propagation_options_repeats_the_training(
        trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    assert (trained / "scorer-phase.pt").is_file()
    again = tmp_path / "again"
    code = main(["train", "fog", "--reuse-scorer-phase", str(trained), "--propagation-epochs", "1",
                 "--propagation-questions", "20", "--out", str(again)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "scorer phase reused (1 epochs" in err and "scorer epoch 1:" not in err
    source, repeated = _weights(trained), _weights(again)
    assert source.keys() == repeated.keys()
    # the same numbers up to the order of multi-threaded float sums (about 1e-8 apart from run to run)
    assert all(torch.allclose(source[k], repeated[k], atol=1e-6) for k in source)
    assert _losses(again, "scorer") == _losses(trained, "scorer")
    assert _losses(again, "propagation") == pytest.approx(_losses(trained, "propagation"), abs=1e-6)
    config = json.loads((again / "config.json").read_text(encoding="utf-8"))
    assert config["datasets"] == ["demo"] and config["split"] == "test" and config["kg"] == "demo"
    assert config["settings"]["validation_by"] == "template" and config["net"]["hidden"] == 16
    assert config["scorer_phase_from"]["model"] == str(trained)
    assert f"Scorer phase reused from `{trained}`" in (again / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert (again / "scorer-phase.pt").is_file()  # a reused model can be reused in turn


def test_a_reused_scorer_phase_trains_other_propagation_options_and_keeps_the_scorer(
        trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    other = tmp_path / "other"
    code = main(["train", "fog", "--reuse-scorer-phase", str(trained), "--propagation-epochs", "2",
                 "--propagation-questions", "20", "--propagation-lr", "0.01", "--out", str(other)])
    assert code == 0, capsys.readouterr().err
    source, retrained = _weights(trained), _weights(other)
    scorer_only = [k for k in source if not k.startswith(_PROPAGATION_PARAMETERS)]
    assert scorer_only and all(torch.equal(source[k], retrained[k]) for k in scorer_only)
    assert not all(torch.allclose(source[k], retrained[k], atol=1e-6) for k in source if k not in scorer_only)
    assert len(_losses(other, "propagation")) == 2
    assert json.loads((other / "config.json").read_text(encoding="utf-8"))["settings"]["propagation_lr"] == 0.01


def test_a_scorer_setting_other_than_the_reused_phase_is_a_one_line_error(
        trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s"
    code = main(["train", "fog", "--reuse-scorer-phase", str(trained), "--seed", "3", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "--seed 3: the reused scorer phase" in err and "was trained with 0" in err
    assert "Traceback" not in err and not out.exists()
    # the same value as the reused phase's is fine to repeat
    assert main(["train", "fog", "--reuse-scorer-phase", str(trained), "--seed", "0", "--propagation-epochs", "0",
                 "--out", str(out)]) == 0


def test_a_model_written_before_an_option_existed_is_reused_with_that_options_default(
        trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    old = tmp_path / "old"
    shutil.copytree(trained, old)
    config = json.loads((old / "config.json").read_text(encoding="utf-8"))
    del config["settings"]["synonyms"], config["settings"]["synonym_share"]  # as kgqa wrote it before --synonyms
    (old / "config.json").write_text(json.dumps(config), encoding="utf-8")
    out = tmp_path / "s"
    code = main(["train", "fog", "--reuse-scorer-phase", str(old), "--propagation-epochs", "0", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    settings = json.loads((out / "config.json").read_text(encoding="utf-8"))["settings"]
    assert settings["synonyms"] is None and settings["synonym_share"] == 0.5
    assert settings["validation_by"] == "template" and settings["seed"] == 0


def test_reusing_a_directory_without_a_scorer_phase_is_a_one_line_error(
        trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "old"
    old.mkdir()
    (old / "config.json").write_text((trained / "config.json").read_text(encoding="utf-8"), encoding="utf-8")
    code = main(["train", "fog", "--reuse-scorer-phase", str(old), "--out", str(tmp_path / "s")])
    err = capsys.readouterr().err
    assert code == 2 and "no scorer-phase.pt" in err and "Traceback" not in err
    code = main(["train", "fog", "--reuse-scorer-phase", str(tmp_path / "nowhere"), "--out", str(tmp_path / "s")])
    err = capsys.readouterr().err
    assert code == 2 and "its config.json cannot be read" in err and "Traceback" not in err
    code = main(["train", "fog", "--split", "test", "--kg", "demo", "--out", str(tmp_path / "s")])
    err = capsys.readouterr().err
    assert code == 2 and "give --dataset" in err and "Traceback" not in err


def test_propagation_select_answers_keeps_the_epoch_with_the_best_graph_mode_answers(
        trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "answers"
    code = main(["train", "fog", "--reuse-scorer-phase", str(trained), "--propagation-epochs", "3",
                 "--propagation-questions", "20", "--propagation-lr", "0.01", "--propagation-select", "answers",
                 "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "before propagation: validation loss" in err and "graph-mode hit" in err
    rows = [r for r in json.loads((out / "history.json").read_text(encoding="utf-8")) if r["phase"] == "propagation"]
    assert rows and all(0 <= r["val_hit"] <= 100 and 0 <= r["val_hits1"] <= r["val_hit"] for r in rows)
    summary = json.loads((out / "scorer.json").read_text(encoding="utf-8"))["summary"]["propagation"]
    assert summary["selected_by"] == "answers"
    # the epoch kept is no worse than any epoch seen, nor than no propagation at all
    best = (summary["val_hit_best"], summary["val_hits1_best"])
    assert all(best >= (r["val_hit"], r["val_hits1"]) for r in rows)
    assert best >= (summary["val_hit_before"], summary["val_hits1_before"])
    assert "epoch kept by validation answers" in (out / "MODEL_CARD.md").read_text(encoding="utf-8")


def test_a_propagation_seed_trains_another_propagation_of_the_same_scorer_and_repeats_itself(
        trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    runs = {}
    for name, seed in (("a", "7"), ("b", "7"), ("c", "8")):
        runs[name] = tmp_path / name
        code = main(["train", "fog", "--reuse-scorer-phase", str(trained), "--propagation-epochs", "1",
                     "--propagation-questions", "20", "--propagation-seed", seed, "--out", str(runs[name])])
        assert code == 0, capsys.readouterr().err
    source, a, b, c = (_weights(d) for d in (trained, runs["a"], runs["b"], runs["c"]))
    propagation = [k for k in source if k.startswith(_PROPAGATION_PARAMETERS)]
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in source)
    assert not all(torch.allclose(a[k], c[k], atol=1e-6) for k in propagation)
    assert not all(torch.allclose(a[k], source[k], atol=1e-6) for k in propagation)
    assert all(torch.equal(a[k], c[k]) for k in source if k not in propagation)
    assert "propagation seed 8" in (runs["c"] / "MODEL_CARD.md").read_text(encoding="utf-8")
