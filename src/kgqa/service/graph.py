"""The evidence of a prediction as a graph the page draws: nodes (topic entities, answers, intermediate nodes, CVT
nodes, literals) and edges labelled with their relations.

Evidence rows are triples ``[head, relation, tail]`` or paths ``[n0, r1, n1, r2, n2, ...]`` (``Prediction.evidence``);
nodes are KG ids or N-Triples literals. Names come from the served KG in one batch; a node the KG knows but that has no
name is a CVT (mediator) node. Labels are data, never markup: the page inserts them as text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from kgqa.kg.base import is_literal, literal_value
from kgqa.normalize import normalize_answer

#: Edges drawn at most (a graph beyond this is cut, and says so).
MAX_EDGES = 300

#: Which kind wins when a node is several things at once.
_KIND_ORDER = ("topic", "answer", "cvt", "literal", "node")


def _edges(evidence: Iterable[Sequence[Any]]) -> Iterable[tuple[str, str, str]]:
    for row in evidence:
        if not isinstance(row, (list, tuple)) or len(row) < 3 or len(row) % 2 == 0:
            continue
        items = [str(x) for x in row]
        for i in range(0, len(items) - 2, 2):
            yield items[i], items[i + 1], items[i + 2]


def evidence_graph(evidence: Iterable[Sequence[Any]], *, topics: Iterable[str] = (),
                   answers: Iterable[tuple[str | None, str]] = (), kg: Any = None,
                   known_names: dict[str, str] | None = None, max_edges: int = MAX_EDGES) -> dict[str, Any]:
    """``{"nodes": [{id, label, kind}], "edges": [{source, target, relation}], "truncated": bool}``.

    ``answers`` are ``(id, name)`` pairs: a node is an answer by id, or (a literal, or an answer without id) by its
    normalised label. ``known_names`` are names the caller already has (topic names, answer names), used when the KG
    does not know a node (a run made over another KG).
    """
    edges: list[dict[str, str]] = []
    seen: set[tuple[str, str, str]] = set()
    order: list[str] = []
    truncated = False
    for head, relation, tail in _edges(evidence):
        if (head, relation, tail) in seen:
            continue
        if len(edges) >= max_edges:
            truncated = True
            break
        seen.add((head, relation, tail))
        edges.append({"source": head, "target": tail, "relation": relation})
        for node in (head, tail):
            if node not in order:
                order.append(node)
    topic_ids = [t for t in topics if t]
    for t in topic_ids:  # a topic with no evidence is still shown: where the method started
        if t not in order:
            order.insert(0, t)
    entity_ids = [n for n in order if not is_literal(n)]
    names: dict[str, str | None] = {}
    known: set[str] = set()
    if kg is not None and entity_ids:
        try:
            names = dict(kg.names(entity_ids))
            known = {n for n in entity_ids if names.get(n) is not None or _has(kg, n)}
        except Exception:  # a KG that cannot name these ids (another schema): ids are shown
            names, known = {}, set()
    extra = known_names or {}
    answer_ids = {a for a, _ in answers if a}
    answer_names = {normalize_answer(n) for a, n in answers if n}
    topic_set = set(topic_ids)
    nodes = []
    for node in order:
        literal = is_literal(node)
        label = literal_value(node) if literal else (names.get(node) or extra.get(node) or "")
        kinds = []
        if node in topic_set:
            kinds.append("topic")
        if node in answer_ids or (label and normalize_answer(label) in answer_names and (literal or not answer_ids)):
            kinds.append("answer")
        if literal:
            kinds.append("literal")
        elif not label and node in known:
            kinds.append("cvt")
        kinds.append("node")
        kind = min(kinds, key=_KIND_ORDER.index)
        nodes.append({"id": node, "label": label or node, "kind": kind, "named": bool(label),
                      "cvt": "cvt" in kinds})
    return {"nodes": nodes, "edges": edges, "truncated": truncated}


def _has(kg: Any, node: str) -> bool:
    try:
        return bool(kg.has_entity(node))
    except Exception:
        return False
