"""Build the demo KG that kgqa ships: ``triples.tsv``, ``names.tsv`` and ``questions.jsonl`` next to this file.

The facts live in the TOML files beside this script (``places.toml``, ``people.toml``, ``films.toml``, ``awards.toml``)
and the questions in ``questions.toml``; each file says in its header how its records read. This script turns the
records into Freebase-style triples: entity ids follow the Freebase grammar (``m.0demo_<key>``) but are synthetic, not
real Freebase MIDs; relations are real Freebase relation names; mediator (CVT) nodes are nameless, as in Freebase.

Run ``python build_demo.py [OUT_DIR]`` (default: this directory) or ``python build_demo.py --check`` (exit 1 if the
shipped files are stale). The output is deterministic. Before writing, a self-check executes every question's gold
chain (and constraint) over the triples with a plain Python interpreter (not kgqa's stores) and stops with an error if
the result differs from the hand-written gold answers, so a wrong fact or a wrong question cannot ship unnoticed.
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kgqa.kg.base import make_literal
from kgqa.kg.schema import FreebaseSchema

HERE = Path(__file__).resolve().parent
FACT_FILES = ("places", "people", "films", "awards", "questions")
OUTPUT_FILES = ("triples.tsv", "names.tsv", "questions.jsonl")
XSD = "http://www.w3.org/2001/XMLSchema#"
PREFIX = "m.0demo_"
SCHEMA = FreebaseSchema()

# Freebase types used by the noise edges (type.object.type, common.topic.notable_types), which the Freebase schema
# hides from methods; a few of them are enough to exercise that filtering.
TYPE_NAMES = {
    "film.film": "Film", "location.country": "Country", "award.award_category": "Award category",
    "people.marriage": "Marriage",
}

CONTAINS, CONTAINEDBY = "location.location.contains", "location.location.containedby"


# -- ids and literals ---------------------------------------------------------------------------------------------------


def slug(text: str) -> str:
    """``"Dom Cobb"`` -> ``dom_cobb``; accents dropped, anything else not [0-9a-z] becomes one underscore."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()
    return re.sub(r"[^0-9a-z]+", "_", ascii_text).strip("_")


def year_literal(year: int | str) -> str:
    return make_literal(str(year), datatype=XSD + "gYear")


def date_literal(date: str) -> str:
    return make_literal(date, datatype=XSD + "date")


def plain_literal(text: str) -> str:
    return make_literal(text)


def ent(key: str) -> str:
    """The synthetic Freebase-style id of a keyed entity."""
    return PREFIX + key


def char(name: str) -> str:
    """The id of a film character, by its name (one character shared across films, as in Freebase)."""
    return PREFIX + "char_" + slug(name)


def resolve(ref: str) -> str:
    """A reference of questions.toml as a node id: a key, ``char:Name``, ``year:YYYY``, ``date:YYYY-MM-DD`` or a literal."""
    if ref.startswith('"'):
        return ref
    kind, sep, rest = ref.partition(":")
    if sep and kind == "char":
        return char(rest)
    if sep and kind == "year":
        return year_literal(rest)
    if sep and kind == "date":
        return date_literal(rest)
    return ent(ref)


def keys(field: str) -> list[str]:
    """A field holding several keys separated by spaces."""
    return field.split()


def record(where: str, raw: Any, required: Iterable[str], optional: Iterable[str] = ()) -> dict[str, Any]:
    """A table record with its fields checked (a typo in a field name would otherwise drop a fact silently)."""
    required, optional = tuple(required), tuple(optional)
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected a table with {', '.join(required + optional)}, got {raw!r}")
    missing = [f for f in required if f not in raw]
    unknown = sorted(set(raw) - set(required) - set(optional))
    if missing or unknown:
        raise ValueError(f"{where}: missing field(s) {missing}, unknown field(s) {unknown}; "
                         f"expected {list(required)} and optionally {list(optional)}")
    return {f: raw.get(f, "") for f in required + optional}


def pair(where: str, raw: Any) -> tuple[Any, Any]:
    if not isinstance(raw, list) or len(raw) != 2:
        raise ValueError(f"{where}: expected a pair [.., ..], got {raw!r}")
    return raw[0], raw[1]


