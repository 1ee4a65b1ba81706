"""The wording of synthetic questions (:mod:`kgqa.datasets.synthetic`): a relation chain from a topic as an English
question made from the relations' own words (:func:`kgqa.kg.schema.relation_words`), in a seeded choice of forms.

Each entity hop is a phrase: an outgoing hop "the genre of X", "X's genre", "what X is directed by", "the imdb rating
X has"; an incoming one "the ones directed by X", "those whose genre is X", "the things with genre X", "anything for
which X is the genre" (a dotted relation's type segment names the ones: "the film directed by X"). A CVT hop's
relations read as one ("starring actor"), or by the far one alone ("actor"). Phrases nest from the topic outwards
("the genre of the ones directed by the director of Heat"), then a frame makes the question: what/which/who questions
and requests ("Name ...", "List ..."); a one-hop chain is also asked directly ("What is Heat directed by?", "Which
one has genre Drama?"). The only word lists are English function words (auxiliaries, prepositions) and the frames;
nothing is read from a dataset.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from kgqa.kg.base import Chain, Direction, Hop
from kgqa.kg.schema import relation_words

__all__ = ["Unit", "hop_units", "word_question"]

#: leading words of a relation label that are not part of its noun ("has genre" -> "genre", "in language" ->
#: "language"): English auxiliaries and prepositions, not a list of any KG's relations
_LEAD_WORDS = frozenset({"has", "have", "had", "is", "was", "are", "in", "of", "on", "at", "for", "to", "from", "with"})
#: a label ending in one of these reads as a passive or prepositional predicate ("directed by", "born in")
_PREPOSITIONS = frozenset({"by", "in", "of", "on", "at", "for", "from", "to", "with", "as", "into"})
_THINGS = ("the ones", "those", "the things", "the entities", "anything", "the items")
#: generic English nouns (no domain's words) that stand for the unknown type of a hop's answers ("the items directed
#: by X"), so the scorer learns that the noun there may be any word, as a question's "movies" or "players" is
_NOUNS = ("people", "persons", "places", "works", "items", "objects", "events", "titles", "records", "entries",
          "subjects", "members", "cases", "instances", "examples", "results", "elements", "products", "names", "pieces",
          "groups", "organizations", "individuals", "things", "entities", "topics", "units", "documents", "releases",
          "creations", "values", "terms", "categories", "kinds", "sorts", "types", "resources", "figures")
_WH = ("what", "which", "who")
#: the frames of a nested phrase: questions (wh-words chosen at random, as no type is known) and requests
_QUESTIONS = ("what is {np}", "what are {np}", "which is {np}", "which are {np}", "who is {np}", "who are {np}",
              "do you know {np}")
_AFTER = ("{np} is what", "{np} are who", "{np} are what", "{np} is who")
_REQUESTS = ("name {np}", "list {np}", "tell me {np}", "give me {np}", "find {np}", "show me {np}", "{np}",
             "i want to know {np}", "can you tell me {np}")


@dataclass(frozen=True)
class Unit:
    """One entity hop: a relation, or the two (or more) relations through a CVT, with the words that name it."""

    hops: tuple[Hop, ...]

    @property
    def incoming(self) -> bool:
        return all(h.direction is Direction.IN for h in self.hops)

    def relations(self) -> list[str]:
        """The relations in the order they read from the subject's side (reversed for an incoming hop)."""
        rels = [h.relation for h in self.hops]
        return rels[::-1] if self.incoming else rels

    def labels(self) -> list[str]:
        """The ways to name this hop: the local names, or the last two segments, of its relations."""
        rels = self.relations()
        if len(rels) == 1:
            options = [relation_words(rels[0], last=1), relation_words(rels[0], last=2)]
        else:  # a CVT hop: both local names ("starring actor"), or the far one alone ("actor")
            options = [" ".join(relation_words(r, last=1) for r in rels), relation_words(rels[-1], last=1)]
        return list(dict.fromkeys(o for o in options if o))

    def subject_type(self) -> str | None:
        """The type a dotted relation's middle segment names (``film.film.directed_by`` -> "film"): the type of the
        hop's subject, so of an incoming hop's answers."""
        parts = [p for p in self.relations()[0].split(".") if p]
        return relation_words(parts[-2]) if len(parts) >= 3 else None


def hop_units(chain: Chain, cvts: Sequence[bool]) -> list[Unit]:
    """The chain cut into entity hops: ``cvts[i]`` says the node after hop i is a CVT (passed through)."""
    units: list[Unit] = []
    pending: list[Hop] = []
    for hop, through in zip(chain, cvts, strict=True):
        pending.append(hop)
        if not through:
            units.append(Unit(tuple(pending)))
            pending = []
    if pending:
        units.append(Unit(tuple(pending)))
    return units


