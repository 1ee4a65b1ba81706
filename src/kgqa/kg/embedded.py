"""The embedded store: the default KG backend. In-process, persisted to a directory, zero setup.

Why this design (numbers in benchmarks/results/kg_bench.md):

* Node ids are interned to integers in sorted order, so the id table is one UTF-8 blob plus offsets (about 15 bytes per node)
  searched by bisection, and opens instantly through mmap. No Python dict of millions of strings is ever built at open time.
* Each direction keeps the edges sorted by ``key = node * R + relation`` (R = number of relations) with the other end in a
  parallel int32 array. One ``searchsorted`` answers "edges of node e with relation r" for a whole frontier at once, so a hop
  over 100k entities is a handful of numpy calls, and listing an entity's relations is two binary searches plus a slice.
  That is 24 bytes per triple for both directions together.
* Label search: exact lookups use a sorted table of normalised names; fuzzy lookups use a tantivy index (an inverted index
  with Levenshtein automata, not a scan), reranked with rapidfuzz.

Intermediate entities of a chain are never named, ranked or pruned; only the frontier size is capped (DEFAULT_MAX_FRONTIER)
and a result that hit a cap says ``truncated``.
"""

from __future__ import annotations

import array
import bisect
import json
import mmap
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from kgqa.errors import DataError, KGError
from kgqa.kg.base import (
    DEFAULT_CHAIN_LIMIT,
    DEFAULT_MAX_FRONTIER,
    DEFAULT_MAX_PATHS,
    Chain,
    ChainResult,
    ConstraintChain,
    Direction,
    EntityMatch,
    KGStats,
    is_literal,
    literal_value,
)
from kgqa.kg.schema import Schema, get_schema
from kgqa.normalize import normalize_label

FORMAT_VERSION = 1
META_FILE = "kgqa-embedded.json"


class _StringTable:
    """Immutable sorted strings stored as one UTF-8 blob + int64 offsets; index lookup by bisection.

    The blob is memory-mapped (slicing an ``mmap`` yields bytes without numpy overhead); the offsets are read into memory
    (8 bytes per string) because bisection touches them ~2·log2(n) times per lookup.
    """

    __slots__ = ("_blob", "_offsets")

    def __init__(self, blob: bytes | mmap.mmap, offsets: np.ndarray) -> None:
        self._blob = blob
        # array.array hands out plain Python ints: numpy int64 scalars cost ~10x more per bisection step.
        self._offsets = array.array("q", np.ascontiguousarray(offsets, dtype=np.int64).tobytes())

    @classmethod
    def build(cls, strings: Sequence[str]) -> _StringTable:
        encoded = [s.encode("utf-8") for s in strings]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        if encoded:
            np.cumsum([len(b) for b in encoded], out=offsets[1:])
        return cls(b"".join(encoded), offsets)

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def raw(self, i: int) -> bytes:
        offsets = self._offsets
        return self._blob[offsets[i]:offsets[i + 1]]

    def __getitem__(self, i: int) -> bytes:
        return self.raw(i)

    def get(self, i: int) -> str:
        return self.raw(i).decode("utf-8")

    def index(self, s: str) -> int | None:
        key = s.encode("utf-8")
        i = bisect.bisect_left(self, key)
        return i if i < len(self) and self.raw(i) == key else None

    def range_of(self, key: bytes) -> tuple[int, int]:
        """Positions ``[lo, hi)`` whose string equals ``key`` (tables with repeated strings)."""
        return bisect.bisect_left(self, key), bisect.bisect_right(self, key)

    def save(self, directory: Path, stem: str) -> None:
        (directory / f"{stem}.blob").write_bytes(bytes(self._blob))
        np.save(directory / f"{stem}.off.npy", np.frombuffer(self._offsets, dtype=np.int64))

    @classmethod
    def load(cls, directory: Path, stem: str) -> _StringTable:
        blob_path = directory / f"{stem}.blob"
        blob: bytes | mmap.mmap = b""
        if blob_path.stat().st_size:
            with blob_path.open("rb") as fh:
                blob = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        return cls(blob, np.load(directory / f"{stem}.off.npy"))