def load_facts(directory: Path = HERE) -> dict[str, dict[str, Any]]:
    """The parsed fact files, keyed by stem (``places``, ``people``, ...)."""
    facts = {}
    for stem in FACT_FILES:
        path = directory / f"{stem}.toml"
        with path.open("rb") as handle:
            try:
                facts[stem] = tomllib.load(handle)
            except tomllib.TOMLDecodeError as exc:
                raise ValueError(f"{path}: {exc}") from None
    return facts


# -- the triples ------------------------------------------------------------------------------------------------------


class Builder:
    """Collects triples (deduplicated, in insertion order) and names, and checks ids as it goes."""

    def __init__(self) -> None:
        self.triples: list[tuple[str, str, str]] = []
        self._seen: set[tuple[str, str, str]] = set()
        self.names: dict[str, str] = {}
        self.cvts: set[str] = set()
        self.questions: list[dict[str, Any]] = []

    def add(self, head: str, relation: str, tail: str) -> None:
        if not SCHEMA.is_valid_entity(head):
            raise ValueError(f"bad head id {head!r}")
        if not SCHEMA.is_valid_relation(relation):
            raise ValueError(f"bad relation {relation!r}")
        if not tail.startswith('"') and not SCHEMA.is_valid_entity(tail):
            raise ValueError(f"bad tail id {tail!r}")
        triple = (head, relation, tail)
        if triple not in self._seen:
            self._seen.add(triple)
            self.triples.append(triple)

    def both(self, head: str, relation: str, tail: str, reverse: str) -> None:
        """A relation Freebase stores in both directions (``reverse`` is its reverse property)."""
        self.add(head, relation, tail)
        self.add(tail, reverse, head)

    def name(self, entity: str, name: str) -> None:
        if not SCHEMA.is_valid_entity(entity):
            raise ValueError(f"bad id {entity!r}")
        old = self.names.get(entity)
        if old is not None and old != name:
            raise ValueError(f"id clash: {entity} is both {old!r} and {name!r}")
        self.names[entity] = name

    def cvt(self, key: str) -> str:
        """A new nameless mediator node."""
        node = PREFIX + "cvt_" + key
        if node in self.cvts:
            raise ValueError(f"duplicate CVT {node}")
        self.cvts.add(node)
        return node

    def type_node(self, type_name: str) -> str:
        """A Freebase type as an entity (``film.film`` -> ``m.0demo_type_film_film`` named "Film")."""
        node = PREFIX + "type_" + type_name.replace(".", "_")
        self.name(node, TYPE_NAMES[type_name])
        return node


def known(where: str, key: str, table: Mapping[str, Any], what: str) -> str:
    """``ent(key)`` after checking that ``key`` is in ``table``."""
    if key not in table:
        raise ValueError(f"{where}: unknown {what} {key!r}")
    return ent(key)


def add_places(b: Builder, places: Mapping[str, Any]) -> None:
    countries, divisions, territories = places["countries"], places["divisions"], places["territories"]
    for key, name in places["continents"].items():
        b.name(ent(key), name)
    for key, name in places["currencies"].items():
        b.name(ent(key), name)
    for key, name in places["languages"].items():
        b.name(ent("lang_" + key), name)
    for key, raw in countries.items():
        where = f"places.toml [countries] {key}"
        c = record(where, raw, ("name", "continent", "capital", "currency"), ("languages",))
        country = ent(key)
        b.name(country, c["name"])
        b.add(country, "type.object.type", b.type_node("location.country"))
        b.both(country, CONTAINEDBY, known(where, c["continent"], places["continents"], "continent"), CONTAINS)
        for capital in keys(c["capital"]):
            b.add(country, "location.country.capital", known(where, capital, places["cities"], "capital city"))
        currency = known(where, c["currency"], places["currencies"], "currency")
        b.both(country, "location.country.currency_used", currency, "finance.currency.countries_used")
        for language in keys(c["languages"]):
            known(where, language, places["languages"], "language")
            b.add(country, "location.country.official_language", ent("lang_" + language))
    for table in ("divisions", "territories"):
        for key, raw in places[table].items():
            name, country = pair(f"places.toml [{table}] {key}", raw)
            b.name(ent(key), name)
            b.both(ent(key), CONTAINEDBY, known(f"places.toml [{table}] {key}", country, countries, "country"), CONTAINS)
    for key, raw in places["cities"].items():
        name, parent = pair(f"places.toml [cities] {key}", raw)
        b.name(ent(key), name)
        if parent not in countries and parent not in divisions and parent not in territories:
            raise ValueError(f"places.toml [cities] {key}: unknown parent {parent!r}")
        b.both(ent(key), CONTAINEDBY, ent(parent), CONTAINS)


