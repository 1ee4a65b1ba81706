"""Evaluation: benchmark datasets (:mod:`kgqa.eval.datasets`), scoring (:mod:`kgqa.eval.metrics`) and the resumable
runner (:func:`kgqa.eval.runner.run_eval`, imported lazily: it pulls in the LLM layer)."""

from kgqa.eval.datasets import DATA_DIR_ENV, DatasetInfo, dataset_info, dataset_names, load_dataset, resolve_data_dir
from kgqa.eval.metrics import QuestionScore, match_answers, score_prediction, summarize

__all__ = [
    "DATA_DIR_ENV",
    "DatasetInfo",
    "QuestionScore",
    "dataset_info",
    "dataset_names",
    "load_dataset",
    "match_answers",
    "resolve_data_dir",
    "score_prediction",
    "summarize",
]
