"""Entity linking for a free question: find the KG entities it mentions (for ``kgqa ask``; benchmarks give topics).

Deterministic and KG-only (every question asked of the KG goes through the :class:`KnowledgeGraph` protocol):

1. **Mentions.** A ``[bracketed]`` mention (MetaQA style) is looked up first, exactly and, with ``fuzzy``, fuzzily; when
   one links, the rest of the question is not searched. Otherwise every word n-gram of the question (up to
   ``_MAX_NGRAM`` words; single stop words and words under three characters skipped) is looked up as an exact
   (normalised) label; a possessive last word also tries its stem (``"Heath Ledger's"`` -> ``"Heath Ledger"``).
2. **Entities only.** A candidate is dropped when it is a nameless node (a CVT: :meth:`Schema.is_cvt`), a type node (the
   object of one of the schema's type relations, :func:`type_relations`: Freebase ``type.object.type``, Wikidata
   ``wdt:P31``, RDF ``rdf:type``) or a node with no fact edge at all (every incident edge is a noise relation the KG
   hides, which is what a schema node such as Freebase's ``Country`` type looks like).
3. **Longest mention.** Mentions are taken longest first; a shorter mention overlapping a taken one is dropped. With
   ``fuzzy``, the words no exact mention covers are then searched fuzzily (spans of two to four words holding a
   capitalised word, or one capitalised word), keeping hits scoring at least ``FUZZY_MIN_SCORE``.
4. **Ranking.** One entity per mention: the best by label match (exact normalised label first, then the fuzzy score),
   then by degree (distinct incident relations, both directions; then incident edges, counted up to ``_EDGE_CAP`` per
   relation). The linked entities are ordered by match, then the longer mention first (in words), then by degree.

A label is a name or an alias: the embedded store indexes the aliases a KG records (Freebase ``common.topic.alias``,
``skos:altLabel``; :mod:`kgqa.kg.embedded.aliases`) beside the names, for exact and fuzzy search alike, so "the Oscar
for Best Director" links the category the demo KG names "Academy Award for Best Director". A question that links
nothing is refused naming the mentions tried (:func:`no_link_message`).

:func:`link` returns a :class:`LinkResult` holding the linked entities and the runners-up, each with why it lost;
:func:`link_entities` is the plain list of :class:`EntityMatch` for callers that only want the entities.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from kgqa.kg.base import Direction, EntityMatch, KnowledgeGraph
from kgqa.normalize import MENTION_MARKS, unmark_mentions

_WORD = re.compile(r"[\w'’.-]+", re.UNICODE)
_POSSESSIVE = re.compile(r"(?<=\w)['’]s$", re.IGNORECASE)
_MAX_NGRAM = 8
_FUZZY_MAX_NGRAM = 4
_PER_MENTION = 10  # same-named entities looked at per mention
_EDGE_CAP = 100  # edges counted per incident relation for the degree tie-break
#: Least fuzzy score (the KG's search score, 1.0 for an exact label) a fuzzy mention must reach to be a candidate.
FUZZY_MIN_SCORE = 0.85
_STOP = {"the", "a", "an", "of", "in", "on", "who", "what", "which", "when", "where", "how", "is", "was", "did", "do",
         "does", "and", "by", "for", "to", "with", "film", "films", "movie", "movies"}

#: rdf:type marks a type node in every schema; each schema names its own type relations (``Schema.type_relations``).
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"

# Why a candidate lost (LinkCandidate.reason).
TYPE_NODE = "type node"
CVT_NODE = "nameless (CVT) node"
NO_FACTS = "no fact edges (schema node)"
OVERLAPPED = "shorter overlapping mention"
WEAKER_MATCH = "weaker label match"
LOWER_DEGREE = "lower degree"
OVER_LIMIT = "over the limit"


@dataclass(frozen=True, slots=True)
class LinkCandidate:
    """One KG entity a mention of the question could mean.

    ``mention`` is the question's words as written and ``span`` their word positions ``[start, end)`` (brackets left
    out); ``exact`` says the normalised label equals the mention (then ``score`` is 1.0); ``degree`` counts distinct
    incident relations (both directions) and ``edges`` incident edges (up to ``_EDGE_CAP`` per relation; ``None`` when
    it was not needed). ``reason`` is why it was not linked (``None`` for a linked one) and ``lost_to`` the id it lost
    to, or for an overlapped mention the mention that covered it.
    """

    id: str
    name: str
    mention: str
    span: tuple[int, int]
    score: float
    exact: bool
    degree: int | None = None
    edges: int | None = None
    reason: str | None = None
    lost_to: str | None = None

    def match(self) -> EntityMatch:
        return EntityMatch(self.id, self.name, self.score)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["span"] = list(self.span)
        return {k: v for k, v in out.items() if v is not None}


@dataclass(slots=True)
class LinkResult:
    """The linked entities best first (``entities``, with their candidates in ``linked``) and every other candidate
    with why it lost (``runners_up``, in the order they were decided)."""

    linked: list[LinkCandidate] = field(default_factory=list)
    runners_up: list[LinkCandidate] = field(default_factory=list)
    #: the mentions looked for: the [bracketed] ones, else the question's name-like phrases (:func:`name_phrases`)
    tried: list[str] = field(default_factory=list)

    @property
    def entities(self) -> list[EntityMatch]:
        return [c.match() for c in self.linked]

    def to_dict(self) -> dict[str, Any]:
        """For JSON (``kgqa ask --json`` / ``--trace``)."""
        return {"linked": [c.to_dict() for c in self.linked], "runners_up": [c.to_dict() for c in self.runners_up],
                "tried": list(self.tried)}


def type_relations(kg: KnowledgeGraph) -> tuple[str, ...]:
    """The type relations of ``kg``'s schema that are in its vocabulary."""
    names = getattr(kg.schema, "type_relations", ())
    return tuple(r for r in dict.fromkeys((*names, RDF_TYPE)) if kg.has_relation(r))


