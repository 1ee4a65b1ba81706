"""What the dataset loaders share: reading a file with errors that name it and the record, a per-record loader,
topic and gold-answer helpers, and the Freebase / Wikidata id forms the files use.

Ids: Freebase MIDs are written ``m.0abc`` (no ``ns:`` prefix), Wikidata ids ``Q42``, MetaQA entities by their label.
A missing file is a :class:`~kgqa.errors.DataError` naming it; a malformed record names the file and the record index.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kgqa.core import GoldAnswer, Question, TopicEntity
from kgqa.datasets.registry import DatasetInfo, Loader
from kgqa.errors import DataError


def require_file(info: DatasetInfo, root: Path, rel: str) -> Path:
    path = root / rel
    if not path.is_file():
        raise DataError(
            f"{path} not found: dataset {info.name!r} reads {rel} under the data directory {root} "
            f"(public source: {info.source}; see docs/datasets.md)")
    return path


def read_json(path: Path) -> Any:
    try:
        with path.open(encoding="utf-8") as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from exc
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def json_list(path: Path) -> list[Any]:
    data = read_json(path)
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a JSON list of question records, found a JSON {type(data).__name__}")
    return data


@contextmanager
def record_errors(path: Path, index: int) -> Iterator[None]:
    """Turn any structural surprise inside one record into a DataError naming the file and the record index."""
    try:
        yield
    except DataError:
        raise
    except KeyError as exc:
        raise DataError(f"{path}: record {index}: missing field {exc.args[0]!r}") from exc
    except (TypeError, ValueError, AttributeError, IndexError) as exc:
        raise DataError(f"{path}: record {index}: malformed ({exc})") from exc


def per_record(build: Callable[[DatasetInfo, str, int, Any], Question]) -> Loader:
    """A loader for a dataset whose main file is one JSON list of records, from the function that builds one question."""

    def load(info: DatasetInfo, root: Path, split: str, limit: int | None) -> list[Question]:
        path = require_file(info, root, info.files[split][0])
        return each_record(path, json_list(path), limit, lambda i, rec: build(info, split, i, rec))

    load.__name__ = load.__qualname__ = getattr(build, "__name__", "load")
    load.__doc__ = build.__doc__
    return load


def each_record(path: Path, records: list[Any], limit: int | None, build: Callable[[int, Any], Question]) -> list[Question]:
    """``build(i, record)`` for the first ``limit`` records of ``path``, each under :func:`record_errors`, so an error names
    the file and the record."""
    questions = []
    for i, rec in enumerate(records[:limit] if limit is not None else records):
        with record_errors(path, i):
            questions.append(build(i, rec))
    return questions


def note_wikidata_topics(metadata: dict[str, Any], rec: Any) -> None:
    """Freebase datasets whose files also carry Wikidata topic QIDs keep them in metadata, for a Wikidata run."""
    wikidata = topics_from(rec.get("qid_topic_entity"), "qid_topic_entity", wikidata_id)
    if wikidata:
        metadata["wikidata_topic_entities"] = [t.model_dump() for t in wikidata]


def text_field(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what} should be a string, found {type(value).__name__}")
    return value


def mapping_field(value: Any, what: str) -> dict[str, Any]:
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


def topics_from(mapping: Any, what: str, normalise: Callable[[str], str]) -> list[TopicEntity]:
    return [TopicEntity(id=normalise(text_field(k, what)), name=str(v) if v is not None else "")
            for k, v in mapping_field(mapping, what).items()]


class Golds:
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


def make_question(qid: str, text: str, topics: list[TopicEntity], golds: list[GoldAnswer],
              metadata: dict[str, Any]) -> Question:
    return Question(id=qid, text=text, topic_entities=topics, answers=golds, metadata=metadata)


def is_mid(value: str) -> bool:
    from kgqa.kg.schema import is_freebase_id  # the Freebase mid grammar, written once in kgqa.kg.schema

    return is_freebase_id(value)
