"""The demo questions shipped with kgqa (over the demo KG; no data directory)."""

from __future__ import annotations

import json
from pathlib import Path

from kgqa.core import Question, TopicEntity
from kgqa.datasets.records import Golds, make_question, record_errors, require_file, text_field
from kgqa.datasets.registry import DatasetInfo, register_dataset


def _load_demo(info: DatasetInfo, root: Path, split: str, limit: int | None) -> list[Question]:
    path = require_file(info, root, info.files[split][0])
    questions: list[Question] = []
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            with record_errors(path, number):
                raw = json.loads(line)
                golds = Golds()
                for answer in raw["answers"]:
                    golds.add(answer.get("id"), text_field(answer["name"], "answers[].name"))
                questions.append(make_question(
                    raw["id"], text_field(raw["question"], "question"), [TopicEntity(**t) for t in raw["topic_entities"]],
                    golds.items, {"dataset": info.name, "split": split, "hops": raw.get("hops"), "qtype": raw.get("type"),
                                  "chain": raw.get("chain"), "constraint": raw.get("constraint")}))
            if limit is not None and len(questions) >= limit:
                break
    return questions


register_dataset(DatasetInfo(
    name="demo", description="The demo questions shipped with kgqa, over the demo KG (`--kg demo`); no data directory.",
    kg="demo", files={"test": ("questions.jsonl",)}, source="written for kgqa (src/kgqa/data/demo, CC0)",
    sizes={"test": 61}, loader=_load_demo, options={"packaged": "kgqa.data.demo"}))
