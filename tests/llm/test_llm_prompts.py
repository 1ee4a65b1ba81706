"""PromptBook: TOML prompts, one safe renderer."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgqa.errors import ConfigError
from kgqa.llm.prompts import PromptBook, PromptError

HERE = Path(__file__).resolve().parent


def test_renders_system_and_user_with_literal_braces() -> None:
    book = PromptBook.from_file(HERE / "prompts.toml")
    assert book.names() == ["answer", "prune"]
    assert book.fields("prune") == {"question", "relations", "k"}
    messages = book.messages("prune", question="Who directed Inception?", relations="film.film.directed_by", k=3)
    assert messages[0] == {"role": "system",
                           "content": "You choose knowledge-graph relations that help answer a question."}
    assert messages[1]["role"] == "user"
    assert messages[1]["content"] == ("Question: Who directed Inception?\nCandidate relations:\nfilm.film.directed_by\n"
                                      'Reply as JSON like {"relations": ["..."]} with at most 3 items.')
    assert [m["role"] for m in book.messages("answer", facts="f", question="q")] == ["user"]


def test_values_are_inserted_verbatim_never_re_rendered() -> None:
    book = PromptBook.from_file(HERE / "prompts.toml")
    content = book.messages("answer", facts="{question} {__class__}", question="x")[0]["content"]
    assert content == "Facts: {question} {__class__}\nQuestion: x\nAnswer:"


def test_missing_variable_names_it() -> None:
    book = PromptBook.from_file(HERE / "prompts.toml")
    with pytest.raises(PromptError, match=r"prompt 'prune' .* needs \['k', 'relations'\]; given \['question'\]"):
        book.messages("prune", question="q")
    with pytest.raises(PromptError, match=r"no prompt named 'prnue' .* available: \['answer', 'prune'\]"):
        book.messages("prnue")
    assert "prune" in book and "nope" not in book


@pytest.mark.parametrize(("template", "message"), [
    ("{question.__class__}", "not a plain name"),
    ("{items[0]}", "not a plain name"),
    ("{0}", "not a plain name"),
    ("{x!r}", "not a plain name"),
    ("{x:>10}", "not a plain name"),
    ("{}", "not a plain name"),
    ("a } b", "unbalanced"),
    ("a { b", "unbalanced"),
])
def test_templates_with_code_or_bad_braces_are_refused_at_load(template: str, message: str) -> None:
    text = f"[p]\nuser = '''{template}'''\n"
    with pytest.raises(PromptError, match=message):
        PromptBook.from_string(text, source="test.toml")


@pytest.mark.parametrize(("text", "message"), [
    ("[p]\nsystem = 's'\n", "needs a 'user' template"),
    ("[p]\nuser = 'u'\nassistant = 'a'\n", "unknown key"),
    ("[p]\nuser = 3\n", "must be a string"),
    ("p = 'x'\n", "must be a table"),
    ("[p\nuser = 'u'", "not valid TOML"),
])
def test_malformed_prompt_files(text: str, message: str) -> None:
    with pytest.raises(PromptError, match=message):
        PromptBook.from_string(text)


def test_for_package_reads_prompts_beside_init(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "kgqa_prompt_test_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "prompts.toml").write_text((HERE / "prompts.toml").read_text())
    monkeypatch.syspath_prepend(str(tmp_path))
    book = PromptBook.for_package("kgqa_prompt_test_pkg")
    assert book.source == str(pkg / "prompts.toml")
    assert book.messages("answer", facts="a", question="b")[0]["content"].startswith("Facts: a")
    with pytest.raises(ConfigError, match="cannot find the package 'no_such_pkg_kgqa'"):
        PromptBook.for_package("no_such_pkg_kgqa")
    (tmp_path / "kgqa_noprompts").mkdir()
    (tmp_path / "kgqa_noprompts" / "__init__.py").write_text("")
    with pytest.raises(PromptError, match="does not exist"):
        PromptBook.for_package("kgqa_noprompts")


def test_worked_examples_are_kept_with_the_prompt_and_shown_after_the_system_text() -> None:
    book = PromptBook.from_string(
        "[p]\nsystem = 'Pick relations for {question}.'\nuser = 'Question: {question}'\n"
        'examples = ["""Question: Who directed Heat?\n{"relations": ["directed_by"]}""", "Question: two"]\n'
        "[q]\nuser = 'Only {x}'\nexamples = ['E1']\n")
    assert book.examples("p") == ('Question: Who directed Heat?\n{"relations": ["directed_by"]}', "Question: two")
    system, user = book.messages("p", question="Q")
    # literal braces in an example stay as written (examples are not templates); one heading, blank lines between
    assert system["content"] == ('Pick relations for Q.\n\nExamples:\n\nQuestion: Who directed Heat?\n'
                                 '{"relations": ["directed_by"]}\n\nQuestion: two')
    assert user["content"] == "Question: Q"
    assert book.messages("q", x="1") == [{"role": "user", "content": "Only 1\n\nExamples:\n\nE1"}]
    assert book.examples("q") == ("E1",)


@pytest.mark.parametrize("examples", ["'one'", "[1]", "['']"])
def test_examples_must_be_a_list_of_texts(examples: str) -> None:
    with pytest.raises(PromptError, match="'examples' must be a list of non-empty strings"):
        PromptBook.from_string(f"[p]\nuser = 'u'\nexamples = {examples}\n", source="test.toml")
