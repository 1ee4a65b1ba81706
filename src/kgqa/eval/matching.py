"""Matching against gold: strict answer matching (the default), the legacy substring rule beside it, evidence support,
and the method's own verdicts (audits) checked against gold. :mod:`kgqa.eval.metrics` scores a question with these.

Strict matching (``hit1``, ``hit``, ``precision``, ``recall``, ``f1``)
    Text is normalised with :func:`kgqa.normalize.normalize_answer` (unicode folding, case, punctuation, the articles
    a/an/the, whitespace). A predicted answer matches a gold answer **by id** when both carry an id of the same kind
    (both Freebase MIDs, both Wikidata ids, or both other ids such as MetaQA labels), and otherwise by its normalised
    name against the gold's normalised name or any alias. A literal id (``"1967"^^<...>``) is matched by its value.
    Predictions are first de-duplicated (same id, or same normalised name for an answer without id; empty answers are
    dropped); then predictions and gold answers are matched one-to-one (a maximum bipartite matching), so each gold
    answer counts at most once and precision = matched / predictions never exceeds 1. ``hit1`` looks only at the
    first-ranked prediction, ``hit`` at any. A question without gold answers scores 1 if the prediction is empty too
    and 0 otherwise.

Legacy matching (``legacy_*``)
    The lenient rule of the ToG/PoG evaluation scripts: lower-case, spaces removed, and a prediction counts if it
    equals a gold name/alias or either string contains the other ("2014" matches "2014 World Series"). Implemented as
    intended, without those scripts' bugs: an empty prediction never matches (in the scripts "" is a substring of
    everything), a malformed record cannot crash the scorer, and each prediction is compared on its own rather than a
    whole response string. It is applied to our normalised text (so it also forgives accents and punctuation, which the
    scripts' lower-casing does not) and includes every strict match, so legacy >= strict always holds. Report it
    beside strict to compare with papers that used it; never instead of it.

Evidence support (SRP paper)
    :func:`supported_by_evidence`: an answer is supported when it appears as a node of the prediction's evidence (the
    head or tail of an evidence triple, or any node of a longer path row ``[n0, r1, n1, r2, n2 ...]``: by id, or for an
    answer without id, a literal, by its value or name).

Verdict audits
    A method records its own verdicts as :class:`kgqa.core.Audit` (a check label, a claim, the nodes it is about); it
    never sees gold. Here each audit's nodes become answer items (id = the node unless it is a literal; name = the given
    name or a literal's value) and are matched against the gold answers with the strict rule: the audit *contains gold*
    when at least one of them matches. Per check and question :func:`audit_counts` counts ``n`` audits, ``claims``
    (claim True), ``tp`` (claimed and contains), ``fp`` (claimed, does not), ``fn`` (claim False, contains), ``tn``
    (claim False, does not), ``contained`` (contains, any claim), and of the check's final audit (highest step, else
    last listed) ``final_claim`` (it claimed True) and ``final_wrong`` (it claimed True without gold: the method stopped
    without the answer). A question without gold answers counts its audits under ``n_unknown`` only.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import lru_cache

from kgqa.core import AnswerItem, Audit, GoldAnswer
from kgqa.errors import KGError
from kgqa.kg.base import is_literal, literal_value
from kgqa.kg.schema import FREEBASE_ID_RE, WIKIDATA_ID_RE
from kgqa.normalize import normalize_answer

__all__ = [
    "AUDIT_COUNTS",
    "MatchResult",
    "audit_counts",
    "canonical_id",
    "clear_caches",
    "match_answers",
    "match_strict_and_legacy",
    "supported_by_evidence",
]


# ---------------------------------------------------------------------------------------------------------------------
# Keys


_MID_RE = FREEBASE_ID_RE  # the Freebase mid grammar, written once in kgqa.kg.schema
_ID_PREFIXES = ("http://rdf.freebase.com/ns/", "https://rdf.freebase.com/ns/", "ns:", "fb:",
                "http://www.wikidata.org/entity/", "https://www.wikidata.org/entity/", "wd:")


@lru_cache(maxsize=1 << 16)
def _norm(text: str) -> str:
    return normalize_answer(text)  # an article-only answer ("The", a band) keeps its label there


@lru_cache(maxsize=1 << 16)
def _legacy_key(text: str) -> str:
    return _norm(text).replace(" ", "")


def clear_caches() -> None:
    """Empty the normalisation caches (benchmarks measure cold scoring with it)."""
    _norm.cache_clear()
    _legacy_key.cache_clear()
    canonical_id.cache_clear()
    _id_key.cache_clear()


def _literal_value(node: str) -> str:
    try:
        return literal_value(node)
    except KGError:  # e.g. a prefixed datatype ("1999"^^xsd:gYear): take what is between the quotes
        end = node.rfind('"')
        return node[1:end] if end > 0 else node.strip('"')


@lru_cache(maxsize=1 << 16)
def canonical_id(value: str | None) -> str | None:
    """The comparable form of an answer id: prefixes (``ns:``, ``wd:``, IRIs, ``<>``) removed; ``None`` for no id or a
    literal (literals are compared by value, as names)."""
    if value is None:
        return None
    text = value.strip()
    if not text or text.startswith('"'):
        return None
    if text.startswith("<") and text.endswith(">"):
        text = text[1:-1]
    for prefix in _ID_PREFIXES:
        if text.startswith(prefix):
            text = text[len(prefix):]
            break
    return text or None


def _id_kind(cid: str) -> str:
    if _MID_RE.match(cid):
        return "freebase"
    if WIKIDATA_ID_RE.match(cid):
        return "wikidata"
    return "other"


@lru_cache(maxsize=1 << 16)
def _id_key(value: str | None) -> tuple[str | None, str | None]:
    cid = canonical_id(value)
    return cid, (_id_kind(cid) if cid else None)


@dataclass(slots=True)
class _Pred:
    cid: str | None
    kind: str | None
    name: str  # normalised
    legacy: str  # normalised, spaces removed

    @property
    def empty(self) -> bool:
        return self.cid is None and not self.name


def _pred_key(item: AnswerItem) -> _Pred:
    raw_id = item.id
    name = item.name or ""
    if not name.strip() and raw_id and raw_id.strip().startswith('"'):
        name = _literal_value(raw_id.strip()) or ""  # a nameless literal answer: its value is its name
    cid, kind = _id_key(raw_id)
    return _Pred(cid, kind, _norm(name), _legacy_key(name))


def _dedupe_preds(items: Sequence[AnswerItem]) -> list[_Pred]:
    preds: list[_Pred] = []
    seen_ids: set[str] = set()
    seen_names: set[str] = set()
    for item in items:
        pred = _pred_key(item)
        if pred.cid is not None:
            if pred.cid in seen_ids:
                continue
            seen_ids.add(pred.cid)
        elif not pred.name or pred.name in seen_names:
            continue  # empty, or a repeat of an earlier answer's name
        if pred.name:
            seen_names.add(pred.name)
        preds.append(pred)
    return preds


class _GoldTable:
    """The de-duplicated gold answers of one question, indexed by id and by normalised name/alias, so matching a
    prediction is a few dictionary lookups rather than a comparison with every gold answer."""

    __slots__ = ("by_id", "by_name", "kinds", "legacy", "n")

    def __init__(self, golds: Sequence[GoldAnswer]) -> None:
        by_id: dict[str, int] = {}  # ids are unique after de-duplication
        by_name: dict[str, list[int]] = {}
        kinds: list[str | None] = []
        legacy: list[tuple[str, int]] = []
        seen_names: set[str] = set()
        for gold in golds:
            cid, kind = _id_key(gold.id) if gold.id is not None else (None, None)
            primary = _norm(gold.name) if gold.name else ""
            names: Collection[str]
            if gold.aliases:
                names = {primary, *(_norm(a) for a in gold.aliases if a)}
                names.discard("")
            else:
                names = (primary,) if primary else ()
            # Duplicates: the same id, or (without id) the same normalised primary name.
            if cid is not None:
                if cid in by_id:
                    continue
                by_id[cid] = len(kinds)
            else:
                if not names:
                    continue  # nothing to match against
                marker = primary or min(names)
                if marker in seen_names:
                    continue
                seen_names.add(marker)
            index = len(kinds)
            kinds.append(kind)
            for name in names:
                by_name.setdefault(name, []).append(index)
                legacy.append((name.replace(" ", ""), index))  # the legacy key of a text is its name sans spaces
        self.by_id, self.by_name, self.kinds, self.legacy, self.n = by_id, by_name, kinds, legacy, len(kinds)

    def strict(self, pred: _Pred) -> set[int]:
        """Gold answers ``pred`` matches: by id when both have comparable ids, otherwise by normalised name/alias."""
        found: set[int] = set()
        if pred.cid is not None:
            index = self.by_id.get(pred.cid)
            if index is not None:
                found.add(index)
        if pred.name:
            for g in self.by_name.get(pred.name, ()):
                if pred.kind is not None and self.kinds[g] == pred.kind:
                    continue  # both sides have ids of the same kind: the id has decided
                found.add(g)
        return found

    def lenient(self, pred: _Pred, strict: set[int]) -> set[int]:
        """Strict matches plus the legacy bidirectional-substring matches (never for an empty prediction)."""
        key = pred.legacy
        if not key:
            return strict
        extra = [g for gold_key, g in self.legacy if key in gold_key or gold_key in key]
        return strict.union(extra) if extra else strict


def _max_matching(edges: list[list[int]], n_gold: int) -> int:
    """Size of a maximum bipartite matching (Kuhn's augmenting paths, iterative so large answer sets cannot overflow
    the stack; answer sets are small, so this is cheap)."""
    owner = [-1] * n_gold  # gold -> prediction
    size = 0
    for root, candidates in enumerate(edges):
        if not candidates:
            continue
        for g in candidates:  # fast path: a free gold answer needs no search (the common case)
            if owner[g] == -1:
                owner[g] = root
                size += 1
                break
        else:
            size += _augment(edges, owner, root, n_gold)
    return size


def _augment(edges: list[list[int]], owner: list[int], root: int, n_gold: int) -> int:
    """Look for an augmenting path from prediction ``root``; apply it and return 1 if there is one, else 0."""
    visited = [False] * n_gold
    parent: dict[int, tuple[int, int]] = {}  # gold -> (prediction that reached it, gold that prediction held)
    stack = [(root, -1)]
    found = -1
    while stack and found < 0:
        pred, via = stack.pop()
        for g in edges[pred]:
            if visited[g]:
                continue
            visited[g] = True
            parent[g] = (pred, via)
            if owner[g] == -1:
                found = g
                break
            stack.append((owner[g], g))
    if found < 0:
        return 0
    # Flip the path: each prediction on it takes the gold that led to it.
    g = found
    while g != -1:
        pred, via = parent[g]
        owner[g] = pred
        g = via
    return 1


@dataclass(slots=True)
class MatchResult:
    """Scores of one prediction list against one gold list under one rule."""

    hit1: float
    hit: float
    precision: float
    recall: float
    f1: float
    n_pred: int  # after de-duplication
    n_gold: int
    n_matched: int


def _result(edges: list[list[int]], first_counts: bool, n_gold: int) -> MatchResult:
    n_pred = len(edges)
    matched = _max_matching(edges, n_gold)
    precision = matched / n_pred
    recall = matched / n_gold
    f1 = 2 * precision * recall / (precision + recall) if matched else 0.0
    hit1 = 1.0 if first_counts and edges[0] else 0.0
    hit = 1.0 if matched else 0.0
    return MatchResult(hit1, hit, precision, recall, f1, n_pred, n_gold, matched)


def match_strict_and_legacy(items: Sequence[AnswerItem],
                            golds: Sequence[GoldAnswer]) -> tuple[MatchResult, MatchResult]:
    """Strict and legacy results of ranked ``items`` against ``golds`` (one pass builds both edge sets)."""
    preds = _dedupe_preds(items)
    table = _GoldTable(golds)
    n_pred, n_gold = len(preds), table.n
    if n_gold == 0:
        ok = 1.0 if n_pred == 0 else 0.0  # nothing to find: only an empty prediction is right
        result = MatchResult(ok, ok, ok, ok, ok, n_pred, 0, 0)
        return result, result
    if n_pred == 0:
        result = MatchResult(0.0, 0.0, 0.0, 0.0, 0.0, 0, n_gold, 0)
        return result, result
    strict_edges: list[list[int]] = []
    lenient_edges: list[list[int]] = []
    for pred in preds:
        found = table.strict(pred)
        strict_edges.append(list(found))
        lenient_edges.append(list(table.lenient(pred, found)))
    # De-duplication never drops the first answer unless it is empty, so preds[0] is the first-ranked answer.
    first_counts = not _pred_key(items[0]).empty
    return _result(strict_edges, first_counts, n_gold), _result(lenient_edges, first_counts, n_gold)


def match_answers(golds: Sequence[GoldAnswer], answers: Sequence[AnswerItem | str],
                  *, legacy: bool = False) -> MatchResult:
    """Score ranked ``answers`` against ``golds`` with the strict rule (or the legacy rule with ``legacy=True``)."""
    items = [AnswerItem(id=None, name=a) if isinstance(a, str) else a for a in answers]
    strict, lenient = match_strict_and_legacy(items, golds)
    return lenient if legacy else strict


# ---------------------------------------------------------------------------------------------------------------------
# Verdict audits and evidence support


#: The per-question counts of one audit check, in the order they are written (see the module docstring).
AUDIT_COUNTS: tuple[str, ...] = ("n", "n_unknown", "claims", "tp", "fp", "fn", "tn", "contained", "final_claim",
                                 "final_wrong")


def _audit_items(audit: Audit) -> list[AnswerItem]:
    """The audit's nodes as answer items (as :func:`kgqa.steps.answers.answer_items` builds them: a literal has no id
    and its value for a name), then its name-only items (names beyond the last node)."""
    items: list[AnswerItem] = []
    for i, node in enumerate(audit.nodes):
        name = audit.names[i] if i < len(audit.names) else ""
        if is_literal(node.strip()):
            items.append(AnswerItem(id=None, name=name or _literal_value(node.strip())))
        else:
            items.append(AnswerItem(id=node, name=name))
    items.extend(AnswerItem(id=None, name=name) for name in audit.names[len(audit.nodes):] if name)
    return items


def _contains_gold(table: _GoldTable, audit: Audit) -> bool:
    """Whether some node (or name) of ``audit`` matches a gold answer under the strict rule."""
    return any(table.strict(_pred_key(item)) for item in _audit_items(audit))


def _final_index(audits: Sequence[Audit]) -> int:
    """Which audit is a check's final verdict: the highest step (the later one listed on a tie), else the last."""
    stepped = [(audit.step, i) for i, audit in enumerate(audits) if audit.step is not None]
    return max(stepped)[1] if stepped else len(audits) - 1


