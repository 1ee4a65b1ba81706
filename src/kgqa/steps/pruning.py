"""Relation pruning: keep the k candidate hops most promising for the question, best first.

One choice object, :class:`PruningConfig`, names the scorer for every method that prunes relations:

* ``llm``: the LLM selects the top k (the CoR/CCoR papers' step: semantic alignment with the question, consistency with
  the chain so far, goal proximity). It is asked for the k best relation *names* (``{"relations": [...]}``), so the
  reply is a few dozen tokens however long the list; a name that is not on the list is ignored. Its prompt belongs to
  the calling method (a :class:`~kgqa.llm.prompts.Signature` pairing the method's prompt with :class:`RelationChoice`),
  so each method keeps its own wording.
* ``embedding``: cosine similarity between the question and the relation's words (no LLM call). Only semantic alignment
  is modelled; consistency and goal proximity are left to the reasoning step.
* ``hybrid``: the ``llm`` scorer whose list is always ordered, and cut to ``prefilter``, by the embedder (so it needs
  one).
* ``auto``: ``embedding`` for an offline local model (the tiny CPU models rank relations worse than MiniLM cosine
  does, docs/llm.md), ``llm`` otherwise; resolved by :func:`resolve_pruner` from the model spec.

Long lists: a prompt lists at most ``prefilter`` candidates (Freebase topics have hundreds of relations). Above that
cap the candidates most similar to the question are shown, by the embedder when there is one and otherwise by the word
overlap of :func:`~kgqa.kg.schema.relation_words` with the question (:func:`lexical_scores`); never by the KG's
(alphabetical) order. The trace event says how many were offered and how many shown.

A token budget instead of the cap (``budget``, ToG and PoG, whose code shows the model every relation): the whole list
is shown while its listing fits ``budget`` tokens (estimated by :func:`listing_tokens`); above it the embedder ranks the
list and the longest best-first prefix that fits is shown. Word overlap never cuts such a list: without an embedder the
whole list is shown (the trace event says ``over_budget``). :meth:`RelationPruner.shown` is what a prompt lists.

Failures: when the LLM's reply cannot be read (after the one re-ask of :func:`~kgqa.steps.reply.ask_reply`) or names
no listed relation, :meth:`RelationPruner.prune` returns a failed :class:`~kgqa.steps.reply.StepResult` whose value is
the top k of the similarity scorer (embedding, else lexical) and whose ``replaced_by`` names it; the trace event holds
the failure and the replacement too (``replace_failed`` False, or no embedder under a ``budget``: the failed result
keeps no relation, as ToG's and PoG's code, where such an entity opens no branch). A reply naming fewer than k listed
relations is used as it is and topped up to k by the same similarity ranking (the event says how many were filled),
so the explorer keeps k branches to backtrack to (``fill`` False: used as it is).

Reply budget: ``max_tokens`` (default :func:`default_prune_tokens`: 16 tokens of JSON framing plus 24 per name, as
long Freebase names with ``(incoming)`` take about 20 tokens), so a small model that starts to ramble is stopped early.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import numpy as np
from pydantic import ConfigDict, Field

from kgqa.errors import ConfigError
from kgqa.kg.base import Chain, Direction, Hop
from kgqa.kg.schema import relation_words
from kgqa.llm.structured import Reply
from kgqa.llm.tokens import approx_tokens
from kgqa.steps.losses import note_entities, note_relations
from kgqa.steps.relations import describe_chain, describe_hop, verbalize_relation
from kgqa.steps.reply import StepResult

if TYPE_CHECKING:
    from kgqa.core import Trace
    from kgqa.llm.base import ChatModel
    from kgqa.llm.oracle import OracleAsk
    from kgqa.llm.prompts import Signature
    from kgqa.text.base import Embedder

PrunerKind = Literal["llm", "embedding", "hybrid"]
PrunerChoice = Literal["auto", "llm", "embedding", "hybrid"]
SimilarityScorer = Literal["embedding", "lexical"]

#: Most candidates one pruning prompt lists (the default of ``PruningConfig.prefilter``).
DEFAULT_PREFILTER = 30
#: Reply budget per relation name, and for the JSON around the names (see :func:`default_prune_tokens`).
TOKENS_PER_NAME = 24
TOKENS_FRAMING = 16


def default_prune_tokens(top_k: int) -> int:
    """The reply budget for a list of ``top_k`` relation names: 88 tokens for k = 3."""
    return TOKENS_FRAMING + TOKENS_PER_NAME * top_k


def resolve_pruner(choice: str, llm: str | None) -> PrunerKind:
    """The scorer ``choice`` stands for with the model spec (or model name) ``llm``: ``auto`` picks by the model."""
    from kgqa.llm import is_local_spec

    if choice == "auto":
        return "embedding" if is_local_spec(llm) else "llm"
    if choice not in ("llm", "embedding", "hybrid"):
        raise ConfigError(f"relation pruner {choice!r} is not one of auto, llm, embedding, hybrid")
    return choice  # type: ignore[return-value]


def pruner_needs_embedder(kind: str) -> bool:
    return kind in ("embedding", "hybrid")


@dataclass(frozen=True)
class PruningConfig:
    kind: PrunerKind = "llm"
    top_k: int = 3
    #: llm and hybrid: the most candidates a prompt lists; a longer list is cut to the ones most similar to the
    #: question (embedding, else lexical). Hybrid always orders (and cuts) its list by the embedder.
    prefilter: int = DEFAULT_PREFILTER
    #: llm and hybrid: the reply budget in tokens; ``None``: :func:`default_prune_tokens` of ``top_k``.
    max_tokens: int | None = None
    #: llm and hybrid: top a reply naming fewer than ``top_k`` relations up from the similarity ranking (CCoR keeps k
    #: branches to backtrack to); False keeps just what the model named (VoG: "the relevant ones"; ToG, PoG).
    fill: bool = True
    #: llm and hybrid: the listing's token budget, replacing the ``prefilter`` count (None: the count). The whole list
    #: is shown while it fits; above it the embedder's ranking is cut to what fits. With a budget word overlap never
    #: stands in for the embedder: without one the whole list is shown, nothing tops a reply up and a failed reply
    #: keeps no relation. ToG and PoG, whose code lists every relation.
    budget: int | None = None
    #: llm and hybrid: replace a reply that cannot be read or names no listed relation by the similarity scorer's top
    #: k; False keeps no relation (ToG's and PoG's code: such an entity opens no branch).
    replace_failed: bool = True

    def __post_init__(self) -> None:
        if self.kind not in ("llm", "embedding", "hybrid"):
            raise ConfigError(f"relation pruner {self.kind!r} is not one of llm, embedding, hybrid")
        if self.top_k < 1 or self.prefilter < 1:
            raise ConfigError("relation pruning needs top_k >= 1 and prefilter >= 1")
        if self.budget is not None and self.budget < 1:
            raise ConfigError(f"relation pruning needs a listing budget >= 1 token, got {self.budget}")
        if self.prefilter < self.top_k:
            raise ConfigError(f"relation pruning lists prefilter={self.prefilter} candidates, fewer than "
                              f"top_k={self.top_k}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ConfigError(f"relation pruning needs max_tokens >= 1, got {self.max_tokens}")

    @property
    def reply_tokens(self) -> int:
        return self.max_tokens if self.max_tokens is not None else default_prune_tokens(self.top_k)


@dataclass(slots=True)
class ScoredHop:
    hop: Hop
    score: float


@dataclass(slots=True)
class Listing:
    """What an LLM scorer's prompt lists of the candidates (:meth:`RelationPruner.shown`)."""

    #: the hops listed, in the prompt's order
    hops: list[Hop]
    #: every candidate by similarity to the question, best first, when a scorer ranked them (else None)
    ranking: list[ScoredHop] | None = None
    #: the scorer that ordered (and cut) the list; None: the whole list in the KG's order
    cut_by: SimilarityScorer | None = None
    #: the whole list is shown although its listing is over the budget (no embedder to rank it)
    over_budget: bool = False