def add_people(b: Builder, people_file: Mapping[str, Any], places: Mapping[str, Any]) -> None:
    people, family = people_file["people"], people_file["family"]
    for key, raw in people.items():
        where = f"people.toml [people] {key}"
        p = record(where, raw, ("name",), ("born", "birthplace", "nationality"))
        person = ent(key)
        b.name(person, p["name"])
        if p["born"]:
            b.add(person, "people.person.date_of_birth", date_literal(p["born"]))
        if p["birthplace"]:
            place = known(where, p["birthplace"], places["cities"], "birthplace")
            b.both(person, "people.person.place_of_birth", place, "location.location.people_born_here")
        for country in keys(p["nationality"]):
            b.add(person, "people.person.nationality", known(where, country, places["countries"], "nationality"))
    for key, raw in people_file["deaths"].items():
        where = f"people.toml [deaths] {key}"
        d = record(where, raw, ("died",), ("place",))
        person = known(where, key, people, "person")
        b.add(person, "people.deceased_person.date_of_death", date_literal(d["died"]))
        if d["place"]:
            b.add(person, "people.deceased_person.place_of_death", known(where, d["place"], places["cities"], "place"))
    for row in family["marriages"]:
        if not isinstance(row, list) or len(row) not in (3, 4):
            raise ValueError(f"people.toml marriages: expected [person, spouse, from, to?], got {row!r}")
        a, c, start = row[:3]
        node = b.cvt(f"marriage_{a}_{c}")
        b.add(node, "type.object.type", b.type_node("people.marriage"))
        for person in (a, c):
            b.both(known("people.toml marriages", person, people, "person"), "people.person.spouse_s", node,
                   "people.marriage.spouse")
        b.add(node, "people.marriage.from", year_literal(start))
        if len(row) == 4:
            b.add(node, "people.marriage.to", year_literal(row[3]))
    for raw in family["siblings"]:
        a, c = pair("people.toml siblings", raw)
        node = b.cvt(f"sibling_{a}_{c}")
        for person in (a, c):
            b.both(known("people.toml siblings", person, people, "person"), "people.person.sibling_s", node,
                   "people.sibling_relationship.sibling")
    for raw in family["parents"]:
        parent, child = pair("people.toml parents", raw)
        b.both(known("people.toml parents", child, people, "person"), "people.person.parents",
               known("people.toml parents", parent, people, "person"), "people.person.children")


CREW = (("writers", "film.film.written_by", "film.writer.film"),
        ("producers", "film.film.produced_by", "film.producer.film"),
        ("music", "film.film.music", "film.music_contributor.film"))


def add_films(b: Builder, films_file: Mapping[str, Any], people: Mapping[str, Any]) -> set[str]:
    """The films, their casts and crews, sequels and aliases; returns the film keys."""
    genres, films = films_file["genres"], films_file["films"]
    for key, name in genres.items():
        b.name(ent("genre_" + key), name)
    crews = {}
    for key, raw in films.items():
        where = f"films.toml [films.{key}]"
        f = record(where, raw, ("name", "year", "directors", "genres"), ("cast", *(c[0] for c in CREW)))
        crews[key] = f
        film = ent(key)
        b.name(film, f["name"])
        b.add(film, "common.topic.notable_types", b.type_node("film.film"))
        b.add(film, "film.film.initial_release_date", year_literal(f["year"]))
        for director in keys(f["directors"]):
            b.both(film, "film.film.directed_by", known(where, director, people, "director"), "film.director.film")
        for genre in keys(f["genres"]):
            known(where, genre, genres, "genre")
            b.both(film, "film.film.genre", ent("genre_" + genre), "film.film_genre.films_in_this_genre")
        for i, item in enumerate(f["cast"] or []):
            actor, sep, character = (part.strip() for part in item.partition("="))
            if not sep or not character:
                raise ValueError(f"{where}: a cast entry is 'actor_key=Character', got {item!r}")
            role = b.cvt(f"perf_{key}_{i + 1}")
            b.both(film, "film.film.starring", role, "film.performance.film")
            b.both(role, "film.performance.actor", known(where, actor, people, "actor"), "film.actor.film")
            b.name(char(character), character)
            b.both(role, "film.performance.character", char(character), "film.film_character.portrayed_in_films")
    for key, f in crews.items():  # after every film, as Freebase dumps group them
        for field, relation, reverse in CREW:
            for person in keys(f[field]):
                b.both(ent(key), relation, known(f"films.toml [films.{key}]", person, people, field), reverse)
    for prequel, sequels in films_file["sequels"].items():
        for sequel in keys(sequels):
            b.both(known("films.toml [sequels]", prequel, films, "film"), "film.film.sequel",
                   known("films.toml [sequels]", sequel, films, "film"), "film.film.prequel")
    for key, aliases in films_file["aliases"].items():
        for alias in aliases:
            b.add(ent(key), "common.topic.alias", plain_literal(alias))
    return set(films)


