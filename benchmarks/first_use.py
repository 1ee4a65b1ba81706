"""First use, as a new user meets kgqa (issue 52 item 14): the default offline ``kgqa ask`` on the demo KG.

Sets of questions about the demo KG, written for this benchmark (none is one of the demo's 61 questions in
``src/kgqa/data/demo/questions.jsonl``): 1-3 hops, a year or entity constraint, an award, an alias ("Oscar",
"Tarantino"). ``dev`` is the set the defaults were tuned on; ``held-out`` was written at the same time and read only
for the final figures (three times in all: issue 52's closing notes list each run). ``dev2`` (22 more, written
later to tune on a wider set than 10 questions) was written after the held-out set had been read, so it may echo
its kinds of question; it never copies one, and no choice is made on the held-out set. ``held-out-2`` (10, the
held-out set's kinds) was written and committed after the third read of ``held-out``, before any further choice,
and is read once for the figure that follows those choices. ``held-out-3`` (10 more of the same kinds) was written
and committed at the start of the next round of choices, after ``held-out-2``'s one read, and is read once for that
round's figure. Each question's gold
answers are written out by name and checked, before anything runs, against the chain (and constraint) that
answers it on the demo KG, so a gold answer is a KG fact, not a guess.

Each question is one real ``kgqa ask QUESTION --json`` process with the defaults (the config's method, the local
model, the demo KG; ``--ask-arg`` adds flags, e.g. ``--ask-arg=--method --ask-arg=ccor`` to measure another method),
timed from start to exit: what a user waits. The first question of a run with a fresh cache also builds what the
method needs (the demo KG, the demo scorer), so the latency figure is the median *after* the first question.

A question is right when the answers are exactly its gold answers (by KG id, order aside); hit@1 (the first answer is
a gold one) is reported beside it.

    python benchmarks/first_use.py                      # both sets, the defaults
    python benchmarks/first_use.py --set dev --ask-arg=--method --ask-arg=ccor --tag ccor
    python benchmarks/first_use.py --fresh-cache        # a new cache directory: the first question builds everything
    python benchmarks/first_use.py --set tune --in-process --tag tune   # a fast tuning pass (one process)

Writes ``benchmarks/results/first_use{-TAG}.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
YEAR = "<http://www.w3.org/2001/XMLSchema#gYear>"


@dataclass(frozen=True)
class Item:
    """One question: its text, what it exercises, the chain that answers it from ``topic`` (demo keys, ``m.0demo_``
    left out), an optional constraint (source position, chain, target key or ``"YEAR"``) and the gold names."""

    text: str
    kind: str
    topic: str
    chain: str
    gold: tuple[str, ...]
    constraint: tuple[int, str, str] | None = None


SETS: dict[str, tuple[Item, ...]] = {
    "dev": (
        Item("Which Quentin Tarantino movie came out in 2009?", "constraint (year)", "quentin_tarantino",
             "film.director.film", ("Inglourious Basterds",), (1, "film.film.initial_release_date", "2009")),
        Item("Who wrote the score for Titanic?", "1 hop", "titanic", "film.film.music", ("James Horner",)),
        Item("Who got the Oscar for Best Director in 2020?", "award, alias, constraint (year)",
             "academy_award_for_best_director", "award.award_category.winners,award.award_honor.award_winner",
             ("Bong Joon-ho",), (1, "award.award_honor.year", "2020")),
        Item("Who directed The Shape of Water?", "1 hop", "the_shape_of_water", "film.film.directed_by",
             ("Guillermo del Toro",)),
        Item("Where was the director of Titanic born?", "2 hops", "titanic",
             "film.film.directed_by,people.person.place_of_birth", ("Kapuskasing",)),
        Item("Which actors starred in Jaws?", "2 hops (CVT)", "jaws", "film.film.starring,film.performance.actor",
             ("Roy Scheider",)),
        Item("Who directed the films Harrison Ford starred in?", "3 hops (CVT)", "harrison_ford",
             "film.actor.film,film.performance.film,film.film.directed_by",
             ("Denis Villeneuve", "Francis Ford Coppola", "George Lucas", "Ridley Scott", "Steven Spielberg")),
        Item("Which film won Best Picture in 2015?", "award, alias, constraint (year)",
             "academy_award_for_best_picture", "award.award_category.winners,award.award_honor.honored_for",
             ("Birdman",), (1, "award.award_honor.year", "2015")),
        Item("Which country is the director of Gravity from?", "2 hops", "gravity",
             "film.film.directed_by,people.person.nationality", ("Mexico",)),
        Item("Which Tarantino films did Brad Pitt star in?", "alias, constraint (entity)", "quentin_tarantino",
             "film.director.film", ("Inglourious Basterds", "Once Upon a Time in Hollywood"),
             (1, "film.film.starring,film.performance.actor", "brad_pitt")),
    ),
    "dev2": (
        Item("Who directed Gladiator?", "1 hop", "gladiator", "film.film.directed_by", ('Ridley Scott',)),
        Item("Who did the music for Memento?", "1 hop", "memento", "film.film.music", ('David Julyan',)),
        Item("Which films did Ridley Scott direct?", "1 hop", "ridley_scott", "film.director.film",
             ('Alien', 'Blade Runner', 'Gladiator')),
        Item("When was Inception released?", "1 hop", "inception", "film.film.initial_release_date", ('2010',)),
        Item("Which country is Peter Jackson from?", "1 hop", "peter_jackson", "people.person.nationality",
             ('New Zealand',)),
        Item("Which films did Hans Zimmer score?", "1 hop", "hans_zimmer", "film.music_contributor.film",
             ('Batman Begins', 'Dune', 'Dune: Part Two', 'Dunkirk', 'Gladiator', 'Inception', 'Interstellar',
              'The Dark Knight', 'The Dark Knight Rises')),
        Item("What genre is Jaws?", "1 hop", "jaws", "film.film.genre", ('Adventure Film', 'Thriller')),
        Item("Who composed the music for the films directed by Ridley Scott?", "2 hops", "ridley_scott",
             "film.director.film,film.film.music", ('Hans Zimmer', 'Jerry Goldsmith', 'Vangelis')),
        Item("What nationality is the director of Parasite?", "2 hops", "parasite",
             "film.film.directed_by,people.person.nationality", ('South Korea',)),
        Item("When was the director of Jaws born?", "2 hops", "jaws",
             "film.film.directed_by,people.person.date_of_birth", ('1946-12-18',)),
        Item("Who directed the prequel to Aliens?", "2 hops", "aliens", "film.film.prequel,film.film.directed_by",
             ('Ridley Scott',)),
        Item("Who acted in Titanic?", "2 hops (CVT)", "titanic", "film.film.starring,film.performance.actor",
             ('Kate Winslet', 'Leonardo DiCaprio')),
        Item("What films did Cillian Murphy act in?", "2 hops (CVT)", "cillian_murphy",
             "film.actor.film,film.performance.film", ('Inception', 'Oppenheimer')),
        Item("Where were the actors of Gravity born?", "3 hops (CVT)", "gravity",
             "film.film.starring,film.performance.actor,people.person.place_of_birth", ('Arlington', 'Lexington')),
        Item("What is the capital of the country Hans Zimmer is from?", "2 hops", "hans_zimmer",
             "people.person.nationality,location.country.capital", ('Berlin',)),
        Item("Which Christopher Nolan film came out in 2014?", "constraint (year)", "christopher_nolan",
             "film.director.film", ('Interstellar',), (1, 'film.film.initial_release_date', '2014')),
        Item("Which Steven Spielberg movie was released in 1975?", "constraint (year)", "steven_spielberg",
             "film.director.film", ('Jaws',), (1, 'film.film.initial_release_date', '1975')),
        Item("Which Ridley Scott films starred Russell Crowe?", "constraint (entity)", "ridley_scott",
             "film.director.film", ('Gladiator',), (1, 'film.film.starring,film.performance.actor', 'russell_crowe')),
        Item("Who won the Oscar for Best Supporting Actor in 2010?", "award, alias, constraint (year)",
             "academy_award_for_best_supporting_actor", "award.award_category.winners,award.award_honor.award_winner",
             ('Christoph Waltz',), (1, 'award.award_honor.year', '2010')),
        Item("Which movie won the Best Picture Oscar in 2013?", "award, alias, constraint (year)",
             "academy_award_for_best_picture", "award.award_category.winners,award.award_honor.honored_for",
             ('Argo',), (1, 'award.award_honor.year', '2013')),
        Item("Who directed the film that won Best Picture in 2017?", "award, 3 hops, constraint (year)",
             "academy_award_for_best_picture",
             "award.award_category.winners,award.award_honor.honored_for,film.film.directed_by", ('Barry Jenkins',),
             (1, 'award.award_honor.year', '2017')),
        Item("Which Oscars did Christoph Waltz win?", "award", "christoph_waltz",
             "award.award_winner.awards_won,award.award_honor.award", ('Academy Award for Best Supporting Actor',)),
    ),
    "held-out": (
        Item("Which Martin Scorsese film came out in 2006?", "constraint (year)", "martin_scorsese",
             "film.director.film", ("The Departed",), (1, "film.film.initial_release_date", "2006")),
        Item("Who composed the soundtrack of Avatar?", "1 hop", "avatar", "film.film.music", ("James Horner",)),
        Item("Who won the Oscar for Best Actor in 2019?", "award, alias, constraint (year)",
             "academy_award_for_best_actor", "award.award_category.winners,award.award_honor.award_winner",
             ("Rami Malek",), (1, "award.award_honor.year", "2019")),
        Item("Who directed Moonlight?", "1 hop", "moonlight", "film.film.directed_by", ("Barry Jenkins",)),
        Item("Who played Hannibal Lecter?", "2 hops (CVT)", "char_hannibal_lecter",
             "film.film_character.portrayed_in_films,film.performance.actor", ("Anthony Hopkins",)),
        Item("Where was the director of La La Land born?", "2 hops", "la_la_land",
             "film.film.directed_by,people.person.place_of_birth", ("Providence",)),
        Item("Which genres are the films Uma Thurman starred in?", "3 hops (CVT)", "uma_thurman",
             "film.actor.film,film.performance.film,film.film.genre", ("Action Film", "Thriller")),
        Item("Which Best Picture winner was directed by Clint Eastwood?", "award, alias, constraint (entity)",
             "clint_eastwood", "film.director.film", ("Million Dollar Baby", "Unforgiven"),
             (1, "award.award_winning_work.awards_won,award.award_honor.award", "academy_award_for_best_picture")),
        Item("Who was the Best Director Oscar winner in 2014?", "award, alias, constraint (year)",
             "academy_award_for_best_director", "award.award_category.winners,award.award_honor.award_winner",
             ("Alfonso Cuarón",), (1, "award.award_honor.year", "2014")),
        Item("Who directed the sequel to The Two Towers?", "alias, 2 hops", "the_two_towers",
             "film.film.sequel,film.film.directed_by", ("Peter Jackson",)),
    ),
    "held-out-2": (
        Item("Which Alfred Hitchcock film came out in 1960?", "constraint (year)", "alfred_hitchcock",
             "film.director.film", ('Psycho',), (1, 'film.film.initial_release_date', '1960')),
        Item("Who wrote the music of Interstellar?", "1 hop", "interstellar", "film.film.music", ('Hans Zimmer',)),
        Item("Who received the Academy Award for Best Actor in 2011?", "award, constraint (year)",
             "academy_award_for_best_actor", "award.award_category.winners,award.award_honor.award_winner",
             ('Colin Firth',), (1, 'award.award_honor.year', '2011')),
        Item("Who directed Fargo?", "1 hop", "fargo", "film.film.directed_by", ('Joel Coen',)),
        Item("Who played Clarice Starling?", "2 hops (CVT)", "char_clarice_starling",
             "film.film_character.portrayed_in_films,film.performance.actor", ('Jodie Foster',)),
        Item("What is the nationality of the director of Alien?", "2 hops", "alien",
             "film.film.directed_by,people.person.nationality", ('United Kingdom',)),
        Item("Which genres are the films Keanu Reeves starred in?", "3 hops (CVT)", "keanu_reeves",
             "film.actor.film,film.performance.film,film.film.genre", ('Action Film', 'Science Fiction')),
        Item("Which Best Picture winner was directed by Martin Scorsese?", "award, alias, constraint (entity)",
             "martin_scorsese", "film.director.film", ('The Departed',),
             (1, 'award.award_winning_work.awards_won,award.award_honor.award', 'academy_award_for_best_picture')),
        Item("Who was the Best Actor Oscar winner in 2020?", "award, alias, constraint (year)",
             "academy_award_for_best_actor", "award.award_category.winners,award.award_honor.award_winner",
             ('Joaquin Phoenix',), (1, 'award.award_honor.year', '2020')),
        Item("Who composed the music for the sequel to The Fellowship of the Ring?", "alias, 2 hops",
             "the_fellowship_of_the_ring", "film.film.sequel,film.film.music", ('Howard Shore',)),
    ),
    "held-out-3": (
        Item("Which James Cameron movie came out in 1997?", "constraint (year)", "james_cameron",
             "film.director.film", ('Titanic',), (1, 'film.film.initial_release_date', '1997')),
        Item("Who scored Taxi Driver?", "1 hop", "taxi_driver", "film.film.music", ('Bernard Herrmann',)),
        Item("Who won the Academy Award for Best Director in 2017?", "award, constraint (year)",
             "academy_award_for_best_director", "award.award_category.winners,award.award_honor.award_winner",
             ('Damien Chazelle',), (1, 'award.award_honor.year', '2017')),
        Item("Who directed Roma?", "1 hop", "roma", "film.film.directed_by", ('Alfonso Cuarón',)),
        Item("Who played Hans Landa?", "2 hops (CVT)", "char_hans_landa",
             "film.film_character.portrayed_in_films,film.performance.actor", ('Christoph Waltz',)),
        Item("Where was the director of Fargo born?", "2 hops", "fargo",
             "film.film.directed_by,people.person.place_of_birth", ('St. Louis Park',)),
        Item("Who directed the films Jodie Foster acted in?", "3 hops (CVT)", "jodie_foster",
             "film.actor.film,film.performance.film,film.film.directed_by", ('Jonathan Demme', 'Martin Scorsese')),
        Item("Which Best Picture winner did Peter Jackson direct?", "award, alias, constraint (entity)",
             "peter_jackson", "film.director.film", ('The Lord of the Rings: The Return of the King',),
             (1, 'award.award_winning_work.awards_won,award.award_honor.award', 'academy_award_for_best_picture')),
        Item("Which film took the Oscar for Best Picture in 2019?", "award, alias, constraint (year)",
             "academy_award_for_best_picture", "award.award_category.winners,award.award_honor.honored_for",
             ('Green Book',), (1, 'award.award_honor.year', '2019')),
        Item("Who composed the music for the sequel to Dark Knight?", "alias, 2 hops", "the_dark_knight",
             "film.film.sequel,film.film.music", ('Hans Zimmer',)),
    ),
}


def _id(key: str) -> str:
    return key if key.startswith(("m.", '"')) else "m.0demo_" + key


def gold_ids(kg: Any, item: Item) -> list[str]:
    """The gold answers' ids: the item's chain (and constraint) run on the demo KG, checked against its gold names."""
    from kgqa.kg.base import ConstraintChain, is_literal, literal_value, parse_chain

    chain = parse_chain(item.chain)
    if item.constraint is None:
        ids = kg.run_chain([_id(item.topic)], chain).entities
    else:
        source, path, target = item.constraint
        value = f'"{target}"^^{YEAR}' if target.isdigit() else _id(target)
        ids = kg.filter_by_constraint([_id(item.topic)], chain, ConstraintChain(source, parse_chain(path), value)).entities
    names = sorted(n or i for i, n in kg.names(ids).items())
    if names != sorted(item.gold):
        raise SystemExit(f"gold of {item.text!r} disagrees with the demo KG: written {sorted(item.gold)}, the KG "
                         f"says {names}")
    # a literal answer comes back by its value, with no id ("2010")
    return sorted(literal_value(i) if is_literal(i) else i for i in ids)


def ask(question: str, extra: list[str], env: dict[str, str], timeout: float) -> tuple[dict[str, Any], float, str]:
    """One ``kgqa ask QUESTION --json`` process: its JSON payload (or an error), wall seconds, the last stderr line."""
    command = [sys.executable, "-m", "kgqa", "ask", question, "--json", *extra]
    started = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}, time.perf_counter() - started, ""
    return _reply(done.returncode, done.stdout, done.stderr, time.perf_counter() - started)


def _reply(code: int, stdout: str, stderr: str, seconds: float) -> tuple[dict[str, Any], float, str]:
    """What one ask printed, as :func:`ask` returns it: the JSON payload (or an error), seconds, the last stderr line."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    if code != 0:
        return {"error": last or f"exit {code}"}, seconds, last
    try:
        return json.loads(stdout), seconds, last
    except ValueError:
        return {"error": "the output is not JSON"}, seconds, ""


