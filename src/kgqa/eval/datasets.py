"""Benchmark question sets, read in their public formats from a data directory.

``load_dataset("metaqa-2hop", split="dev")`` returns a list of :class:`~kgqa.core.Question`. The data directory
comes from the ``data_dir`` argument (the CLI's ``--data-dir``), else the ``KGQA_DATA_DIR`` environment variable. Files
sit under it exactly as the public repositories ship them (paths below; docs/datasets.md has the full table):

==================  ======================================================  ==========================================
name                files (relative to the data directory)                  public source
==================  ======================================================  ==========================================
metaqa-{1,2,3}hop   metaqa/{k}-hop/qa_{dev,test}.txt (+ qa_*_qtype.txt)     github.com/yuyuz/MetaQA (vanilla QA files)
webqsp              questions/aog/WebQSP.json (1,639, names only)           github.com/xuduyinuo/AoG data/WebQSP.json
webqsp-gog          questions/gog/webqsp/data_with_ct_0.json (1,000)        github.com/YaooXu/GoG data/webqsp
cwq                 questions/tog/cwq.json + chatkbqa/CWQ/                  ToG data/cwq.json; ChatKBQA data/CWQ/origin;
                    ComplexWebQuestions_test.json + pog/cope_alias/         PoG cope_alias/cwq_aname_dict.json
                    cwq_aname_dict.json
grailqa             questions/tog/grailqa.json (1,000 sampled)              github.com/IDEA-FinAI/ToG data/
qald10-en           questions/tog/qald_10-en.json (333, Wikidata)           github.com/IDEA-FinAI/ToG data/
webquestions        questions/tog/WebQuestions.json (2,032)                 github.com/IDEA-FinAI/ToG data/
simplequestions     questions/tog/SimpleQA.json (1,000 sampled)             github.com/IDEA-FinAI/ToG data/
==================  ======================================================  ==========================================

Ids: Freebase MIDs are written ``m.0abc`` (no ``ns:`` prefix), Wikidata ids ``Q42``, MetaQA entities by their label.
Questions without an id in the file get ``<dataset>-<record index>`` (MetaQA: ``<dataset>-<split>-<line number>``).
A missing file is a :class:`DataError` naming it; a malformed record names the file and the line or record index.

Dataset facts: a :class:`DatasetInfo`'s ``facts`` are what holds for every question of the dataset and a method may
need, e.g. CWQ's ``{"max_depth": 4}`` (the reasoning depth published methods use on CWQ). :func:`load_dataset` puts each
fact into every question's ``metadata`` under its key, unless the loader already set that key for the question, so a
method reads ``question.metadata`` and never tests a dataset's name.

The registry: :data:`DATASETS` is a :class:`kgqa.registry.Registry` of kind ``"dataset"``. :func:`register_dataset`
adds a :class:`DatasetInfo` (with its loader); a third-party package adds one through the entry-point group
``kgqa.datasets`` whose object is a DatasetInfo (``[project.entry-points."kgqa.datasets"] mydata =
"mypkg.data:MY_DATASET"``), loaded the first time a dataset name is asked for.

Length: this module is over the ~600-line guideline because it holds one short loader per public file format, each
beside its registration and all sharing the helpers at the top; they change together when a release format moves.
"""

from __future__ import annotations

import copy
import gc
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from kgqa import config
from kgqa.core import GoldAnswer, Question, TopicEntity
from kgqa.errors import ConfigError, DataError
from kgqa.normalize import MENTION_MARKS, unmark_mentions
from kgqa.registry import Registry

__all__ = [
    "DATASETS",
    "DATA_DIR_ENV",
    "DatasetInfo",
    "dataset_info",
    "dataset_names",
    "load_dataset",
    "register_dataset",
    "resolve_data_dir",
]

DATA_DIR_ENV = "KGQA_DATA_DIR"

Loader = Callable[["DatasetInfo", Path, str, "int | None"], list[Question]]


@dataclass(frozen=True)
class DatasetInfo:
    """A registered dataset: its files per split, the KG it is asked over, where it comes from, and its loader.

    ``facts`` hold for every question and go into each question's ``metadata`` (see the module docstring).
    """

    name: str
    description: str
    kg: str  # "metaqa" | "freebase" | "wikidata": which KG (and schema) the questions are meant for
    files: dict[str, tuple[str, ...]]  # split -> paths relative to the data directory (the first is the main file)
    source: str
    sizes: dict[str, int] = field(default_factory=dict)  # expected question count per split (from the data README)
    loader: Loader | None = None
    options: dict[str, Any] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)  # metadata of every question (e.g. CWQ: max_depth 4)

    @property
    def splits(self) -> tuple[str, ...]:
        return tuple(self.files)


