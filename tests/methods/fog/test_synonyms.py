"""Synonym copies for FoG's training (kgqa.methods.fog.wordings.synonyms) on a small WordNet database written in
WordNet 3.0's own file format: readings of inflected words, inflection of the synonym, what is never swapped, seeds."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from kgqa.errors import ConfigError
from kgqa.methods.fog.training import TrainingQuestion, synonym_copies
from kgqa.methods.fog.wordings.synonyms import Analysis, WordNet, swap_synonyms

# data.* lines: offset, lexicographer file, part of speech, word count (hex), (word, lex id) pairs, pointer count, gloss
_NOUNS = """  1 This software and database is being provided to you, the LICENSEE, by Princeton University
03338821 06 n 03 movie 0 film 0 picture 0 000 | a form of entertainment
03338900 06 n 02 film 0 photographic_film 0 000 | photographic material
10794014 18 n 03 writer 0 author 0 scribe 0 000 | writes (books or stories or articles or the like)
10000001 18 n 01 director 0 000 | someone who controls resources and expenditures
10000002 18 n 02 director 0 film_maker 0 000 | a person who directs a film
"""
_VERBS = """  1 This software and database is being provided to you, the LICENSEE, by Princeton University
01698289 36 v 04 write 0 compose 1 pen 0 indite 0 000 | produce a literary work
02000001 41 v 02 star 0 feature 0 000 | feature as the star
02000002 41 v 01 direct 0 000 | be in charge of
"""
_VERB_EXCEPTIONS = "starred star\nwritten write\nwrote write\nstarring star\n"


@pytest.fixture(scope="module")
def wordnet_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("wordnet")
    (directory / "data.noun").write_text(_NOUNS, encoding="utf-8")
    (directory / "data.verb").write_text(_VERBS, encoding="utf-8")
    (directory / "verb.exc").write_text(_VERB_EXCEPTIONS, encoding="utf-8")
    return directory


@pytest.fixture(scope="module")
def wordnet(wordnet_dir: Path) -> WordNet:
    return WordNet.load(str(wordnet_dir))


def test_inflected_words_are_read_through_the_exception_lists_and_the_suffix_rules(wordnet: WordNet) -> None:
    assert wordnet.analyses("written") == [Analysis("v", "write", "past")]
    assert wordnet.analyses("starred") == [Analysis("v", "star", "past")]
    assert wordnet.analyses("films") == [Analysis("n", "film", "plural")]
    assert wordnet.analyses("movies") == [Analysis("n", "movie", "plural")]
    assert wordnet.analyses("writes") == [Analysis("v", "write", "third")]
    assert wordnet.analyses("zebra") == []
    # a word in two synsets has both, each without the word itself; multi-word lemmas read as text
    assert wordnet.synonyms(Analysis("n", "film", "base")) == [("movie", "picture"), ("photographic film",)]


def test_a_synonym_takes_the_inflection_of_the_word_it_replaces(wordnet: WordNet) -> None:
    assert wordnet.inflect("pen", "v", "past") == "penned"  # a short verb doubles its consonant
    assert wordnet.inflect("compose", "v", "past") == "composed"
    assert wordnet.inflect("write", "v", "past") == "written"  # the irregular participle, from verb.exc
    assert wordnet.inflect("picture", "n", "plural") == "pictures"
    assert wordnet.inflect("photographic film", "n", "plural") == "photographic films"  # a noun's head is its last word
    assert wordnet.inflect("film maker", "n", "plural") == "film makers"
    assert wordnet.inflect("star", "v", "gerund") == "starring"
    assert wordnet.inflect("scribe", "n", "base") == "scribe"


def test_swapping_keeps_mentions_function_words_and_capitals_and_is_seeded(wordnet: WordNet) -> None:
    text = "Which films written by [Film Writer] did the director star in"
    swapped = swap_synonyms(text, ["Film Writer"], 1.0, wordnet, random.Random(3))
    # the mention is never touched though "film" and "writer" have synonyms; function words stay; a synset with
    # no other lemma ("director" the manager) is no choice
    assert re.fullmatch(r"Which (movies|pictures|photographic films) (composed|penned|indited) by \[Film Writer\] "
                        r"did the film maker feature in", swapped), swapped
    assert swapped == swap_synonyms(text, ["Film Writer"], 1.0, wordnet, random.Random(3))
    assert swap_synonyms("Films written by [X]", ["X"], 1.0, wordnet, random.Random(0))[0].isupper()
    # share 0 swaps nothing; a word with no synonym stays whatever the share
    assert swap_synonyms(text, ["Film Writer"], 0.0, wordnet, random.Random(3)) == text
    assert swap_synonyms("zebra crossings", [], 1.0, wordnet, random.Random(0)) == "zebra crossings"


def test_synonym_copies_start_from_the_question_or_its_composed_copy(wordnet_dir: Path) -> None:
    questions = [TrainingQuestion(text=f"what films did [P{i}] direct", topics=(f"p{i}",), chain=(), answers=frozenset(),
                                  mentions=(f"P{i}",)) for i in range(40)]
    composed = [f"Name the scripts by P{i}." for i in range(40)]
    copies = synonym_copies(questions, composed, str(wordnet_dir), 1.0, random.Random(0))
    from_question = [c for c in copies if c.startswith("what")]
    from_composed = [c for c in copies if c.startswith("Name")]
    assert len(from_question) + len(from_composed) == 40 and from_question and from_composed
    # share 1: every word with a synonym is swapped ("photographic films" is film's other sense)
    assert all(" films" not in c or "photographic films" in c for c in from_question)
    assert all(f"P{i}" in c for i, c in enumerate(copies))
    assert copies == synonym_copies(questions, composed, str(wordnet_dir), 1.0, random.Random(0))
    assert all(c.startswith("what") for c in synonym_copies(questions, [], str(wordnet_dir), 1.0, random.Random(0)))


def test_a_missing_wordnet_database_is_a_clear_error_naming_where_it_looked(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=r"synonyms '.*nowhere'.*no WordNet database.*wordnet-base"):
        WordNet.load(str(tmp_path / "nowhere"))
    monkeypatch.setenv("KGQA_WORDNET", str(tmp_path))
    with pytest.raises(ConfigError, match=f"in {tmp_path};"):
        WordNet.load("wordnet")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "data.noun").write_text("03338821 06 n zz movie 0\n", encoding="utf-8")
    (broken / "data.verb").write_text("", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"data.noun line 1: not a synset line"):
        WordNet.load(str(broken))


def test_kgqa_wordnet_names_the_database_for_the_wordnet_spec(wordnet_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGQA_WORDNET", str(wordnet_dir))
    assert WordNet.load("wordnet").source == str(wordnet_dir)