def link_entities(kg: KnowledgeGraph, question: str, *, limit: int = 3, fuzzy: bool = True) -> list[EntityMatch]:
    """The entities ``question`` mentions, best first (at most ``limit``); :func:`link` keeps the runners-up too."""
    return link(kg, question, limit=limit, fuzzy=fuzzy).entities


def link(kg: KnowledgeGraph, question: str, *, limit: int = 3, fuzzy: bool = True) -> LinkResult:
    """Link ``question`` to at most ``limit`` entities of ``kg``, with the runners-up and why each lost."""
    return _Linker(kg, fuzzy).run(question, limit)


@dataclass(slots=True)
class _Node:
    """What the linker learnt of one node: why it can never be linked (or ``None``), its degree, its edges."""

    bad: str | None
    degree: int
    relations: list[tuple[str, Direction]]
    edges: int | None = None


class _Linker:
    def __init__(self, kg: KnowledgeGraph, fuzzy: bool) -> None:
        self.kg = kg
        self.fuzzy = fuzzy
        self.type_rels = type_relations(kg)
        self.nodes: dict[str, _Node] = {}
        self.covering: dict[int, str] = {}  # word position -> the linked mention covering it
        self.result = LinkResult()

    # -- the steps -------------------------------------------------------------------------------------------------

    def run(self, question: str, limit: int) -> LinkResult:
        words = _words(unmark_mentions(question))
        linked: list[LinkCandidate] = []
        mentions: list[list[LinkCandidate]] = []
        for bracket in MENTION_MARKS.finditer(question):
            start = len(_words(unmark_mentions(question[:bracket.start()])))
            span = (start, min(start + len(_words(bracket.group(1))), len(words)))
            if span[1] <= span[0]:
                continue
            text = bracket.group(1).strip()
            found = self._search([text], span, fuzzy=False)
            if not found and self.fuzzy:
                found = self._search([text], span, fuzzy=True)
            mentions.append(self._entities_only(found))
        if mentions:
            linked = self._take(mentions, [False] * len(words))
            self.result.tried = [b.group(1).strip() for b in MENTION_MARKS.finditer(question) if b.group(1).strip()]
        if not linked:
            self.result.tried = list(dict.fromkeys([*self.result.tried, *name_phrases(words)]))
            taken = [False] * len(words)
            linked = self._take([self._entities_only(self._search(_variants(words[s:e]), (s, e), fuzzy=False))
                                 for s, e in _spans(words, _MAX_NGRAM)], taken)
            if self.fuzzy and not all(taken):
                gaps = [(s, e) for s, e in _spans(words, _FUZZY_MAX_NGRAM, fuzzy=True) if not any(taken[s:e])]
                linked += self._take([self._entities_only(self._search(_variants(words[s:e]), (s, e), fuzzy=True))
                                      for s, e in gaps], taken)
        linked.sort(key=lambda c: (-c.exact, -c.score, -(c.span[1] - c.span[0]), -(c.degree or 0), -(c.edges or 0),
                                   c.span[0]))
        self.result.linked = linked[:max(limit, 0)]
        self.result.runners_up += [replace(c, reason=OVER_LIMIT) for c in linked[max(limit, 0):]]
        # A bracketed mention that linked nothing is searched again as part of the question: report each loss once.
        unique = {(c.id, c.span, c.reason): c for c in reversed(self.result.runners_up)}
        self.result.runners_up = list(reversed(unique.values()))
        return self.result

    def _search(self, texts: Sequence[str], span: tuple[int, int], *, fuzzy: bool) -> list[LinkCandidate]:
        """Candidates for one span: every text variant searched, each entity once (its best score)."""
        best: dict[str, LinkCandidate] = {}
        for text in texts:
            for hit in self.kg.search(text, fuzzy=fuzzy, limit=_PER_MENTION):
                exact = hit.score >= 1.0
                if fuzzy and not exact and hit.score < FUZZY_MIN_SCORE:
                    continue
                known = best.get(hit.id)
                if known is None or (exact, hit.score) > (known.exact, known.score):
                    best[hit.id] = LinkCandidate(hit.id, hit.name, texts[0], span, float(hit.score), exact)
        return list(best.values())

    def _entities_only(self, candidates: list[LinkCandidate]) -> list[LinkCandidate]:
        """Drop (into the runners-up) the candidates that are not entities; the others get their degree."""
        if not candidates:
            return []
        names = self.kg.names([c.id for c in candidates])
        kept: list[LinkCandidate] = []
        for c in candidates:
            node = self._node(c.id, names.get(c.id))
            if node.bad:
                self.result.runners_up.append(replace(c, degree=node.degree, reason=node.bad))
            else:
                kept.append(replace(c, degree=node.degree))
        return kept

    def _take(self, mentions: Iterable[list[LinkCandidate]], taken: list[bool]) -> list[LinkCandidate]:
        """Longest mention first; a mention overlapping a taken one loses; one entity per mention (the best ranked)."""
        ordered = sorted((m for m in mentions if m), key=lambda m: (-(m[0].span[1] - m[0].span[0]),
                                                                     -max(c.exact for c in m), -max(c.score for c in m),
                                                                     m[0].span[0]))
        linked: list[LinkCandidate] = []
        covering = self.covering
        for mention in ordered:
            start, end = mention[0].span
            if any(taken[start:end]):
                by = next(covering[i] for i in range(start, end) if taken[i])
                self.result.runners_up += [replace(c, reason=OVERLAPPED, lost_to=by) for c in mention]
                continue
            ranked = self._rank(mention)
            winner = ranked[0]
            linked.append(winner)
            for c in ranked[1:]:
                same_match = (c.exact, c.score) == (winner.exact, winner.score)
                self.result.runners_up.append(replace(c, reason=LOWER_DEGREE if same_match else WEAKER_MATCH,
                                                      lost_to=winner.id))
            for i in range(start, end):
                taken[i] = True
                covering[i] = winner.mention
        return linked

    def _rank(self, mention: list[LinkCandidate]) -> list[LinkCandidate]:
        def key(c: LinkCandidate) -> tuple[float, ...]:
            return (-c.exact, -c.score, -(c.degree or 0), -(c.edges or 0))

        if len(mention) > 1:  # edges only where the relation count may tie
            mention = [replace(c, edges=self._edges(c.id)) for c in mention]
        return sorted(mention, key=lambda c: (key(c), c.id))

    # -- what a node is --------------------------------------------------------------------------------------------

    def _node(self, entity: str, name: str | None) -> _Node:
        known = self.nodes.get(entity)
        if known is not None:
            return known
        kg = self.kg
        relations = [(r, d) for d in (Direction.OUT, Direction.IN) for r in kg.relations(entity, d)]
        bad: str | None = None
        if kg.schema.is_cvt(entity, name):
            bad = CVT_NODE
        elif any(kg.neighbors(entity, r, Direction.IN, limit=1) for r in self.type_rels):
            bad = TYPE_NODE
        elif not relations:
            bad = NO_FACTS
        node = self.nodes[entity] = _Node(bad, len(relations), relations)
        return node

    def _edges(self, entity: str) -> int:
        node = self.nodes[entity]
        if node.edges is None:
            node.edges = sum(len(self.kg.neighbors(entity, r, d, limit=_EDGE_CAP)) for r, d in node.relations)
        return node.edges