def listing_lines(hops: Sequence[Hop]) -> list[str]:
    """How a pruning prompt lists candidate hops: ``1. film.film.directed_by``, one a line."""
    return [f"{i}. {describe_hop(h)}" for i, h in enumerate(hops, start=1)]


def listing_tokens(hops: Sequence[Hop]) -> int:
    """Estimated tokens of the listing of ``hops`` (:func:`kgqa.llm.tokens.approx_tokens` per line, plus the line
    break): about 13 for a Freebase relation such as ``12. film.film.directed_by (incoming)``."""
    return sum(approx_tokens(line) + 1 for line in listing_lines(hops))


# The reply model's name, docstring and field description are rendered into the prompt (ask_json shows the model its
# JSON schema): changing them changes what every method using it asks.
class RelationChoice(Reply):
    """The chosen relations, best first."""

    # A model that writes a list number instead of a name is understood (see RelationPruner._match).
    model_config = ConfigDict(coerce_numbers_to_str=True)

    relations: list[str] = Field(description="names copied from the list, best first")


#: How a listed hop is marked when it is walked backwards (:func:`kgqa.steps.relations.describe_hop`).
_INCOMING = " (incoming)"


def choose_gold_relations(ask: OracleAsk) -> dict[str, Any]:
    """The oracle rule of a relation choice: the listed hops of a gold chain, then those of a gold constraint
    (relation and direction), each in the list's order, at most ``top_k``; none when the list holds none."""
    chain_hops = {(r, back) for chain in ask.gold.chains for r, back in chain}
    constraint_hops = {hop for c in ask.gold.constraints for hop in c[1]} - chain_hops
    listed = [text for _, text in ask.numbered("candidates")]

    def hop(text: str) -> tuple[str, bool]:
        return text.removesuffix(_INCOMING), text.endswith(_INCOMING)

    right = [text for text in listed if hop(text) in chain_hops] + [text for text in listed
                                                                    if hop(text) in constraint_hops]
    top_k = int(str(ask.inputs.get("top_k") or len(listed)))
    return {"relations": ask.choose(listed, right, most=top_k)}


