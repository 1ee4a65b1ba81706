"""Synonym copies: training questions with their words swapped for WordNet synonyms, a paraphraser that runs offline.

The composed wordings (:mod:`kgqa.methods.fog.wordings`) vary a question's structure with a hand-written phrase
table; the words stay the table author's. A scorer that met "written" and "films" only misreads "penned" and "pictures"
(docs/fog.md: most misses left on the reworded sets are such words). A lexical database supplies the other words
without anyone choosing them: :class:`WordNet` reads the noun and verb synsets of a WordNet 3.x database directory
(``index.*`` is not needed: ``data.noun``, ``data.verb`` and the ``*.exc`` exception lists), and
:func:`swap_synonyms` replaces each word of a question outside its topic mentions, with a given probability, by a
lemma of one of its synsets, inflected as the word was ("written" -> "penned", "movies" -> "pictures").

Senses are not disambiguated: "directed" may become "aimed" as well as "conducted". A sense that never occurs in a KG
question is noise the scorer learns to ignore; the sense that does is the paraphrase it needs. The database is not
shipped: Debian's ``wordnet-base`` installs it at ``/usr/share/wordnet`` (the config key ``wordnet``, ``KGQA_WORDNET``, names
another directory).
WordNet 3.0 is Princeton's, under its own permissive licence.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kgqa.errors import ConfigError

#: where ``--synonyms wordnet`` looks when KGQA_WORDNET is unset (Debian's wordnet-base)
DEFAULT_WORDNET_DIRS = ("/usr/share/wordnet", "/usr/share/wordnet/dict", "/usr/local/share/wordnet")
_POS = {"noun": "n", "verb": "v"}
_STOPWORD_TEXT = """
a an the of in on by to for with from at as and or but not no than then that this these those there here it its
what which who whom whose when where why how is are was were be been being am do does did done has have had having
can could will would shall should may might must i me my we our you your he him his she her they them their also
same other another any some all each every both either one ones much many more most such own very just only
"""
#: function words never swapped: their WordNet senses ("do" -> "perform", "who" -> "World Health Organization") only
#: blur what the question asks
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_WORD_RE = re.compile(r"[A-Za-z][A-Za-z'-]*")
# suffix rules of English inflection, as WordNet's own morphological processor applies them (detachment order matters)
_NOUN_SUFFIXES = (("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
                  ("men", "man"), ("ies", "y"))
_VERB_SUFFIXES = (("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"),
                  ("ing", ""))


@dataclass(frozen=True)
class Analysis:
    """One reading of a word: part of speech, lemma, and the inflection that made the word from the lemma."""

    pos: str  # "n" or "v"
    lemma: str
    form: str  # "base", "plural" (nouns), "third", "past", "gerund" (verbs)


class WordNet:
    """Noun and verb synsets of a WordNet database, with its exception lists (see the module docstring)."""

    def __init__(self, synsets: dict[tuple[str, str], list[tuple[str, ...]]],
                 exceptions: dict[tuple[str, str], tuple[str, ...]], source: str = "") -> None:
        self.synsets = synsets  # (pos, lemma) -> the synsets (as lemma tuples) the lemma belongs to
        self.exceptions = exceptions  # (pos, inflected form) -> lemmas
        self.irregular: dict[tuple[str, str], list[str]] = {}  # (pos, lemma) -> its irregular forms
        for (pos, inflected), lemmas in exceptions.items():
            for lemma in lemmas:
                self.irregular.setdefault((pos, lemma), []).append(inflected)
        self.source = source

    @classmethod
    def load(cls, spec: str = "wordnet") -> WordNet:
        """``wordnet`` (the ``wordnet`` config key / KGQA_WORDNET, else :data:`DEFAULT_WORDNET_DIRS`) or a database
        directory by path."""
        from kgqa import config

        if spec == "wordnet":
            configured = config.get("wordnet")  # KGQA_WORDNET or the config file's wordnet key
            candidates = ([Path(str(configured)).expanduser()] if configured
                          else [Path(d) for d in DEFAULT_WORDNET_DIRS])
        else:
            candidates = [Path(spec).expanduser()]
        for directory in candidates:
            if (directory / "data.noun").is_file() and (directory / "data.verb").is_file():
                return cls.read(directory)
        where = ", ".join(str(c) for c in candidates)
        raise ConfigError(f"synonyms {spec!r}: no WordNet database (data.noun and data.verb) in {where}; install "
                          f"Debian's wordnet-base, or give the directory of a WordNet 3.x database "
                          f"(or set KGQA_WORDNET)")

    @classmethod
    def read(cls, directory: Path) -> WordNet:
        synsets: dict[tuple[str, str], list[tuple[str, ...]]] = {}
        exceptions: dict[tuple[str, str], tuple[str, ...]] = {}
        for name, pos in _POS.items():
            try:
                lines = (directory / f"data.{name}").read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError as exc:
                raise ConfigError(f"WordNet {directory}: cannot read data.{name} ({exc.strerror})") from None
            for number, line in enumerate(lines, start=1):
                if not line or line.startswith(" "):  # the licence header lines start with two spaces
                    continue
                fields = line.split()
                try:
                    count = int(fields[3], 16)
                    words = tuple(_lemma_text(w) for w in fields[4:4 + 2 * count:2])
                except (IndexError, ValueError):
                    raise ConfigError(f"WordNet {directory}/data.{name} line {number}: not a synset line") from None
                for word in dict.fromkeys(words):
                    synsets.setdefault((pos, word), []).append(words)
            exc_path = directory / f"{name}.exc"
            if exc_path.is_file():
                for line in exc_path.read_text(encoding="utf-8", errors="replace").splitlines():
                    parts = line.split()
                    if len(parts) >= 2:
                        exceptions[(pos, _lemma_text(parts[0]))] = tuple(_lemma_text(p) for p in parts[1:])
        if not synsets:
            raise ConfigError(f"WordNet {directory}: data.noun and data.verb hold no synsets")
        return cls(synsets, exceptions, str(directory))

    def analyses(self, word: str) -> list[Analysis]:
        """Every reading of ``word`` (lower case) as a noun or verb form whose lemma is in the database."""
        found: dict[tuple[str, str], Analysis] = {}

        def add(pos: str, lemma: str, form: str) -> None:
            if (pos, lemma) in self.synsets and (pos, lemma) not in found:
                found[(pos, lemma)] = Analysis(pos, lemma, form)

        for pos in ("n", "v"):
            add(pos, word, "base")
            for lemma in self.exceptions.get((pos, word), ()):
                add(pos, lemma, _exception_form(pos, word))
            for suffix, ending in _NOUN_SUFFIXES if pos == "n" else _VERB_SUFFIXES:
                if word.endswith(suffix) and len(word) > len(suffix) + 1:
                    add(pos, word[: len(word) - len(suffix)] + ending, _suffix_form(pos, suffix))
        return list(found.values())

    def synonyms(self, analysis: Analysis) -> list[tuple[str, ...]]:
        """The synsets of an analysis's lemma, each without the lemma itself, empty ones left out."""
        out = []
        for synset in self.synsets.get((analysis.pos, analysis.lemma), ()):
            others = tuple(w for w in synset if w != analysis.lemma)
            if others:
                out.append(others)
        return out

    def inflect(self, lemma: str, pos: str, form: str) -> str:
        """``lemma`` in ``form`` (the head word of a phrase: a verb's first word, a noun's last)."""
        if form == "base":
            return lemma
        words = lemma.split(" ")
        head = 0 if pos == "v" else len(words) - 1
        words[head] = self._inflect_word(words[head], pos, form)
        return " ".join(words)

    def _inflect_word(self, word: str, pos: str, form: str) -> str:
        irregular = [f for f in self.irregular.get((pos, word), ()) if _exception_form(pos, f) == form]
        if irregular:  # "written" before "wrote": MetaQA's questions use the participle ("written by")
            return sorted(irregular, key=lambda f: (not f.endswith("en"), f))[0]
        if form in ("plural", "third"):
            if word.endswith(("s", "x", "z", "ch", "sh")):
                return word + "es"
            if len(word) > 1 and word.endswith("y") and word[-2] not in "aeiou":
                return word[:-1] + "ies"
            return word + "s"
        stem = word
        if _doubles(word):
            stem = word + word[-1]
        if form == "past":
            if word.endswith("e"):
                return word + "d"
            if len(word) > 1 and word.endswith("y") and word[-2] not in "aeiou":
                return word[:-1] + "ied"
            return stem + "ed"
        if form == "gerund":
            if word.endswith("e") and not word.endswith(("ee", "ye", "oe")):
                return word[:-1] + "ing"
            return stem + "ing"
        return word