# -- words and spans ---------------------------------------------------------------------------------------------------


def _words(text: str) -> list[str]:
    return [w for w in (m.group(0).strip(".'’-") for m in _WORD.finditer(text)) if w]


def _variants(span: Sequence[str]) -> list[str]:
    """The span as written, then with a possessive last word cut to its stem (``Ledger's`` -> ``Ledger``)."""
    text = " ".join(span)
    stem = _POSSESSIVE.sub("", span[-1])
    if stem != span[-1] and stem:
        return [text, " ".join([*span[:-1], stem])]
    return [text]


def _spans(words: Sequence[str], max_size: int, *, fuzzy: bool = False) -> list[tuple[int, int]]:
    """Word spans ``[start, end)`` worth a search, longest first. A lone word must not be a stop word and must have
    three characters; for a fuzzy search, a span must hold a capitalised word that is not a stop word."""
    out: list[tuple[int, int]] = []
    for size in range(min(max_size, len(words)), 0, -1):
        for start in range(0, len(words) - size + 1):
            span = words[start:start + size]
            if size == 1 and (span[0].lower() in _STOP or len(span[0]) < 3):
                continue
            if fuzzy and not any(w[:1].isupper() and w.lower() not in _STOP for w in span):
                continue
            out.append((start, start + size))
    return out