def add_awards(b: Builder, awards: Mapping[str, Any], films: set[str], people: Mapping[str, Any]) -> None:
    for key, name in awards["awards"].items():
        b.name(ent(key), name)
    categories = {}
    for key, raw in awards["categories"].items():
        name, award = pair(f"awards.toml [categories] {key}", raw)
        category = categories[key] = ent(slug(name))
        b.name(category, name)
        b.add(category, "type.object.type", b.type_node("award.award_category"))
        b.both(category, "award.award_category.category_of",
               known(f"awards.toml [categories] {key}", award, awards["awards"], "award"), "award.award.category")
    for category, rows in awards["honors"].items():
        if category not in categories:
            raise ValueError(f"awards.toml [honors.{category}]: unknown category")
        for year, raw in rows.items():
            where = f"awards.toml [honors.{category}] {year}"
            h = record(where, raw, ("film",), ("winners",))
            node = b.cvt(f"honor_{category}_{year}")
            b.both(node, "award.award_honor.award", categories[category], "award.award_category.winners")
            b.add(node, "award.award_honor.year", year_literal(year))
            b.both(node, "award.award_honor.honored_for", known(where, h["film"], films, "film"),
                   "award.award_winning_work.awards_won")
            for winner in keys(h["winners"]):
                b.both(node, "award.award_honor.award_winner", known(where, winner, people, "winner"),
                       "award.award_winner.awards_won")


def build(directory: Path = HERE) -> Builder:
    """Read the fact files in ``directory`` and collect the triples, names and questions (unchecked)."""
    facts = load_facts(directory)
    b = Builder()
    places, people = facts["places"], facts["people"]["people"]
    add_places(b, places)
    add_people(b, facts["people"], places)
    films = add_films(b, facts["films"], people)
    add_awards(b, facts["awards"], films, people)
    b.questions = list(facts["questions"]["questions"])
    return b


# -- the self-check: a plain interpreter for chains and constraints (independent of kgqa's stores) -----------------------

_LEX_RE = re.compile(r'^"((?:[^"\\]|\\.)*)"')


def lexical(node: str) -> str | None:
    match = _LEX_RE.match(node)
    return match.group(1) if match else None


class Index:
    def __init__(self, triples: list[tuple[str, str, str]]) -> None:
        self.out: dict[tuple[str, str], set[str]] = defaultdict(set)
        self.inc: dict[tuple[str, str], set[str]] = defaultdict(set)
        for h, r, t in triples:
            self.out[(h, r)].add(t)
            self.inc[(t, r)].add(h)

    def step(self, node: str, hop: str) -> set[str]:
        if hop.startswith("^"):
            return self.inc.get((node, hop[1:]), set())
        return self.out.get((node, hop), set())

    def paths(self, topics: list[str], chain: list[str]) -> list[tuple[str, ...]]:
        paths = [(t,) for t in topics]
        for hop in chain:
            paths = [(*p, n) for p in paths for n in sorted(self.step(p[-1], hop))]
        return paths

    def reaches(self, start: str, chain: list[str], target: str) -> bool:
        ends = {p[-1] for p in self.paths([start], chain)}
        if target.startswith('"'):
            return any(lexical(e) == lexical(target) for e in ends if e.startswith('"'))
        return target in ends

    def answer(self, topics: list[str], chain: list[str], constraint: tuple[int, list[str], str] | None) -> set[str]:
        paths = self.paths(topics, chain)
        if constraint is not None:
            source, c_chain, target = constraint
            paths = [p for p in paths if self.reaches(p[source], c_chain, target)]
        return {p[-1] for p in paths}


QUESTION_FIELDS = ("type", "question", "topics", "chain", "answers")