def cosine_scores(embedder: Embedder, query: str, texts: Sequence[str]) -> list[float]:
    """Cosine similarity of ``query`` with each text, mapped from [-1, 1] to [0, 1] so every scorer speaks one scale."""
    vectors = embedder.embed([query, *texts])
    sims = np.asarray(vectors[1:] @ vectors[0], dtype=float)
    return [float((x + 1.0) / 2.0) for x in sims]


_WORD_RE = re.compile(r"[^\W_]+")
_STOPWORDS = frozenset({
    "a", "about", "an", "and", "are", "as", "at", "be", "been", "by", "did", "do", "does", "for", "from", "had", "has",
    "have", "how", "in", "is", "it", "its", "of", "on", "or", "s", "that", "the", "their", "this", "to", "was", "were",
    "what", "when", "where", "which", "who", "whom", "whose", "why", "with"
})


def _content_words(text: str) -> list[str]:
    return [w for w in _WORD_RE.findall(text.casefold()) if w not in _STOPWORDS]


def _words_match(a: str, b: str) -> bool:
    """Same word, or one a prefix of the other (4+ letters: film/films, star/starring), or a shared 5-letter stem
    (directed/director)."""
    if a == b:
        return True
    if len(a) >= 4 and len(b) >= 4 and (a.startswith(b) or b.startswith(a)):
        return True
    return len(a) >= 5 and len(b) >= 5 and a[:5] == b[:5]


def lexical_scores(query: str, relations: Sequence[str]) -> list[float]:
    """Word overlap of each relation with ``query``, in [0, 1]: the share of the relation's content words (its local
    name, :func:`relation_words` with ``last=2``; the domain counts half) that match a word of the query.

    The scorer of last resort, when there is no embedder: crude, but it reads the question, which the KG's order does
    not.
    """
    query_words = set(_content_words(query))

    def matched(word: str) -> bool:
        return any(_words_match(word, q) for q in query_words)

    scores = []
    for relation in relations:
        local = _content_words(relation_words(relation, last=2))
        domain = [w for w in _content_words(relation_words(relation)) if w not in local]
        weight = len(local) + 0.5 * len(domain)
        hit = sum(1.0 for w in local if matched(w)) + sum(0.5 for w in domain if matched(w))
        scores.append(hit / weight if weight else 0.0)
    return scores


