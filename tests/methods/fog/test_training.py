"""FoG's training (kgqa.methods.fog.training): the gold walks that supervise the scorer, the other wordings it also
reads, the validation split and its folds, and the propagation loss; and graph mode's reading
(kgqa.methods.fog.reading). Every KG is a real embedded store built from a handful of triples."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch

from kgqa.kg.base import parse_chain
from kgqa.kg.embedded import EmbeddedKG
from kgqa.methods.fog.reading import GraphReading
from kgqa.methods.fog.training import TrainingQuestion, gold_walk
from kgqa.steps.foresight.graph import expand
from kgqa.testing import small_kg

FILMS = [("D", "directed", "F1"), ("D", "directed", "F2"), ("D", "directed", "F3"), ("F1", "starring", "X"),
         ("F1", "starring", "Y"), ("F2", "starring", "X"), ("F3", "starring", "Z"), ("D", "born_in", "P")]


@pytest.fixture(scope="module")
def film_kg(tmp_path_factory: pytest.TempPathFactory) -> EmbeddedKG:
    return small_kg(tmp_path_factory.mktemp("films") / "kg", FILMS)


def test_graph_reading_ranks_by_statement_counts_unless_told_not_to(tmp_path: Path) -> None:
    # two remakes titled T merged into one entity: both written by W, the 2011 one also by V, whom the scorer prefers
    kg = small_kg(tmp_path / "kg", [("T", "written_by", "W"), ("T", "written_by", "V"), ("T", "written_by", "W")],
                  {e: e for e in ("T", "W", "V")})
    scores = {("T", "written_by", "V"): 0.95, ("T", "written_by", "W"): 0.9}

    def score_batch(triples, layers, backward):
        return np.array([scores.get(t, 0.05) for t in triples], dtype=np.float32), np.zeros((len(triples), 4))

    graph = expand(kg, ["T"], score_batch, hops=2, tau_e=0.1)
    assert [a.entity for a in GraphReading().rank(graph, statement_counts=kg.statement_counts)[0]] == ["W", "V"]
    assert [a.entity for a in GraphReading(by_records=False).rank(graph, statement_counts=kg.statement_counts)[0]] \
        == ["V", "W"]


def test_gold_walk_keeps_exactly_the_triples_on_walks_to_gold_answers(film_kg: EmbeddedKG) -> None:
    walk = gold_walk(film_kg, TrainingQuestion("actors in D's films?", ("D",), parse_chain("directed,starring"),
                                               frozenset({"X", "Z"})))
    assert walk.reached
    assert walk.positives == {
        (("D", "directed", "F1"), 1, False), (("D", "directed", "F2"), 1, False), (("D", "directed", "F3"), 1, False),
        (("F1", "starring", "X"), 2, False), (("F2", "starring", "X"), 2, False), (("F3", "starring", "Z"), 2, False)}
    assert walk.path_nodes == {0: {"D"}, 1: {"F1", "F2", "F3"}, 2: {"X", "Z"}}

    backward = gold_walk(film_kg, TrainingQuestion("who directed films starring X?", ("X",),
                                                   parse_chain("^starring,^directed"), frozenset({"D"})))
    assert backward.positives == {(("F1", "starring", "X"), 1, True), (("F2", "starring", "X"), 1, True),
                                  (("D", "directed", "F1"), 2, True), (("D", "directed", "F2"), 2, True)}


def test_gold_walk_never_re_enters_the_topic(film_kg: EmbeddedKG) -> None:
    chain = parse_chain("starring,^starring")  # films sharing an actor with F1
    walk = gold_walk(film_kg, TrainingQuestion("films sharing an actor with F1?", ("F1",), chain, frozenset({"F2"})))
    assert walk.positives == {(("F1", "starring", "X"), 1, False), (("F2", "starring", "X"), 2, True)}
    assert walk.path_nodes[1] == {"X"}  # Y leads only back to F1
    # the topic itself is never reached again, so a gold set naming it is unreached
    back_to_topic = gold_walk(film_kg, TrainingQuestion("?", ("F1",), chain, frozenset({"F1"})))
    assert not back_to_topic.reached and back_to_topic.positives == set()
    # a topic missing from the KG reaches nothing
    assert not gold_walk(film_kg, TrainingQuestion("?", ("nowhere",), chain, frozenset({"F2"}))).reached
    # nor does a chain through a relation outside the KG's vocabulary (a Freebase question over the pieces)
    assert not gold_walk(film_kg, TrainingQuestion("?", ("D",), parse_chain("directed,scored_by"),
                                                   frozenset({"X"}))).reached


def test_word_dropout_keeps_topic_mentions_whole_and_is_seeded() -> None:

    from kgqa.methods.fog.training import drop_words

    text = "which films did the director of Tom Hanks Jr. also write"
    first = [drop_words(text, ["Tom Hanks Jr."], 0.6, random.Random(3)) for _ in range(2)]
    assert first[0] == first[1]  # the same seed, the same copy
    copies = [drop_words(text, ["Tom Hanks Jr."], 0.6, random.Random(seed)) for seed in range(40)]
    assert all("Tom Hanks Jr." in c for c in copies)
    assert any("[MASK]" in c for c in copies) and any(len(c.split()) < len(text.split()) for c in copies)
    assert drop_words(text, ["Tom Hanks Jr."], 0.0, random.Random(0)) == text
    words = text.split()
    for c in copies:  # nothing is invented: every word left is the original's, in order, or the mask
        rest = iter(words)
        assert all(w == "[MASK]" or any(w == o for o in rest) for w in c.split())


def test_validation_by_template_holds_out_every_question_of_a_held_out_template() -> None:

    from kgqa.methods.fog.training import TrainSettings, question_template, split_validation

    chain = parse_chain("directed_by")
    templates = [f"who {verb} {{}}" for verb in ("directed", "made", "helmed", "filmed", "shot", "produced")]
    questions = [TrainingQuestion(t.format(name), (name,), chain, frozenset({"x"}), mentions=(name,))
                 for t in templates for name in ("Alien", "Heat", "Ran", "Up")]
    settings = TrainSettings(validation_share=0.3, validation_by="template")
    val, train = split_validation(questions, settings, random.Random(0))
    assert val and train and not val & set(train) and len(val) + len(train) == len(questions)
    held = {question_template(questions[i]) for i in val}
    assert not held & {question_template(questions[i]) for i in train}  # no template on both sides
    assert all(len([i for i in val if question_template(questions[i]) == h]) == 4 for h in held)
    again, _ = split_validation(questions, settings, random.Random(0))
    assert again == val
    by_question, _ = split_validation(questions, TrainSettings(validation_share=0.3), random.Random(0))
    assert len(by_question) == round(0.3 * len(questions))


def test_composed_wordings_write_every_metaqa_chain_in_other_words_and_are_seeded() -> None:

    from kgqa.datasets.metaqa_chains import QTYPE_CHAINS
    from kgqa.methods.fog.wordings import ChainWordings

    table = ChainWordings.load("metaqa")
    chain = QTYPE_CHAINS["movie_to_director_to_movie_to_year"]
    first = [table.compose(chain, "Heat", random.Random(5)) for _ in range(2)]
    assert first[0] == first[1] and first[0] is not None and "Heat" in first[0]
    for qtype, qchain in QTYPE_CHAINS.items():
        text = table.compose(qchain, "Heat", random.Random(qtype))
        assert text is not None and "Heat" in text and text[0].isupper(), qtype
    # the phrases nest from the topic outward: the last hop's words come first
    every = set(table.every(QTYPE_CHAINS["movie_to_director_to_movie"], "Heat"))
    assert "Name films directed by the director of Heat." in every
    assert not any("Heat's director's" in q or "has directed's" in q for q in every)  # possessives only at the topic
    assert table.compose(parse_chain("produced_by"), "Heat", random.Random(0)) is None  # no phrase for it


def test_composed_wordings_never_write_a_template_of_the_reworded_test_sets() -> None:
    """The packaged table trains scorers that are then measured on metaqa-reworded-*: no question it can compose may
    be one of those wordings (topic abstracted, case and punctuation ignored)."""
    import re
    from pathlib import Path

    import kgqa.data.metaqa_reworded as reworded
    from kgqa.datasets.metaqa_chains import QTYPE_CHAINS, iter_metaqa_questions
    from kgqa.methods.fog.wordings import ChainWordings

    def norm(text: str) -> str:
        return re.sub(r"[^a-z0-9{} ]", "", " ".join(text.lower().split()))

    table = ChainWordings.load("metaqa")
    base = Path(reworded.__file__).parent
    for hops in (1, 2, 3):
        for q in iter_metaqa_questions(base, hops, "test"):
            template = norm(q["question"].replace(f"[{q['topic']}]", "{}"))
            assert template not in {norm(t) for t in table.every(QTYPE_CHAINS[q["qtype"]], "{}")}, q["question"]


def test_template_wordings_cover_every_metaqa_chain_and_are_seeded() -> None:

    from kgqa.datasets.metaqa_chains import QTYPE_CHAINS
    from kgqa.kg.base import Direction, Hop
    from kgqa.methods.fog.wordings.templates import ChainTemplates, parse_chain_key

    table = ChainTemplates.load("metaqa")
    for qtype, chain in QTYPE_CHAINS.items():
        assert table.covers(chain), qtype
        text = table.compose(chain, "Heat", random.Random(qtype))
        assert text is not None and "Heat" in text and "{topic}" not in text, qtype
    chain = QTYPE_CHAINS["movie_to_writer_to_movie_to_actor"]
    assert table.compose(chain, "Heat", random.Random(3)) == table.compose(chain, "Heat", random.Random(3))
    assert table.compose(parse_chain("produced_by"), "Heat", random.Random(0)) is None
    # keys: a chain written out, ^ for a hop walked backward
    assert parse_chain_key("^starred_actors,directed_by") == (Hop("starred_actors", Direction.IN), Hop("directed_by"))
    assert parse_chain_key("^starred_actors,directed_by") == QTYPE_CHAINS["actor_to_movie_to_director"]


def test_template_wordings_share_no_wording_with_the_reworded_sets() -> None:
    """The packaged templates train scorers measured on metaqa-reworded-* (test) and chosen on it (dev): none of them
    may be one of those sets' wordings (topic abstracted, case and punctuation ignored)."""
    from pathlib import Path

    import kgqa.data.metaqa_reworded as reworded
    from kgqa.datasets.metaqa_chains import iter_metaqa_questions
    from kgqa.methods.fog.wordings.templates import ChainTemplates
    from kgqa.normalize import wording_key

    packaged = {name: {wording_key(t) for t in ChainTemplates.load(name).wordings()}
                for name in ("metaqa", "metaqa_many", "metaqa_many2")}
    assert len(packaged["metaqa_many"]) > 5 * len(packaged["metaqa"])
    assert packaged["metaqa_many"] < packaged["metaqa_many2"]
    base = Path(reworded.__file__).parent
    for split in ("test", "dev", "dev2"):
        for hops in (1, 2, 3):
            for q in iter_metaqa_questions(base, hops, split):
                theirs = wording_key(q["question"])
                for name, ours in packaged.items():
                    assert theirs not in ours, (name, q["question"])


