"""The dataset registry: what a dataset is (:class:`DatasetInfo`), the registry of them, and loading one.

``load_dataset("metaqa-2hop", split="dev")`` returns a list of :class:`~kgqa.core.Question`. The data directory
comes from the ``data_dir`` argument (the CLI's ``--data-dir``), else the ``KGQA_DATA_DIR`` environment variable, else
the config file. Files sit under it exactly as the public repositories ship them (docs/datasets.md has the table).

Dataset facts: a :class:`DatasetInfo`'s ``facts`` are what holds for every question of the dataset and a method may
need, e.g. CWQ's ``{"max_depth": 4}`` (the reasoning depth published methods use on CWQ). :func:`load_dataset` puts each
fact into every question's ``metadata`` under its key, unless the loader already set that key for the question, so a
method reads ``question.metadata`` and never tests a dataset's name.

The registry: :data:`DATASETS` is a :class:`kgqa.registry.Registry` of kind ``"dataset"``. :func:`register_dataset`
adds a :class:`DatasetInfo` (with its loader); a third-party package adds one through the entry-point group
``kgqa.datasets`` whose object is a DatasetInfo (``[project.entry-points."kgqa.datasets"] mydata =
"mypkg.data:MY_DATASET"``), loaded the first time a dataset name is asked for.
"""

from __future__ import annotations

import copy
import gc
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from kgqa import config
from kgqa.core import Question
from kgqa.errors import ConfigError
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