class RelationPruner:
    """Keeps the top k candidates, best first. Ties keep the KG's order, so runs repeat."""

    def __init__(self, config: PruningConfig, *, llm: ChatModel | None = None, embedder: Embedder | None = None,
                 signature: Signature | None = None, step: str = "prune", temperature: float | None = None,
                 seed: int | None = None) -> None:
        if config.kind in ("llm", "hybrid") and (llm is None or signature is None):
            raise ConfigError(f"relation pruner {config.kind!r} needs a chat model and the method's pruning prompt")
        if config.kind in ("embedding", "hybrid") and embedder is None:
            raise ConfigError(f"relation pruner {config.kind!r} needs an embedder (e.g. --embedder minilm)")
        self.config = config
        self.llm = llm
        self.embedder = embedder
        #: the calling method's pruning prompt with :class:`RelationChoice` as its reply (its step names the trace
        #: event; without one, ``step`` does)
        self.signature = signature
        self.step = signature.step if signature is not None else step
        #: Sampling of the LLM scorer (None: the backend's default, temperature 0); ToG explores at 0.4, seeded.
        self.temperature = temperature
        self.seed = seed

    @property
    def max_tokens(self) -> int:
        """The reply budget of the LLM scorer (``config.max_tokens`` or the default for ``top_k``)."""
        return self.config.reply_tokens

    @property
    def similarity(self) -> SimilarityScorer:
        """The scorer that prefilters long lists and replaces an unreadable LLM reply: embedding when there is an
        embedder, else lexical."""
        return "embedding" if self.embedder is not None else "lexical"

    @property
    def ranks(self) -> bool:
        """Whether a similarity ranking may stand in for the model (fill, replacement): always by count, only with
        an embedder under a ``budget`` (word overlap never does there)."""
        return self.embedder is not None or self.config.budget is None

    def prune(self, question: str, topic_names: Sequence[str], chain: Chain, candidates: Sequence[Hop], *,
              trace: Trace | None = None, at: str | Collection[str] | None = None, depth: int | None = None,
              from_topic: Chain | None = None, **prompt_vars: str) -> StepResult[list[ScoredHop]]:
        """The top-k candidates, best first. A failed result (unreadable LLM reply) carries the similarity scorer's
        top k and names that scorer in ``replaced_by``.

        ``at``: the node (or nodes) the candidates leave from, when known (ToG, PoG, VoG); loss attribution
        (:mod:`kgqa.steps.losses`) then reads the candidates as hops from it, and otherwise as hops after ``chain``
        (or after ``from_topic``, the whole chain from the topic, when ``chain`` starts elsewhere: a constraint chain).
        """
        if not candidates:
            return StepResult.success([])
        pool = list(candidates)
        where = {"at": at, "chain": None if at is not None else (chain if from_topic is None else from_topic),
                 "depth": depth}
        event: dict[str, Any] = {"scorer": self.config.kind, "candidates": len(pool)}
        if self.config.kind == "embedding":
            result = StepResult.success(self._ranked(question, pool)[: self.config.top_k])
            shown = pool
        else:
            listing = self.shown(question, pool)
            shown, ranking = listing.hops, listing.ranking
            if self.config.budget is not None:
                event["budget"] = self.config.budget
            if listing.over_budget:
                event["over_budget"] = listing_tokens(pool)
            if listing.cut_by is not None:
                event["prefilter"] = listing.cut_by
                note_relations(f"{self.step}.prefilter", pool, shown, **where)
            result = self._llm_choice(question, topic_names, chain, pool, shown, ranking, prompt_vars, event)
        best = result.value or []
        note_relations(self.step, shown, [s.hop for s in best], **where)
        if trace is not None:
            event["kept"] = [{"relation": describe_hop(s.hop), "score": round(s.score, 4)} for s in best]
            if not result.ok:
                event["failure"] = result.failure
                event["fallback"] = result.replaced_by
            trace.add(self.step, **event)
        return result

    def shown(self, question: str, candidates: Sequence[Hop]) -> Listing:
        """What the LLM scorer's prompt lists of ``candidates``.

        By count (no ``budget``): the whole list up to ``prefilter`` candidates; above it (and always for ``hybrid``)
        the ``prefilter`` most similar to the question, by the embedder or else by word overlap. By ``budget``: the
        whole list while its listing fits the budget; above it (and always for ``hybrid``) the embedder's best-first
        prefix that fits, never fewer than ``top_k``; without an embedder the whole list, marked ``over_budget``.
        """
        pool = list(candidates)
        cfg = self.config
        if cfg.budget is None:
            if cfg.kind != "hybrid" and len(pool) <= cfg.prefilter:
                return Listing(pool)
            ranking = self._ranked(question, pool)
            return Listing([s.hop for s in ranking[: cfg.prefilter]], ranking, self.similarity)
        if cfg.kind != "hybrid" and listing_tokens(pool) <= cfg.budget:
            return Listing(pool)
        if self.embedder is None:  # word overlap never cuts a budgeted list (hybrid always has an embedder)
            return Listing(pool, over_budget=True)
        ranking = self._ranked(question, pool)
        used, fits = 0, 0
        for i, scored in enumerate(ranking, start=1):
            used += approx_tokens(f"{i}. {describe_hop(scored.hop)}") + 1
            if used > cfg.budget and i > cfg.top_k:
                break
            fits = i
        return Listing([s.hop for s in ranking[:fits]], ranking, "embedding")

    # -- scorers ---------------------------------------------------------------------------------------------------

    def _similarity_scores(self, question: str, hops: list[Hop]) -> list[float]:
        if self.embedder is not None:
            return cosine_scores(self.embedder, question, [verbalize_relation(h) for h in hops])
        return lexical_scores(question, [h.relation for h in hops])

    def _ranked(self, question: str, hops: list[Hop]) -> list[ScoredHop]:
        """``hops`` by similarity to the question, best first; ties in the given order."""
        scores = self._similarity_scores(question, hops)
        order = sorted(range(len(hops)), key=lambda i: (-scores[i], i))
        return [ScoredHop(hops[i], scores[i]) for i in order]

    def _llm_choice(self, question: str, topic_names: Sequence[str], chain: Chain, pool: list[Hop], shown: list[Hop],
                    ranking: list[ScoredHop] | None, prompt_vars: dict[str, str],
                    event: dict[str, Any]) -> StepResult[list[ScoredHop]]:
        """The LLM's choice among ``shown`` (``pool`` cut by the prefilter, whose ``ranking`` it is when it cut)."""
        from kgqa.steps.reply import ask_reply

        assert self.llm is not None and self.signature is not None
        k = self.config.top_k
        event["shown"] = len(shown)
        listing = "\n".join(listing_lines(shown))
        reply = ask_reply(self.llm, self.signature, max_tokens=self.max_tokens, temperature=self.temperature, seed=self.seed,
                          question=question, chain=describe_chain(topic_names, chain),
                          candidates=listing, top_k=str(k), **prompt_vars)
        picked: list[Hop] = []
        if reply.ok and reply.value is not None:
            picked, ignored = self._match(reply.value.relations, shown)
            if ignored:
                event["ignored"] = ignored[:10]
        if not picked:
            failure = reply.failure if not reply.ok else (
                f"the reply named none of the {len(shown)} listed relations: {reply.value.relations[:5]!r}"
                if reply.value is not None else "no reply")
            if not self.config.replace_failed or not self.ranks:
                if reply.ok:  # a readable reply that names no listed relation: the entity opens no branch
                    event["none_named"] = True
                    return StepResult.success([])
                return StepResult.failed(f"{failure}; no relation kept", [])
            ranking = ranking if ranking is not None else self._ranked(question, pool)
            scorer = self.similarity
            return StepResult.failed(f"{failure}; replaced by the {scorer} scorer", ranking[:k], replaced_by=scorer)
        kept = [ScoredHop(h, (k - i) / k) for i, h in enumerate(picked)]
        if len(picked) < k and self.config.fill and self.ranks:
            # Fewer names than asked: top up from the similarity ranking of the listed candidates, below the model's.
            ranking = ranking if ranking is not None else self._ranked(question, pool)
            listed = set(shown)
            fill = [s.hop for s in ranking if s.hop in listed and s.hop not in picked][: k - len(picked)]
            kept += [ScoredHop(h, (k - len(kept) - j) / k) for j, h in enumerate(fill)]
            if fill:
                event["filled"] = len(fill)
                event["filled_by"] = self.similarity
        return StepResult.success(kept)

    def _match(self, names: Sequence[str], shown: list[Hop]) -> tuple[list[Hop], list[str]]:
        """The listed hops ``names`` refer to, in the reply's order, at most k, no repeats; and the names ignored.

        A name is read as written in the list (``film.film.starring (incoming)``); a bare relation name stands for its
        outgoing hop when that is listed, else its incoming one; a list number (``3`` or ``"3. film..."``) for that line.
        """
        exact = {describe_hop(h): h for h in shown}
        folded = {name.casefold(): h for name, h in exact.items()}
        bare: dict[str, Hop] = {}
        for h in shown:
            if h.direction is Direction.OUT or h.relation.casefold() not in bare:
                bare[h.relation.casefold()] = h
        picked: list[Hop] = []
        ignored: list[str] = []
        for raw in names:
            text = str(raw).strip().strip("\"'`").strip()
            numbered = re.fullmatch(r"(\d+)(?:[.)]\s*(.*))?", text)
            if numbered and numbered.group(2):
                text = numbered.group(2).strip()
            hop = exact.get(text) or folded.get(text.casefold()) or bare.get(text.casefold())
            if hop is None and numbered and not numbered.group(2) and 1 <= int(numbered.group(1)) <= len(shown):
                hop = shown[int(numbered.group(1)) - 1]
            if hop is None:
                ignored.append(str(raw)[:80])
            elif hop not in picked:
                picked.append(hop)
            if len(picked) == self.config.top_k:
                break
        return picked, ignored


