"""Evaluation: benchmark datasets (:mod:`kgqa.datasets`, re-exported here), scoring (:mod:`kgqa.eval.matching`,
answers, evidence and audits against gold; :mod:`kgqa.eval.metrics`, a question's scores and a run's summary;
:mod:`kgqa.eval.metric_registry`, every metric by name) and the resumable runner (:func:`kgqa.eval.runner.run_eval`,
imported lazily: it pulls in the LLM layer).

The runner's pieces, lowest first: :mod:`~kgqa.eval.rundir` (the run directory's files, the durable results writer,
the lock), :mod:`~kgqa.eval.kg_timing` (time spent in the KG), :mod:`~kgqa.eval.progress` (the progress bar),
:mod:`~kgqa.eval.solver` (one question answered and scored), :mod:`~kgqa.eval.report` (report.md, plots, comparing
runs), :mod:`~kgqa.eval.summary` (summary.json of a run directory) and :mod:`~kgqa.eval.runner` (answering the
questions). Each imports only those before it.
"""

from kgqa.datasets import (
    DATA_DIR_ENV,
    DATASETS,
    DatasetInfo,
    dataset_info,
    dataset_names,
    load_dataset,
    register_dataset,
    resolve_data_dir,
)
from kgqa.eval.metrics import QuestionScore, match_answers, score_prediction, summarize

__all__ = [
    "DATASETS",
    "DATA_DIR_ENV",
    "DatasetInfo",
    "QuestionScore",
    "dataset_info",
    "dataset_names",
    "load_dataset",
    "match_answers",
    "register_dataset",
    "resolve_data_dir",
    "score_prediction",
    "summarize",
]
