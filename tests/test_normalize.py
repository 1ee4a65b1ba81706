"""The mention marks of a question are removed in one place for the loader, linking and the answer types."""

from __future__ import annotations

from kgqa.normalize import MENTION_MARKS, unmark_mentions


def test_unmark_mentions_keeps_the_words_of_every_marked_mention() -> None:
    assert unmark_mentions("Who directed [Inception]?") == "Who directed Inception?"
    assert unmark_mentions("films with [Tom Hanks] and [Meg Ryan]") == "films with Tom Hanks and Meg Ryan"
    assert MENTION_MARKS.findall("films with [Tom Hanks] and [Meg Ryan]") == ["Tom Hanks", "Meg Ryan"]


def test_unmark_mentions_leaves_unpaired_brackets_and_plain_text_alone() -> None:
    assert unmark_mentions("Who directed Inception?") == "Who directed Inception?"
    assert unmark_mentions("a [b [c] d") == "a [b c d"
    assert unmark_mentions("[]") == "[]"


def test_a_question_and_its_template_share_a_wording_key() -> None:
    from kgqa.normalize import wording_key, wording_words

    assert wording_key("Who directed [Heat]?") == wording_key("who  directed {topic}") == "who directed {topic}"
    assert wording_words("What's [Alien]'s genre?") == ["what's", "{topic}'s", "genre"]
