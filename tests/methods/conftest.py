"""Fixtures shared by the method tests: a tiny foresight scorer trained on the kit's movie KG (FoG, chains).

torch is imported only when a scorer fixture is used, so the tests of methods that need no torch (IO, CoT, CCoR, ...)
run without it (tests/methods/test_without_torch.py checks that they do).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kgqa.kg.base import parse_chain
from kgqa.testing import offline_embedder, shared_movie_kg

KIT_ENCODER = "hash:64"
FILMS_OF_NOLAN = "Which films did Christopher Nolan direct?"


@pytest.fixture(scope="session")
def kit_scorer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scorer trained by ``train_scorer`` on five kit questions (hashing embedder, hidden 16), saved as
    ``kgqa train fog`` saves one."""
    return train_kit_scorer(tmp_path_factory.mktemp("fog") / "scorer", seed=0)


@pytest.fixture(scope="session")
def kit_scorer_dir_seed1(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same training on another seed: a second member for ensemble tests."""
    return train_kit_scorer(tmp_path_factory.mktemp("fog") / "scorer-seed1", seed=1)


def train_kit_scorer(out: Path, *, seed: int) -> Path:
    import torch

    from kgqa.methods.fog.training import TrainingQuestion, TrainSettings, train_scorer
    from kgqa.steps.foresight.model import NetSpec
    from kgqa.steps.foresight.scorer import LabelVectors

    kg = shared_movie_kg()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    questions = [
        TrainingQuestion(FILMS_OF_NOLAN, ("m.nolan",), parse_chain("film.director.film"),
                         frozenset({"m.inception", "m.interstellar", "m.memento"})),
        TrainingQuestion("Who directed Shutter Island?", ("m.shutter",), parse_chain("film.film.directed_by"),
                         frozenset({"m.scorsese"})),
        TrainingQuestion("Which actors starred in films directed by Christopher Nolan?", ("m.nolan",),
                         parse_chain("film.director.film,film.film.starring,film.performance.actor"),
                         frozenset({"m.dicaprio", "m.page", "m.mcconaughey", "m.pearce"})),
        TrainingQuestion("Which country is Martin Scorsese from?", ("m.scorsese",),
                         parse_chain("people.person.nationality"), frozenset({"m.us"})),
        TrainingQuestion("Who directed the films Leonardo DiCaprio starred in?", ("m.dicaprio",),
                         parse_chain("^film.performance.actor,^film.film.starring,film.film.directed_by"),
                         frozenset({"m.nolan", "m.scorsese"})),
    ]
    settings = TrainSettings(lr=1e-2, epochs=3, batch_size=32, validation_share=0.0, propagation_epochs=1,
                             propagation_lr=1e-2, propagation_questions=5, seed=seed)
    spec = NetSpec(input_dim=64, hidden=16, heads=2, self_blocks=1, propagation_layers=1)
    try:
        result = train_scorer(kg, questions, LabelVectors(kg, offline_embedder(64)), settings=settings, net_spec=spec,
                              encoder=KIT_ENCODER)
    finally:
        torch.set_num_threads(threads)
    assert result.summary["unreached"] == 0  # every gold chain reaches its answers on the kit KG
    result.scorer.save(out, {"trained_on": "five kit questions"})
    return out