def _noun(label: str) -> str:
    words = label.split()
    while len(words) > 1 and words[0] in _LEAD_WORDS:
        words = words[1:]
    return " ".join(words)


def _prepositional(label: str) -> bool:
    return label.split()[-1] in _PREPOSITIONS


def _verb(label: str) -> str | None:
    """The active verb of a passive label ("directed by" -> "directed"), or None."""
    words = label.split()
    return " ".join(words[:-1]) if len(words) > 1 and words[-1] == "by" else None


def _owned(label: str) -> bool:
    return label.split()[0] in ("has", "have") and len(label.split()) > 1


def _outgoing(inner: str, label: str, is_name: bool, rng: random.Random) -> str:
    """A phrase for what ``inner`` reaches by an outgoing hop named ``label``."""
    noun, verb = _noun(label), _verb(label)
    forms = [f"the {noun} of {inner}", f"the {noun} of {inner}"]
    if is_name:
        forms.append(f"{inner}'s {noun}")
    if verb:
        forms += [f"the one that {verb} {inner}", f"whoever {verb} {inner}", f"what {inner} was {label}"]
    elif _prepositional(label):
        forms.append(f"what {inner} is {label}")
    elif label.split()[0] == "in":
        forms.append(f"the {noun} {inner} is in")
    else:
        forms.append(f"the {noun} that {inner} has" if _owned(label) else f"the {noun} {inner} has")
    return rng.choice(forms)


def _incoming(inner: str, label: str, thing: str, rng: random.Random) -> str:
    """A phrase for what reaches ``inner`` by a hop named ``label`` (an incoming hop)."""
    noun, verb = _noun(label), _verb(label)
    forms = [f"{thing} whose {noun} is {inner}", f"{thing} with {noun} {inner}", f"{thing} for which {inner} is the {noun}"]
    if verb:
        forms += [f"{thing} {inner} {verb}", f"{thing} that {inner} {verb}"]
    if _prepositional(label):
        forms += [f"{thing} {label} {inner}", f"{thing} that are {label} {inner}"]
    elif _owned(label):
        forms.append(f"{thing} that have {noun} {inner}")
    return rng.choice(forms)


def _single(topic: str, unit: Unit, label: str, rng: random.Random) -> str | None:
    """A direct question for the last hop from ``topic`` (a name, or the phrase of the hops before: "what is Heat
    directed by", "who directed the ones with genre Drama"), or None to use the nested forms."""
    if rng.random() < 0.5:
        return None
    noun, verb, wh = _noun(label), _verb(label), rng.choice(_WH)
    if unit.incoming:
        kind = unit.subject_type()
        which = f"which {kind}" if kind and rng.random() < 0.6 else rng.choice(("what", "which ones", "who"))
        forms = [f"{which} has {noun} {topic}", f"{which} has {topic} as {noun}"]
        if verb:
            forms += [f"what did {topic} {verb}", f"{which} did {topic} {verb}", f"what has {topic} {verb}"]
        if _prepositional(label):
            forms += [f"{which} is {label} {topic}", f"{wh} is {label} {topic}"]
    else:
        forms = [f"what {noun} does {topic} have", f"what is the {noun} of {topic}", f"{topic}: {noun}",
                 f"{topic} has which {noun}", f"the {noun} of {topic} is what"]
        if verb:
            forms = [f"{wh} {verb} {topic}", f"{topic} was {verb} by whom", f"{wh} is {topic} {label}"]
        elif _prepositional(label):
            forms += [f"{wh} is {topic} {label}", f"{topic} is {label} what"]
        elif label.split()[0] == "in":
            forms += [f"what {noun} is {topic} in", f"{topic} is in which {noun}"]
    return rng.choice(forms)


def _frame(np: str, inner: str | None, noun: str | None, bare: bool, rng: random.Random) -> str:
    """The whole question around the phrase ``np``; for a chain of several hops, sometimes the inner phrase first
    ("for the films of X, what is their genre"). A ``bare`` one-hop phrase of a named topic is never framed as the
    plainest wh-question ("what is the genre of Heat"), which a benchmark may hold word for word."""
    if inner is not None and noun is not None and rng.random() < 0.2:
        return rng.choice((f"{inner}: what is their {noun}", f"for {inner}, give the {noun}",
                           f"take {inner}; what {noun} do they have"))
    frames = _REQUESTS + _AFTER if bare else _QUESTIONS + _REQUESTS + _AFTER
    return rng.choice(frames).replace("{np}", np)