def test_the_many_authors_templates_are_rebuilt_by_their_merge_script(tmp_path: Path) -> None:
    """``metaqa_many`` is the packaged templates plus four authors' styles (benchmarks/data/fog_many_authors), and
    ``metaqa_many2`` those plus two more: the merge script, run on those files, writes each packaged file's exact
    content."""
    import subprocess
    import sys
    from importlib import resources

    script = Path(__file__).parents[3] / "benchmarks" / "data" / "fog_many_authors" / "merge_templates.py"
    out = tmp_path / "many.json"
    done = subprocess.run([sys.executable, str(script), "--out", str(out)], capture_output=True, text=True, check=True)
    assert "2204 templates over 49 chains" in done.stdout
    packaged = resources.files("kgqa.methods.fog.wordings").joinpath("metaqa_many_templates.json")
    assert out.read_text(encoding="utf-8") == packaged.read_text(encoding="utf-8")
    # metaqa_many2: the same plus the sixteenth session's two authors
    out2 = tmp_path / "many2.json"
    done = subprocess.run([sys.executable, str(script), "--out", str(out2), "--also", "style5.json", "--also",
                           "style6.json"], capture_output=True, text=True, check=True)
    assert "3110 templates over 49 chains" in done.stdout
    packaged2 = resources.files("kgqa.methods.fog.wordings").joinpath("metaqa_many2_templates.json")
    assert out2.read_text(encoding="utf-8") == packaged2.read_text(encoding="utf-8")


