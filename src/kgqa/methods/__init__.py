"""KGQA methods: one subpackage per method (``kgqa/methods/<name>/``), each registering itself by name.

The subpackages are imported lazily, the first time the registry is asked for a name (:func:`get_method`,
:func:`method_names`), so ``import kgqa.methods`` is cheap and a method whose optional dependencies are missing does not
stop the others from loading.
"""

from kgqa.methods.base import (
    GROUNDING_WEIGHTS,
    AnswerItem,
    GoldAnswer,
    Grounding,
    Method,
    MethodContext,
    Prediction,
    Question,
    TopicEntity,
    Trace,
    discover_methods,
    get_method,
    method_names,
    register_method,
)

__all__ = [
    "GROUNDING_WEIGHTS",
    "AnswerItem",
    "GoldAnswer",
    "Grounding",
    "Method",
    "MethodContext",
    "Prediction",
    "Question",
    "TopicEntity",
    "Trace",
    "discover_methods",
    "get_method",
    "method_names",
    "register_method",
]
