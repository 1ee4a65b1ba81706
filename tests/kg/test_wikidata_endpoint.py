"""Wikidata conventions end to end: a sample written here in Wikidata's RDF shape (``wd:`` entities, ``wdt:`` truthy
statements, ``p:``/``ps:``/``pq:`` statement nodes with qualifiers, ranks, references and value nodes as the dumps have
them, ``rdfs:label`` in several languages, a few hundred films and people), served by Oxigraph through
``kgqa kg endpoint start --schema wikidata``; ``kgqa kg relations/chain/search --schema wikidata`` and
``kgqa eval --method ccor`` with a scripted model on ten QALD-style questions give the expected answers, qualifiers
included.

QIDs of the well-known entities are Wikidata's; the generated filler uses Q900000000 and up.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kgqa.kg.base import parse_chain
from kgqa.kg.endpoint import stop_endpoint
from kgqa.steps.relations import describe_chain, describe_hop

REPO = Path(__file__).resolve().parents[2]
XSD = "http://www.w3.org/2001/XMLSchema#"

PREFIXES = """\
@prefix wd: <http://www.wikidata.org/entity/> .
@prefix wds: <http://www.wikidata.org/entity/statement/> .
@prefix wdv: <http://www.wikidata.org/value/> .
@prefix wdref: <http://www.wikidata.org/reference/> .
@prefix wdt: <http://www.wikidata.org/prop/direct/> .
@prefix p: <http://www.wikidata.org/prop/> .
@prefix ps: <http://www.wikidata.org/prop/statement/> .
@prefix psv: <http://www.wikidata.org/prop/statement/value/> .
@prefix pq: <http://www.wikidata.org/prop/qualifier/> .
@prefix pr: <http://www.wikidata.org/prop/reference/> .
@prefix wikibase: <http://wikiba.se/ontology#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix schema: <http://schema.org/> .
@prefix skos: <http://www.w3.org/2004/02/skos/core#> .
@prefix prov: <http://www.w3.org/ns/prov#> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
"""

# Entities everyone knows: QID -> labels by language.
KNOWN = {
    "Q25188": {"en": "Inception", "de": "Inception", "ja": "インセプション"},
    "Q25191": {"en": "Christopher Nolan", "fr": "Christopher Nolan"},
    "Q38111": {"en": "Leonardo DiCaprio", "de": "Leonardo DiCaprio", "ru": "Леонардо Ди Каприо"},
    "Q202735": {"en": "Joseph Gordon-Levitt"},
    "Q13909": {"en": "Interstellar", "fr": "Interstellar"},
    "Q44578": {"en": "Titanic", "fr": "Titanic", "es": "Titanic"},
    "Q42574": {"en": "James Cameron"},
    "Q84": {"en": "London", "de": "London", "fr": "Londres", "es": "Londres"},
    "Q145": {"en": "United Kingdom", "de": "Vereinigtes Königreich", "fr": "Royaume-Uni"},
    "Q30": {"en": "United States of America", "de": "Vereinigte Staaten"},
    "Q65": {"en": "Los Angeles"},
    "Q5": {"en": "human", "de": "Mensch"},
    "Q11424": {"en": "film", "de": "Film"},
    "Q900000001": {"en": "Emma Thomas"},
    "Q900000002": {"en": "Dom Cobb"},
    "Q900000003": {"en": "Arthur"},
    "Q900000004": {"en": "Jack Dawson"},
    "Q900000005": {"en": "Cooper"},
    "Q900000006": {"en": "Matthew McConaughey"},
    "Q900000007": {"en": "Academy Award for Best Visual Effects"},
    "Q900000008": {"en": "Kapuskasing", "fr": "Kapuskasing"},  # James Cameron's birthplace
    "Q16": {"en": "Canada", "fr": "Canada"},
}


class Sample:
    """Builds the Turtle text: truthy ``wdt:`` edges for best-rank statements plus the full statement nodes."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.statements = 0

    def entity(self, qid: str, labels: dict[str, str], kind: str | None = None) -> None:
        for lang, text in labels.items():
            self.lines.append(f'wd:{qid} rdfs:label "{text}"@{lang} .')
        if "en" in labels:
            self.lines.append(f'wd:{qid} schema:description "a sample entity about {labels["en"]}"@en .')
            self.lines.append(f'wd:{qid} skos:altLabel "{labels["en"].upper()}"@en .')
        if kind:
            self.claim(qid, "P31", f"wd:{kind}")

    def claim(self, subject: str, prop: str, value: str, qualifiers: dict[str, str] | None = None,
              rank: str = "NormalRank") -> str:
        """One statement: ``wdt:`` (when not deprecated), ``p:`` -> statement node -> ``ps:`` value, qualifiers as
        ``pq:``, a rank, a reference and, for dates, a ``psv:`` value node (all of which are noise to kgqa)."""
        self.statements += 1
        node = f"wds:{subject}-{self.statements:08X}-0000-4000-8000-{self.statements:012X}"
        if rank != "DeprecatedRank":
            self.lines.append(f"wd:{subject} wdt:{prop} {value} .")
        self.lines.append(f"wd:{subject} p:{prop} {node} .")
        self.lines.append(f"{node} a wikibase:Statement ; wikibase:rank wikibase:{rank} ; ps:{prop} {value} .")
        for qualifier, qvalue in (qualifiers or {}).items():
            self.lines.append(f"{node} pq:{qualifier} {qvalue} .")
        self.lines.append(f"{node} prov:wasDerivedFrom wdref:ref{self.statements:06d} .")
        self.lines.append(f"wdref:ref{self.statements:06d} pr:P143 wd:Q328 .")
        if "xsd:dateTime" in value:
            self.lines.append(f"{node} psv:{prop} wdv:v{self.statements:06d} .")
            self.lines.append(f"wdv:v{self.statements:06d} wikibase:timePrecision 11 .")
        return node

    def text(self) -> str:
        return PREFIXES + "\n".join(self.lines) + "\n"


