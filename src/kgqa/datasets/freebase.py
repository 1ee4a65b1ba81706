"""The Freebase question sets the seed methods report on: WebQSP (compact and GoG's), and CWQ (all, and GoG's 1,000)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kgqa.core import Question, TopicEntity
from kgqa.datasets.records import (
    Golds,
    each_record,
    freebase_id,
    is_mid,
    json_list,
    make_question,
    note_wikidata_topics,
    per_record,
    read_json,
    record_errors,
    require_file,
    text_field,
    topics_from,
)
from kgqa.datasets.registry import DatasetInfo, register_dataset
from kgqa.errors import DataError


@per_record
def _load_webqsp_compact(info: DatasetInfo, split: str, i: int, rec: Any) -> Question:
    golds = Golds()
    missing = 0
    for name in rec["answer"] or []:
        if name is None or not str(name).strip():
            missing += 1  # the compact file lost literal answers (e.g. "AUD") as nulls
            continue
        golds.add(None, text_field(name, "answer"))
    metadata: dict[str, Any] = {"dataset": info.name, "split": split}
    if missing:
        metadata["missing_gold"] = missing
    return make_question(text_field(rec["QuestionId"], "QuestionId"), text_field(rec["RawQuestion"], "RawQuestion"),
                     topics_from(rec.get("topic_entity"), "topic_entity", freebase_id), golds.items,
                     metadata)


register_dataset(DatasetInfo(
    name="webqsp",
    description="WebQSP test, all 1,639 questions (compact: answers by name, topic MIDs)",
    kg="freebase",
    files={"test": ("questions/aog/WebQSP.json",)},
    source="https://github.com/xuduyinuo/AoG data/WebQSP.json (from WebQSP, Yih et al. 2016)",
    sizes={"test": 1_639},
    loader=_load_webqsp_compact,
))


def _webqsp_answer(golds: Golds, answer: dict[str, Any]) -> str:
    kind = answer.get("AnswerType")
    arg = text_field(answer["AnswerArgument"], "AnswerArgument")
    if kind == "Entity":
        mid = freebase_id(arg)
        golds.add(mid, answer.get("EntityName") or "")
        return mid
    golds.add(None, arg)  # a Value answer: a literal (year, date, code)
    return arg


@per_record
def _load_webqsp_gog(info: DatasetInfo, split: str, i: int, rec: Any) -> Question:
    parses = rec["Parses"]
    if not isinstance(parses, list) or not parses:
        raise ValueError("Parses should be a non-empty list")
    golds = Golds()
    parse_answers = []
    # Gold = the union over parses (as the GoG/AoG 'answer' field); each parse's set is kept in metadata.
    for parse in parses:
        parse_answers.append([_webqsp_answer(golds, a) for a in parse.get("Answers") or []])
    first = parses[0]
    topics = topics_from(rec.get("topic_entity"), "topic_entity", freebase_id)
    if not topics and first.get("TopicEntityMid"):
        topics = [TopicEntity(id=freebase_id(first["TopicEntityMid"]), name=first.get("TopicEntityName") or "")]
    chain = first.get("InferentialChain") or []
    constraints = list(first.get("Constraints") or [])
    metadata: dict[str, Any] = {
        "dataset": info.name, "split": split,
        "hops": len(chain) if chain else None,  # 14 parses have no chain in the file
        "inferential_chain": list(chain),
        "constraints": constraints,
        "time": first.get("Time"),
        "order": first.get("Order"),
        "constrained": bool(constraints or first.get("Time") or first.get("Order")),
        "sparql": first.get("Sparql"),
        "processed_question": rec.get("ProcessedQuestion"),
    }
    if len(parses) > 1:
        metadata["parse_answers"] = parse_answers
    note_wikidata_topics(metadata, rec)
    return make_question(text_field(rec["QuestionId"], "QuestionId"), text_field(rec["RawQuestion"], "RawQuestion"),
                     topics, golds.items, metadata)


register_dataset(DatasetInfo(
    name="webqsp-gog",
    description="WebQSP test, 1,000 questions with full parses (SPARQL, inferential chain, constraints, answer MIDs)",
    kg="freebase",
    files={"test": ("questions/gog/webqsp/data_with_ct_0.json",)},
    source="https://github.com/YaooXu/GoG data/webqsp/data_with_ct_0.json (WebQSP original format)",
    sizes={"test": 1_000},
    loader=_load_webqsp_gog,
))


_UNNAMED = {"", "UnName_Entity"}


def _load_cwq(info: DatasetInfo, root: Path, split: str, limit: int | None) -> list[Question]:
    """CWQ question records (ToG's or GoG's file: the same fields) joined by ID with the official answer MIDs, and
    PoG's answer names."""
    records_rel, official_rel, alias_rel = info.files[split]
    records_path = require_file(info, root, records_rel)
    official_path = require_file(info, root, official_rel)
    alias_path = require_file(info, root, alias_rel)
    records = json_list(records_path)
    official: dict[str, list[str]] = {}
    for i, rec in enumerate(json_list(official_path)):
        with record_errors(official_path, i):
            answers = rec["answer"]
            if not isinstance(answers, list):
                raise ValueError("answer should be a list of MIDs")
            official[text_field(rec["ID"], "ID")] = [text_field(a, "answer") for a in answers]
    alias_data = read_json(alias_path)
    if not isinstance(alias_data, dict):
        raise DataError(f"{alias_path}: expected a JSON object question -> [answer names], "
                        f"found a JSON {type(alias_data).__name__}")

    def build(i: int, rec: Any) -> Question:
        qid = text_field(rec["ID"], "ID")
        text = text_field(rec["question"], "question")
        tog_answer = rec.get("answer")
        mids = official.get(qid)
        if mids is None:
            raise DataError(f"{records_path}: record {i}: ID {qid!r} is not in {official_path}")
        names = alias_data.get(text)
        # PoG's name list is position-aligned with the official answer MIDs (same length for every question).
        if not isinstance(names, list) or len(names) != len(mids):
            names = [tog_answer if len(mids) == 1 and isinstance(tog_answer, str) else ""] * len(mids)
        golds = Golds()
        for mid, name in zip(mids, names, strict=True):
            name = name if isinstance(name, str) and name not in _UNNAMED else ""
            mid = freebase_id(mid)
            if is_mid(mid):
                golds.add(mid, name)
            else:  # a literal answer ("financier"): the value is its own name
                golds.add(None, mid)
        metadata: dict[str, Any] = {
            "dataset": info.name, "split": split,
            "compositionality": rec.get("compositionality_type"),
            "sparql": rec.get("sparql"),
            "webqsp_id": rec.get("webqsp_ID"),
            "webqsp_question": rec.get("webqsp_question"),
            "machine_question": rec.get("machine_question"),
            "tog_answer": tog_answer,
        }
        note_wikidata_topics(metadata, rec)
        return make_question(qid, text, topics_from(rec.get("topic_entity"), "topic_entity", freebase_id),
                         golds.items, metadata)

    return each_record(records_path, records, limit, build)


