"""KGQA methods: one subpackage per method (``kgqa/methods/<name>/``), each registering itself by name.

The subpackages are imported lazily, the first time the registry is asked for a name (:func:`get_method`,
:func:`method_names`), so ``import kgqa.methods`` is cheap and a method whose optional dependencies are missing does not
stop the others from loading. The contract a method implements is in :mod:`kgqa.methods.base`; the shared types it
speaks are in :mod:`kgqa.core` (re-exported here for convenience).
"""

from kgqa.core import (
    GROUNDING_WEIGHTS,
    AnswerItem,
    GoldAnswer,
    Grounding,
    MethodContext,
    Prediction,
    Question,
    TopicEntity,
    Trace,
)
from kgqa.methods.base import Explanation, KGQAMethod, Method, MethodConfig, MethodDetails, Needs, solve
from kgqa.methods.context import Resources, build_context
from kgqa.methods.registry import (
    METHODS,
    discover_methods,
    get_method,
    method_info,
    method_names,
    parse_method_config,
    register_method,
    train,
    trainers,
)
from kgqa.methods.trainer import Trainer, TrainerSettings, TrainingReport, TrainingSession

__all__ = [
    "GROUNDING_WEIGHTS",
    "METHODS",
    "AnswerItem",
    "Explanation",
    "GoldAnswer",
    "Grounding",
    "KGQAMethod",
    "Method",
    "MethodConfig",
    "MethodContext",
    "MethodDetails",
    "Needs",
    "Prediction",
    "Question",
    "Resources",
    "TopicEntity",
    "Trace",
    "Trainer",
    "TrainerSettings",
    "TrainingReport",
    "TrainingSession",
    "build_context",
    "discover_methods",
    "get_method",
    "method_info",
    "method_names",
    "parse_method_config",
    "register_method",
    "solve",
    "train",
    "trainers",
]