#: Every dataset by name: the built-ins below, those added by :func:`register_dataset`, and the ``kgqa.datasets``
#: entry points.
DATASETS: Registry[DatasetInfo] = Registry("dataset")


def register_dataset(info: DatasetInfo, *, replace: bool = False) -> DatasetInfo:
    """Add a dataset to the registry (a third party may register its own loader); a second dataset under a taken name
    is refused unless ``replace``."""
    if info.loader is None:
        raise ValueError(f"dataset {info.name!r} has no loader")
    return DATASETS.add(info.name, info, replace=replace)


def dataset_names() -> list[str]:
    """The registered dataset names, sorted."""
    return DATASETS.names()


def dataset_info(name: str) -> DatasetInfo:
    """The registered dataset ``name``; unknown names are a :class:`ConfigError` listing the known ones."""
    info = DATASETS.get(name)
    if not isinstance(info, DatasetInfo) or info.loader is None:
        raise ConfigError(f"dataset {name!r} is registered with {type(info).__name__} {info!r}, not a DatasetInfo "
                          f"with a loader (entry point group {DATASETS.entry_point_group})")
    return info


def resolve_data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The data directory: ``data_dir`` if given, else ``$KGQA_DATA_DIR``, else the config file (:mod:`kgqa.config`)."""
    return config.data_dir(data_dir if data_dir not in (None, "") else None)


def dataset_root(name: str, data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where the files of dataset ``name`` live: inside kgqa for a packaged dataset (``demo``), else the data dir."""
    return _root(dataset_info(name), data_dir)


def _root(info: DatasetInfo, data_dir: str | os.PathLike[str] | None) -> Path:
    if info.options.get("packaged"):
        return Path(str(resources.files(info.options["packaged"])))
    return resolve_data_dir(data_dir)


def load_dataset(name: str, split: str = "test", data_dir: str | os.PathLike[str] | None = None,
                 limit: int | None = None) -> list[Question]:
    """Load the questions of ``name`` / ``split`` (the first ``limit`` of them, in file order), each with the
    dataset's ``facts`` in its metadata."""
    info = dataset_info(name)
    split = split.strip().lower()
    if split not in info.files:
        raise ConfigError(f"dataset {info.name!r} has no split {split!r}; its splits: {', '.join(info.splits)}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ConfigError(f"limit must be a non-negative integer, got {limit!r}")
    root = _root(info, data_dir)
    assert info.loader is not None
    with _gc_paused():
        questions = info.loader(info, root, split, limit)
    if limit is not None:
        questions = questions[:limit]
    if info.facts:
        _add_facts(questions, info.facts)
    return questions


def _add_facts(questions: list[Question], facts: dict[str, Any]) -> None:
    """Put each dataset fact into every question's metadata, unless the question already has that key."""
    for question in questions:
        for key, value in facts.items():
            if key not in question.metadata:
                question.metadata[key] = copy.deepcopy(value)  # no two questions share a mutable value


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while loading: every object built is kept, and the collector's repeated
    passes over tens of thousands of fresh models otherwise cost more than the parsing itself."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# ---------------------------------------------------------------------------------------------------------------------
# Helpers shared by the loaders


def _require(info: DatasetInfo, root: Path, rel: str) -> Path:
    path = root / rel
    if not path.is_file():
        raise DataError(
            f"{path} not found: dataset {info.name!r} reads {rel} under the data directory {root} "
            f"(public source: {info.source}; see docs/datasets.md)")
    return path


def _read_json(path: Path) -> Any:
    try:
        with path.open(encoding="utf-8") as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from exc
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def _json_list(path: Path) -> list[Any]:
    data = _read_json(path)
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a JSON list of question records, found a JSON {type(data).__name__}")
    return data


@contextmanager
def _record(path: Path, index: int) -> Iterator[None]:
    """Turn any structural surprise inside one record into a DataError naming the file and the record index."""
    try:
        yield
    except DataError:
        raise
    except KeyError as exc:
        raise DataError(f"{path}: record {index}: missing field {exc.args[0]!r}") from exc
    except (TypeError, ValueError, AttributeError, IndexError) as exc:
        raise DataError(f"{path}: record {index}: malformed ({exc})") from exc


def _per_record(build: Callable[[DatasetInfo, str, int, Any], Question]) -> Loader:
    """A loader for a dataset whose main file is one JSON list of records, from the function that builds one question."""

    def load(info: DatasetInfo, root: Path, split: str, limit: int | None) -> list[Question]:
        path = _require(info, root, info.files[split][0])
        return _each_record(path, _json_list(path), limit, lambda i, rec: build(info, split, i, rec))

    load.__name__ = load.__qualname__ = getattr(build, "__name__", "load")
    load.__doc__ = build.__doc__
    return load


def _each_record(path: Path, records: list[Any], limit: int | None, build: Callable[[int, Any], Question]) -> list[Question]:
    """``build(i, record)`` for the first ``limit`` records of ``path``, each under :func:`_record`, so an error names
    the file and the record."""
    questions = []
    for i, rec in enumerate(records[:limit] if limit is not None else records):
        with _record(path, i):
            questions.append(build(i, rec))
    return questions


def _note_wikidata_topics(metadata: dict[str, Any], rec: Any) -> None:
    """Freebase datasets whose files also carry Wikidata topic QIDs keep them in metadata, for a Wikidata run."""
    wikidata = _topics(rec.get("qid_topic_entity"), "qid_topic_entity", wikidata_id)
    if wikidata:
        metadata["wikidata_topic_entities"] = [t.model_dump() for t in wikidata]


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what} should be a string, found {type(value).__name__}")
    return value


