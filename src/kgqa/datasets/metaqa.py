"""MetaQA (vanilla 1/2/3-hop QA files over the WikiMovies KB) and kgqa's packaged MetaQA questions in other wordings
(``metaqa-reworded-{k}hop``, read by the same loader)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kgqa.core import GoldAnswer, Question, TopicEntity
from kgqa.datasets.records import make_question, require_file
from kgqa.datasets.registry import DatasetInfo, register_dataset
from kgqa.errors import DataError
from kgqa.normalize import MENTION_MARKS, unmark_mentions


def _load_metaqa(info: DatasetInfo, root: Path, split: str, limit: int | None) -> list[Question]:
    hops = int(info.options["hops"])
    qa_rel, qtype_rel = info.files[split]
    qa_path = require_file(info, root, qa_rel)
    qtype_path = root / qtype_rel
    qtypes: list[str] | None = None
    if qtype_path.is_file():  # optional: the vanilla release ships it, minimal copies may not
        qtypes = qtype_path.read_text(encoding="utf-8").splitlines()
    # MetaQA labels repeat across thousands of questions; sharing the (immutable) objects keeps loading fast.
    golds_cache: dict[str, GoldAnswer] = {}
    topic_cache: dict[str, TopicEntity] = {}
    questions: list[Question] = []
    try:
        lines = qa_path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise DataError(f"{qa_path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    if qtypes is not None and len(qtypes) != len(lines):
        raise DataError(f"{qtype_path}: has {len(qtypes)} lines but {qa_path} has {len(lines)}; "
                        "the question-type file must align line by line with the questions")
    dataset, prefix = info.name, f"{info.name}-{split}-"
    for lineno, line in enumerate(lines, 1):
        if limit is not None and len(questions) >= limit:
            break
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 2:
            raise DataError(f"{qa_path}: line {lineno}: expected 'question<TAB>answer1|answer2|...', "
                            f"found {len(parts)} tab-separated fields")
        raw, answer_field = parts[0].strip(), parts[1].strip()
        marks = MENTION_MARKS.findall(raw)
        if not marks:
            raise DataError(f"{qa_path}: line {lineno}: no [topic entity] in the question {raw!r}")
        names = answer_field.split("|")
        if "" in names or any(n != n.strip() for n in names):
            names = [n.strip() for n in names if n.strip()]
            if not names:
                raise DataError(f"{qa_path}: line {lineno}: no answers after the tab")
        topics = []
        for label in marks if len(marks) == 1 else dict.fromkeys(marks):
            topic = topic_cache.get(label)
            if topic is None:
                topic = topic_cache[label] = TopicEntity(id=label.strip(), name=label.strip())
            topics.append(topic)
        golds = []
        for label in dict.fromkeys(names):
            gold = golds_cache.get(label)
            if gold is None:
                gold = golds_cache[label] = GoldAnswer(id=label, name=label, aliases=[])
            golds.append(gold)
        metadata: dict[str, Any] = {"dataset": dataset, "split": split, "hops": hops, "raw_text": raw}
        if qtypes is not None:
            metadata["qtype"] = qtypes[lineno - 1].strip()
        questions.append(make_question(f"{prefix}{lineno}", unmark_mentions(raw), topics, golds, metadata))
    return questions


for _hops, _n_dev, _n_test in ((1, 9_992, 9_947), (2, 14_872, 14_872), (3, 14_274, 14_274)):
    register_dataset(DatasetInfo(
        name=f"metaqa-{_hops}hop",
        description=f"MetaQA vanilla {_hops}-hop questions over the WikiMovies KB",
        kg="metaqa",
        files={s: (f"metaqa/{_hops}-hop/qa_{s}.txt", f"metaqa/{_hops}-hop/qa_{s}_qtype.txt") for s in ("dev", "test")},
        source="https://github.com/yuyuz/MetaQA (vanilla QA files; KB kb.txt)",
        sizes={"dev": _n_dev, "test": _n_test},
        loader=_load_metaqa,
        options={"hops": _hops},
    ))




for _hops in (1, 2, 3):
    register_dataset(DatasetInfo(
        name=f"metaqa-reworded-{_hops}hop",
        description=f"MetaQA {_hops}-hop questions in kgqa's own wordings (test: 100 over test topics; dev and dev2: "
                    "200 each over dev topics, each in another author's wordings), answers from the gold chains on "
                    "kb.txt; shipped with kgqa (the KG is still MetaQA's)",
        kg="metaqa",
        files={"test": (f"{_hops}-hop/qa_test.txt", f"{_hops}-hop/qa_test_qtype.txt"),
               "dev": (f"{_hops}-hop/qa_dev.txt", f"{_hops}-hop/qa_dev_qtype.txt"),
               "dev2": (f"{_hops}-hop/qa_dev2.txt", f"{_hops}-hop/qa_dev2_qtype.txt")},
        source="written for kgqa (src/kgqa/data/metaqa_reworded, CC0; topics and types sampled from MetaQA test "
               "and dev)",
        sizes={"test": 100, "dev": 200, "dev2": 200},
        loader=_load_metaqa,
        options={"hops": _hops, "packaged": "kgqa.data.metaqa_reworded"},
    ))