def date(value: str) -> str:
    return f'"{value}T00:00:00Z"^^xsd:dateTime'


def build_sample() -> Sample:
    s = Sample()
    for qid, labels in KNOWN.items():
        kind = "Q11424" if qid in ("Q25188", "Q13909", "Q44578") else (
            "Q5" if qid in ("Q25191", "Q38111", "Q202735", "Q42574", "Q900000001", "Q900000006") else None)
        s.entity(qid, labels, kind)
    s.claim("Q25188", "P57", "wd:Q25191")
    s.claim("Q13909", "P57", "wd:Q25191")
    s.claim("Q44578", "P57", "wd:Q42574")
    s.claim("Q25188", "P161", "wd:Q38111", {"P453": "wd:Q900000002"})
    s.claim("Q25188", "P161", "wd:Q202735", {"P453": "wd:Q900000003"})
    s.claim("Q44578", "P161", "wd:Q38111", {"P453": "wd:Q900000004"})
    s.claim("Q13909", "P161", "wd:Q900000006", {"P453": "wd:Q900000005"})
    s.claim("Q25188", "P577", date("2010-07-08"))
    s.claim("Q25188", "P577", date("2010-07-16"), rank="DeprecatedRank")  # no truthy edge for a deprecated claim
    s.claim("Q13909", "P577", date("2014-10-26"))
    s.claim("Q25188", "P166", "wd:Q900000007", {"P585": date("2011-02-27")})
    s.claim("Q25191", "P19", "wd:Q84")
    s.claim("Q42574", "P19", "wd:Q900000008")
    s.claim("Q84", "P17", "wd:Q145")
    s.claim("Q900000008", "P17", "wd:Q16")
    s.claim("Q38111", "P19", "wd:Q65")
    s.claim("Q65", "P17", "wd:Q30")
    s.claim("Q25191", "P569", date("1970-07-30"))
    s.claim("Q25191", "P26", "wd:Q900000001", {"P580": date("1997-01-01")})
    s.claim("Q900000001", "P26", "wd:Q25191", {"P580": date("1997-01-01")})
    # Filler: 120 films with directors, casts (with roles) and dates; 150 people with birthplaces.
    people = [f"Q9{i:08d}" for i in range(100, 250)]
    for i, qid in enumerate(people):
        s.entity(qid, {"en": f"Sample Person {i}", "de": f"Beispielperson {i}"}, "Q5")
        s.claim(qid, "P19", "wd:" + ("Q84" if i % 3 == 0 else "Q65"))
    for i in range(120):
        film = f"Q9{i + 300:08d}"
        s.entity(film, {"en": f"Sample Film {i}", "fr": f"Film exemple {i}"}, "Q11424")
        s.claim(film, "P57", "wd:" + people[i % len(people)])
        s.claim(film, "P577", date(f"{1950 + i % 70}-01-01"))
        for j in range(2):
            s.claim(film, "P161", "wd:" + people[(i * 7 + j * 13) % len(people)],
                    {"P453": "wd:" + people[(i * 11 + j) % len(people)]})
    return s


