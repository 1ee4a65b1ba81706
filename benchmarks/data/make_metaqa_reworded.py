"""Generate ``src/kgqa/data/metaqa_reworded``: MetaQA questions in our own wordings, 100 per hop (1, 2, 3).

For each hop, a seeded sample of MetaQA's *test* questions, stratified over the question types (an equal share per type,
the remainder spread over randomly chosen types), keeps only each question's topic entity and question type; the
question is re-rendered from one of the hand-written templates below (never one of MetaQA's), and the answers are
recomputed by running the type's gold relation chain on kb.txt (:func:`kgqa.datasets.metaqa_chains.run_metaqa_chain`).
Questions whose chain gives no answer or more than ``--max-answers`` are skipped. The output is MetaQA's vanilla format
(``{k}-hop/qa_test.txt`` and the aligned ``{k}-hop/qa_test_qtype.txt``), so ``_load_metaqa`` reads it as is.

    python benchmarks/data/make_metaqa_reworded.py --kg /tmp/kgs/metaqa --data-dir ../shared/data/metaqa

``--kg`` is an embedded import of kb.txt (``kgqa kg import .../metaqa/kb.txt --format metaqa --out DIR``); ``--data-dir``
defaults to ``$KGQA_DATA_DIR/metaqa``. The output is deterministic for a given seed (default 7), KB and MetaQA release.

``--split dev`` writes the dev split instead (``{k}-hop/qa_dev.txt``, topics from MetaQA's *dev* questions, 200 per hop
by default) from a second set of templates, ``metaqa_reworded_dev_templates.json`` beside this script, written by
another author who had not seen the test templates, the test files or kgqa's phrase table: wordings to tune and
choose on, so that the test split's stay unseen. Its templates are checked against MetaQA's dev and test wordings and
against the test templates here.

``--split dev2`` writes a second dev split (``{k}-hop/qa_dev2.txt``, MetaQA dev topics, 200 per hop, seed 8 by
default) from ``metaqa_reworded_dev2_templates.json``: a third author's wordings (4 per type, written in the sixteenth
session from the chain descriptions alone), for choosing once the first dev split had been chosen on too often. Its
templates are checked as the dev ones are, and also against the dev templates and every template kgqa's scorers
train with (the packaged ``metaqa`` and ``metaqa_many`` files); a template that collides with any of these or with
MetaQA's wordings is dropped and reported (short plain wordings often do: 28 of the 196 written).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import random
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from kgqa.datasets.metaqa_chains import QTYPES, iter_metaqa_questions, run_metaqa_chain
from kgqa.kg import open_kg
from kgqa.normalize import wording_key

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "src" / "kgqa" / "data" / "metaqa_reworded"
DEV_TEMPLATES = Path(__file__).resolve().parent / "metaqa_reworded_dev_templates.json"
DEV2_TEMPLATES = Path(__file__).resolve().parent / "metaqa_reworded_dev2_templates.json"

#: Question type -> our own wordings (``{topic}`` becomes ``[topic]``). None is one of MetaQA's templates; the
#: generator checks this against the MetaQA test files (case and punctuation ignored) before writing anything.
TEMPLATES: dict[str, list[str]] = {
    # ---- 1-hop ------------------------------------------------------------------------------------------------------
    "actor_to_movie": [
        "Which films feature {topic} in the cast?",
        "List the movies with {topic} in a starring role.",
        "In what pictures has {topic} had an acting role?",
        "Name the films {topic} performed in.",
    ],
    "director_to_movie": [
        "Which movies were made under the direction of {topic}?",
        "List the films helmed by {topic}.",
        "Give me the filmography of {topic} as a director.",
        "For which pictures was {topic} behind the camera?",
    ],
    "movie_to_actor": [
        "Name the cast members of {topic}.",
        "Which performers appear in {topic}?",
        "Who is in the cast of {topic}?",
        "Give the actors who played in {topic}.",
    ],
    "movie_to_director": [
        "Who was behind the camera on {topic}?",
        "{topic} was helmed by whom?",
        "Which filmmaker is credited with directing {topic}?",
        "Name the person who directed the picture {topic}.",
    ],
    "movie_to_genre": [
        "{topic} belongs to which genre?",
        "How would you categorize {topic} by genre?",
        "Which genre label fits {topic}?",
        "Name the genre of the picture {topic}.",
    ],
    "movie_to_imdbrating": [
        "What rating does {topic} have on IMDb?",
        "How well is {topic} rated by IMDb users?",
        "Give the IMDb score of {topic}.",
    ],
    "movie_to_imdbvotes": [
        "How many votes has {topic} received on IMDb?",
        "What is the IMDb vote count for {topic}?",
        "How widely has {topic} been voted on at IMDb?",
    ],
    "movie_to_language": [
        "In which language was {topic} made?",
        "Which language do the characters of {topic} speak?",
        "Name the original language of {topic}.",
        "{topic} was filmed in what language?",
    ],
    "movie_to_tags": [
        "Which keywords are attached to {topic}?",
        "What tags has {topic} been given?",
        "List some keywords associated with the film {topic}.",
        "What labels or themes are linked to {topic}?",
    ],
    "movie_to_writer": [
        "Who penned the script of {topic}?",
        "Name the screenwriter behind {topic}.",
        "Whose writing credit is on {topic}?",
        "{topic} was scripted by whom?",
    ],
    "movie_to_year": [
        "In which year did {topic} come out?",
        "When did {topic} hit theaters?",
        "{topic} premiered in what year?",
        "Which year saw the release of {topic}?",
    ],
    "tag_to_movie": [
        "Which films are tagged with {topic}?",
        "Find movies labelled with the keyword {topic}.",
        "List films that have {topic} among their tags.",
        "Name pictures whose keywords include {topic}.",
    ],
    "writer_to_movie": [
        "Which films have a screenplay by {topic}?",
        "Name the movies {topic} wrote the script for.",
        "List pictures credited to the writer {topic}.",
        "For which films did {topic} receive a writing credit?",
    ],
    # ---- 2-hop ------------------------------------------------------------------------------------------------------
    "actor_to_movie_to_actor": [
        "Who has shared the screen with {topic}?",
        "Name the actors who appeared alongside {topic} in a film.",
        "Which performers have been cast in a movie together with {topic}?",
        "List {topic}'s fellow cast members across their films.",
    ],
    "actor_to_movie_to_director": [
        "Which filmmakers have directed {topic}?",
        "Name the directors {topic} has worked with as an actor.",
        "Who directed the films in which {topic} had a role?",
        "{topic} has acted under which directors?",
    ],
    "actor_to_movie_to_genre": [
        "Which genres do {topic}'s films belong to?",
        "What genres has {topic} acted in?",
        "Name the genres of the pictures featuring {topic}.",
        "In which genres can {topic} be seen on screen?",
    ],
    "actor_to_movie_to_language": [
        "In which languages are the films featuring {topic}?",
        "What languages are spoken in the pictures {topic} appears in?",
        "Name the languages of the movies with {topic} in the cast.",
    ],
    "actor_to_movie_to_writer": [
        "Who wrote the scripts of the films {topic} appeared in?",
        "Name the screenwriters whose films cast {topic}.",
        "Which writers penned movies featuring {topic}?",
    ],
    "actor_to_movie_to_year": [
        "In which years were films featuring {topic} released?",
        "When did the pictures with {topic} in the cast come out?",
        "List the release years of {topic}'s films.",
    ],
    "director_to_movie_to_actor": [
        "Which actors have been directed by {topic}?",
        "Name the performers in films made by {topic}.",
        "Who appeared in pictures helmed by {topic}?",
        "Who has {topic} cast in their films?",
    ],
    "director_to_movie_to_director": [
        "Who shared directing credits with {topic}?",
        "Name the filmmakers who directed a movie jointly with {topic}.",
        "Which directors have teamed up with {topic} behind the camera?",
    ],
    "director_to_movie_to_genre": [
        "Which genres has {topic} worked in as a director?",
        "What genres do the films helmed by {topic} belong to?",
        "Name the genres of pictures {topic} directed.",
    ],
    "director_to_movie_to_language": [
        "In which languages has {topic} directed films?",
        "What languages are spoken in films helmed by {topic}?",
        "Name the languages of the pictures {topic} directed.",
    ],
    "director_to_movie_to_writer": [
        "Which screenwriters wrote films that {topic} directed?",
        "Who provided the scripts for movies helmed by {topic}?",
        "Whose screenplays has {topic} directed?",
    ],
    "director_to_movie_to_year": [
        "In which years did {topic} release a film as director?",
        "When did films helmed by {topic} come out?",
        "List the years in which pictures directed by {topic} were released.",
    ],
    "movie_to_actor_to_movie": [
        "What other films feature actors from {topic}?",
        "Which movies have a cast member in common with {topic}?",
        "Name films in which someone from the cast of {topic} also appears.",
        "{topic}'s cast also appeared in which other movies?",
    ],
    "movie_to_director_to_movie": [
        "What else did the filmmaker behind {topic} direct?",
        "Which other films come from the director of {topic}?",
        "Name other pictures helmed by whoever directed {topic}.",
    ],
    "movie_to_writer_to_movie": [
        "What other films were scripted by the writer of {topic}?",
        "Which movies have a screenwriter in common with {topic}?",
        "Name other pictures penned by whoever wrote {topic}.",
    ],
    "writer_to_movie_to_actor": [
        "Which actors appeared in films scripted by {topic}?",
        "Who was cast in movies that {topic} wrote?",
        "Name the performers in pictures with a screenplay by {topic}.",
    ],
    "writer_to_movie_to_director": [
        "Who directed the scripts written by {topic}?",
        "Which filmmakers brought {topic}'s screenplays to the screen?",
        "Name the directors of films penned by {topic}.",
    ],
    "writer_to_movie_to_genre": [
        "Which genres has {topic} written films in?",
        "What genres do the screenplays of {topic} fall into?",
        "Name the genres of pictures scripted by {topic}.",
    ],
    "writer_to_movie_to_language": [
        "In which languages are the films scripted by {topic}?",
        "What languages are spoken in movies penned by {topic}?",
        "Name the languages of pictures with a screenplay by {topic}.",
    ],
    "writer_to_movie_to_writer": [
        "Who has shared a writing credit with {topic}?",
        "Which screenwriters have collaborated with {topic} on a script?",
        "Name the writers who penned a film jointly with {topic}.",
    ],
    "writer_to_movie_to_year": [
        "In which years were films scripted by {topic} released?",
        "When did movies penned by {topic} come out?",
        "List the release years of pictures with a screenplay by {topic}.",
    ],
    # ---- 3-hop: other films reached through the topic movie's actors / director / writer, then one of their fields ----
    "movie_to_actor_to_movie_to_director": [
        "Who directed films featuring the cast of {topic}?",
        "{topic}'s cast also appeared in films directed by whom?",
        "Name the directors of movies that have an actor in common with {topic}.",
    ],
    "movie_to_actor_to_movie_to_genre": [
        "What genres are the other films of {topic}'s cast in?",
        "Which genres do movies featuring actors from {topic} belong to?",
        "Name the genres of films that have a cast member in common with {topic}.",
    ],
    "movie_to_actor_to_movie_to_language": [
        "In which languages are the other films of {topic}'s actors?",
        "What languages are spoken in movies featuring someone from the cast of {topic}?",
        "Name the languages of films that have a performer in common with {topic}.",
    ],
    "movie_to_actor_to_movie_to_writer": [
        "Who wrote the scripts of other films featuring the cast of {topic}?",
        "Which screenwriters penned movies with actors from {topic}?",
        "Name the writers of films that have a cast member in common with {topic}.",
    ],
    "movie_to_actor_to_movie_to_year": [
        "In which years were other films with {topic}'s actors released?",
        "When did movies featuring members of the cast of {topic} come out?",
        "List the release years of films that have a performer in common with {topic}.",
    ],
    "movie_to_director_to_movie_to_actor": [
        "Which actors appear in other films by the director of {topic}?",
        "Who was cast in movies made by the filmmaker behind {topic}?",
        "Name the performers in pictures that have a director in common with {topic}.",
    ],
    "movie_to_director_to_movie_to_genre": [
        "Which genres do the other films by {topic}'s director belong to?",
        "Name the genres of movies that have a director in common with {topic}.",
        "In what genres has the filmmaker behind {topic} made other films?",
    ],
    "movie_to_director_to_movie_to_language": [
        "In which languages are the other films by the director of {topic}?",
        "What languages are spoken in movies made by the filmmaker behind {topic}?",
        "Which languages are the films that share a director with {topic} made in?",
    ],
    "movie_to_director_to_movie_to_writer": [
        "Who wrote the other films directed by the filmmaker of {topic}?",
        "Which screenwriters penned movies that have a director in common with {topic}?",
        "Name the writers of pictures helmed by whoever directed {topic}.",
    ],
    "movie_to_director_to_movie_to_year": [
        "In which years did the director of {topic} release other films?",
        "When did movies that have a director in common with {topic} come out?",
        "List the release years of pictures helmed by whoever directed {topic}.",
    ],
    "movie_to_writer_to_movie_to_actor": [
        "Which actors appear in other films by the screenwriter of {topic}?",
        "Who was cast in movies penned by whoever wrote {topic}?",
        "Name the performers in films that have a writer in common with {topic}.",
    ],
    "movie_to_writer_to_movie_to_director": [
        "Who directed other scripts by the writer of {topic}?",
        "Which filmmakers helmed movies that have a screenwriter in common with {topic}?",
        "Name the directors of pictures penned by whoever wrote {topic}.",
    ],
    "movie_to_writer_to_movie_to_genre": [
        "Which genres do the other films by {topic}'s screenwriter belong to?",
        "Name the genres of movies that have a writer in common with {topic}.",
        "What genres are the pictures penned by whoever wrote {topic}?",
    ],
    "movie_to_writer_to_movie_to_language": [
        "In which languages are the other films by the writer of {topic}?",
        "What languages are spoken in movies that have a screenwriter in common with {topic}?",
        "Name the languages of pictures penned by whoever wrote {topic}.",
    ],
    "movie_to_writer_to_movie_to_year": [
        "In which years were other films by {topic}'s screenwriter released?",
        "When did movies that have a writer in common with {topic} come out?",
        "List the release years of pictures penned by whoever wrote {topic}.",
    ],
}

@functools.cache  # the dev2 path and check_templates both ask for dev + test: read the files once
def metaqa_wordings(data_dir: Path, splits: tuple[str, ...] = ("test",)) -> frozenset[str]:
    """Every MetaQA wording of ``splits`` (all hops), normalised."""
    return frozenset(wording_key(item["question"]) for split in splits for hops in (1, 2, 3)
                     for item in iter_metaqa_questions(data_dir, hops, split))


def dev_templates(path: Path = DEV_TEMPLATES) -> dict[str, list[str]]:
    """The dev split's templates (question type -> wordings), read from their JSON file."""
    return json.loads(path.read_text(encoding="utf-8"))