def swap_synonyms(text: str, mentions: Sequence[str], share: float, wordnet: WordNet, rng: random.Random) -> str:
    """``text`` with each word outside ``mentions`` and :data:`STOPWORDS` that has a synonym replaced, with
    probability ``share``, by a lemma of one of its synsets (reading, synset and lemma drawn uniformly) in the word's
    inflection; a capital first letter is kept."""
    protected: list[tuple[int, int]] = []
    for mention in mentions:
        start = text.find(mention) if mention else -1
        while start >= 0:
            protected.append((start, start + len(mention)))
            start = text.find(mention, start + len(mention))
    pieces: list[str] = []
    last = 0
    for match in _WORD_RE.finditer(text):
        word = match.group()
        lower = word.lower()
        if (lower in STOPWORDS or len(lower) < 3 or "'" in lower
                or any(lo < match.end() and match.start() < hi for lo, hi in protected)):
            continue
        readings = [(a, s) for a in wordnet.analyses(lower) if (s := wordnet.synonyms(a))]
        if not readings or rng.random() >= share:
            continue
        analysis, synsets = rng.choice(readings)
        replacement = wordnet.inflect(rng.choice(rng.choice(synsets)), analysis.pos, analysis.form)
        if word[0].isupper():
            replacement = replacement[0].upper() + replacement[1:]
        pieces.append(text[last:match.start()])
        pieces.append(replacement)
        last = match.end()
    pieces.append(text[last:])
    return "".join(pieces)


def _lemma_text(word: str) -> str:
    """A database word as text: underscores are spaces, adjective markers ("(a)") go, lower case."""
    return re.sub(r"\([a-z]+\)$", "", word).replace("_", " ").lower()


def _exception_form(pos: str, inflected: str) -> str:
    if pos == "n":
        return "plural"
    if inflected.endswith("ing"):
        return "gerund"
    if inflected.endswith("s") and not inflected.endswith("ss"):
        return "third"
    return "past"


def _suffix_form(pos: str, suffix: str) -> str:
    if pos == "n":
        return "plural"
    return {"s": "third", "ies": "third", "es": "third", "ed": "past", "ing": "gerund"}[suffix]


def _doubles(word: str) -> bool:
    """Whether a short verb doubles its last consonant before -ed/-ing ("pen" -> "penned", "star" -> "starred")."""
    return (len(word) <= 4 and len(word) >= 3 and word[-1] in "bdgklmnprt" and word[-2] in "aeiou"
            and word[-3] not in "aeiou")