# Ten QALD-style questions: text, topic, gold answers {id or literal: name}, main chain, constraint.
QUESTIONS: list[dict[str, Any]] = [
    {"q": "Who directed Inception?", "topic": "Q25188", "answer": {"Q25191": "Christopher Nolan"},
     "chain": "wdt:P57"},
    {"q": "Which films did Christopher Nolan direct?", "topic": "Q25191",
     "answer": {"Q25188": "Inception", "Q13909": "Interstellar"}, "chain": "^wdt:P57"},
    {"q": "Where was Christopher Nolan born?", "topic": "Q25191", "answer": {"Q84": "London"}, "chain": "wdt:P19"},
    {"q": "In which country was the director of Titanic born?", "topic": "Q44578", "answer": {"Q16": "Canada"},
     "chain": "wdt:P57,wdt:P19,wdt:P17"},
    {"q": "When was Inception published?", "topic": "Q25188",
     "answer": {"2010-07-08T00:00:00Z": "2010-07-08T00:00:00Z"}, "chain": "wdt:P577"},
    {"q": "Who is the spouse of Christopher Nolan?", "topic": "Q25191", "answer": {"Q900000001": "Emma Thomas"},
     "chain": "wdt:P26"},
    {"q": "Who played Dom Cobb in Inception?", "topic": "Q25188", "answer": {"Q38111": "Leonardo DiCaprio"},
     "chain": "p:P161,ps:P161", "constraint": {"source": 1, "chain": "pq:P453", "target": "Dom Cobb"}},
    {"q": "Which character did Leonardo DiCaprio play in Inception?", "topic": "Q25188",
     "answer": {"Q900000002": "Dom Cobb"}, "chain": "p:P161,pq:P453",
     "constraint": {"source": 1, "chain": "ps:P161", "target": "Leonardo DiCaprio"}},
    {"q": "Since when has Christopher Nolan been married to Emma Thomas?", "topic": "Q25191",
     "answer": {"1997-01-01T00:00:00Z": "1997-01-01T00:00:00Z"}, "chain": "p:P26,pq:P580",
     "constraint": {"source": 1, "chain": "ps:P26", "target": "Emma Thomas"}},
    {"q": "In which films did Leonardo DiCaprio play Jack Dawson?", "topic": "Q38111",
     "answer": {"Q44578": "Titanic"}, "chain": "^ps:P161,^p:P161",
     "constraint": {"source": 1, "chain": "pq:P453", "target": "Jack Dawson"}},
]


def qald_file(path: Path) -> None:
    """The questions in QALD-10's JSON as ToG distributes it (what `--dataset qald10-en` reads)."""
    records = [{"question": item["q"], "answer": item["answer"],
                "qid_topic_entity": {item["topic"]: KNOWN[item["topic"]]["en"]},
                "sparql": f"# chain {item['chain']}"} for item in QUESTIONS]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records, ensure_ascii=False, indent=1), encoding="utf-8")