def audit_counts(golds: Sequence[GoldAnswer], audits: Sequence[Audit]) -> dict[str, dict[str, int]]:
    """Per check: the counts of :data:`AUDIT_COUNTS` of one question's audits against its gold answers."""
    table = _GoldTable(golds)
    by_check: dict[str, list[Audit]] = {}
    for audit in audits:
        by_check.setdefault(audit.check, []).append(audit)
    result: dict[str, dict[str, int]] = {}
    for check, group in by_check.items():
        counts = dict.fromkeys(AUDIT_COUNTS, 0)
        result[check] = counts
        if table.n == 0:  # nothing to check against: record only that there were audits
            counts["n_unknown"] = len(group)
            continue
        contains = [_contains_gold(table, audit) for audit in group]
        for audit, found in zip(group, contains, strict=True):
            counts["n"] += 1
            counts["contained"] += int(found)
            if audit.claim is True:
                counts["claims"] += 1
                counts["tp" if found else "fp"] += 1
            elif audit.claim is False:
                counts["fn" if found else "tn"] += 1
        final = _final_index(group)
        if group[final].claim is True:
            counts["final_claim"] = 1
            counts["final_wrong"] = int(not contains[final])
    return result


def supported_by_evidence(answer: AnswerItem, evidence: Sequence[Sequence[str]]) -> bool:
    """Whether ``answer`` is a node of ``evidence``: the head or tail of a triple ``[h, r, t]``, or any node (even
    position) of a longer path row ``[n0, r1, n1, r2, n2 ...]``.

    An answer with an entity id is found by its id (prefixes aside, as :func:`canonical_id` compares them); a literal
    (an answer without id, or with a literal id) by its N-Triples string or by its value against the literals' values
    and the evidence's plain strings (evidence written with names), compared normalised.
    """
    raw_id = (answer.id or "").strip()
    cid = canonical_id(raw_id) if raw_id else None
    literal_id = raw_id if raw_id.startswith('"') else None
    name = _norm(answer.name or (_literal_value(literal_id) if literal_id else ""))
    if cid is None and not name and literal_id is None:
        return False  # an empty answer is supported by nothing
    for row in evidence:
        for node in row[0::2]:
            text = str(node).strip()
            if cid is not None:
                if canonical_id(text) == cid:
                    return True
                continue
            if literal_id is not None and text == literal_id:
                return True
            value = _literal_value(text) if is_literal(text) else text
            if name and _norm(value) == name:
                return True
    return False

