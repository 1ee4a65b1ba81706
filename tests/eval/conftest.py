"""Fixtures the MetaQA tests share: the data directory and one embedded import of kb.txt per session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kgqa.kg.embedded import EmbeddedKG, EmbeddedKGBuilder
from kgqa.kg.loaders import load_into

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def metaqa_dir() -> Path:
    path = Path(os.environ.get("KGQA_DATA_DIR", REPO / ".." / "shared" / "data")) / "metaqa"
    if not (path / "kb.txt").is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"MetaQA data missing at {path} (set KGQA_DATA_DIR); CI must run the data tests")
        pytest.skip("MetaQA data not found (set KGQA_DATA_DIR)")
    return path.resolve()


@pytest.fixture(scope="session")
def metaqa_kg(metaqa_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> EmbeddedKG:
    builder = EmbeddedKGBuilder(schema="generic")
    load_into(builder, metaqa_dir / "kb.txt", "metaqa")
    return builder.build(tmp_path_factory.mktemp("metaqa") / "kg")
