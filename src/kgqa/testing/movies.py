"""The small movie KG of the method tests: a dozen entities with every shape a KG-exploring method meets.

Contents (Freebase schema, ids readable on purpose):

* directors ``m.nolan`` (Christopher Nolan, nationality ``m.uk``) and ``m.scorsese`` (Martin Scorsese, ``m.us``), with
  ``film.director.film`` and its reverse ``film.film.directed_by``;
* films ``m.inception`` (2010), ``m.interstellar`` (2014), ``m.memento`` (2000), ``m.shutter`` (Shutter Island, 2010),
  released on typed literals (``film.film.initial_release_date`` -> ``"2010"^^xsd:gYear``);
* performances as nameless CVTs ``m.cvt1`` .. ``m.cvt5``: film ``film.film.starring`` -> CVT ->
  ``film.performance.actor`` / ``film.performance.character`` (``m.dicaprio`` plays ``m.cobb`` in Inception and
  ``m.daniels`` in Shutter Island; ``m.page``, ``m.mcconaughey``, ``m.pearce`` one role each);
* a distractor branch: ``m.nolan`` ``award.award_winner.awards_won`` -> ``m.cvt_award`` ``award.award_honor.year``
  ``"2024"^^xsd:gYear``, which leads nowhere useful.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from kgqa.kg.base import make_literal
from kgqa.kg.embedded import EmbeddedKG, EmbeddedKGBuilder

XSD_GYEAR = "http://www.w3.org/2001/XMLSchema#gYear"

#: film id -> (name, release year, [(actor, character)])
FILMS: dict[str, tuple[str, str, list[tuple[str, str]]]] = {
    "m.inception": ("Inception", "2010", [("m.dicaprio", "m.cobb"), ("m.page", "m.ariadne")]),
    "m.interstellar": ("Interstellar", "2014", [("m.mcconaughey", "m.cooper")]),
    "m.memento": ("Memento", "2000", [("m.pearce", "m.leonard")]),
    "m.shutter": ("Shutter Island", "2010", [("m.dicaprio", "m.daniels")]),
}
DIRECTORS: dict[str, list[str]] = {"m.nolan": ["m.inception", "m.interstellar", "m.memento"], "m.scorsese": ["m.shutter"]}
#: Display names of every named entity but the films (whose names are in FILMS); CVTs have none.
NAMES: dict[str, str] = {
    "m.nolan": "Christopher Nolan", "m.scorsese": "Martin Scorsese", "m.dicaprio": "Leonardo DiCaprio",
    "m.page": "Elliot Page", "m.mcconaughey": "Matthew McConaughey", "m.pearce": "Guy Pearce", "m.cobb": "Dom Cobb",
    "m.ariadne": "Ariadne", "m.cooper": "Cooper", "m.leonard": "Leonard Shelby", "m.daniels": "Teddy Daniels",
    "m.uk": "United Kingdom", "m.us": "United States",
}


def movie_kg(path: str | Path) -> EmbeddedKG:
    """Build the movie KG into the directory ``path`` (created; must not hold another store) and open it."""
    b = EmbeddedKGBuilder(schema="freebase")
    names = dict(NAMES)
    cvt = 0
    for director, made in DIRECTORS.items():
        for film in made:
            b.add_triple(director, "film.director.film", film)
            b.add_triple(film, "film.film.directed_by", director)
    for film, (name, year, cast) in FILMS.items():
        names[film] = name
        b.add_triple(film, "film.film.initial_release_date", make_literal(year, datatype=XSD_GYEAR))
        for actor, character in cast:
            cvt += 1
            node = f"m.cvt{cvt}"
            b.add_triple(film, "film.film.starring", node)
            b.add_triple(node, "film.performance.actor", actor)
            b.add_triple(node, "film.performance.character", character)
    b.add_triple("m.nolan", "people.person.nationality", "m.uk")
    b.add_triple("m.scorsese", "people.person.nationality", "m.us")
    b.add_triple("m.dicaprio", "people.person.nationality", "m.us")
    b.add_triple("m.nolan", "award.award_winner.awards_won", "m.cvt_award")  # a distractor branch
    b.add_triple("m.cvt_award", "award.award_honor.year", make_literal("2024", datatype=XSD_GYEAR))
    for entity, name in names.items():
        b.add_name(entity, name)
    return b.build(Path(path))


@functools.cache
def shared_movie_kg() -> EmbeddedKG:
    """One movie KG per process, built on first use in a temporary directory removed at exit.

    The store is read-only once built, so every test may share it; use :func:`movie_kg` for a private copy.
    """
    root = Path(tempfile.mkdtemp(prefix="kgqa-movie-kg-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return movie_kg(root / "kg")


def small_kg(path: str | Path, triples: Iterable[tuple[str, str, str]], names: Mapping[str, str] | None = None, *,
             schema: str = "generic") -> EmbeddedKG:
    """A real embedded store of exactly ``triples`` (and ``names``) built into ``path`` and opened: the KG of a test
    that needs a graph shaped just so (a cycle, a hub, two remakes of one title)."""
    builder = EmbeddedKGBuilder(schema=schema)
    for head, relation, tail in triples:
        builder.add_triple(head, relation, tail)
    for entity, name in (names or {}).items():
        builder.add_name(entity, name)
    return builder.build(Path(path))