def _mapping(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{what} should be an object, found {type(value).__name__}")
    return value


_FB_PREFIXES = ("http://rdf.freebase.com/ns/", "https://rdf.freebase.com/ns/", "ns:", "fb:")
_WD_PREFIXES = ("http://www.wikidata.org/entity/", "https://www.wikidata.org/entity/", "wd:")


def freebase_id(value: str) -> str:
    """``ns:m.0abc`` / ``http://rdf.freebase.com/ns/m.0abc`` -> ``m.0abc``."""
    value = value.strip()
    for prefix in _FB_PREFIXES:
        if value.startswith(prefix):
            return value[len(prefix):]
    return value


def wikidata_id(value: str) -> str:
    """``wd:Q42`` / ``http://www.wikidata.org/entity/Q42`` -> ``Q42``."""
    value = value.strip()
    for prefix in _WD_PREFIXES:
        if value.startswith(prefix):
            return value[len(prefix):]
    return value


def _topics(mapping: Any, what: str, normalise: Callable[[str], str]) -> list[TopicEntity]:
    return [TopicEntity(id=normalise(_text(k, what)), name=str(v) if v is not None else "")
            for k, v in _mapping(mapping, what).items()]


class _Golds:
    """Collects gold answers for one question, dropping duplicates (same id, or same name when there is no id)."""

    __slots__ = ("items", "seen")

    def __init__(self) -> None:
        self.items: list[GoldAnswer] = []
        self.seen: set[str] = set()

    def add(self, id_: str | None, name: str, aliases: list[str] | None = None) -> None:
        key = "id:" + id_ if id_ else "name:" + name
        if key in self.seen:
            return
        self.seen.add(key)
        self.items.append(GoldAnswer(id=id_, name=name, aliases=list(aliases or [])))


def _question(qid: str, text: str, topics: list[TopicEntity], golds: list[GoldAnswer],
              metadata: dict[str, Any]) -> Question:
    return Question(id=qid, text=text, topic_entities=topics, answers=golds, metadata=metadata)


def _is_mid(value: str) -> bool:
    from kgqa.kg.schema import is_freebase_id  # the Freebase mid grammar, written once in kgqa.kg.schema

    return is_freebase_id(value)


# ---------------------------------------------------------------------------------------------------------------------
# MetaQA


def _load_metaqa(info: DatasetInfo, root: Path, split: str, limit: int | None) -> list[Question]:
    hops = int(info.options["hops"])
    qa_rel, qtype_rel = info.files[split]
    qa_path = _require(info, root, qa_rel)
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
        questions.append(_question(f"{prefix}{lineno}", unmark_mentions(raw), topics, golds, metadata))
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


# ---------------------------------------------------------------------------------------------------------------------
# WebQSP


@_per_record
def _load_webqsp_compact(info: DatasetInfo, split: str, i: int, rec: Any) -> Question:
    golds = _Golds()
    missing = 0
    for name in rec["answer"] or []:
        if name is None or not str(name).strip():
            missing += 1  # the compact file lost literal answers (e.g. "AUD") as nulls
            continue
        golds.add(None, _text(name, "answer"))
    metadata: dict[str, Any] = {"dataset": info.name, "split": split}
    if missing:
        metadata["missing_gold"] = missing
    return _question(_text(rec["QuestionId"], "QuestionId"), _text(rec["RawQuestion"], "RawQuestion"),
                     _topics(rec.get("topic_entity"), "topic_entity", freebase_id), golds.items,
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


def _webqsp_answer(golds: _Golds, answer: dict[str, Any]) -> str:
    kind = answer.get("AnswerType")
    arg = _text(answer["AnswerArgument"], "AnswerArgument")
    if kind == "Entity":
        mid = freebase_id(arg)
        golds.add(mid, answer.get("EntityName") or "")
        return mid
    golds.add(None, arg)  # a Value answer: a literal (year, date, code)
    return arg


@_per_record
def _load_webqsp_gog(info: DatasetInfo, split: str, i: int, rec: Any) -> Question:
    parses = rec["Parses"]
    if not isinstance(parses, list) or not parses:
        raise ValueError("Parses should be a non-empty list")
    golds = _Golds()
    parse_answers = []
    # Gold = the union over parses (as the GoG/AoG 'answer' field); each parse's set is kept in metadata.
    for parse in parses:
        parse_answers.append([_webqsp_answer(golds, a) for a in parse.get("Answers") or []])
    first = parses[0]
    topics = _topics(rec.get("topic_entity"), "topic_entity", freebase_id)
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
    _note_wikidata_topics(metadata, rec)
    return _question(_text(rec["QuestionId"], "QuestionId"), _text(rec["RawQuestion"], "RawQuestion"),
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


# ---------------------------------------------------------------------------------------------------------------------
# CWQ


_UNNAMED = {"", "UnName_Entity"}


def _load_cwq(info: DatasetInfo, root: Path, split: str, limit: int | None) -> list[Question]:
    tog_rel, official_rel, alias_rel = info.files[split]
    tog_path = _require(info, root, tog_rel)
    official_path = _require(info, root, official_rel)
    alias_path = _require(info, root, alias_rel)
    records = _json_list(tog_path)
    official: dict[str, list[str]] = {}
    for i, rec in enumerate(_json_list(official_path)):
        with _record(official_path, i):
            answers = rec["answer"]
            if not isinstance(answers, list):
                raise ValueError("answer should be a list of MIDs")
            official[_text(rec["ID"], "ID")] = [_text(a, "answer") for a in answers]
    alias_data = _read_json(alias_path)
    if not isinstance(alias_data, dict):
        raise DataError(f"{alias_path}: expected a JSON object question -> [answer names], "
                        f"found a JSON {type(alias_data).__name__}")

    def build(i: int, rec: Any) -> Question:
        qid = _text(rec["ID"], "ID")
        text = _text(rec["question"], "question")
        tog_answer = rec.get("answer")
        mids = official.get(qid)
        if mids is None:
            raise DataError(f"{tog_path}: record {i}: ID {qid!r} is not in {official_path}")
        names = alias_data.get(text)
        # PoG's name list is position-aligned with the official answer MIDs (same length for every question).
        if not isinstance(names, list) or len(names) != len(mids):
            names = [tog_answer if len(mids) == 1 and isinstance(tog_answer, str) else ""] * len(mids)
        golds = _Golds()
        for mid, name in zip(mids, names, strict=True):
            name = name if isinstance(name, str) and name not in _UNNAMED else ""
            mid = freebase_id(mid)
            if _is_mid(mid):
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
        _note_wikidata_topics(metadata, rec)
        return _question(qid, text, _topics(rec.get("topic_entity"), "topic_entity", freebase_id),
                         golds.items, metadata)

    return _each_record(tog_path, records, limit, build)


register_dataset(DatasetInfo(
    name="cwq",
    description="ComplexWebQuestions test (3,531): ToG's file joined by ID with the official answer MIDs, "
                "answer names from PoG's alias dictionary",
    kg="freebase",
    files={"test": ("questions/tog/cwq.json", "questions/chatkbqa/CWQ/ComplexWebQuestions_test.json",
                    "questions/pog/cope_alias/cwq_aname_dict.json")},
    source="https://github.com/IDEA-FinAI/ToG data/cwq.json; https://github.com/LHRLAB/ChatKBQA "
           "data/CWQ/origin/ComplexWebQuestions_test.json; https://github.com/liyichen-cly/PoG "
           "cope_alias/cwq_aname_dict.json (CWQ: Talmor & Berant 2018)",
    sizes={"test": 3_531},
    loader=_load_cwq,
    facts={"max_depth": 4},  # CWQ composes up to four relations: the exploration depth its published results use
))


# ---------------------------------------------------------------------------------------------------------------------
# ToG's other files: GrailQA, QALD-10, WebQuestions, SimpleQuestions


def _load_grailqa(info: DatasetInfo, root: Path, split: str, limit: int | None) -> list[Question]:
    rel = info.files[split][0]
    misspelt = root / rel.replace("grailqa.json", "graliqa.json")
    # ToG's repository ships the file as "graliqa.json"; accept a verbatim copy as well.
    path = misspelt if not (root / rel).is_file() and misspelt.is_file() else _require(info, root, rel)
    records = _json_list(path)

    def build(i: int, rec: Any) -> Question:
        golds = _Golds()
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
        return _question(str(rec["qid"]), _text(rec["question"], "question"),
                         _topics(rec.get("topic_entity"), "topic_entity", freebase_id), golds.items,
                         metadata)

    return _each_record(path, records, limit, build)


register_dataset(DatasetInfo(
    name="grailqa",
    description="GrailQA, ToG's 1,000-question sample of the test set (answers with MIDs, s-expressions)",
    kg="freebase",
    files={"test": ("questions/tog/grailqa.json",)},
    source="https://github.com/IDEA-FinAI/ToG data/grailqa.json (GrailQA: Gu et al. 2021)",
    sizes={"test": 1_000},
    loader=_load_grailqa,
))


@_per_record
def _load_qald(info: DatasetInfo, split: str, i: int, rec: Any) -> Question:
    from kgqa.kg.schema import WIKIDATA_ID_RE  # the Wikidata id grammar, written once in kgqa.kg.schema

    golds = _Golds()
    for key, value in _mapping(rec["answer"], "answer").items():
        key = wikidata_id(str(key))
        name = str(value) if value is not None else ""
        if WIKIDATA_ID_RE.match(key):
            golds.add(key, name)
        else:  # literals are stored as value -> value
            golds.add(None, name or key)
    metadata = {"dataset": info.name, "split": split, "sparql": rec.get("sparql")}
    return _question(f"{info.name}-{i}", _text(rec["question"], "question"),
                     _topics(rec.get("qid_topic_entity"), "qid_topic_entity", wikidata_id),
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


@_per_record
def _load_webquestions(info: DatasetInfo, split: str, i: int, rec: Any) -> Question:
    golds = _Golds()
    for name in rec["answers"]:
        golds.add(None, _text(name, "answers[]"))
    metadata: dict[str, Any] = {"dataset": info.name, "split": split, "url": rec.get("url")}
    _note_wikidata_topics(metadata, rec)
    return _question(f"{info.name}-{i}", _text(rec["question"], "question"),
                     _topics(rec.get("topic_entity"), "topic_entity", freebase_id), golds.items,
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


@_per_record
def _load_simplequestions(info: DatasetInfo, split: str, i: int, rec: Any) -> Question:
    golds = _Golds()
    golds.add(None, _text(rec["answer"], "answer"))
    metadata = {"dataset": info.name, "split": split, "hops": 1, "relation": rec.get("relation")}
    return _question(f"{info.name}-{i}", _text(rec["question"], "question"),
                     _topics(rec.get("topic_entity"), "topic_entity", freebase_id), golds.items,
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


def _load_demo(info: DatasetInfo, root: Path, split: str, limit: int | None) -> list[Question]:
    path = _require(info, root, info.files[split][0])
    questions: list[Question] = []
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            with _record(path, number):
                raw = json.loads(line)
                golds = _Golds()
                for answer in raw["answers"]:
                    golds.add(answer.get("id"), _text(answer["name"], "answers[].name"))
                questions.append(_question(
                    raw["id"], _text(raw["question"], "question"), [TopicEntity(**t) for t in raw["topic_entities"]],
                    golds.items, {"dataset": info.name, "split": split, "hops": raw.get("hops"), "qtype": raw.get("type"),
                                  "chain": raw.get("chain"), "constraint": raw.get("constraint")}))
            if limit is not None and len(questions) >= limit:
                break
    return questions


register_dataset(DatasetInfo(
    name="demo", description="The demo questions shipped with kgqa, over the demo KG (`--kg demo`); no data directory.",
    kg="demo", files={"test": ("questions.jsonl",)}, source="written for kgqa (src/kgqa/data/demo, CC0)",
    sizes={"test": 61}, loader=_load_demo, options={"packaged": "kgqa.data.demo"}))


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
