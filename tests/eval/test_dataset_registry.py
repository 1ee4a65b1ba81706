"""The dataset registry (a :class:`kgqa.registry.Registry`): registration, entry points of ``kgqa.datasets`` from a
package installed for the test, and dataset facts put into every question's metadata."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kgqa.core import GoldAnswer, Question, TopicEntity
from kgqa.datasets import DATA_DIR_ENV, DATASETS, DatasetInfo, dataset_info, dataset_names, load_dataset, register_dataset
from kgqa.errors import ConfigError
from kgqa.registry import REGISTRIES

IN_CI = os.environ.get("CI", "").lower() == "true"


def _load_lines(info: DatasetInfo, root: Path, split: str, limit: int | None) -> list[Question]:
    """One question per line of ``text<TAB>answer``; a line with a third field ``deep`` sets its own max_depth."""
    questions = []
    for i, line in enumerate((root / info.files[split][0]).read_text(encoding="utf-8").splitlines()):
        text, answer, *rest = line.split("\t")
        metadata: dict[str, Any] = {"dataset": info.name, "split": split}
        if rest == ["deep"]:
            metadata["max_depth"] = 9
        questions.append(Question(id=f"{info.name}-{i}", text=text, topic_entities=[TopicEntity(id="t", name="T")],
                                  answers=[GoldAnswer(name=answer)], metadata=metadata))
    return questions


def _lines_dataset(name: str = "lines", **facts: Any) -> DatasetInfo:
    return DatasetInfo(name=name, description="questions from a text file", kg="generic",
                       files={"test": ("lines/questions.txt",)}, source="written by the test", loader=_load_lines,
                       facts=dict(facts))


@pytest.fixture
def lines_dir(tmp_path: Path) -> Path:
    (tmp_path / "lines").mkdir()
    (tmp_path / "lines" / "questions.txt").write_text("q one\ta\nq two\tb\tdeep\nq three\tc\n", encoding="utf-8")
    return tmp_path


@pytest.fixture
def registry() -> Iterator[None]:
    with DATASETS.restored():
        yield


def test_the_dataset_registry_is_a_registry_of_its_kind() -> None:
    assert REGISTRIES["dataset"] is DATASETS
    assert DATASETS.entry_point_group == "kgqa.datasets"
    assert dataset_info(" CWQ ") is dataset_info("cwq")  # names are case- and space-insensitive
    with pytest.raises(ConfigError, match=r"unknown dataset 'nope'; known datasets: .*metaqa-2hop"):
        dataset_info("nope")


def test_facts_go_into_every_question_unless_it_has_the_key(lines_dir: Path, registry: None) -> None:
    register_dataset(_lines_dataset(max_depth=4, tags=["x"]))
    questions = load_dataset("lines", data_dir=lines_dir)
    assert [q.metadata["max_depth"] for q in questions] == [4, 9, 4]  # the loader's own value wins
    assert all(q.metadata["tags"] == ["x"] for q in questions)
    questions[0].metadata["tags"].append("y")  # each question has its own copy of a mutable fact
    assert questions[2].metadata["tags"] == ["x"] and dataset_info("lines").facts["tags"] == ["x"]
    assert [q.metadata["max_depth"] for q in load_dataset("lines", data_dir=lines_dir, limit=2)] == [4, 9]

    register_dataset(_lines_dataset("plain"))
    assert [q.metadata.get("max_depth") for q in load_dataset("plain", data_dir=lines_dir)] == [None, 9, None]


def test_registration_is_listed_and_a_taken_name_is_refused(registry: None) -> None:
    info = register_dataset(_lines_dataset())
    assert "lines" in dataset_names() and dataset_info("lines") is info
    register_dataset(info)  # the same entry again is harmless
    with pytest.raises(ValueError, match="already registered"):
        register_dataset(_lines_dataset(max_depth=2))
    replaced = register_dataset(_lines_dataset(max_depth=2), replace=True)
    assert dataset_info("lines") is replaced
    with pytest.raises(ValueError, match="no loader"):
        register_dataset(DatasetInfo(name="noloader", description="", kg="generic", files={"test": ("x",)}, source=""))


def test_registrations_do_not_outlive_a_restored_block() -> None:
    with DATASETS.restored():
        register_dataset(_lines_dataset("transient"))
        assert "transient" in dataset_names()
    assert "transient" not in dataset_names()


PLUGIN = '''
from pathlib import Path

from kgqa.core import GoldAnswer, Question
from kgqa.datasets import DatasetInfo


def _load(info, root, split, limit):
    rows = [line.split("=") for line in (root / info.files[split][0]).read_text().splitlines()]
    return [Question(id=f"plug-{i}", text=q, answers=[GoldAnswer(name=a)], metadata={"dataset": info.name})
            for i, (q, a) in enumerate(rows)]


PLUGGED = DatasetInfo(name="plugged", description="a dataset from a third-party package", kg="generic",
                      files={"test": ("plugged/qa.txt",)}, source="the test's package", loader=_load,
                      facts={"max_depth": 2})
NOT_A_DATASET = {"name": "not a DatasetInfo"}
'''


@pytest.fixture
def plugin_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A package installed on sys.path with a dist-info declaring ``kgqa.datasets`` entry points."""
    site = tmp_path / "site"
    (site / "kgqa_test_plugin").mkdir(parents=True)
    (site / "kgqa_test_plugin" / "__init__.py").write_text(PLUGIN, encoding="utf-8")
    dist = site / "kgqa_test_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: kgqa-test-plugin\nVersion: 0.1\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text(textwrap.dedent("""\
        [kgqa.datasets]
        plugged = kgqa_test_plugin:PLUGGED
        not-a-dataset = kgqa_test_plugin:NOT_A_DATASET
        broken = kgqa_test_plugin_missing:PLUGGED
        """), encoding="utf-8")
    data = tmp_path / "data"
    (data / "plugged").mkdir(parents=True)
    (data / "plugged" / "qa.txt").write_text("who is one=One\nwho is two=Two\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    try:
        with DATASETS.restored():
            DATASETS.discover(force=True)
            yield data
    finally:
        sys.modules.pop("kgqa_test_plugin", None)


def test_a_package_adds_a_dataset_by_entry_point(plugin_package: Path) -> None:
    assert {"plugged", "not-a-dataset"} <= set(dataset_names())
    info = dataset_info("plugged")
    assert info.description == "a dataset from a third-party package"
    questions = load_dataset("plugged", data_dir=plugin_package)
    assert [(q.text, q.gold_names, q.metadata["max_depth"]) for q in questions] == [
        ("who is one", ["One"], 2), ("who is two", ["Two"], 2)]
    with pytest.raises(ConfigError, match=r"'not-a-dataset' is registered with dict .*not a DatasetInfo"):
        dataset_info("not-a-dataset")
    with pytest.raises(ConfigError, match=r"dataset 'broken' could not be loaded: ModuleNotFoundError"):
        load_dataset("broken", data_dir=plugin_package)


def test_cwq_questions_carry_the_max_depth_fact(tmp_path: Path) -> None:
    assert dataset_info("cwq").facts == dataset_info("cwq-gog").facts == {"max_depth": 4}
    assert all(not dataset_info(name).facts for name in dataset_names() if name not in ("cwq", "cwq-gog"))
    tog = [{"ID": "q1", "question": "Q one?", "answer": "A", "topic_entity": {"ns:m.0t": "T"}}]
    files = {"questions/tog/cwq.json": tog, "questions/chatkbqa/CWQ/ComplexWebQuestions_test.json":
             [{"ID": "q1", "answer": ["m.0a"]}], "questions/pog/cope_alias/cwq_aname_dict.json": {"Q one?": ["A"]}}
    for rel, content in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(json.dumps(content), encoding="utf-8")
    assert load_dataset("cwq", data_dir=tmp_path)[0].metadata["max_depth"] == 4


def test_real_cwq_questions_all_carry_the_fact() -> None:
    default = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
    data = Path(os.environ.get(DATA_DIR_ENV) or default)
    if not (data / "questions" / "tog" / "cwq.json").is_file():
        if IN_CI:
            pytest.fail(f"CWQ data under {data} is missing (CI=true, so this is an error)")
        pytest.skip(f"CWQ data under {data} is missing")
    questions = load_dataset("cwq", data_dir=data)
    assert len(questions) == 3_531 and {q.metadata["max_depth"] for q in questions} == {4}
    assert "max_depth" not in load_dataset("metaqa-2hop", "dev", data_dir=data, limit=5)[0].metadata