def ask_in_process(question: str, extra: list[str], env: dict[str, str], timeout: float
                   ) -> tuple[dict[str, Any], float, str]:
    """:func:`ask` in this process (``--in-process``): the same command line, models loaded once for every question,
    so a tuning pass over 50 questions takes a minute; its seconds are not what a user waits."""
    import contextlib
    import io

    from kgqa.cli import main as kgqa_main

    out, err = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = kgqa_main(["ask", question, "--json", *extra])
    return _reply(code, out.getvalue(), err.getvalue(), time.perf_counter() - started)


def run(sets: list[str], extra: list[str], env: dict[str, str], timeout: float, *, in_process: bool = False
        ) -> dict[str, Any]:
    from kgqa.kg import open_kg

    kg = open_kg("demo")
    golds = {name: [gold_ids(kg, item) for item in SETS[name]] for name in sets}  # every gold checked before any ask
    rows: list[dict[str, Any]] = []
    for name in sets:
        for item, gold in zip(SETS[name], golds[name], strict=True):
            payload, seconds, last = (ask_in_process if in_process else ask)(item.text, extra, env, timeout)
            answers = [a.get("id") or a.get("name") for a in payload.get("answers", [])]
            names = [a.get("name") for a in payload.get("answers", [])]
            right = bool(answers) and sorted(set(answers)) == gold
            rows.append({"set": name, "question": item.text, "kind": item.kind, "gold": sorted(item.gold),
                         "answers": names[:10], "answer_count": len(answers), "right": right,
                         "hit1": bool(answers) and answers[0] in gold, "seconds": round(seconds, 2),
                         "method": payload.get("method"), "error": payload.get("error"),
                         "llm_calls": (payload.get("usage") or {}).get("calls"), "stderr_last": last})
            mark = "right" if right else "WRONG"
            print(f"[{name}] {mark:5} {seconds:6.1f} s  {item.text}  ->  {'; '.join(map(str, names[:5])) or '(none)'}"
                  + (f"  [{payload['error']}]" if payload.get("error") else ""), flush=True)
    kg.close()
    return summarise(rows, sets)


