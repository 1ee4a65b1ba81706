"""MetaQA question types as relation chains over the WikiMovies KB, and a check that the chains reproduce the gold answers.

The KB (kb.txt) stores every fact as ``movie|relation|value`` with nine relations:

=====================  ===================  =====================================
role in a question     relation             direction from the movie
=====================  ===================  =====================================
director               ``directed_by``      movie -> director
writer                 ``written_by``       movie -> writer
actor                  ``starred_actors``   movie -> actor
year                   ``release_year``     movie -> year
language               ``in_language``      movie -> language
tag / tags             ``has_tags``         movie -> tag
genre                  ``has_genre``        movie -> genre
imdbvotes              ``has_imdb_votes``   movie -> votes
imdbrating             ``has_imdb_rating``  movie -> rating
=====================  ===================  =====================================

A question type such as ``director_to_movie_to_language`` reads as roles joined by ``_to_``; every step either leaves a
movie (``movie -> X``: the relation, outgoing) or reaches one (``X -> movie``: the relation, incoming, written ``^r``).
So ``movie_to_director`` is ``directed_by``, ``director_to_movie`` is ``^directed_by`` and
``director_to_movie_to_language`` is ``^directed_by,in_language``.
"""

from __future__ import annotations

import itertools
import re
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kgqa.errors import ConfigError, DataError
from kgqa.kg.base import Chain, Direction, Hop, KnowledgeGraph, format_chain

#: Role name in a question type -> the KB relation that links a movie to it (always stored movie -> value).
ROLE_RELATIONS: dict[str, str] = {
    "director": "directed_by",
    "writer": "written_by",
    "actor": "starred_actors",
    "year": "release_year",
    "language": "in_language",
    "tag": "has_tags",
    "tags": "has_tags",
    "genre": "has_genre",
    "imdbvotes": "has_imdb_votes",
    "imdbrating": "has_imdb_rating",
}

#: Every question type of the vanilla MetaQA 1/2/3-hop dev and test files (read from qa_*_qtype.txt).
QTYPES: dict[int, tuple[str, ...]] = {
    1: ("actor_to_movie", "director_to_movie", "movie_to_actor", "movie_to_director", "movie_to_genre",
        "movie_to_imdbrating", "movie_to_imdbvotes", "movie_to_language", "movie_to_tags", "movie_to_writer",
        "movie_to_year", "tag_to_movie", "writer_to_movie"),
    2: ("actor_to_movie_to_actor", "actor_to_movie_to_director", "actor_to_movie_to_genre",
        "actor_to_movie_to_language", "actor_to_movie_to_writer", "actor_to_movie_to_year",
        "director_to_movie_to_actor", "director_to_movie_to_director", "director_to_movie_to_genre",
        "director_to_movie_to_language", "director_to_movie_to_writer", "director_to_movie_to_year",
        "movie_to_actor_to_movie", "movie_to_director_to_movie", "movie_to_writer_to_movie",
        "writer_to_movie_to_actor", "writer_to_movie_to_director", "writer_to_movie_to_genre",
        "writer_to_movie_to_language", "writer_to_movie_to_writer", "writer_to_movie_to_year"),
    3: ("movie_to_actor_to_movie_to_director", "movie_to_actor_to_movie_to_genre",
        "movie_to_actor_to_movie_to_language", "movie_to_actor_to_movie_to_writer", "movie_to_actor_to_movie_to_year",
        "movie_to_director_to_movie_to_actor", "movie_to_director_to_movie_to_genre",
        "movie_to_director_to_movie_to_language", "movie_to_director_to_movie_to_writer",
        "movie_to_director_to_movie_to_year", "movie_to_writer_to_movie_to_actor",
        "movie_to_writer_to_movie_to_director", "movie_to_writer_to_movie_to_genre",
        "movie_to_writer_to_movie_to_language", "movie_to_writer_to_movie_to_year"),
}

_TOPIC_RE = re.compile(r"\[([^\[\]]+)\]")


