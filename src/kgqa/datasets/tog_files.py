"""The other question files of ToG's repository: GrailQA, QALD-10 (Wikidata), WebQuestions, SimpleQuestions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kgqa.core import Question
from kgqa.datasets.records import (
    Golds,
    each_record,
    freebase_id,
    json_list,
    make_question,
    mapping_field,
    note_wikidata_topics,
    per_record,
    require_file,
    text_field,
    topics_from,
    wikidata_id,
)
from kgqa.datasets.registry import DatasetInfo, register_dataset


def _load_grailqa(info: DatasetInfo, root: Path, split: str, limit: int | None) -> list[Question]:
    rel = info.files[split][0]
    misspelt = root / rel.replace("grailqa.json", "graliqa.json")
    # ToG's repository ships the file as "graliqa.json"; accept a verbatim copy as well.
    path = misspelt if not (root / rel).is_file() and misspelt.is_file() else require_file(info, root, rel)
    records = json_list(path)

    def build(i: int, rec: Any) -> Question:
        golds = Golds()
        for answer in rec["answer"]:
            arg = str(answer["answer_argument"])
            if answer.get("answer_type") == "Entity":
                golds.add(freebase_id(arg), answer.get("entity_name") or "")
            else:
                golds.add(None, arg)
        metadata: dict[str, Any] = {
            "dataset": info.name, "split": split,
            "level": rec.get("level"),
            "function": rec.get("function"),
            "num_edge": rec.get("num_edge"),
            "num_node": rec.get("num_node"),
            "domains": rec.get("domains"),
            "s_expression": rec.get("s_expression"),
            "sparql": rec.get("sparql_query"),
        }
        if rec.get("hops") is not None:  # only some of ToG's sample carry it
            metadata["hops"] = rec["hops"]
        return make_question(str(rec["qid"]), text_field(rec["question"], "question"),
                         topics_from(rec.get("topic_entity"), "topic_entity", freebase_id), golds.items,
                         metadata)

    return each_record(path, records, limit, build)


register_dataset(DatasetInfo(
    name="grailqa",
    description="GrailQA, ToG's 1,000-question sample of the test set (answers with MIDs, s-expressions)",
    kg="freebase",
    files={"test": ("questions/tog/grailqa.json",)},
    source="https://github.com/IDEA-FinAI/ToG data/grailqa.json (GrailQA: Gu et al. 2021)",
    sizes={"test": 1_000},
    loader=_load_grailqa,
))


@per_record
def _load_qald(info: DatasetInfo, split: str, i: int, rec: Any) -> Question:
    from kgqa.kg.schema import WIKIDATA_ID_RE  # the Wikidata id grammar, written once in kgqa.kg.schema

    golds = Golds()
    for key, value in mapping_field(rec["answer"], "answer").items():
        key = wikidata_id(str(key))
        name = str(value) if value is not None else ""
        if WIKIDATA_ID_RE.match(key):
            golds.add(key, name)
        else:  # literals are stored as value -> value
            golds.add(None, name or key)
    metadata = {"dataset": info.name, "split": split, "sparql": rec.get("sparql")}
    return make_question(f"{info.name}-{i}", text_field(rec["question"], "question"),
                     topics_from(rec.get("qid_topic_entity"), "qid_topic_entity", wikidata_id),
                     golds.items, metadata)


register_dataset(DatasetInfo(
    name="qald10-en",
    description="QALD-10 English test (333 questions over Wikidata; needs a Wikidata SPARQL endpoint to run)",
    kg="wikidata",
    files={"test": ("questions/tog/qald_10-en.json",)},
    source="https://github.com/IDEA-FinAI/ToG data/qald_10-en.json (QALD-10: Usbeck et al. 2023)",
    sizes={"test": 333},
    loader=_load_qald,
))


@per_record
def _load_webquestions(info: DatasetInfo, split: str, i: int, rec: Any) -> Question:
    golds = Golds()
    for name in rec["answers"]:
        golds.add(None, text_field(name, "answers[]"))
    metadata: dict[str, Any] = {"dataset": info.name, "split": split, "url": rec.get("url")}
    note_wikidata_topics(metadata, rec)
    return make_question(f"{info.name}-{i}", text_field(rec["question"], "question"),
                     topics_from(rec.get("topic_entity"), "topic_entity", freebase_id), golds.items,
                     metadata)


register_dataset(DatasetInfo(
    name="webquestions",
    description="WebQuestions test (2,032; answers by name, topic MIDs and QIDs)",
    kg="freebase",
    files={"test": ("questions/tog/WebQuestions.json",)},
    source="https://github.com/IDEA-FinAI/ToG data/WebQuestions.json (WebQuestions: Berant et al. 2013)",
    sizes={"test": 2_032},
    loader=_load_webquestions,
))


@per_record
def _load_simplequestions(info: DatasetInfo, split: str, i: int, rec: Any) -> Question:
    golds = Golds()
    golds.add(None, text_field(rec["answer"], "answer"))
    metadata = {"dataset": info.name, "split": split, "hops": 1, "relation": rec.get("relation")}
    return make_question(f"{info.name}-{i}", text_field(rec["question"], "question"),
                     topics_from(rec.get("topic_entity"), "topic_entity", freebase_id), golds.items,
                     metadata)


register_dataset(DatasetInfo(
    name="simplequestions",
    description="SimpleQuestions, ToG's 1,000-question sample of the test set (single-relation questions)",
    kg="freebase",
    files={"test": ("questions/tog/SimpleQA.json",)},
    source="https://github.com/IDEA-FinAI/ToG data/SimpleQA.json (SimpleQuestions: Bordes et al. 2015)",
    sizes={"test": 1_000},
    loader=_load_simplequestions,
))