def summarise(rows: list[dict[str, Any]], sets: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"sets": {}}
    for name in sets:
        mine = [r for r in rows if r["set"] == name]
        out["sets"][name] = {"right": sum(r["right"] for r in mine), "hit1": sum(r["hit1"] for r in mine),
                             "questions": len(mine)}
    after_first = [r["seconds"] for r in rows[1:]]
    out["first_seconds"] = rows[0]["seconds"] if rows else None
    out["median_seconds_after_first"] = round(statistics.median(after_first), 2) if after_first else None
    out["rows"] = rows
    return out


def markdown(result: dict[str, Any]) -> str:
    lines = [f"# First use: the default `kgqa ask` on the demo KG ({result['created']})", "",
             f"Command: `{result['command']}`; method: {result['method']}; load average at the start "
             f"{result['load_average']}; {result['cpu_count']} cores.", ""]
    for name, counts in result["sets"].items():
        lines.append(f"- **{name}**: {counts['right']} of {counts['questions']} right (exact answer set), hit@1 "
                     f"{counts['hit1']} of {counts['questions']}")
    lines += [f"- first question {result['first_seconds']} s (with a fresh cache it builds the demo KG and what the "
              f"method needs); median after the first: **{result['median_seconds_after_first']} s**", "",
              "| set | question | kind | gold | answers | right | s |", "|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        answers = "; ".join(map(str, r["answers"])) + (f" ... ({r['answer_count']})" if r["answer_count"] > 10 else "")
        if r["error"]:
            answers = f"error: {r['error']}"
        lines.append(f"| {r['set']} | {r['question']} | {r['kind']} | {'; '.join(r['gold'])} | {answers or '(none)'} "
                     f"| {'yes' if r['right'] else 'no'} | {r['seconds']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", choices=[*SETS, "tune", "both", "all"], default="both",
                        help="both: dev and held-out; tune: dev and dev2 (the sets choices are made on); all: every set")
    parser.add_argument("--ask-arg", action="append", default=[], help="an extra argument of every kgqa ask (repeat)")
    parser.add_argument("--tag", default="", help="results file suffix (first_use-TAG.json)")
    parser.add_argument("--fresh-cache", action="store_true", help="run with a new, empty cache directory")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds one ask may take")
    parser.add_argument("--out-dir", type=Path, default=RESULTS)
    parser.add_argument("--in-process", action="store_true", help="ask in this process, models loaded once (a fast "
                        "tuning pass; its seconds are not a user's wait)")
    args = parser.parse_args()
    sets = {"both": ["dev", "held-out"], "tune": ["dev", "dev2"], "all": list(SETS)}.get(
        args.set, [args.set])
    env = dict(os.environ)
    fresh = None
    if args.fresh_cache:
        fresh = tempfile.mkdtemp(prefix="kgqa-first-use-")
        env["KGQA_CACHE_DIR"] = fresh
        os.environ["KGQA_CACHE_DIR"] = fresh  # the gold check opens the demo KG there too
    from kgqa import config
    from kgqa.provenance import source_commit

    load = [round(x, 2) for x in os.getloadavg()]  # at the start: the machine the run met
    try:
        started = time.time()
        result = run(sets, args.ask_arg, env, args.timeout, in_process=args.in_process)
    finally:
        if fresh is not None:
            shutil.rmtree(fresh, ignore_errors=True)
    result.update({
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python", "benchmarks/first_use.py", *sys.argv[1:]]),
        "method": next((r["method"] for r in result["rows"] if r["method"]), str(config.get("method"))),
        "ask_args": args.ask_arg, "fresh_cache": args.fresh_cache, "in_process": args.in_process,
        "commit": source_commit(),
        "load_average": load, "cpu_count": os.cpu_count(),
        "python": platform.python_version(), "wall_seconds": round(time.time() - started, 1)})
    args.out_dir.mkdir(parents=True, exist_ok=True)
    stem = "first_use" + (f"-{args.tag}" if args.tag else "")
    (args.out_dir / f"{stem}.json").write_text(json.dumps(result, ensure_ascii=False, indent=2) + "\n")
    (args.out_dir / f"{stem}.md").write_text(markdown(result))
    for name, counts in result["sets"].items():
        print(f"{name}: {counts['right']}/{counts['questions']} right, hit@1 {counts['hit1']}")
    print(f"median after the first: {result['median_seconds_after_first']} s -> {args.out_dir / (stem + '.md')}")


if __name__ == "__main__":
    main()