def chain_for_qtype(qtype: str) -> Chain:
    """The relation chain of a MetaQA question type (see the module docstring for the rule)."""
    roles = qtype.strip().split("_to_")
    if len(roles) < 2:
        raise ConfigError(f"MetaQA question type {qtype!r} is not of the form role_to_role[_to_role...]")
    hops: list[Hop] = []
    for source, target in itertools.pairwise(roles):
        if source == "movie" and target in ROLE_RELATIONS:
            hops.append(Hop(ROLE_RELATIONS[target], Direction.OUT))
        elif target == "movie" and source in ROLE_RELATIONS:
            hops.append(Hop(ROLE_RELATIONS[source], Direction.IN))
        else:
            raise ConfigError(f"MetaQA question type {qtype!r}: step {source}_to_{target} does not go through a movie "
                              f"or names an unknown role (known: movie, {', '.join(sorted(ROLE_RELATIONS))})")
    return tuple(hops)


#: The mapping itself, for every known question type: ``QTYPE_CHAINS["movie_to_director"] == (Hop("directed_by"),)``.
QTYPE_CHAINS: dict[str, Chain] = {q: chain_for_qtype(q) for types in QTYPES.values() for q in types}


def iter_metaqa_questions(data_dir: Path, hops: int, split: str) -> Iterator[dict[str, Any]]:
    """Yield the questions of ``{hops}-hop/qa_{split}.txt`` with their aligned question type:
    ``{"line", "question", "topic", "answers", "qtype"}`` (answers as a list, in file order)."""
    base = Path(data_dir) / f"{hops}-hop"
    qa_path, type_path = base / f"qa_{split}.txt", base / f"qa_{split}_qtype.txt"
    for path in (qa_path, type_path):
        if not path.is_file():
            raise DataError(f"{path}: no such file (expected the MetaQA {hops}-hop {split} split)")
    with qa_path.open(encoding="utf-8") as qa, type_path.open(encoding="utf-8") as types:
        for number, (line, qtype_line) in enumerate(itertools.zip_longest(qa, types), start=1):
            if line is None or qtype_line is None:
                raise DataError(f"{type_path}: not aligned with {qa_path}: they differ in length at line {number}")
            line = line.rstrip("\r\n")
            if not line:
                continue
            parts = line.split("\t")
            if len(parts) != 2:
                raise DataError(f"{qa_path}:{number}: expected question<TAB>answer1|answer2|...")
            question, answers = parts
            topics = _TOPIC_RE.findall(question)
            if len(topics) != 1:
                raise DataError(f"{qa_path}:{number}: expected one [topic entity] in the question, found {len(topics)}")
            yield {"line": number, "question": question, "topic": topics[0],
                   "answers": [a for a in answers.split("|") if a], "qtype": qtype_line.strip()}


def _comma_parts(label: str) -> list[str]:
    return [p.strip() for p in label.split(",") if p.strip()] if "," in label else []


def run_metaqa_chain(kg: KnowledgeGraph, topic: str, qtype: str, *, chain_limit: int = 1_000_000) -> tuple[set[str], bool]:
    """The answers MetaQA means by ``qtype`` from ``topic``: the chain, hop by hop, never coming back to the topic.

    MetaQA's gold answers never contain the topic entity itself: ``movie_to_actor_to_movie`` asks for the *other*
    movies of the topic movie's actors, ``movie_to_director_to_movie_to_actor`` goes through the director's *other*
    movies, and ``writer_to_movie_to_director`` leaves out the writer when they directed their own script. So the topic
    is dropped from every later position of the same kind (movie vs. person/value). The kind matters because ids are
    labels: a writer named "Malcolm X" wrote the movie "Malcolm X", which must stay. Returns (answers, truncated).
    """
    chain = QTYPE_CHAINS.get(qtype) or chain_for_qtype(qtype)
    roles = qtype.split("_to_")
    topic_is_movie = roles[0] == "movie"
    frontier = [topic]
    truncated = False
    pending: list[Hop] = []
    for position, hop in enumerate(chain, start=1):
        pending.append(hop)
        same_kind = (roles[position] == "movie") == topic_is_movie
        if not same_kind and position < len(chain):
            continue  # no filter needed here: keep walking inside one run_chain call
        result = kg.run_chain(frontier, tuple(pending), limit=chain_limit)
        truncated = truncated or result.truncated
        pending = []
        frontier = [e for e in result.entities if not (same_kind and e == topic)]
        if not frontier:
            break
    return set(frontier), truncated