T = TypeVar("T")


def drop_zero_scored(step: str, items: Sequence[T], *, score: Callable[[T], float], node: Callable[[T], str],
                     depth: int | None = None) -> list[T]:
    """``items`` without those scored zero, in their order: ToG's and PoG's code prune a candidate entity its scores
    put at zero even when there is room for it. The loss log notes the cut as ``step`` (``tog.zero``, ``pog.zero``),
    the candidates read as nodes by ``node``, ``depth`` hops from the topic."""
    kept = [item for item in items if score(item) > 0]
    note_entities(step, [node(item) for item in items], [node(item) for item in kept], depth=depth)
    return kept


def similarity_order(embedder: Embedder | None, query: str, texts: Sequence[str]) -> tuple[list[int], list[float]]:
    """Indices of ``texts`` most similar to ``query`` first (ties in the given order), and the scores: cosine by the
    embedder, else word overlap (:func:`lexical_scores`). The prefilter of long candidate lists (PoG, VoG)."""
    scores = cosine_scores(embedder, query, texts) if embedder is not None else lexical_scores(query, texts)
    return sorted(range(len(texts)), key=lambda i: (-scores[i], i)), scores


def adaptive_width(similarities: Sequence[float], *, low: int = 3, high: int = 10, temperature: float = 0.1) -> int:
    """How many of ``similarities``' candidates an entropy-adaptive prefilter keeps (VoG): between ``low`` and ``high``,
    more when the similarity distribution is flat (the scorer cannot tell them apart), fewer when it is peaked.

    The similarities are turned into a distribution by a softmax at ``temperature``; its entropy, divided by the
    largest possible (``log n``), sets the width linearly between ``low`` and ``high``; never more than ``n``.
    """
    n = len(similarities)
    if n <= low:
        return n
    if low < 1 or high < low or temperature <= 0:
        raise ConfigError(f"adaptive_width needs 1 <= low <= high and temperature > 0, got {low}, {high}, {temperature}")
    logits = np.asarray(similarities, dtype=float) / temperature
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    entropy = float(-(probs * np.log(np.clip(probs, 1e-12, None))).sum() / np.log(n))
    return min(n, low + round((high - low) * min(max(entropy, 0.0), 1.0)))
