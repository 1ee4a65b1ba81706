"""Answer types read as a typed retry reads them: the likely ends and the ends one hop before them (bridges)."""

from __future__ import annotations

import numpy as np

from kgqa.steps.foresight.answer_types import AnswerTypes, QuestionTyping

DIRECTED_BY = ("film.film.directed_by", False)
DIRECTOR_OF = ("film.film.directed_by", True)  # reached backwards: the films
FILM_OF_PERFORMANCE = ("film.performance.film", False)
CHARACTER = ("film.performance.character", False)
BIRTHPLACE = ("people.person.place_of_birth", False)
BORN_HERE = ("location.location.people_born_here", False)


def typing_of(junctions: dict) -> QuestionTyping:
    types = {DIRECTED_BY: "person", BORN_HERE: "person", DIRECTOR_OF: "film", FILM_OF_PERFORMANCE: "film",
             CHARACTER: "character", BIRTHPLACE: "place"}
    classes = ["character", "film", "person", "place"]
    model = AnswerTypes(types, classes, np.zeros((4, 2), dtype=np.float32), np.zeros(4, dtype=np.float32), "hash:2",
                        "hash", junctions=junctions)
    probabilities = np.asarray([0.02, 0.03, 0.9, 0.05], dtype=np.float32)
    return QuestionTyping(model, probabilities, model.prior(probabilities, 1.0))


def test_the_ends_of_the_type_a_likely_hop_starts_from_are_bridges_and_so_are_well_crossed_junctions() -> None:
    typing = typing_of({(BIRTHPLACE, BORN_HERE): 0.8, (CHARACTER, DIRECTED_BY): 0.1})
    likely = typing.types.likely_ends(typing.probabilities)
    assert likely == {DIRECTED_BY, BORN_HERE}
    # films lead on to their directors (a hop by directed_by starts at a film); most birthplaces lead on to people
    # born there (a junction of 0.8); characters lead on to directors for one in ten (below the share): not a bridge
    assert typing.bridge_ends(likely) == {DIRECTOR_OF, FILM_OF_PERFORMANCE, BIRTHPLACE}
    assert typing.bridge_ends(likely, share=0.05) == {DIRECTOR_OF, FILM_OF_PERFORMANCE, BIRTHPLACE, CHARACTER}
    assert typing.bridge_ends(set()) == set()
