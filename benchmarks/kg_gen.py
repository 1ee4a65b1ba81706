"""Seeded generator of Freebase-style knowledge graphs for the KG benchmarks.

The graph is built in numpy (integer node ids) and only turned into strings when it is fed to an
:class:`~kgqa.kg.embedded.EmbeddedKGBuilder` or written as N-Triples, so generating 10M triples takes seconds and the
import measurement is not polluted by generator work.

Shape (all from one ``numpy.random.Generator`` seeded with ``seed``):

* ``m.0...`` entities (a quarter as many as triples) in ~24 domains; relations ``domain.type.property`` (200-2,000 of
  them, Zipf-popular) each with a head domain, and for entity-valued relations a range domain;
* power-law degrees: heads and tails are drawn Zipf-like within their domain from one popularity order per domain, so
  popular entities are popular both ways and the top ones are hubs with 10^4-10^5+ edges;
* ``type.object.type`` / ``common.topic.notable_*`` noise edges (8%) into a small set of type entities (the biggest hubs);
* CVT mediator nodes (``m.cvt...``, nameless, ~5% of the nodes): ``head -parent-> cvt -prop-> value`` with 2-4
  properties, as Freebase's ``film.film.starring -> film.performance.actor``;
* literals in N-Triples form: ``xsd:gYear`` years, ``xsd:date`` dates, ``xsd:integer`` numbers and ``@en`` strings;
* names for ~93% of the entities, 1-4 words built from syllables with a Zipf word distribution (so names repeat words and
  sometimes collide, which gives fuzzy search real work).

Run it alone to print statistics or write N-Triples::

    python benchmarks/kg_gen.py --triples 1e6 --seed 0 --nt /tmp/kg.nt
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kgqa.kg.base import make_literal
from kgqa.kg.schema import FreebaseSchema, Schema

XSD = "http://www.w3.org/2001/XMLSchema#"
# Freebase mids use digits and consonants (no vowels, so no accidental words) plus underscore: 32 symbols.
MID_ALPHABET = "0123456789bcdfghjklmnpqrstvwxyz_"

DOMAINS = [
    "film", "music", "people", "location", "sports", "book", "tv", "award", "organization", "education", "business",
    "government", "military", "medicine", "biology", "architecture", "aviation", "computer", "religion", "food",
    "language", "geography", "astronomy", "law",
]
TYPES = [
    "film", "actor", "person", "album", "track", "team", "player", "city", "country", "company", "school", "award",
    "event", "position", "genre", "character", "series", "episode", "season", "building", "product", "species",
    "disease", "drug", "court", "case", "league", "venue", "recording", "release", "edition", "author", "work", "place",
    "topic", "producer", "writer", "artist", "program", "station", "airport", "aircraft", "ship", "battle", "unit",
    "officeholder", "jurisdiction", "river", "mountain", "star", "planet", "dish", "cuisine", "software", "language",
]
PROPERTIES = [
    "directed_by", "written_by", "produced_by", "genre", "country", "language", "release_date", "date_of_birth",
    "place_of_birth", "nationality", "spouse", "children", "parents", "member_of", "located_in", "contains", "capital",
    "founded", "founder", "headquarters", "employer", "award_won", "nominated_for", "winner", "ceremony", "team",
    "sport", "league", "coach", "album", "artist", "label", "author", "publisher", "subject", "series", "character",
    "instrument", "institution", "degree", "major", "population", "area", "currency", "official_language", "religion",
    "ethnicity", "profession", "notable_for", "influenced_by", "cause_of_death", "place_of_death", "date_of_death",
    "height", "budget", "runtime", "gross_revenue", "rating", "sequel", "prequel", "adapted_from", "composer",
    "editor", "cinematographer", "venue", "opened", "closed", "architect", "owner", "operator", "manufacturer",
    "designer", "discoverer", "orbit", "parent", "sibling", "partner", "origin", "destination", "elevation",
]
CVT_TYPES = [
    "performance", "tenure", "membership", "award_honor", "marriage", "employment_tenure", "nomination", "roster",
    "government_position_held", "release_event", "dated_integer", "ranking", "education_record", "track_contribution",
]
NOISE_RELATIONS = ["type.object.type", "common.topic.notable_types", "common.topic.notable_for"]

_ONSETS = ["b", "br", "c", "ch", "d", "dr", "f", "fl", "g", "gr", "h", "j", "k", "kl", "l", "m", "n", "p", "pr", "r",
           "s", "sh", "st", "t", "th", "tr", "v", "w", "z", "", "", "qu", "sk", "bl"]
_VOWELS = ["a", "e", "i", "o", "u", "a", "e", "o", "i", "a", "ea", "ou", "y", "ie"]
_CODAS = ["", "", "", "n", "r", "l", "s", "th", "nd", "rk", "m", "x", "nt", "st", "ck"]

#: Relation kinds; CVT parents lead to mediator nodes, the others to an entity or a literal.
ENTITY, CVT, YEAR, DATE, INTEGER, TEXT, NOISE = range(7)
_KIND_NAMES = ["entity", "cvt", "year", "date", "integer", "text", "noise"]
_TOP_LEVEL_KIND_P = {ENTITY: 0.66, CVT: 0.08, YEAR: 0.07, DATE: 0.08, INTEGER: 0.06, TEXT: 0.05}
_CVT_PROP_KIND_P = {ENTITY: 0.62, YEAR: 0.14, DATE: 0.14, INTEGER: 0.10}
_FIRST_YEAR, _LAST_YEAR = 1700, 2025
_DATE_START = np.datetime64("1800-01-01")
_DATE_DAYS = int((np.datetime64("2025-12-31") - _DATE_START).astype(int)) + 1


@dataclass
class GeneratedKG:
    """A generated graph: integer triples plus the string tables that name nodes and relations.

    Node ids ``[0, n_entities)`` are entities, then ``n_cvt`` CVT nodes, then literals. ``names[i]`` is the display name
    of entity ``i`` or ``None``.
    """

    seed: int
    node_ids: list[str]
    relations: list[str]
    relation_kinds: np.ndarray
    heads: np.ndarray
    rels: np.ndarray
    tails: np.ndarray
    names: list[str | None]
    n_entities: int
    n_cvt: int
    info: dict[str, Any] = field(default_factory=dict)

    # -- the protocol export_ntriples() and the benchmarks need -------------------------------------------------------

    @property
    def schema(self) -> Schema:
        return FreebaseSchema()

    @property
    def n_nodes(self) -> int:
        return len(self.node_ids)

    def __len__(self) -> int:
        return len(self.heads)

    def is_literal_node(self, node: int) -> bool:
        return node >= self.n_entities + self.n_cvt

    def iter_triples(self, chunk: int = 100_000) -> Iterator[tuple[str, str, str]]:
        """Every triple as strings; converts 100k at a time so memory stays flat."""
        ids, rels = self.node_ids, self.relations
        for start in range(0, len(self.heads), chunk):
            hs = self.heads[start:start + chunk].tolist()
            rs = self.rels[start:start + chunk].tolist()
            ts = self.tails[start:start + chunk].tolist()
            for h, r, t in zip(hs, rs, ts, strict=True):
                yield ids[h], rels[r], ids[t]

    def iter_names(self) -> Iterator[tuple[str, str]]:
        ids = self.node_ids
        for node, name in enumerate(self.names):
            if name is not None:
                yield ids[node], name

    def feed(self, builder: Any, chunk: int = 262_144, *, mode: str = "arrow") -> int:
        """Add every triple and name to an EmbeddedKGBuilder, ``chunk`` rows at a time, the way a source would:

        * ``arrow``: columns as arrow string arrays taken from the id table (a columnar source such as Parquet);
        * ``lists``: columns as lists of Python str (``add_triple_columns`` / ``add_names``);
        * ``per-triple``: one ``add_triple`` / ``add_name`` call per row, as the file loaders do.
        """
        if mode not in ("arrow", "lists", "per-triple"):
            raise ValueError(f"unknown feed mode {mode!r}")
        named = np.flatnonzero(np.fromiter((n is not None for n in self.names), dtype=bool, count=len(self.names)))
        if mode == "arrow":
            import pyarrow as pa
            import pyarrow.compute as pc

            # The system allocator, as the builder uses: arrow's default keeps freed batches mapped, which would count
            # the source's batches in the import's peak memory.
            pool = pa.system_memory_pool()
            ids = pa.array(self.node_ids, type=pa.large_string(), memory_pool=pool)
            rels = pa.array(self.relations, type=pa.large_string(), memory_pool=pool)
            names = pa.array(self.names, type=pa.large_string(), memory_pool=pool)

            def take(table: Any, rows: np.ndarray) -> Any:
                return pc.take(table, rows, memory_pool=pool)

            for start in range(0, len(self.heads), chunk):
                stop = start + chunk
                builder.add_triple_columns(take(ids, self.heads[start:stop]), take(rels, self.rels[start:stop]),
                                           take(ids, self.tails[start:stop]))
            for start in range(0, len(named), chunk):
                part = named[start:start + chunk]
                builder.add_names(take(ids, part), take(names, part))
            return len(self.heads)
        id_list, rel_list, name_list = self.node_ids, self.relations, self.names
        for start in range(0, len(self.heads), chunk):
            hs = list(map(id_list.__getitem__, self.heads[start:start + chunk].tolist()))
            rs = list(map(rel_list.__getitem__, self.rels[start:start + chunk].tolist()))
            ts = list(map(id_list.__getitem__, self.tails[start:start + chunk].tolist()))
            if mode == "lists":
                builder.add_triple_columns(hs, rs, ts)
            else:
                add = builder.add_triple
                for h, r, t in zip(hs, rs, ts, strict=True):
                    add(h, r, t)
        for start in range(0, len(named), chunk):
            part = named[start:start + chunk].tolist()
            entities, names = list(map(id_list.__getitem__, part)), list(map(name_list.__getitem__, part))
            if mode == "lists":
                builder.add_names(entities, names)
            else:
                for entity, name in zip(entities, names, strict=True):
                    builder.add_name(entity, name)
        return len(self.heads)

    def csr(self) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        """Adjacency for path sampling: ``((out_indptr, out_edges), (in_indptr, in_edges))``; edges are triple indices
        grouped by head (out) or tail (in)."""
        out: list[tuple[np.ndarray, np.ndarray]] = []
        for ends in (self.heads, self.tails):
            order = np.argsort(ends, kind="stable").astype(np.int64)
            indptr = np.zeros(self.n_nodes + 1, dtype=np.int64)
            np.cumsum(np.bincount(ends, minlength=self.n_nodes), out=indptr[1:])
            out.append((indptr, order))
        return out[0], out[1]

    def degrees(self) -> np.ndarray:
        return (np.bincount(self.heads, minlength=self.n_nodes)
                + np.bincount(self.tails, minlength=self.n_nodes)).astype(np.int64)

    def write_ntriples(self, path: str | Path) -> int:
        """Write the graph as N-Triples with the Freebase IRI mapping (kgqa.kg.servers.export_ntriples when present)."""
        try:
            from kgqa.kg.servers import export_ntriples
        except ImportError:
            return _write_ntriples(self, Path(path))
        return export_ntriples(self, path)


def _write_ntriples(kg: GeneratedKG, path: Path) -> int:
    """Fallback N-Triples writer: every generated id is a plain Freebase id and every literal is already escaped."""
    schema = kg.schema
    name_iri = schema.name_predicates[0]
    count = 0
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        for h, r, t in kg.iter_triples():
            obj = t if t.startswith('"') else f"<{schema.entity_iri(t)}>"
            fh.write(f"<{schema.entity_iri(h)}> <{schema.relation_iri(r)}> {obj} .\n")
            count += 1
        for entity, name in kg.iter_names():
            fh.write(f"<{schema.entity_iri(entity)}> <{name_iri}> {make_literal(name, lang='en')} .\n")
            count += 1
    return count


# ---------------------------------------------------------------------------------------------------------------------
# Building blocks


def _zipf_cdf(n: int, exponent: float) -> np.ndarray:
    weights = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** exponent
    cdf = np.cumsum(weights)
    return cdf / cdf[-1]


def _zipf_draw(rng: np.random.Generator, cdf: np.ndarray, size: int) -> np.ndarray:
    """Ranks drawn with P(rank k) proportional to the Zipf weights behind ``cdf``."""
    return np.minimum(np.searchsorted(cdf, rng.random(size), side="right"), len(cdf) - 1)


def _encode_ids(numbers: np.ndarray, prefix: str) -> list[str]:
    """``prefix`` + base-32 digits (Freebase alphabet) of each number, fixed width, vectorised."""
    width = max(1, int(np.ceil(np.log(max(int(numbers.max(initial=0)) + 1, 2)) / np.log(32))))
    alphabet = np.frombuffer(MID_ALPHABET.encode("ascii"), dtype=np.uint8)
    digits = np.empty((len(numbers), width), dtype=np.uint8)
    value = numbers.astype(np.int64)
    for k in range(width - 1, -1, -1):
        digits[:, k] = alphabet[value & 31]
        value = value >> 5
    return [prefix + s for s in digits.view(f"S{width}").ravel().astype(f"U{width}").tolist()]


def _make_words(rng: np.random.Generator, count: int) -> list[str]:
    """``count`` distinct pronounceable words of 2-3 syllables."""
    words: set[str] = set()
    ordered: list[str] = []
    while len(ordered) < count:
        n = count - len(ordered)
        syllables = rng.choice([2, 3], p=[0.7, 0.3], size=n)
        onset = rng.integers(0, len(_ONSETS), size=(n, 3))
        vowel = rng.integers(0, len(_VOWELS), size=(n, 3))
        coda = rng.integers(0, len(_CODAS), size=(n, 3))
        for i in range(n):
            word = "".join(_ONSETS[onset[i, s]] + _VOWELS[vowel[i, s]] + (_CODAS[coda[i, s]] if s == syllables[i] - 1
                                                                           else "")
                           for s in range(syllables[i]))
            if len(word) >= 4 and word not in words:
                words.add(word)
                ordered.append(word)
    return ordered


def _make_names(rng: np.random.Generator, count: int, words: list[str]) -> list[str]:
    """Names of 1-4 capitalised words; the word distribution is Zipf-like so common words recur across names."""
    lengths = rng.choice([1, 2, 3, 4], p=[0.15, 0.55, 0.25, 0.05], size=count)
    picks = _zipf_draw(rng, _zipf_cdf(len(words), 0.8), int(lengths.sum()))
    perm = rng.permutation(len(words))  # the most frequent word is not the first one generated
    cap = [w.capitalize() for w in words]
    chosen = [cap[i] for i in perm[picks].tolist()]
    names: list[str] = []
    pos = 0
    for n in lengths.tolist():
        names.append(" ".join(chosen[pos:pos + n]))
        pos += n
    return names


def _relation_names(rng: np.random.Generator, count: int, taken: set[str], domains: list[str],
                    types: list[str], props: list[str]) -> list[str]:
    names: list[str] = []
    while len(names) < count:
        name = f"{domains[rng.integers(len(domains))]}.{types[rng.integers(len(types))]}." \
               f"{props[rng.integers(len(props))]}"
        if name not in taken:
            taken.add(name)
            names.append(name)
    return names


# ---------------------------------------------------------------------------------------------------------------------
# The generator


def generate(n_triples: int, seed: int = 0) -> GeneratedKG:
    """A Freebase-style graph of about ``n_triples`` distinct triples (see the module docstring)."""
    if n_triples < 1000:
        raise ValueError(f"n_triples={n_triples}: the generator needs at least 1000 triples")
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    n_rel = int(min(2000, max(200, np.sqrt(n_triples) / 2)))
    n_entities = max(2000, n_triples // 4)
    n_types = max(50, n_rel // 4)  # type entities: the targets of the noise relations
    n_domains = len(DOMAINS)

    # Entities: type entities first, then the rest split into domains of Zipf-ish sizes.
    domain_share = _zipf_cdf(n_domains, 0.7)
    domain_share = np.diff(np.concatenate([[0.0], domain_share]))
    domain_sizes = np.maximum((domain_share * (n_entities - n_types)).astype(np.int64), 10)
    domain_sizes[0] += (n_entities - n_types) - int(domain_sizes.sum())
    domain_start = n_types + np.concatenate([[0], np.cumsum(domain_sizes)[:-1]])
    # One popularity order per domain, shared by heads and tails (popular entities are popular both ways).
    domain_perm = [domain_start[d] + rng.permutation(int(domain_sizes[d])) for d in range(n_domains)]
    head_cdf = [_zipf_cdf(int(s), 0.75) for s in domain_sizes]
    tail_cdf = [_zipf_cdf(int(s), 1.1) for s in domain_sizes]

    # Relations: top-level ones, CVT property ones (2-4 per CVT parent), then the noise relations.
    taken: set[str] = set(NOISE_RELATIONS)
    kinds_top = np.array(list(_TOP_LEVEL_KIND_P))
    n_cvt_parents = max(4, int(n_rel * _TOP_LEVEL_KIND_P[CVT] / 3))
    n_top = n_rel - len(NOISE_RELATIONS) - 3 * n_cvt_parents
    top_kind = rng.choice(kinds_top[kinds_top != CVT], size=n_top,
                          p=_renorm([p for k, p in _TOP_LEVEL_KIND_P.items() if k != CVT]))
    names_top = _relation_names(rng, n_top, taken, DOMAINS, TYPES, PROPERTIES)
    names_cvt_parent = _relation_names(rng, n_cvt_parents, taken, DOMAINS, TYPES, PROPERTIES)
    relations: list[str] = [*names_top, *names_cvt_parent]
    kinds: list[int] = [*top_kind.tolist(), *[CVT] * n_cvt_parents]
    cvt_props: list[np.ndarray] = []
    for parent in names_cvt_parent:
        domain = parent.split(".")[0]
        cvt_type = CVT_TYPES[rng.integers(len(CVT_TYPES))]
        k = int(rng.integers(2, 5))
        first = len(relations)
        for prop in rng.choice(PROPERTIES, size=k, replace=False).tolist():
            name = f"{domain}.{cvt_type}.{prop}"
            while name in taken:
                name = f"{domain}.{cvt_type}_{rng.integers(100)}.{prop}"
            taken.add(name)
            relations.append(name)
            kinds.append(int(rng.choice(list(_CVT_PROP_KIND_P), p=_renorm(list(_CVT_PROP_KIND_P.values())))))
        cvt_props.append(np.arange(first, len(relations)))
    noise_first = len(relations)
    relations.extend(NOISE_RELATIONS)
    kinds.extend([NOISE] * len(NOISE_RELATIONS))
    relation_kinds = np.asarray(kinds, dtype=np.int8)
    n_rel = len(relations)
    rel_domain = rng.integers(0, n_domains, size=n_rel)
    # Range domains are concentrated (places, people and dates are everybody's objects), which makes tail hubs.
    rel_range = rng.permutation(n_domains)[_zipf_draw(rng, _zipf_cdf(n_domains, 1.0), n_rel)]

    # Triple budget: 8% noise, ~6% CVT structure, the rest direct facts.
    n_noise = int(0.08 * n_triples)
    n_cvt = max(10, int(0.016 * n_triples))
    cvt_k = np.array([len(p) for p in cvt_props])
    cvt_parent_rank = _zipf_draw(rng, _zipf_cdf(n_cvt_parents, 1.0), n_cvt)
    n_cvt_triples = int(n_cvt + cvt_k[cvt_parent_rank].sum())
    n_direct = max(0, int(n_triples * 1.06) - n_noise - n_cvt_triples)  # slack for duplicates dropped below

    # Literal node blocks follow entities and CVTs.
    cvt_base = n_entities
    lit_base = n_entities + n_cvt
    years = np.arange(_FIRST_YEAR, _LAST_YEAR + 1)
    year_base = lit_base
    date_base = year_base + len(years)
    int_pool = 200_000
    int_base = date_base + _DATE_DAYS
    n_words = int(min(100_000, max(5_000, n_entities // 25)))
    text_base = int_base + int_pool

    def draw_entities(domains: np.ndarray, cdfs: list[np.ndarray]) -> np.ndarray:
        out = np.empty(len(domains), dtype=np.int64)
        for d in range(n_domains):
            mask = domains == d
            count = int(mask.sum())
            if count:
                out[mask] = domain_perm[d][_zipf_draw(rng, cdfs[d], count)]
        return out

    def draw_values(rel_ids: np.ndarray) -> np.ndarray:
        """Tail nodes for the given relations, by each relation's kind."""
        out = np.empty(len(rel_ids), dtype=np.int64)
        rk = relation_kinds[rel_ids]
        m = rk == ENTITY
        out[m] = draw_entities(rel_range[rel_ids[m]], tail_cdf)
        m = rk == YEAR
        # Recent years are commoner, as in any encyclopaedic KG.
        out[m] = year_base + np.minimum((len(years) * rng.beta(4.0, 1.3, size=int(m.sum()))).astype(np.int64),
                                        len(years) - 1)
        m = rk == DATE
        out[m] = date_base + np.minimum((_DATE_DAYS * rng.beta(3.0, 1.2, size=int(m.sum()))).astype(np.int64),
                                        _DATE_DAYS - 1)
        m = rk == INTEGER
        out[m] = int_base + np.minimum(rng.lognormal(5.0, 2.0, size=int(m.sum())).astype(np.int64), int_pool - 1)
        m = rk == TEXT
        out[m] = text_base + _zipf_draw(rng, _zipf_cdf(n_words, 0.9), int(m.sum()))
        return out

    # Direct facts (relation popularity is Zipf over a shuffled order, so popular relations are not the first named).
    top_ids = np.flatnonzero((relation_kinds != CVT) & (relation_kinds != NOISE)
                             & (np.arange(n_rel) < len(names_top)))
    top_ids = top_ids[rng.permutation(len(top_ids))]
    top_cdf = _zipf_cdf(len(top_ids), 1.0)

    def draw_direct(count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rel = top_ids[_zipf_draw(rng, top_cdf, count)]
        return draw_entities(rel_domain[rel], head_cdf), rel, draw_values(rel)

    direct_head, direct_rel, direct_tail = draw_direct(n_direct)

    # CVT structure: one parent edge into each CVT, then its properties.
    parent_ids = np.arange(len(names_top), len(names_top) + n_cvt_parents)
    cvt_parent = parent_ids[cvt_parent_rank]
    cvt_nodes = cvt_base + np.arange(n_cvt)
    parent_head = draw_entities(rel_domain[cvt_parent], head_cdf)
    prop_rel = np.concatenate([cvt_props[r] for r in cvt_parent_rank.tolist()])
    prop_head = np.repeat(cvt_nodes, cvt_k[cvt_parent_rank])
    prop_tail = draw_values(prop_rel)

    # Noise: bookkeeping edges from any entity to the type entities (which become hubs).
    # type.object.type dominates, as in Freebase; a few types (Freebase's common.topic) sit on a large share of entities.
    noise_rel = noise_first + rng.choice(len(NOISE_RELATIONS), p=[0.6, 0.3, 0.1], size=n_noise)
    noise_head = n_types + rng.integers(0, n_entities - n_types, size=n_noise)
    noise_tail = _zipf_draw(rng, _zipf_cdf(n_types, 1.3), n_noise)

    heads = np.concatenate([direct_head, parent_head, prop_head, noise_head])
    rels = np.concatenate([direct_rel, cvt_parent, prop_rel, noise_rel])
    tails = np.concatenate([direct_tail, cvt_nodes, prop_tail, noise_tail])
    # Drop self-loops and duplicates (keeping first occurrences, in generation order); top up with more direct facts
    # until there are n_triples, then cut the excess from the direct facts only (every CVT keeps its structure).
    n_nodes = text_base + n_words
    while True:
        keep = heads != tails
        heads, rels, tails = heads[keep], rels[keep], tails[keep]
        _, first = np.unique((heads * n_rel + rels) * n_nodes + tails, return_index=True)
        first.sort()
        heads, rels, tails = heads[first], rels[first], tails[first]
        missing = n_triples - len(heads)
        if missing <= 0:
            break
        extra = draw_direct(int(missing * 1.2) + 100)
        heads, rels, tails = (np.concatenate([extra[i], arr]) for i, arr in enumerate((heads, rels, tails)))
    heads, rels, tails = heads[-missing:], rels[-missing:], tails[-missing:]

    # Strings: ids (a random permutation of numbers so popularity is not visible in id order), literals, names.
    entity_ids = _encode_ids(rng.permutation(np.arange(n_entities) + 32 ** 3), "m.0")
    cvt_ids = _encode_ids(rng.permutation(n_cvt), "m.cvt")
    year_ids = [make_literal(str(y), datatype=XSD + "gYear") for y in years.tolist()]
    date_ids = [make_literal(str(d), datatype=XSD + "date")
                for d in (_DATE_START + np.arange(_DATE_DAYS)).astype("datetime64[D]").astype(str).tolist()]
    int_ids = [make_literal(str(i), datatype=XSD + "integer") for i in range(int_pool)]
    words = _make_words(rng, n_words)
    text_ids = [make_literal(w.capitalize(), lang="en") for w in words]
    node_ids = entity_ids + cvt_ids + year_ids + date_ids + int_ids + text_ids
    assert len(node_ids) == n_nodes

    name_words = _make_words(np.random.default_rng([seed, 1]), n_words)
    names: list[str | None] = list(_make_names(rng, n_entities, name_words))
    unnamed = rng.random(n_entities) < 0.07
    unnamed[:n_types] = False
    for i in np.flatnonzero(unnamed).tolist():
        names[i] = None

    kg = GeneratedKG(seed=seed, node_ids=node_ids, relations=relations, relation_kinds=relation_kinds,
                     heads=heads.astype(np.int32), rels=rels.astype(np.int32), tails=tails.astype(np.int32),
                     names=names, n_entities=n_entities, n_cvt=n_cvt)
    kg.info = describe(kg)
    kg.info["generate_s"] = round(time.perf_counter() - started, 3)
    return kg


def _renorm(p: list[float]) -> np.ndarray:
    arr = np.asarray(p, dtype=np.float64)
    return arr / arr.sum()


def describe(kg: GeneratedKG) -> dict[str, Any]:
    """Shape statistics: counts, degree percentiles, hubs, share of each relation kind."""
    deg = kg.degrees()
    used = np.zeros(kg.n_nodes, dtype=bool)
    used[kg.heads] = True
    used[kg.tails] = True
    ent_deg = deg[: kg.n_entities]
    kind_counts = np.bincount(kg.relation_kinds[kg.rels], minlength=len(_KIND_NAMES))
    return {
        "triples": len(kg),
        "relations": len(kg.relations),
        "entities": int(used[: kg.n_entities].sum()),
        "cvt_nodes": int(used[kg.n_entities:kg.n_entities + kg.n_cvt].sum()),
        "literal_nodes": int(used[kg.n_entities + kg.n_cvt:].sum()),
        "named_entities": sum(1 for n in kg.names if n is not None),
        "cvt_share_of_nodes": round(float(used[kg.n_entities:kg.n_entities + kg.n_cvt].sum() / max(used.sum(), 1)), 4),
        "entity_degree_p50": float(np.percentile(ent_deg[ent_deg > 0], 50)),
        "entity_degree_p99": float(np.percentile(ent_deg[ent_deg > 0], 99)),
        "max_degree": int(deg.max()),
        "nodes_with_100k_edges": int((deg >= 100_000).sum()),
        "nodes_with_10k_edges": int((deg >= 10_000).sum()),
        "triples_by_kind": {name: int(c) for name, c in zip(_KIND_NAMES, kind_counts.tolist(), strict=True)},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--triples", type=float, default=1e6, help="number of triples (1e6 style allowed)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--nt", type=Path, help="also write the graph as N-Triples here")
    args = parser.parse_args(argv)
    kg = generate(int(args.triples), seed=args.seed)
    import json

    print(json.dumps(kg.info, indent=2))
    if args.nt:
        started = time.perf_counter()
        lines = kg.write_ntriples(args.nt)
        print(f"wrote {lines} lines to {args.nt} in {time.perf_counter() - started:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
