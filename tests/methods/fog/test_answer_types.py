"""FoG's answer-type prior (kgqa.steps.foresight.answer_types): types induced from a real embedded KG, a classifier
trained on real (hashing) sentence vectors, saved and loaded, and ``kgqa train answer-types`` / FoG's
``answer_types`` setting end to end on the demo KG."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from kgqa.cli import main
from kgqa.errors import ConfigError
from kgqa.kg.base import parse_chain
from kgqa.kg.embedded import EmbeddedKG, EmbeddedKGBuilder
from kgqa.methods.fog.training import TrainingQuestion
from kgqa.steps.foresight.answer_types import (
    FILE,
    AnswerTypes,
    focus_phrase,
    induce_types,
    junction_shares,
    mask_mentions,
    train_answer_types,
)
from kgqa.text import HashingEmbedder

FILMS = [f"F{i}" for i in range(8)]
PEOPLE = [f"P{i}" for i in range(8)]


@pytest.fixture(scope="module")
def kg(tmp_path_factory: pytest.TempPathFactory) -> EmbeddedKG:
    # every film has a director and a writer (the same people, shifted by one) and a year; every other one an actor
    builder = EmbeddedKGBuilder(schema="generic")
    for i, film in enumerate(FILMS):
        builder.add_triple(film, "directed_by", PEOPLE[i])
        builder.add_triple(film, "written_by", PEOPLE[(i + 1) % len(PEOPLE)])
        builder.add_triple(film, "release_year", f"{1990 + i}")
        if i % 2 == 0:
            builder.add_triple(film, "starred_actors", f"A{i}")
    return builder.build(tmp_path_factory.mktemp("types") / "kg")


def question(text: str, topic: str, chain: str, answers: set[str]) -> TrainingQuestion:
    return TrainingQuestion(text, (topic,), parse_chain(chain), frozenset(answers), source=text, mentions=(topic,))


def training_set() -> list[TrainingQuestion]:
    out = []
    for i, film in enumerate(FILMS):
        out.append(question(f"who directed [{film}]", film, "directed_by", {PEOPLE[i]}))
        out.append(question(f"when was [{film}] released", film, "release_year", {f"{1990 + i}"}))
    for i, person in enumerate(PEOPLE):
        out.append(question(f"which films did [{person}] direct", person, "^directed_by", {FILMS[i]}))
    return out


def test_mentions_are_masked_case_insensitively_longest_first() -> None:
    assert mask_mentions("who directed [The Dark Knight Rises]", ["The Dark Knight", "the dark knight rises"]) == \
        "who directed X"
    assert mask_mentions("what did [Nolan] direct", []) == "what did Nolan direct"
    assert mask_mentions("films of a.b", ["a.b"]) == "films of X"  # a mention is text, not a pattern


def test_the_focus_phrase_is_the_wh_word_and_its_words_or_an_imperative_opening() -> None:
    assert focus_phrase("Which writers penned movies featuring X?") == "Which writers penned movies"
    assert focus_phrase("X's cast also appeared in films directed by whom?") == "films directed by whom"
    assert focus_phrase("X has directed movies together with which other filmmakers?") == "which other filmmakers"
    assert focus_phrase("Name the writers of pictures helmed by whoever directed X.") == "Name the writers of pictures"
    assert focus_phrase("who") == "who" and focus_phrase("") == ""


def test_the_clause_rule_reads_a_request_or_a_question_word_where_a_clause_opens() -> None:
    clause = partial(focus_phrase, rule="clause")
    # a request verb after polite words, or opening a later clause; a relative "which" is not the question word
    assert clause("Kindly identify the films for which X is credited as a screenwriter.") == "identify the films for which"
    assert focus_phrase("Kindly identify the films for which X is credited as a screenwriter.") == "which X is credited"
    assert clause("For the movies X made, name the writers.") == "name the writers"
    assert clause("Could you please list the cast of X?") == "list the cast of X"
    # a wh-word opening a clause comes before one ending the question; one ending it still counts
    assert clause("What kind of movie is X, like comedy or what?") == "What kind of movie"
    assert clause("X's cast also appeared in films directed by whom?") == "films directed by whom"
    # neither: the first rule
    assert clause("X starred in which movies") == "which movies" == focus_phrase("X starred in which movies")
    assert clause("Did the guy who wrote X write anything else?") == "who wrote X write"
    assert clause("") == ""
    with pytest.raises(ConfigError, match="focus phrase rule 'last'"):
        focus_phrase("who", rule="last")


def test_a_model_reading_the_focus_phrase_reads_it_after_a_save_and_older_models_do_not(kg: EmbeddedKG,
                                                                                        tmp_path: Path) -> None:
    embedder = HashingEmbedder(64)
    # the same words for two types; where the wh-word stands says which
    questions = []
    for i, film in enumerate(FILMS):
        questions.append(question(f"which person directed films like [{film}]", film, "directed_by", {PEOPLE[i]}))
        questions.append(question(f"person directed which films like [{film}]", film,
                                  "directed_by,^directed_by", {FILMS[i]}))
    plain = train_answer_types(kg, questions, embedder, seed=2, epochs=200)
    focused = train_answer_types(kg, questions, embedder, seed=2, epochs=200, focus=True)
    assert plain.features == ("sentence",) and focused.features == ("sentence", "focus")
    assert focused.weight.shape[1] == 2 * plain.weight.shape[1]
    new = ["which person directed films like [Heat]", "person directed which films like [Heat]"]
    mentions = [["Heat"], ["Heat"]]
    plain_read = plain.probabilities(embedder, new, mentions)
    focused_read = focused.probabilities(embedder, new, mentions)
    assert not np.allclose(plain_read, focused_read)  # the focus phrase is read: the odds differ
    assert [focused.classes[i] for i in focused_read.argmax(axis=1)] == ["directed_by", "^directed_by"]

    focused.save(tmp_path / "focused")
    plain.save(tmp_path / "plain")
    assert json.loads((tmp_path / "focused" / FILE).read_text(encoding="utf-8"))["features"] == ["sentence", "focus"]
    assert "features" not in json.loads((tmp_path / "plain" / FILE).read_text(encoding="utf-8"))
    again = AnswerTypes.load(tmp_path / "focused")
    assert again.features == ("sentence", "focus")
    assert np.allclose(again.probabilities(embedder, new, mentions), focused_read, atol=1e-6)
    assert AnswerTypes.load(tmp_path / "plain").features == ("sentence",)

    # the clause rule is its own feature: a model stores it and reads the phrase by it, older models by theirs
    clausal = train_answer_types(kg, questions, embedder, seed=2, epochs=200, focus=True, focus_rule="clause")
    assert clausal.features == ("sentence", "focus_clause")
    polite = "Please name the directors of [Heat]"
    assert clausal.focus(polite, ["Heat"]) == "name the directors of X"
    assert focused.focus(polite, ["Heat"]) == "Please name the directors of"
    assert plain.focus(polite, ["Heat"]) is None
    clausal.save(tmp_path / "clausal")
    assert AnswerTypes.load(tmp_path / "clausal").features == ("sentence", "focus_clause")
    with pytest.raises(ConfigError, match="focus rule 'last'"):
        train_answer_types(kg, questions, embedder, seed=2, epochs=200, focus=True, focus_rule="last")

    data = json.loads((tmp_path / "focused" / FILE).read_text(encoding="utf-8"))
    data["features"] = ["sentence", "mood"]
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / FILE).write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"unknown features \['mood'\]"):
        AnswerTypes.load(tmp_path / "bad")
    data["features"] = ["sentence"]  # weights for two vectors, one read
    (tmp_path / "bad" / FILE).write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ConfigError, match="reads 128 dimensions, its features \\(sentence\\) give 64"):
        AnswerTypes.load(tmp_path / "bad").probabilities(embedder, new, mentions)


def test_types_join_ends_whose_entities_can_be_reached_at_the_other(kg: EmbeddedKG) -> None:
    samples = {("directed_by", False): PEOPLE[:4], ("written_by", False): PEOPLE[4:],
               ("directed_by", True): FILMS[:4], ("starred_actors", True): FILMS[::2],
               ("release_year", False): ["1990", "1991"], ("starred_actors", False): ["A0", "A2"]}
    types = induce_types(kg, samples)
    assert types[("directed_by", False)] == types[("written_by", False)] == "directed_by"  # the same people
    assert types[("directed_by", True)] == types[("starred_actors", True)] == "^directed_by"  # films
    assert types[("release_year", False)] == "release_year" and types[("starred_actors", False)] == "starred_actors"
    # either way round is enough: only half the films list an actor, but every film with an actor has a director
    strict = induce_types(kg, {("directed_by", True): FILMS, ("starred_actors", True): FILMS[::2]}, containment=1.0)
    assert strict[("directed_by", True)] == strict[("starred_actors", True)]
    # and under the bar both ways, two ends stay apart: directors who also wrote, 1 of 2 sampled each way
    apart = induce_types(kg, {("directed_by", False): ["P0", "A0"], ("written_by", False): ["P1", "A2"]},
                         containment=0.6)
    assert apart[("directed_by", False)] != apart[("written_by", False)]


def test_the_classifier_reads_the_type_a_question_asks_for_and_survives_a_save(kg: EmbeddedKG,
                                                                                tmp_path: Path) -> None:
    embedder = HashingEmbedder(128)
    model = train_answer_types(kg, training_set(), embedder, seed=3)
    assert set(model.classes) == {"directed_by", "release_year", "^directed_by"}
    # the answers' neighbourhoods type ends no question ends on: written_by with the directors, films by any relation
    assert model.types[("written_by", False)] == "directed_by"
    assert model.types[("release_year", True)] == model.types[("written_by", True)] == "^directed_by"
    new = ["who directed [Heat]", "when was [Heat] released", "which films did [Mann] direct"]
    probs = model.probabilities(embedder, new, [["Heat"], ["Heat"], ["Mann"]])
    assert [model.classes[i] for i in probs.argmax(axis=1)] == ["directed_by", "release_year", "^directed_by"]
    assert np.allclose(probs.sum(axis=1), 1.0)

    model.save(tmp_path / "types")
    again = AnswerTypes.load(tmp_path / "types")
    assert np.allclose(again.probabilities(embedder, new, [["Heat"], ["Heat"], ["Mann"]]), probs, atol=1e-6)
    assert again.meta["training"]["questions"] == len(training_set()) and again.types == model.types
    # the same seed gives the same model
    assert np.array_equal(train_answer_types(kg, training_set(), embedder, seed=3).weight, model.weight)

    prior = again.prior(probs[0], 0.5)

    def expected(kind: str) -> float:
        return max(float(probs[0][again.classes.index(kind)]), 1e-3) ** 0.5

    assert prior((("directed_by", False),)) == pytest.approx(expected("directed_by"))
    assert prior((("directed_by", False), ("written_by", True))) == pytest.approx(expected("^directed_by"))  # the end
    assert prior((("starred_actors", False),)) == pytest.approx(1e-3 ** 0.5)  # a type no question ends on
    assert prior((("no_such_relation", False),)) == 1.0  # an untyped end: no opinion
    assert again.prior(probs[0], 0.0)((("starred_actors", False),)) == 1.0


def test_junctions_measure_how_often_one_type_goes_on_by_a_relation_of_another(kg: EmbeddedKG) -> None:
    samples = {("directed_by", False): PEOPLE[:4], ("starred_actors", False): ["A0", "A2", "A4"],
               ("directed_by", True): FILMS[:4], ("written_by", True): FILMS[4:], ("starred_actors", True): ["F0"]}
    types = induce_types(kg, samples)
    shares = junction_shares(kg, samples, types)
    actor, director, films_of = ("starred_actors", False), ("directed_by", False), ("directed_by", True)
    # an actor is no film: none of them has a director
    assert shares[(actor, director)] == 0.0
    # every director sampled directed a film: a junction within one type is not stored (it costs nothing)
    assert (director, films_of) not in shares and (films_of, director) not in shares
    # a hop whose start no sample typed has no junction: nothing is known of what leaves by it
    assert (director, ("written_by", True)) not in shares
    # every junction stored joins two types, and every pair of sampled ends of two types is stored
    assert all(types[a] != types[(b[0], not b[1])] for a, b in shares)
    assert {(a, b) for a in samples for b in samples
            if (b[0], not b[1]) in types and types[a] != types[(b[0], not b[1])]} <= set(shares)


def test_the_prior_charges_each_junction_between_two_types_and_reads_the_topic_head(kg: EmbeddedKG,
                                                                                     tmp_path: Path) -> None:
    embedder = HashingEmbedder(128)
    model = train_answer_types(kg, training_set(), embedder, seed=3)
    actor, director, films_of = ("starred_actors", False), ("directed_by", False), ("directed_by", True)
    assert model.junctions[(actor, director)] == 0.0
    # the topic head: "who directed [F]" starts from a film, "which films did [P] direct" from a director
    assert model.topic_classes is not None and set(model.topic_classes) == {"^directed_by", "directed_by"}
    new = ["who directed [Heat]", "which films did [Mann] direct"]
    answer_rows, topic_rows = model.read(embedder, new, [["Heat"], ["Mann"]])
    assert topic_rows is not None
    assert [model.topic_classes[i] for i in topic_rows.argmax(axis=1)] == ["^directed_by", "directed_by"]
    assert np.allclose(answer_rows, model.probabilities(embedder, new, [["Heat"], ["Mann"]]))

    plain = model.prior(answer_rows[0], 1.0, junctions=False)
    charged = model.prior(answer_rows[0], 1.0)
    through_actor = (actor, director)  # an actor read as a film: MetaQA's "Lucy"
    assert charged(through_actor) == pytest.approx(plain(through_actor) * 1e-3)  # share 0, floored
    assert charged((director, films_of, director)) == pytest.approx(plain((director, films_of, director)))
    # the topic row weighs the start: from a film (directed_by) or from a director (^directed_by)
    topical = model.prior(answer_rows[0], 1.0, topic=topic_rows[0])
    p_film = float(topic_rows[0][model.topic_classes.index("^directed_by")])
    assert topical((director,)) == pytest.approx(charged((director,)) * p_film)
    assert topical((films_of,)) == pytest.approx(charged((films_of,)) * max(1 - p_film, 1e-3), rel=1e-3)
    assert model.prior(answer_rows[0], 0.0, topic=topic_rows[0])(through_actor) == 1.0  # weight 0: no opinion

    model.save(tmp_path / "types")
    again = AnswerTypes.load(tmp_path / "types")
    assert again.junctions == model.junctions and again.topic_classes == model.topic_classes
    assert np.allclose(again.read(embedder, new, [["Heat"], ["Mann"]])[1], topic_rows, atol=1e-6)
    # a model saved before the topic head and the junctions reads as it did: end type only
    data = json.loads((tmp_path / "types" / FILE).read_text(encoding="utf-8"))
    del data["topic"], data["junctions"]
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / FILE).write_text(json.dumps(data), encoding="utf-8")
    old = AnswerTypes.load(tmp_path / "old")
    assert old.topic_classes is None and old.junctions == {} and old.read(embedder, new, [["Heat"], ["Mann"]])[1] is None
    assert old.prior(answer_rows[0], 1.0)(through_actor) == pytest.approx(plain(through_actor))
    # a topic head that does not fit its classes is refused like the answer head
    data = json.loads((tmp_path / "types" / FILE).read_text(encoding="utf-8"))
    data["topic"]["bias"] = data["topic"]["bias"][:-1]
    (tmp_path / "types" / FILE).write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ConfigError, match="do not agree"):
        AnswerTypes.load(tmp_path / "types")


def test_answer_types_train_on_several_blocks_of_copies(kg: EmbeddedKG) -> None:
    from kgqa.errors import ConfigError

    questions = training_set()
    once = [q.text.upper() for q in questions]
    model = train_answer_types(kg, questions, HashingEmbedder(32), copies=once + once, epochs=5)
    assert model.meta["training"]["copies"] == 2 * len(questions)
    with pytest.raises(ConfigError, match="whole blocks"):
        train_answer_types(kg, questions, HashingEmbedder(32), copies=once[:-1], epochs=5)


def test_a_question_in_its_own_wording_can_weigh_more_than_its_copies(kg: EmbeddedKG) -> None:
    # every copy says the same thing whatever its chain: alone they would pull every reading to the majority type
    questions = training_set()
    copies = ["tell me about X"] * len(questions)
    embedder = HashingEmbedder(64)
    even = train_answer_types(kg, questions, embedder, copies=copies, epochs=60, seed=1)
    heavy = train_answer_types(kg, questions, embedder, copies=copies, epochs=60, seed=1, question_weight=4.0)
    assert heavy.meta["training"]["question_weight"] == 4.0 and "question_weight" not in even.meta["training"]
    texts = [q.text for q in questions]
    mentions = [list(q.mentions) for q in questions]
    truth = [heavy.classes.index(heavy.types[(q.chain[-1].relation, q.chain[-1].direction.value == "in")])
             for q in questions]

    def sure(model: AnswerTypes) -> float:  # the mean probability of each question's own type
        probs = model.probabilities(embedder, texts, mentions)
        return float(np.mean([probs[i][c] for i, c in enumerate(truth)]))

    assert sure(heavy) > sure(even)
    with pytest.raises(ConfigError, match="question weight must be positive"):
        train_answer_types(kg, questions, embedder, copies=copies, question_weight=0.0)


def test_unreadable_models_and_another_encoder_are_clear_errors(kg: EmbeddedKG, tmp_path: Path) -> None:
    from kgqa.errors import ConfigError

    with pytest.raises(ConfigError, match="not an answer-type model directory"):
        AnswerTypes.load(tmp_path)
    (tmp_path / FILE).write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match="cannot be read"):
        AnswerTypes.load(tmp_path)
    model = train_answer_types(kg, training_set(), HashingEmbedder(32), epochs=5)
    model.save(tmp_path / "m")
    data = json.loads((tmp_path / "m" / FILE).read_text(encoding="utf-8"))
    data["bias"] = data["bias"][:-1]
    (tmp_path / "m" / FILE).write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ConfigError, match="do not agree"):
        AnswerTypes.load(tmp_path / "m")
    with pytest.raises(ConfigError, match="made with encoder 'hash32'"):
        model.probabilities(HashingEmbedder(64), ["who"], [[]])
    with pytest.raises(ConfigError, match="no training questions"):
        train_answer_types(kg, [], HashingEmbedder(32))


def test_train_answer_types_and_fog_reading_with_it_on_the_demo_kg(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "types"
    code = main(["train", "answer-types", "--dataset", "demo", "--split", "test", "--kg", "demo", "--encoder",
                 "hash", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    model = AnswerTypes.load(out)
    assert (model.encoder, model.embedder_name) == ("hash", "hash256") and model.meta["trained_on"]["datasets"] == ["demo"]
    assert "use it with --method fog --method-config answer_types=" in capsys.readouterr().out
    assert model.features == ("sentence",)
    code = main(["train", "answer-types", "--dataset", "demo", "--split", "test", "--kg", "demo", "--encoder",
                 "hash", "--focus-phrase", "--out", str(tmp_path / "focused")])
    assert code == 0, capsys.readouterr().err
    assert AnswerTypes.load(tmp_path / "focused").features == ("sentence", "focus")
    capsys.readouterr()
    # an existing --out and a wrong directory are one-line errors
    assert main(["train", "answer-types", "--dataset", "demo", "--kg", "demo", "--out", str(out)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert main(["train", "answer-types", "--dataset", "demo", "--kg", "demo", "--containment", "0",
                 "--out", str(tmp_path / "other")]) == 2
    assert "--containment must be in (0, 1], got 0.0" in capsys.readouterr().err and not (tmp_path / "other").exists()
    assert main(["train", "answer-types", "--dataset", "demo", "--kg", "demo", "--question-weight", "-1",
                 "--out", str(tmp_path / "other")]) == 2
    assert "--question-weight must be positive, got -1.0" in capsys.readouterr().err
    assert not (tmp_path / "other").exists()
    assert main(["train", "answer-types", "--kg", "demo", "--out", str(tmp_path / "other")]) == 2
    assert "give --dataset (one or more) or --like SCORERDIR" in capsys.readouterr().err
    code = main(["ask", "Who directed Inception?", "--method", "fog", "--method-config", "mode=graph",
                 "--method-config", f"answer_types={tmp_path}"])
    err = capsys.readouterr().err
    assert code == 2 and "not an answer-type model directory" in err and "Traceback" not in err