def training_wordings() -> set[str]:
    """Every template kgqa's packaged template files train scorers with, normalised."""
    from kgqa.methods.fog.wordings.templates import ChainTemplates

    return {wording_key(t) for name in ("metaqa", "metaqa_many") for t in ChainTemplates.load(name).wordings()}


def drop_known(templates_by_type: dict[str, list[str]], known: set[str]) -> dict[str, list[str]]:
    """``templates_by_type`` without the templates whose wording is in ``known`` (each one printed)."""
    kept: dict[str, list[str]] = {qtype: [] for qtype in templates_by_type}
    for qtype, templates in templates_by_type.items():
        for t in templates:
            if wording_key(t) in known:
                print(f"dropped ({qtype}): {t!r} is a wording kgqa already has", file=sys.stderr)
            else:
                kept[qtype].append(t)
    return kept


def check_templates(data_dir: Path, templates_by_type: dict[str, list[str]] | None = None,
                    split: str = "test") -> None:
    """Every type has >= 2 templates, each with one ``{topic}``, none one of MetaQA's wordings (of the split's
    and, for dev, of test too); the dev templates share none with the test templates."""
    templates_by_type = TEMPLATES if templates_by_type is None else templates_by_type
    known = {q for types in QTYPES.values() for q in types}
    if set(templates_by_type) != known:
        raise SystemExit(f"templates/types mismatch: missing {sorted(known - set(templates_by_type))}, "
                         f"unknown {sorted(set(templates_by_type) - known)}")
    theirs = metaqa_wordings(data_dir, ("test",) if split == "test" else (split, "test"))
    ours = {wording_key(t) for ts in TEMPLATES.values() for t in ts} if split != "test" else set()
    for qtype, templates in templates_by_type.items():
        if len(set(templates)) < 2:
            raise SystemExit(f"{qtype}: needs at least 2 distinct templates")
        for template in templates:
            if template.count("{topic}") != 1:
                raise SystemExit(f"{qtype}: {template!r} must hold exactly one {{topic}}")
            if wording_key(template) in theirs:
                raise SystemExit(f"{qtype}: {template!r} is one of MetaQA's own wordings")
            if wording_key(template) in ours:
                raise SystemExit(f"{qtype}: {template!r} is one of the test split's templates")