def check(b: Builder) -> list[dict]:
    """Execute every question's gold chain on the triples; fail loudly on any disagreement. Returns the records."""
    index = Index(b.triples)
    relations = {r for _, r, _ in b.triples}
    errors: list[str] = []
    records = []
    for number, raw in enumerate(b.questions, start=1):
        qid = f"demo-{number:03d}"
        q = record(f"questions.toml question {number}", raw, QUESTION_FIELDS, ("constraint",))
        hops = q["chain"].split(",")
        topic_ids = [resolve(t) for t in q["topics"]]
        gold_ids = [resolve(g) for g in q["answers"]]
        c = None
        if q["constraint"]:
            spec = record(f"{qid} constraint", q["constraint"], ("source", "chain", "target"))
            c = (spec["source"], spec["chain"].split(","), resolve(spec["target"]))
        for hop in hops + (c[1] if c else []):
            if hop.lstrip("^") not in relations:
                errors.append(f"{qid}: relation {hop} is not in the KG")
        for entity in topic_ids + gold_ids + ([c[2]] if c else []):
            if not entity.startswith('"') and entity not in b.names:
                errors.append(f"{qid}: {entity} has no name (unknown entity?)")
        if len(set(gold_ids)) != len(gold_ids):
            errors.append(f"{qid}: duplicate gold answers")
        text = q["question"]
        got = index.answer(topic_ids, hops, c)
        if got != set(gold_ids):
            errors.append(f"{qid} {text!r}: gold chain returns {sorted(got)}, hand-written gold is {sorted(gold_ids)}")
        if c is not None and not index.answer(topic_ids, hops, None) > got:
            errors.append(f"{qid} {text!r}: the constraint filters nothing out, so it tests nothing")

        def label(node: str) -> str:
            return (lexical(node) or "") if node.startswith('"') else b.names.get(node, "?")

        records.append({
            "id": qid, "question": text,
            "topic_entities": [{"id": t, "name": label(t)} for t in topic_ids],
            "answers": [{"id": g, "name": label(g)} for g in gold_ids if g in b.names or g.startswith('"')],
            "hops": len(hops), "chain": q["chain"],
            "constraint": None if c is None else {"source": c[0], "chain": q["constraint"]["chain"], "target": c[2]},
            "type": q["type"],
        })
    # Structural checks: CVTs nameless, every other node named, no dangling references.
    nodes = {h for h, _, _ in b.triples} | {t for _, _, t in b.triples if not t.startswith('"')}
    for node in sorted(nodes):
        if node in b.cvts and node in b.names:
            errors.append(f"CVT {node} has a name")
        if node not in b.cvts and node not in b.names:
            errors.append(f"entity {node} has no name")
    for node in sorted(b.cvts | set(b.names)):
        if node not in nodes:
            errors.append(f"{node} has no edge (an unused entry in the fact tables?)")
    if errors:
        raise SystemExit("demo KG self-check FAILED:\n  " + "\n  ".join(errors))
    return records


def render(b: Builder, records: list[dict]) -> dict[str, str]:
    """The three output files as text, keyed by file name."""
    triples = "".join(f"{h}\t{r}\t{t}\n" for h, r, t in b.triples)
    names = "".join(f"{entity}\t{name}\n" for entity, name in sorted(b.names.items()))
    questions = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
    return {"triples.tsv": triples, "names.tsv": names, "questions.jsonl": questions}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    check_only = "--check" in args
    args = [a for a in args if a != "--check"]
    if len(args) > 1 or any(a.startswith("-") for a in args):
        print("usage: build_demo.py [--check] [OUT_DIR]", file=sys.stderr)
        return 2
    out_dir = Path(args[0]) if args else HERE
    b = build()
    records = check(b)
    files = render(b, records)
    if check_only:
        stale = [name for name, text in files.items()
                 if not (out_dir / name).is_file() or (out_dir / name).read_text(encoding="utf-8") != text]
        print(f"stale: {', '.join(stale)} (run build_demo.py)" if stale else "demo files are up to date", file=sys.stderr)
        return 1 if stale else 0
    out_dir.mkdir(parents=True, exist_ok=True)
    for file_name, text in files.items():
        (out_dir / file_name).write_text(text, encoding="utf-8", newline="\n")
    counts: dict[str, int] = defaultdict(int)
    for rec in records:
        counts[rec["type"]] += 1
    relations = {r for _, r, _ in b.triples}
    print(f"triples={len(b.triples)} names={len(b.names)} cvts={len(b.cvts)} relations={len(relations)} "
          f"questions={len(records)} {dict(counts)}; self-check passed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