def test_a_bad_template_wordings_file_is_a_clear_error(tmp_path: Path) -> None:
    from kgqa.errors import ConfigError
    from kgqa.methods.fog.wordings.templates import ChainTemplates

    with pytest.raises(ConfigError, match="not a packaged file"):
        ChainTemplates.load("nosuch")
    bad = tmp_path / "t.json"
    bad.write_text('{"directed_by": ["Who made it?"]}', encoding="utf-8")
    with pytest.raises(ConfigError, match="exactly one"):
        ChainTemplates.load(str(bad))
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid JSON"):
        ChainTemplates.load(str(bad))
    with pytest.raises(ConfigError, match="no such file"):
        ChainTemplates.load(str(tmp_path / "missing.json"))


def test_a_bad_composed_wordings_table_is_a_clear_error(tmp_path: Path) -> None:
    from kgqa.errors import ConfigError
    from kgqa.methods.fog.wordings import ChainWordings

    with pytest.raises(ConfigError, match="not a packaged table"):
        ChainWordings.load("nosuch")
    bad = tmp_path / "t.toml"
    bad.write_text('frames = ["{np}?"]\n[out]\ndirected_by = ["the director"]\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"out.directed_by must be a non-empty list of phrases with \{x\}"):
        ChainWordings.load(str(bad))
    bad.write_text("frames = [", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid TOML"):
        ChainWordings.load(str(bad))


def test_validation_folds_are_fixed_and_disjoint_across_seeds() -> None:

    from kgqa.methods.fog.training import TrainSettings, question_template, split_validation

    chain = parse_chain("directed_by")
    verbs = [f"verb{k}" for k in range(40)]
    questions = [TrainingQuestion(f"who {verb} {name}", (name,), chain, frozenset({"x"}), mentions=(name,))
                 for verb in verbs for name in ("Alien", "Heat", "Ran")]

    def held(fold: int, seed: int) -> set[str]:
        settings = TrainSettings(validation_share=0.25, validation_by="template", validation_fold=fold, seed=seed)
        val, train = split_validation(questions, settings, random.Random(seed))
        assert val and train and not val & set(train) and len(val) + len(train) == len(questions)
        templates = {question_template(questions[i]) for i in val}
        assert not templates & {question_template(questions[i]) for i in train}
        return templates

    folds = [held(k, seed=k) for k in range(4)]  # 1 / 0.25 = 4 folds; each member its own seed
    assert all(held(k, seed=99) == folds[k] for k in range(4))  # the fold, not the seed, decides
    assert all(not folds[a] & folds[b] for a in range(4) for b in range(a + 1, 4))
    assert set().union(*folds) == {question_template(q) for q in questions}  # every template in exactly one fold


def test_validation_fold_out_of_range_is_a_clear_error() -> None:

    from kgqa.errors import ConfigError
    from kgqa.methods.fog.training import TrainSettings, split_validation

    questions = [TrainingQuestion(f"who made {n}", (n,), parse_chain("directed_by"), frozenset({"x"}), mentions=(n,))
                 for n in ("Alien", "Heat")]
    with pytest.raises(ConfigError, match=r"fold must be in \[0, 10\)"):
        split_validation(questions, TrainSettings(validation_share=0.1, validation_fold=10), random.Random(0))


def test_question_weighting_counts_each_subgraph_once_however_many_edges_it_has() -> None:
    from kgqa.methods.fog.training import weighted_mean

    # one hub-heavy subgraph of 99 edges the network gets wrong (loss 1), one small subgraph it gets right (loss 0)
    per_edge = torch.tensor([1.0] * 99 + [0.0])
    graph_of_edge = torch.tensor([0] * 99 + [1])
    assert float(weighted_mean(torch, per_edge, graph_of_edge, 2, "edge")) == pytest.approx(0.99)
    assert float(weighted_mean(torch, per_edge, graph_of_edge, 2, "question")) == pytest.approx(0.5)


def test_an_unknown_propagation_weighting_is_a_clear_error_before_any_work() -> None:
    from kgqa.errors import ConfigError
    from kgqa.methods.fog.training import TrainSettings, train_scorer
    from kgqa.steps.foresight.scorer import LabelVectors
    from kgqa.testing import offline_embedder, shared_movie_kg

    kg = shared_movie_kg()
    with pytest.raises(ConfigError, match="propagation_weighting must be 'edge' or 'question', got 'node'"):
        train_scorer(kg, [], LabelVectors(kg, offline_embedder(64)), settings=TrainSettings(propagation_weighting="node"))


def test_the_best_epoch_ranks_answers_before_the_loss_and_needs_the_loss_to_improve_by_more_than_1e5() -> None:
    from kgqa.methods.fog.training import BestEpoch

    net = torch.nn.Linear(2, 1)
    best = BestEpoch(net, patience=2, start=(-90.0, -80.0, 0.5))
    assert not best.update((-95.0, -70.0, 0.9), validated=True)  # a better hit wins over a worse loss
    assert best.best == (-95.0, -70.0, 0.9)
    assert not best.update((-95.0, -70.0, 0.9 - 1e-6), validated=True)  # not better: stale 1
    assert best.update((-94.0, -99.0, 0.1), validated=True)  # worse hit, whatever else: stale 2, stop
    assert best.best == (-95.0, -70.0, 0.9)
    by_loss = BestEpoch(net, patience=1)
    assert not by_loss.update((0.7,), validated=True) and by_loss.update((0.8,), validated=True)