def _gather_ranges(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate ``arange(lo[i], hi[i])`` for all i; also return, per element, which i it came from."""
    counts = hi - lo
    total = int(counts.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    owners = np.repeat(np.arange(len(lo), dtype=np.int64), counts)
    starts = np.repeat(lo - (np.cumsum(counts) - counts), counts)
    return starts + np.arange(total, dtype=np.int64), owners


def _first_occurrence_unique(values: np.ndarray) -> np.ndarray:
    """Distinct values in order of first appearance (stable, unlike np.unique)."""
    if len(values) == 0:
        return values
    # Sort-based: numpy 2.4's hash-based np.unique is 20-40x slower on large integer arrays.
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    first = order[np.concatenate(([True], ordered[1:] != ordered[:-1]))]
    return values[np.sort(first)]


def _unique_sorted(values: np.ndarray) -> np.ndarray:
    """``np.unique`` for 1-D integer arrays, by sorting (see :func:`_first_occurrence_unique`)."""
    if len(values) == 0:
        return values
    ordered = np.sort(values)
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]


class EmbeddedKG:
    """A knowledge graph held in numpy arrays, persisted to a directory. See the module docstring."""

    def __init__(self, directory: Path, meta: dict, *, max_frontier: int = DEFAULT_MAX_FRONTIER) -> None:
        self.directory = directory
        self._meta = meta
        self._schema = get_schema(meta.get("schema", "generic"))
        self.max_frontier = max_frontier
        self._nodes = _StringTable.load(directory, "nodes")
        self._names = _StringTable.load(directory, "names")
        self._has_name = np.load(directory / "has_name.npy", mmap_mode="r")
        self._relations: list[str] = meta["relations"]
        self._rel_index = {r: i for i, r in enumerate(self._relations)}
        self._noise = np.array([self._schema.is_noise_relation(r) for r in self._relations], dtype=bool)
        self._noise_list: list[bool] = self._noise.tolist()
        self._R = max(len(self._relations), 1)
        self._node_count = max(len(self._nodes), 1)
        self._out_key = np.load(directory / "out_key.npy", mmap_mode="r")
        self._out_other = np.load(directory / "out_other.npy", mmap_mode="r")
        self._in_key = np.load(directory / "in_key.npy", mmap_mode="r")
        self._in_other = np.load(directory / "in_other.npy", mmap_mode="r")
        self._label_keys = _StringTable.load(directory, "label_keys")
        self._label_nodes = np.load(directory / "label_nodes.npy", mmap_mode="r")
        self._fuzzy = None  # opened on first fuzzy search

    # -- opening ---------------------------------------------------------------------------------------------------

    @classmethod
    def open(cls, directory: str | os.PathLike[str], **options: int) -> EmbeddedKG:
        path = Path(directory)
        meta_path = path / META_FILE
        if not meta_path.is_file():
            raise KGError(f"{path} is not a kgqa embedded KG (no {META_FILE}); build one with `kgqa kg import`")
        meta = json.loads(meta_path.read_text())
        if meta.get("format_version") != FORMAT_VERSION:
            raise KGError(f"{path} was written by format version {meta.get('format_version')}, this kgqa reads "
                          f"{FORMAT_VERSION}; re-import it")
        return cls(path, meta, **options)

    @property
    def schema(self) -> Schema:
        return self._schema

    def close(self) -> None:
        self._fuzzy = None

    def __enter__(self) -> EmbeddedKG:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- id helpers ------------------------------------------------------------------------------------------------

    def _node(self, entity: str) -> int | None:
        return self._nodes.index(entity)

    def _nodes_of(self, entities: Iterable[str]) -> np.ndarray:
        found = [i for i in (self._node(e) for e in entities) if i is not None]
        return _unique_sorted(np.asarray(found, dtype=np.int64))

    def _ids(self, nodes: Iterable[int] | np.ndarray) -> list[str]:
        if isinstance(nodes, np.ndarray):
            nodes = nodes.tolist()
        get = self._nodes.get
        return [get(n) for n in nodes]

    def _relation(self, relation: str) -> int:
        index = self._rel_index.get(relation)
        if index is None:
            raise KGError(f"relation {relation!r} is not in this KG's vocabulary ({len(self._relations)} relations)")
        return index

    def _arrays(self, direction: Direction) -> tuple[np.ndarray, np.ndarray]:
        return (self._out_key, self._out_other) if direction is Direction.OUT else (self._in_key, self._in_other)

    def has_entity(self, entity: str) -> bool:
        return self._node(entity) is not None

    def has_relation(self, relation: str) -> bool:
        return relation in self._rel_index

    # -- one-hop operations ----------------------------------------------------------------------------------------

    def relations(self, entity: str, direction: Direction | str = Direction.OUT) -> list[str]:
        node = self._node(entity)
        if node is None:
            return []
        key, _ = self._arrays(Direction.parse(direction))
        base = node * self._R
        lo = int(key.searchsorted(base))
        hi = int(key.searchsorted(base + self._R))
        # Keys of one node are sorted by relation, so a dict over the slice dedupes in order (faster than np.unique
        # for the short slices of most entities).
        noise, names = self._noise_list, self._relations
        return [names[r] for r in dict.fromkeys((key[lo:hi] - base).tolist()) if not noise[r]]

    def neighbors(self, entity: str, relation: str, direction: Direction | str = Direction.OUT,
                  limit: int = 100) -> list[str]:
        rel = self._relation(relation)
        node = self._node(entity)
        if node is None:
            return []
        key, other = self._arrays(Direction.parse(direction))
        target = node * self._R + rel
        lo = int(key.searchsorted(target))
        hi = int(key.searchsorted(target + 1))
        return self._ids(other[lo:min(hi, lo + max(limit, 0))].tolist())

    # -- chains ----------------------------------------------------------------------------------------------------

    def _hop(self, frontier: np.ndarray, rel: int, direction: Direction) -> tuple[np.ndarray, np.ndarray]:
        """All edges (frontier position, reached node) for one hop; positions index into ``frontier``."""
        key, other = self._arrays(direction)
        targets = frontier * self._R + rel
        lo = np.searchsorted(key, targets, side="left")
        hi = np.searchsorted(key, targets, side="right")
        edge_idx, owners = _gather_ranges(lo, hi)
        return owners, np.asarray(other[edge_idx], dtype=np.int64)

    def _walk(self, start: np.ndarray, chain: Chain, *, keep: dict[int, np.ndarray] | None = None,
              with_edges: bool = True) -> tuple[list[np.ndarray], list[tuple[np.ndarray, np.ndarray]], bool]:
        """Follow ``chain`` from ``start``; returns the distinct frontier at every position, the deduplicated edges of
        every hop as (source node, reached node) arrays (when ``with_edges``), and whether a frontier was capped.

        ``keep`` restricts the frontier at given positions to given node sets (used for joint constraint execution).
        """
        rels = [self._relation(h.relation) for h in chain]
        truncated = False
        frontier = np.asarray(start, dtype=np.int64)
        if keep and 0 in keep:
            frontier = frontier[np.isin(frontier, keep[0])]
        frontiers = [frontier]
        edges: list[tuple[np.ndarray, np.ndarray]] = []
        for position, (hop, rel) in enumerate(zip(chain, rels, strict=True), start=1):
            owners, reached = self._hop(frontier, rel, hop.direction)
            sources = frontier[owners]
            if keep and position in keep:
                mask = np.isin(reached, keep[position])
                sources, reached = sources[mask], reached[mask]
            nxt = _first_occurrence_unique(reached)
            if len(nxt) > self.max_frontier:
                truncated = True
                nxt = nxt[: self.max_frontier]
                mask = np.isin(reached, nxt)
                sources, reached = sources[mask], reached[mask]
            if with_edges:
                # One int64 per (source, reached) pair makes deduplication a flat sort.
                pairs = _unique_sorted(sources * self._node_count + reached)
                edges.append((pairs // self._node_count, pairs % self._node_count))
            frontier = nxt
            frontiers.append(frontier)
        return frontiers, edges, truncated

    @staticmethod
    def _alive(frontiers: list[np.ndarray], edges: list[tuple[np.ndarray, np.ndarray]],
               final: np.ndarray) -> list[np.ndarray]:
        """Nodes at each position that lie on a complete path ending in ``final``."""
        alive = [np.empty(0, dtype=np.int64)] * len(frontiers)
        alive[-1] = final
        for h in range(len(edges) - 1, -1, -1):
            src, dst = edges[h]
            alive[h] = _unique_sorted(src[np.isin(dst, alive[h + 1])])
        return alive

    def _paths(self, edges: list[tuple[np.ndarray, np.ndarray]], alive: list[np.ndarray],
               max_paths: int) -> tuple[list[tuple[str, ...]], bool]:
        """Enumerate paths through the alive nodes, breadth-first, at most ``max_paths``."""
        rows: list[tuple[int, ...]] = [(int(n),) for n in alive[0]]
        truncated = False
        for h, (src, dst) in enumerate(edges):
            mask = np.isin(src, alive[h]) & np.isin(dst, alive[h + 1])
            succ: dict[int, list[int]] = {}
            for s, d in zip(src[mask].tolist(), dst[mask].tolist(), strict=True):
                succ.setdefault(s, []).append(d)
            grown: list[tuple[int, ...]] = []
            for row in rows:
                for d in succ.get(row[-1], ()):
                    if len(grown) >= max_paths:  # a path beyond the cap exists: only then is the result cut
                        truncated = True
                        break
                    grown.append((*row, d))
                if truncated:
                    break
            rows = grown
        names = {n: self._nodes.get(n) for row in rows for n in row}
        return [tuple(names[n] for n in row) for row in rows], truncated

    def run_chain(self, topics: Sequence[str], chain: Chain, *, bindings: bool = False,
                  limit: int = DEFAULT_CHAIN_LIMIT, max_paths: int = DEFAULT_MAX_PATHS) -> ChainResult:
        return self._run(self._nodes_of(topics), chain, None, bindings=bindings, limit=limit, max_paths=max_paths)

    def _run(self, start: np.ndarray, chain: Chain, keep: dict[int, np.ndarray] | None, *, bindings: bool,
             limit: int, max_paths: int = DEFAULT_MAX_PATHS) -> ChainResult:
        frontiers, edges, truncated = self._walk(start, chain, keep=keep, with_edges=bindings)
        final = frontiers[-1]
        if len(final) > limit:
            truncated = True
            final = final[:limit]
        result = ChainResult(entities=self._ids(final), truncated=truncated)
        if bindings:
            alive = self._alive(frontiers, edges, final)
            result.paths, cut = self._paths(edges, alive, max_paths)
            result.truncated = result.truncated or cut
        return result

    def chain_relations(self, topics: Sequence[str], chain: Chain,
                        direction: Direction | str = Direction.OUT) -> list[str]:
        frontiers, _, _ = self._walk(self._nodes_of(topics), chain, with_edges=False)
        end = frontiers[-1]
        if len(end) == 0:
            return []
        key, _ = self._arrays(Direction.parse(direction))
        lo = np.searchsorted(key, end * self._R)
        hi = np.searchsorted(key, (end + 1) * self._R)
        idx, _ = _gather_ranges(lo, hi)
        rels = _unique_sorted(np.asarray(key[idx]) % self._R)
        return [self._relations[r] for r in rels if not self._noise[r]]

    # -- constraints -----------------------------------------------------------------------------------------------

    def _check_source(self, main: Chain, constraint: ConstraintChain) -> None:
        if not 0 <= constraint.source <= len(main):
            raise KGError(f"constraint source position {constraint.source} is outside the main chain "
                          f"(0..{len(main)})")
        if not constraint.chain:
            raise KGError("constraint chain is empty")

    def _sources_on_paths(self, topics: Sequence[str], main: Chain, source: int) -> tuple[np.ndarray, bool]:
        frontiers, edges, truncated = self._walk(self._nodes_of(topics), main)
        return self._alive(frontiers, edges, frontiers[-1])[source], truncated

    def constraint_values(self, topics: Sequence[str], main: Chain, constraint: ConstraintChain,
                          limit: int = DEFAULT_CHAIN_LIMIT) -> ChainResult:
        self._check_source(main, constraint)
        sources, truncated = self._sources_on_paths(topics, main, constraint.source)
        result = self._run(sources, constraint.chain, None, bindings=False, limit=limit)
        result.truncated = result.truncated or truncated
        return result

    def _matches_target(self, nodes: np.ndarray, target: str) -> np.ndarray:
        if is_literal(target):
            wanted = literal_value(target)
            return np.array([is_literal(n) and literal_value(n) == wanted for n in self._ids(nodes)], dtype=bool)
        target_node = self._node(target)
        return nodes == (target_node if target_node is not None else -1)

    def filter_by_constraint(self, topics: Sequence[str], main: Chain, constraint: ConstraintChain,
                             limit: int = DEFAULT_CHAIN_LIMIT) -> ChainResult:
        self._check_source(main, constraint)
        if constraint.target is None:
            raise KGError("filter_by_constraint needs a constraint target; use constraint_values to list candidates")
        sources, truncated = self._sources_on_paths(topics, main, constraint.source)
        # Which source entities reach the target: walk the constraint chain keeping each start as its own origin.
        frontiers, edges, cut = self._walk(sources, constraint.chain)
        hit_end = frontiers[-1][self._matches_target(frontiers[-1], constraint.target)]
        satisfied = self._alive(frontiers, edges, hit_end)[0]
        result = self._run(self._nodes_of(topics), main, {constraint.source: satisfied}, bindings=False, limit=limit)
        result.truncated = result.truncated or truncated or cut
        return result

    # -- names and search ------------------------------------------------------------------------------------------

    def names(self, ids: Sequence[str]) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        for entity in ids:
            if is_literal(entity):
                out[entity] = literal_value(entity)
                continue
            node = self._node(entity)
            out[entity] = self._names.get(node) if node is not None and self._has_name[node] else None
        return out

    def search(self, label: str, *, fuzzy: bool = False, limit: int = 10) -> list[EntityMatch]:
        key = normalize_label(label)
        if not key:
            return []
        lo, hi = self._label_keys.range_of(key.encode("utf-8"))
        exact = [int(n) for n in self._label_nodes[lo:hi]]
        matches = [EntityMatch(e, self._names.get(n), 1.0) for n, e in zip(exact, self._ids(exact), strict=True)]
        if not fuzzy or len(matches) >= limit:
            return matches[:limit]
        from kgqa.kg.label_index import FuzzyLabelIndex

        if self._fuzzy is None:
            self._fuzzy = FuzzyLabelIndex.open(self.directory / "fuzzy")
        seen = {m.id for m in matches}
        for node, score in self._fuzzy.search(key, limit=limit * 3):
            entity = self._nodes.get(node)
            if entity not in seen and score < 1.0:
                seen.add(entity)
                matches.append(EntityMatch(entity, self._names.get(node), score))
        matches.sort(key=lambda m: -m.score)
        return matches[:limit]

    # -- vocabulary and statistics ---------------------------------------------------------------------------------

    def vocabulary(self) -> list[str]:
        return list(self._relations)

    def stats(self) -> KGStats:
        m = self._meta
        return KGStats(backend="embedded", schema=self._schema.name, triples=m["triples"], entities=m["entities"],
                       relations=len(self._relations), literals=m["literals"], names=m["names"],
                       extra={"directory": str(self.directory), "noise_relations": int(self._noise.sum())})

    def iter_triples(self) -> Iterator[tuple[str, str, str]]:
        """Every triple as (head, relation, tail) strings, in storage order."""
        for start in range(0, len(self._out_key), 100_000):
            keys = np.asarray(self._out_key[start:start + 100_000])
            others = np.asarray(self._out_other[start:start + 100_000])
            for k, o in zip(keys.tolist(), others.tolist(), strict=True):
                yield self._nodes.get(k // self._R), self._relations[k % self._R], self._nodes.get(o)

    def iter_names(self) -> Iterator[tuple[str, str]]:
        """Every (entity, name) pair of a named, non-literal node."""
        for node in np.flatnonzero(self._has_name):
            entity = self._nodes.get(int(node))
            if not is_literal(entity):
                yield entity, self._names.get(int(node))


class EmbeddedKGBuilder:
    """Collects triples and names, then writes an :class:`EmbeddedKG` directory.

    Ids are interned while adding, so memory during import is one dict entry per distinct node plus 24 bytes per
    triple (three ``array('q')`` columns, which cost a fifth of a list of tuples).
    """

    def __init__(self, schema: str | Schema | None = "generic") -> None:
        self.schema = get_schema(schema)
        self._node_ids: dict[str, int] = {}
        self._rel_ids: dict[str, int] = {}
        self._heads = array.array("q")
        self._rels = array.array("q")
        self._tails = array.array("q")
        self._names: dict[int, str] = {}

    def _intern(self, node: str) -> int:
        index = self._node_ids.get(node)
        if index is None:
            index = self._node_ids[node] = len(self._node_ids)
        return index

    def add_triple(self, head: str, relation: str, tail: str) -> None:
        # The hot path of every import: plain dict lookups and array appends, the checks folded into one test.
        if not head or not relation or not tail or head[0] == '"':
            if is_literal(head or ""):
                raise DataError(f"a literal cannot be the head of a triple: {head!r}")
            raise DataError(f"empty field in triple ({head!r}, {relation!r}, {tail!r})")
        nodes = self._node_ids
        h = nodes.get(head)
        if h is None:
            h = nodes[head] = len(nodes)
        t = nodes.get(tail)
        if t is None:
            t = nodes[tail] = len(nodes)
        r = self._rel_ids.get(relation)
        if r is None:
            r = self._rel_ids[relation] = len(self._rel_ids)
        self._heads.append(h)
        self._rels.append(r)
        self._tails.append(t)

    def add_triples(self, triples: Iterable[tuple[str, str, str]]) -> int:
        count = 0
        add = self.add_triple
        for head, relation, tail in triples:
            add(head, relation, tail)
            count += 1
        return count

    def add_name(self, entity: str, name: str) -> None:
        """Give ``entity`` a display name (the first one given wins). Naming an entity makes it a node even with no edge."""
        node = self._intern(entity)
        self._names.setdefault(node, name)

    @property
    def triple_count(self) -> int:
        return len(self._heads)

    def build(self, out_dir: str | os.PathLike[str], *, overwrite: bool = True) -> EmbeddedKG:
        """Write the store to ``out_dir`` (atomically: a temp dir renamed into place) and open it."""
        out = Path(out_dir)
        if out.exists() and any(out.iterdir()) and (not overwrite or not (out / META_FILE).exists()):
            raise DataError(f"{out} exists and is not an embedded KG to overwrite; choose an empty --out directory")
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".kgqa-build-", dir=out.parent))
        try:
            meta = self._write(tmp)
            (tmp / META_FILE).write_text(json.dumps(meta, indent=2))
            if out.exists():
                shutil.rmtree(out)
            tmp.rename(out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return EmbeddedKG.open(out)

    def _write(self, directory: Path) -> dict:
        # Nodes sorted by their UTF-8 bytes so the id table can be bisected; remap interned ids to sorted ranks.
        # Code-point order is UTF-8 byte order, so strings sort as they are (no encoding per comparison key).
        by_insertion = list(self._node_ids)
        self._node_ids = {}  # the largest structure of an import: free it before the tables are built
        order = sorted(range(len(by_insertion)), key=by_insertion.__getitem__)
        rank = np.empty(len(order), dtype=np.int64)
        rank[np.asarray(order, dtype=np.int64)] = np.arange(len(order), dtype=np.int64)
        sorted_nodes = [by_insertion[i] for i in order]
        _StringTable.build(sorted_nodes).save(directory, "nodes")

        relations = sorted(self._rel_ids)
        rel_rank = np.empty(max(len(relations), 1), dtype=np.int64)
        for new, rel in enumerate(relations):
            rel_rank[self._rel_ids[rel]] = new
        R = max(len(relations), 1)

        N = max(len(sorted_nodes), 1)
        heads = rank[np.frombuffer(self._heads, dtype=np.int64)]
        rels = rel_rank[np.frombuffer(self._rels, dtype=np.int64)] if len(self._rels) else np.empty(0, np.int64)
        tails = rank[np.frombuffer(self._tails, dtype=np.int64)]
        self._heads, self._rels, self._tails = array.array("q"), array.array("q"), array.array("q")

        # Both directions are sorted by one int64 per edge, (node * R + relation) * N + other end, when it fits: a flat
        # sort is several times faster than deduplicating or lexsorting rows.
        if N * N * R < 2**62:
            combined = np.sort((heads * R + rels) * N + tails)
            combined = combined[np.concatenate(([True], combined[1:] != combined[:-1]))] if len(combined) else combined
            del heads, rels, tails
            out_key, out_other = combined // N, combined % N
            del combined
            in_combined = np.sort((out_other * R + out_key % R) * N + out_key // R)
            in_key, in_other = in_combined // N, in_combined % N
            del in_combined
        else:  # pragma: no cover - KGs beyond ~2^62 / R edges keys; correct, slower
            pairs = np.unique(np.stack([heads * R + rels, tails], axis=1), axis=0)
            out_key, out_other = pairs[:, 0], pairs[:, 1]
            in_pairs = np.stack([out_other * R + out_key % R, out_key // R], axis=1)
            in_pairs = in_pairs[np.lexsort((in_pairs[:, 1], in_pairs[:, 0]))]
            in_key, in_other = in_pairs[:, 0], in_pairs[:, 1]
        triples = len(out_key)
        np.save(directory / "out_key.npy", np.ascontiguousarray(out_key))
        np.save(directory / "out_other.npy", out_other.astype(np.int32))
        np.save(directory / "in_key.npy", np.ascontiguousarray(in_key))
        np.save(directory / "in_other.npy", in_other.astype(np.int32))
        del out_key, out_other, in_key, in_other

        names = [""] * len(sorted_nodes)
        has_name = np.zeros(len(sorted_nodes), dtype=bool)
        for node, name in self._names.items():
            names[rank[node]] = name
            has_name[rank[node]] = True
        literal_mask = np.fromiter((n[0] == '"' for n in sorted_nodes), dtype=bool, count=len(sorted_nodes))
        for i in np.flatnonzero(literal_mask & ~has_name):
            names[i] = literal_value(sorted_nodes[i])
            has_name[i] = True
        _StringTable.build(names).save(directory, "names")
        np.save(directory / "has_name.npy", has_name)

        # Exact label table: (normalised name, node), sorted by the key bytes. Literals are values, not entities.
        candidates = np.flatnonzero(has_name & ~literal_mask).tolist()
        normalised = [normalize_label(names[i]) for i in candidates]
        # Sorting indices by key (stable: equal keys keep node order) is several times faster than sorting tuples.
        by_key = sorted((j for j, k in enumerate(normalised) if k), key=normalised.__getitem__)
        keys = [normalised[j] for j in by_key]
        label_nodes = [candidates[j] for j in by_key]
        del normalised, candidates
        _StringTable.build(keys).save(directory, "label_keys")
        np.save(directory / "label_nodes.npy", np.asarray(label_nodes, dtype=np.int64))

        from kgqa.kg.label_index import FuzzyLabelIndex

        FuzzyLabelIndex.build(directory / "fuzzy", zip(label_nodes, keys, strict=True), normalized=True)

        self._node_ids = {}
        return {
            "format_version": FORMAT_VERSION,
            "schema": self.schema.name,
            "relations": relations,
            "triples": int(triples),
            "entities": int(len(sorted_nodes) - literal_mask.sum()),
            "literals": int(literal_mask.sum()),
            "names": int((has_name & ~literal_mask).sum()),
        }