def scripted_rules() -> list[dict[str, Any]]:
    """A scripted model following each question's chains, as in the demo agreement test (test_endpoint_cli.py)."""
    rules: list[dict[str, Any]] = []
    for i, item in enumerate(QUESTIONS):
        chain = parse_chain(item["chain"])
        names = [KNOWN[item["topic"]]["en"]]
        text = re.escape(item["q"])
        constraint = item.get("constraint")

        def judged(ch: Any, text: str = text, names: list[str] = names) -> str:
            return f"Question: {text}\nCurrent main chain: {re.escape(describe_chain(names, ch))}\n"

        rules.append({"match": judged(chain), "reply": {"chain_status": "incomplete", "answer_space_reached": True,
                                                        "reason": "a qualifier is left"} if constraint else
                      {"chain_status": "complete", "reason": "the gold chain"}})
        rules += [{"match": judged(chain[:d]), "reply": {"chain_status": "incomplete", "answer_space_reached": False,
                                                        "reason": "a prefix"}} for d in range(1, len(chain))]
        rules.append({"match": f"Question: {text}\nCurrent main chain: ",
                      "reply": {"chain_status": "inconsistent", "reason": "off the gold chain"}})
        if constraint:
            query = f"Constraint {i}: {item['q']}"
            cchain = parse_chain(constraint["chain"])
            label = [f"entities at position {constraint['source']} of the main chain"]
            head = f"Constraint sub-question: {re.escape(query)}\nConstraint chain: "
            full = head + re.escape(describe_chain(label, cchain)) + "\n"
            rules.append({"match": f"Question: {text}\nMain chain: ",
                          "reply": {"constraint_query": query, "source_position": constraint["source"]}})
            rules += [{"match": full + rf"[\s\S]*\n{n}\. {re.escape(constraint['target'])}\n",
                       "reply": {"chain_correct": True, "target": n, "reason": "the gold target"}} for n in range(1, 31)]
            rules.append({"match": full, "reply": {"chain_correct": True, "target": None, "reason": "not listed"}})
            rules.append({"match": head, "reply": {"chain_correct": False, "reason": "off the gold chain"}})
            rules.append({"match": f"Question: {re.escape(query)}\n",
                          "reply": {"relations": [describe_hop(h) for h in cchain]}})
        rules.append({"match": f"Question: {text}\nChain so far: ",
                      "reply": {"relations": [describe_hop(h) for h in chain]}})
    rules.append({"reply": {"reasoning": "scripted", "answers": []}})
    return rules


# ---------------------------------------------------------------------------------------------------------------------