_CWQ_ANSWERS = ("questions/chatkbqa/CWQ/ComplexWebQuestions_test.json", "questions/pog/cope_alias/cwq_aname_dict.json")
_CWQ_ANSWERS_SOURCE = ("https://github.com/LHRLAB/ChatKBQA data/CWQ/origin/ComplexWebQuestions_test.json; "
                       "https://github.com/liyichen-cly/PoG cope_alias/cwq_aname_dict.json (CWQ: Talmor & Berant 2018)")


def _cwq_dataset(name: str, description: str, records: str, records_source: str, size: int) -> DatasetInfo:
    """A CWQ test set: a file of question records joined with the official answer MIDs and PoG's answer names."""
    return DatasetInfo(
        name=name,
        description=description,
        kg="freebase",
        files={"test": (records, *_CWQ_ANSWERS)},
        source=f"{records_source}; {_CWQ_ANSWERS_SOURCE}",
        sizes={"test": size},
        loader=_load_cwq,
        facts={"max_depth": 4},  # CWQ composes up to four relations: the exploration depth its published results use
    )


register_dataset(_cwq_dataset(
    "cwq", "ComplexWebQuestions test (3,531): ToG's file joined by ID with the official answer MIDs, answer names from "
           "PoG's alias dictionary",
    "questions/tog/cwq.json", "https://github.com/IDEA-FinAI/ToG data/cwq.json", 3_531))

# GoG's 1,000 CWQ test questions are ToG's first 1,000 records, field for field (checked on the shared data), so this
# is the same join over GoG's file: the questions whose gold paths the Freebase pieces (goldpath_triples.tsv) hold.
register_dataset(_cwq_dataset(
    "cwq-gog", "ComplexWebQuestions test, GoG's 1,000 (the first 1,000 of cwq, whose gold paths the Freebase pieces "
               "hold): answer MIDs from the official file, names from PoG's alias dictionary",
    "questions/gog/cwq/cwq_1000.json", "https://github.com/YaooXu/GoG data/cwq/cwq_1000.json", 1_000))
