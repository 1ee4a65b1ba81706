"""The packaged demo dataset loads with no data directory and matches the demo KG."""

from __future__ import annotations

import pytest

from kgqa.datasets import dataset_names, load_dataset
from kgqa.kg.demo import build_demo_kg


def test_demo_dataset_needs_no_data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.delenv("KGQA_DATA_DIR", raising=False)
    assert "demo" in dataset_names()
    questions = load_dataset("demo")
    assert len(questions) == 61
    assert len(load_dataset("demo", limit=5)) == 5
    kg = build_demo_kg(tmp_path / "demo")
    for q in questions:
        assert q.answers and q.topic_entities
        assert all(kg.has_entity(t.id) for t in q.topic_entities), q.id
        assert q.metadata["chain"]