def kgqa(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "kgqa", *args], capture_output=True, text=True, env=env, timeout=600,
                          stdin=subprocess.DEVNULL)
    if check and proc.returncode != 0:
        raise AssertionError(f"kgqa {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def wikidata(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("wikidata")
    config = base / "config.toml"
    config.write_text("", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KGQA_")}
    env.update({"KGQA_CACHE_DIR": str(base / "cache"), "KGQA_CONFIG": str(config),
                "PYTHONPATH": str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")})
    sample = build_sample()
    data = base / "wikidata-sample.ttl"
    data.write_text(sample.text(), encoding="utf-8")
    directory = base / "endpoint"
    started = kgqa(env, "kg", "endpoint", "start", "--engine", "oxigraph", "--data", str(data), "--dir", str(directory),
                   "--schema", "wikidata")
    url = re.search(r"SPARQL endpoint: (\S+)", started.stdout).group(1)  # type: ignore[union-attr]
    try:
        yield {"env": env, "url": url, "dir": directory, "base": base, "sample": sample}
    finally:
        stop_endpoint(directory)


def test_sample_has_wikidata_shape(wikidata: dict[str, Any]) -> None:
    status = json.loads(kgqa(wikidata["env"], "kg", "endpoint", "status", str(wikidata["dir"]), "--json").stdout)
    assert status["schema"] == "wikidata" and status["running"]
    info = json.loads(kgqa(wikidata["env"], "kg", "info", wikidata["url"], "--schema", "wikidata", "--json").stdout)
    assert info["entities"] >= 300
    # Only the four property namespaces are relations; labels, ranks, references, value nodes are noise.
    from kgqa.kg.schema import get_schema

    schema = get_schema("wikidata")
    facts = {r for r in info["vocabulary"] if not schema.is_noise_relation(r)}
    assert {"wdt:P57", "p:P161", "ps:P161", "pq:P453", "pq:P580"} <= facts
    assert all(re.fullmatch(r"(wdt|p|ps|pq):P\d+", r) for r in facts), facts
    noise = set(info["vocabulary"]) - facts
    assert {"http://wikiba.se/ontology#rank", "http://www.w3.org/ns/prov#wasDerivedFrom", "psv:P577"} & noise or \
        "http://www.wikidata.org/prop/statement/value/P577" in noise


def test_relations_chain_search_with_the_wikidata_schema(wikidata: dict[str, Any]) -> None:
    env, url = wikidata["env"], wikidata["url"]
    rels = json.loads(kgqa(env, "kg", "relations", url, "Inception", "--schema", "wikidata", "--json").stdout)
    assert rels["entity"] == {"id": "Q25188", "name": "Inception"}  # the English label among en/de/ja
    assert {"wdt:P57", "wdt:P161", "p:P161", "wdt:P577", "p:P577", "wdt:P166", "p:P166", "wdt:P31"} <= set(rels["out"])
    assert not any("rdfs" in r or "schema" in r or "prov" in r for r in rels["out"])

    chain = json.loads(kgqa(env, "kg", "chain", url, "--schema", "wikidata", "--from", "Christopher Nolan",
                            "--path", "^wdt:P57", "--json").stdout)
    assert {e["name"] for e in chain["entities"]} == {"Inception", "Interstellar"}
    # Through a statement node: the cast, and a qualifier (the character) on the same statement.
    cast = json.loads(kgqa(env, "kg", "chain", url, "--schema", "wikidata", "--from", "Q25188",
                           "--path", "p:P161,ps:P161", "--json").stdout)
    assert {e["id"] for e in cast["entities"]} == {"Q38111", "Q202735"}
    roles = json.loads(kgqa(env, "kg", "chain", url, "--schema", "wikidata", "--from", "Q25188",
                            "--path", "p:P161,pq:P453", "--paths", "--json").stdout)
    assert {e["name"] for e in roles["entities"]} == {"Dom Cobb", "Arthur"}
    assert all(p[1].startswith("wds:Q25188-") for p in roles["paths"])  # statement nodes as wds: ids
    statements = json.loads(kgqa(env, "kg", "chain", url, "--schema", "wikidata", "--from", "Q25188",
                                 "--path", "p:P161", "--json").stdout)
    assert all(e["name"] is None for e in statements["entities"])  # nameless, like Freebase CVTs
    # A deprecated claim has its statement but no truthy edge.
    truthy = json.loads(kgqa(env, "kg", "chain", url, "--schema", "wikidata", "--from", "Q25188",
                             "--path", "wdt:P577", "--json").stdout)
    assert [e["id"] for e in truthy["entities"]] == [f'"2010-07-08T00:00:00Z"^^<{XSD}dateTime>']
    every = json.loads(kgqa(env, "kg", "chain", url, "--schema", "wikidata", "--from", "Q25188",
                            "--path", "p:P577,ps:P577", "--json").stdout)
    assert len(every["entities"]) == 2

    found = json.loads(kgqa(env, "kg", "search", url, "Christopher Nolan", "--schema", "wikidata", "--exact",
                            "--json").stdout)
    assert [m["id"] for m in found["matches"]] == ["Q25191"]
    fuzzy = json.loads(kgqa(env, "kg", "search", url, "leonardo dicaprio", "--schema", "wikidata", "--json").stdout)
    assert fuzzy["matches"][0]["id"] == "Q38111" and fuzzy["matches"][0]["name"] == "Leonardo DiCaprio"
    # Search covers names in the schema's language: a French label is not an exact name of the English KG view.
    french = json.loads(kgqa(env, "kg", "search", url, "Royaume-Uni", "--schema", "wikidata", "--exact",
                             "--json").stdout)
    assert french["matches"] == []


def test_ccor_answers_qald_style_questions(wikidata: dict[str, Any]) -> None:
    env, base = wikidata["env"], wikidata["base"]
    data_dir = base / "data"
    qald_file(data_dir / "questions" / "tog" / "qald_10-en.json")
    rules = base / "rules.jsonl"
    rules.write_text("\n".join(json.dumps(r) for r in scripted_rules()) + "\n", encoding="utf-8")
    out = base / "run"
    kgqa(env, "eval", "--dataset", "qald10-en", "--data-dir", str(data_dir), "--method", "ccor",
         "--llm", f"scripted:{rules}", "--kg", f"endpoint:{wikidata['dir']}", "--out", str(out), "--no-progress",
         "--no-report")
    rows = {r["question"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert len(rows) == 10
    for item in QUESTIONS:
        row = rows[item["q"]]
        assert row["error"] is None, (item["q"], row["error"])
        assert row["grounding"] == "structured", item["q"]
        assert sorted(row["answers"]) == sorted(item["answer"].values()), (item["q"], row["answers"])
        assert row["hit1"] == 1 and row["f1"] == 1.0, item["q"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["hits@1"] == pytest.approx(100.0) or summary["hits@1"] == pytest.approx(1.0)