def quotas(qtypes: list[str], total: int, rng: random.Random) -> dict[str, int]:
    """An equal share of ``total`` per type; the remainder goes to randomly chosen types, one each."""
    base, extra = divmod(total, len(qtypes))
    lucky = set(rng.sample(qtypes, extra))
    return {q: base + (q in lucky) for q in qtypes}


def make_hop(kg: Any, data_dir: Path, hops: int, total: int, rng: random.Random,
             max_answers: int, split: str = "test",
             templates_by_type: dict[str, list[str]] | None = None) -> list[tuple[str, list[str], str]]:
    """``total`` questions ``(text, sorted answers, qtype)`` for ``hops``, topics from MetaQA's ``split``, in a
    shuffled order."""
    templates_by_type = TEMPLATES if templates_by_type is None else templates_by_type
    by_type: dict[str, list[str]] = defaultdict(list)  # qtype -> distinct topics, in file order
    seen: set[tuple[str, str]] = set()
    for item in iter_metaqa_questions(data_dir, hops, split):
        key = (item["qtype"], item["topic"])
        if key not in seen:
            seen.add(key)
            by_type[item["qtype"]].append(item["topic"])
    qtypes = [q for q in QTYPES[hops] if by_type.get(q)]  # types with questions (1-hop test: no imdb types)
    want = quotas(qtypes, total, rng)
    pools = {}
    for qtype in qtypes:
        pool = list(by_type[qtype])
        rng.shuffle(pool)
        pools[qtype] = iter(pool)
    template_cycle = {}
    for qtype in qtypes:
        order = list(templates_by_type[qtype])
        rng.shuffle(order)
        template_cycle[qtype] = itertools.cycle(order)

    picked: list[tuple[str, list[str], str]] = []
    missing = 0

    def take(qtype: str) -> bool:
        for topic in pools[qtype]:
            answers, truncated = run_metaqa_chain(kg, topic, qtype)
            if truncated or not answers or len(answers) > max_answers:
                continue
            text = next(template_cycle[qtype]).format(topic=f"[{topic}]")
            picked.append((text, sorted(answers), qtype))
            return True
        return False

    for qtype in qtypes:
        for got in range(want[qtype]):
            if not take(qtype):
                missing += want[qtype] - got
                break
    while missing:  # a type ran out of usable topics: top up from the others, round robin
        progressed = False
        for qtype in qtypes:
            if missing and take(qtype):
                missing -= 1
                progressed = True
        if not progressed:
            raise SystemExit(f"{hops}-hop: only {len(picked)} usable questions, wanted {total}")
    rng.shuffle(picked)
    return picked