_JOINERS = {"of", "the", "for", "and", "de", "del", "la", "le", "in", "on", "a", "an", "at", "to", "von", "van", "&"}


def name_phrases(words: Sequence[str]) -> list[str]:
    """The phrases of a question that look like names, for telling a user what linking looked for: runs of
    capitalised words (small joining words such as "of", "for" inside a run), the stop words at either end and a lone
    question word dropped ("Who got the Oscar for Best Director in 2020" -> "Oscar for Best Director")."""
    phrases: list[str] = []
    run: list[str] = []

    def close() -> None:
        while run and (run[-1].lower() in _JOINERS or run[-1].lower() in _STOP):
            run.pop()
        while run and run[0].lower() in _STOP:
            run.pop(0)
        if run:
            phrases.append(" ".join(run))
        run.clear()

    for word in words:
        if word[:1].isupper() or (run and word.lower() in _JOINERS):
            run.append(word)
        else:
            close()
    close()
    return list(dict.fromkeys(phrases))


def no_link_message(kg: KnowledgeGraph, result: LinkResult) -> str:
    """What a user reads when nothing in the question links: the mentions tried (with the closest label of each, if
    any comes near), what was dropped and why, and how to name a topic instead."""
    tried: list[str] = []
    for mention in result.tried[:6]:
        close = [m for m in kg.search(mention, fuzzy=True, limit=1) if m.name]
        hint = f" (closest: {close[0].name!r}, {close[0].score:.2f})" if close else ""
        tried.append(f"{mention!r}{hint}")
    looked = ("tried " + ", ".join(tried)) if tried else "it has no capitalised name or [bracketed] mention to look up"
    dropped = "; ".join(f"{c.name} [{c.id}]: {c.reason}" for c in result.runners_up[:5])
    return ("no entity of the KG is mentioned in the question: " + looked + " (every phrase is searched by exact "
            f"name and alias, name-like ones also by close spelling, at least {FUZZY_MIN_SCORE})"
            + (f"; dropped: {dropped}" if dropped else "")
            + ". Name a topic entity (`--topic NAME`, or `topics` in a request), or put its name in [brackets]")


def resolve_entity(kg: KnowledgeGraph, text: str) -> str:
    """An entity id as given, or the entity whose name is exactly ``text``; a clear error (with close names) otherwise."""
    from kgqa.errors import KGError

    if kg.has_entity(text):
        return text
    matches = kg.search(text, fuzzy=False, limit=5)
    if matches:
        return matches[0].id
    close = kg.search(text, fuzzy=True, limit=3)
    hint = f"; did you mean {', '.join(repr(m.name) for m in close)}?" if close else ""
    raise KGError(f"entity {text!r} is neither an id nor an exact name in this KG{hint}")


def question_text(question: str) -> str:
    """The question as methods read it: the [brackets] that mark a topic mention for linking removed, their words
    kept ("Who directed [Inception]?" -> "Who directed Inception?"), as the MetaQA loader does; a prompt or a
    trained scorer never sees the marks."""
    return unmark_mentions(question)


def question_topics(kg: KnowledgeGraph, question: str, given: Sequence[str] | None = None
                    ) -> tuple[list[Any], LinkResult | None]:
    """The topic entities of a question: those ``given`` (ids or exact names), else those linked in the question, with
    the linking result (None when given). Shared by ``kgqa ask`` and ``kgqa serve``; a KGError when nothing links."""
    from kgqa.core import TopicEntity
    from kgqa.errors import KGError

    if given:
        ids = [resolve_entity(kg, g) for g in given]
        names = kg.names(ids)
        return [TopicEntity(id=i, name=names.get(i) or i) for i in ids], None
    result = link(kg, question)
    if not result.linked:
        raise KGError(no_link_message(kg, result))
    return [TopicEntity(id=m.id, name=m.name) for m in result.entities], result