def _surface(text: str, topic: str, rng: random.Random) -> str:
    """Capitals and final punctuation as people vary them: a capital first letter (never changing the topic's
    name), then "?", "." or nothing."""
    if rng.random() < 0.5 and not text.startswith(topic):
        text = text[:1].upper() + text[1:]
    end = rng.random()
    return text + ("?" if end < 0.45 else "." if end < 0.6 else "")


def _thing(kind: str | None, rng: random.Random) -> str:
    """How the answers of an incoming hop are called: their type when the relation names it, else a pronoun-like
    phrase or a generic noun."""
    roll = rng.random()
    if kind and roll < 0.5:
        return f"the {kind}"
    return rng.choice(_THINGS) if roll < 0.75 else f"the {rng.choice(_NOUNS)}"


def _siblings(first: Unit, second: Unit) -> bool:
    """Whether ``second`` walks ``first`` back (the same relations, reversed): a hop to the topic's siblings."""
    return second.hops == tuple(h.reversed() for h in reversed(first.hops))


def _sibling_phrase(inner: str, first: Unit, label: str, is_name: bool, rng: random.Random) -> str:
    """One phrase for a hop and its way back, as English says it: the others with the same value ("the ones with the
    same genre as Heat"), or the other values of the same things ("the fellow starred actors of Al Pacino")."""
    noun, verb = _noun(label), _verb(label)
    if not first.incoming:  # inner -r-> value <-r- answers: what shares inner's value
        thing = _thing(first.subject_type(), rng)
        forms = [f"{thing} with the same {noun} as {inner}", f"{thing} sharing a {noun} with {inner}",
                 f"{thing} that have {noun} in common with {inner}", f"{thing} whose {noun} is also the {noun} of {inner}",
                 f"{thing} that share {inner}'s {noun}" if is_name else f"{thing} that share the {noun} of {inner}"]
        if verb:
            forms += [f"{thing} also {label} whoever {verb} {inner}", f"the other ones {label} the one that {verb} {inner}"]
        return rng.choice(forms)
    # answers -r-> x <-r- inner ... read from inner: inner is a value; the answers are the other values of its things
    forms = [f"the fellow {noun} of {inner}", f"the {noun} together with {inner}", f"the {noun} alongside {inner}",
             f"the other {noun} of {_thing(first.subject_type(), rng)} with {noun} {inner}"]
    if verb:
        forms += [f"whoever {verb} the same things as {inner}", f"the ones who {verb} something together with {inner}"]
    return rng.choice(forms)


def word_question(topic: str, chain: Chain, cvts: Sequence[bool], rng: random.Random) -> str:
    """The question of ``chain`` from the topic named ``topic`` (``cvts``: which nodes of the path are CVTs), in a
    seeded choice of forms (see the module docstring)."""
    units = hop_units(chain, cvts)
    labels = [rng.choice(u.labels()) for u in units]
    # a hop and its way back read as one phrase ("the ones with the same genre as X"), most of the time
    items: list[tuple[Unit, str, bool]] = []
    i = 0
    while i < len(units):
        pair = i + 1 < len(units) and _siblings(units[i], units[i + 1]) and rng.random() < 0.7
        items.append((units[i], labels[i], pair))
        i += 2 if pair else 1
    np, is_name = topic, True
    for unit, label, pair in items[:-1]:
        np = _phrase(np, unit, label, pair, is_name, rng)
        is_name = False
    last, label, pair = items[-1]
    # the last hop asked directly ("who directed <the rest>"), but not a named topic's one hop: its plainest
    # questions ("who directed Heat") are what a benchmark may hold word for word
    direct = None if pair or len(items) == 1 else _single(np, last, label, rng)
    if direct is not None:
        return _surface(direct, topic, rng)
    inner = np
    np = _phrase(np, last, label, pair, is_name, rng)
    noun = _noun(label) if len(items) > 1 and not last.incoming and not pair else None
    return _surface(_frame(np, inner if len(items) > 1 else None, noun, len(items) == 1, rng), topic, rng)


def _phrase(inner: str, unit: Unit, label: str, pair: bool, is_name: bool, rng: random.Random) -> str:
    if pair:
        return _sibling_phrase(inner, unit, label, is_name, rng)
    if unit.incoming:
        return _incoming(inner, label, _thing(unit.subject_type(), rng), rng)
    return _outgoing(inner, label, is_name, rng)