def write_hop(out: Path, hops: int, rows: list[tuple[str, list[str], str]], split: str = "test") -> None:
    folder = out / f"{hops}-hop"
    folder.mkdir(parents=True, exist_ok=True)
    for text, answers, _ in rows:
        if "\t" in text or any("|" in a or "\t" in a for a in answers):
            raise SystemExit(f"{text!r}: a tab or '|' in a question or answer would break the MetaQA format")
    (folder / f"qa_{split}.txt").write_text("".join(f"{t}\t{'|'.join(a)}\n" for t, a, _ in rows), encoding="utf-8")
    (folder / f"qa_{split}_qtype.txt").write_text("".join(f"{q}\n" for _, _, q in rows), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kg", default="/tmp/kgs/metaqa", help="embedded import of MetaQA's kb.txt")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="MetaQA directory with {1,2,3}-hop/qa_test.txt (default: $KGQA_DATA_DIR/metaqa)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--split", choices=("test", "dev", "dev2"), default="test",
                        help="test: the templates above over MetaQA test topics; dev / dev2: the dev (dev2) templates' "
                             "file over MetaQA dev topics")
    parser.add_argument("--seed", type=int, default=None, help="default 7 (test, dev), 8 (dev2)")
    parser.add_argument("--per-hop", type=int, default=None, help="questions per hop (default: 100 test, 200 dev)")
    parser.add_argument("--max-answers", type=int, default=200)
    args = parser.parse_args(argv)
    data_dir = args.data_dir
    if data_dir is None:
        if not os.environ.get("KGQA_DATA_DIR"):
            parser.error("give --data-dir or set KGQA_DATA_DIR")
        data_dir = Path(os.environ["KGQA_DATA_DIR"]) / "metaqa"
    topics_split = "dev" if args.split == "dev2" else args.split
    if args.split == "dev2":
        known = (training_wordings() | metaqa_wordings(data_dir, ("dev", "test"))
                 | {wording_key(t) for ts in [*dev_templates().values(), *TEMPLATES.values()] for t in ts})
        templates_by_type = drop_known(dev_templates(DEV2_TEMPLATES), known)
    else:
        templates_by_type = TEMPLATES if args.split == "test" else dev_templates()
    per_hop = args.per_hop or (100 if args.split == "test" else 200)
    check_templates(data_dir, templates_by_type, topics_split)
    kg = open_kg(args.kg)
    rng = random.Random(args.seed if args.seed is not None else (8 if args.split == "dev2" else 7))
    for hops in (1, 2, 3):
        rows = make_hop(kg, data_dir, hops, per_hop, rng, args.max_answers, topics_split, templates_by_type)
        write_hop(args.out, hops, rows, args.split)
        print(f"{hops}-hop: {len(rows)} questions, {len({q for _, _, q in rows})} types -> {args.out / f'{hops}-hop'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