def _failure_kind(kg: KnowledgeGraph, topic: str, qtype: str, gold: set[str], reached: set[str]) -> str:
    """Sort a miss: ``comma_split_gold`` (MetaQA cut an answer like "Paris, Texas" into "Paris" and "Texas"),
    ``same_title_movies`` (extra answers only, and the topic title has several release years: remakes merged under
    one label while gold follows one film), ``extra_only`` (other extra-only misses, typically same-title films of one
    year or without a year), ``missing`` (a gold answer was not reached: a real gap or bug)."""
    missing = gold - reached
    if missing:
        if all(any(m in _comma_parts(r) for r in reached - gold) for m in missing):
            return "comma_split_gold"
        return "missing"
    if (qtype.startswith("movie_to") and kg.has_relation("release_year")
            and len(kg.neighbors(topic, "release_year", "out", limit=100)) > 1):
        return "same_title_movies"
    return "extra_only"


def check_metaqa_chains(kg: KnowledgeGraph, data_dir: Path, hops: int, split: str, *, limit: int | None = None,
                        max_failures: int = 20, chain_limit: int = 1_000_000) -> dict[str, Any]:
    """Run each question's chain from its [topic] (see :func:`run_metaqa_chain`: the topic is dropped from later
    positions of its kind, as MetaQA's gold answers never contain it) and compare with the gold answers.

    Returns counts and shares: ``exact`` (reached set == gold set), ``covered`` (every gold answer reached), per
    question type; ``failure_kinds`` sorts the misses (see :func:`_failure_kind`: known MetaQA artefacts vs. real
    ``missing`` answers); plus up to
    ``max_failures`` examples. ``limit`` checks only the first questions of the split.
    """
    started = time.perf_counter()
    total = exact = covered = topic_missing = truncated = 0
    by_type: dict[str, Counter[str]] = {}
    kinds: Counter[str] = Counter()
    failures: list[dict[str, Any]] = []
    for item in iter_metaqa_questions(data_dir, hops, split):
        if limit is not None and total >= limit:
            break
        qtype = item["qtype"]
        chain = QTYPE_CHAINS.get(qtype) or chain_for_qtype(qtype)
        total += 1
        counts = by_type.setdefault(qtype, Counter())
        counts["questions"] += 1
        topic = item["topic"]
        gold = set(item["answers"])
        has_topic = kg.has_entity(topic) if hasattr(kg, "has_entity") else True
        if has_topic:
            reached, cut = run_metaqa_chain(kg, topic, qtype, chain_limit=chain_limit)
            truncated += int(cut)
        else:
            topic_missing += 1
            reached = set()
        is_exact = reached == gold
        is_covered = gold <= reached
        exact += is_exact
        covered += is_covered
        counts["exact"] += is_exact
        counts["covered"] += is_covered
        if is_exact:
            continue
        kind = _failure_kind(kg, topic, qtype, gold, reached) if has_topic else "topic_not_in_kg"
        kinds[kind] += 1
        if len(failures) < max_failures:
            failures.append({"line": item["line"], "question": item["question"], "qtype": qtype,
                             "chain": format_chain(chain), "kind": kind,
                             "missing": sorted(gold - reached)[:10], "extra": sorted(reached - gold)[:10],
                             "gold": len(gold), "reached": len(reached)})
    def share(n: int) -> float:
        return n / total if total else 0.0

    return {
        "hops": hops, "split": split, "questions": total,
        "exact": exact, "exact_share": share(exact),
        "covered": covered, "covered_share": share(covered),
        "topic_missing": topic_missing, "truncated": truncated,
        "failure_kinds": dict(kinds),
        "by_qtype": {q: {"chain": format_chain(QTYPE_CHAINS.get(q) or chain_for_qtype(q)),
                         "questions": c["questions"], "exact_share": c["exact"] / c["questions"],
                         "covered_share": c["covered"] / c["questions"]}
                     for q, c in sorted(by_type.items())},
        "failures": failures,
        "seconds": time.perf_counter() - started,
    }
