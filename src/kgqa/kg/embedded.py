"""The embedded store: the default KG backend. In-process, persisted to a directory, zero setup.

Why this design (numbers in benchmarks/results/kg_bench.md):

* Node ids are interned to integers in bulk (see :class:`EmbeddedKGBuilder`). The id table is one UTF-8 blob plus
  offsets (about 15 bytes per node) ordered by a 64-bit hash of each id (:func:`_key_hash`), with a bucket directory
  over the hashes: an id is found with one hash, two array reads and one byte comparison (a few µs), and opening the
  store builds no index: the arrays are mmap'd, and only the string tables' offsets (8 bytes a string) are read in.
  Hash order also means the import never sorts strings, which was the slowest step of building a large store. (Ids
  therefore come out of chains in hash order, not alphabetically.)
* Each direction keeps a CSR over (node, relation) pairs: ``pair_key = node * R + relation`` (sorted, distinct), the
  offset of each pair's edges, and the other end of every edge; ``node_ptr`` gives each node's range of pairs. Listing an
  entity's relations is a slice (no search, no deduplication, even for hubs with 10^5 edges); one ``searchsorted`` over
  the pair keys hops a whole frontier at once. Both directions together cost about 8 bytes per triple for the edges
  plus 16 per distinct (node, relation) pair.
* Label search: exact lookups hash the normalised name into the same kind of bucket directory; fuzzy lookups use a
  tantivy index (an inverted index with Levenshtein automata, not a scan), reranked with rapidfuzz.

Intermediate entities of a chain are never named, ranked or pruned; only the frontier size is capped (DEFAULT_MAX_FRONTIER)
and a result that hit a cap says ``truncated``.
"""

from __future__ import annotations

import array
import bisect
import gc
import json
import mmap
import os
import shutil
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kgqa.errors import DataError, ImportAborted, KGError, KGQAError
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
from kgqa.normalize import normalize_label, normalize_labels

FORMAT_VERSION = 2
META_FILE = "kgqa-embedded.json"

# The builder's arrow buffers come from the system allocator: arrow's default (mimalloc) keeps freed batches mapped, which
# put a 1M-triple import at 190 bytes of RAM per triple against 116 here, at the same speed (faster at 10M).
_POOL = pa.system_memory_pool()


class _StringTable:
    """Immutable strings stored as one UTF-8 blob + int64 offsets.

    The blob is memory-mapped (slicing an ``mmap`` yields bytes without numpy overhead); the offsets are read into memory
    (8 bytes per string) as an ``array.array``, which hands out plain Python ints (numpy scalars cost ~10x more).
    """

    __slots__ = ("_blob", "_offsets")

    def __init__(self, blob: bytes | mmap.mmap, offsets: np.ndarray) -> None:
        self._blob = blob
        self._offsets = array.array("q", np.ascontiguousarray(offsets, dtype=np.int64).tobytes())

    @classmethod
    def build(cls, strings: Sequence[str]) -> _StringTable:
        # One join and one encode for the whole table; per-string lengths come from a C-level map.
        joined = "".join(strings)
        if joined.isascii():
            blob = joined.encode("ascii")
            lengths = map(len, strings)
        else:
            blob = joined.encode("utf-8")
            lengths = map(len, map(str.encode, strings))
        offsets = np.zeros(len(strings) + 1, dtype=np.int64)
        if len(strings):
            np.cumsum(np.fromiter(lengths, dtype=np.int64, count=len(strings)), out=offsets[1:])
        return cls(blob, offsets)

    @classmethod
    def from_arrow(cls, strings: pa.Array) -> _StringTable:
        data, offsets = _packed(strings)
        return cls(data[offsets[0]:offsets[-1]].tobytes(), offsets - offsets[0])

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def raw(self, i: int) -> bytes:
        offsets = self._offsets
        return self._blob[offsets[i]:offsets[i + 1]]

    def get(self, i: int) -> str:
        return self.raw(i).decode("utf-8")

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


# -- hashing ids and labels ------------------------------------------------------------------------------------------
#
# A table hash must be computable for millions of strings at once at import (numpy over the packed UTF-8 bytes) and for
# one string at query time (Python), with the same value. The string's bytes read as a little-endian integer, reduced
# modulo a prime below 2**55 (so a Horner step h * 256 + byte never leaves uint64), then spread by the splitmix64
# finaliser so the top bits, which pick the bucket, depend on every byte.
_HASH_PRIME = 36028797018963913  # the largest prime below 2**55
_MIX1, _MIX2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_MASK64 = (1 << 64) - 1


def _key_hash(key: bytes) -> int:
    """The table hash of one string's UTF-8 bytes (equal to :func:`_hash_packed` of it)."""
    z = int.from_bytes(key, "little") % _HASH_PRIME
    z = ((z ^ (z >> 30)) * _MIX1) & _MASK64
    z = ((z ^ (z >> 27)) * _MIX2) & _MASK64
    return z ^ (z >> 31)


def _hash_packed(data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Table hashes (uint64) of the strings ``data[offsets[i]:offsets[i + 1]]``.

    Vectorised across strings, one byte position at a time from the last: strings sorted by length, so the strings still
    being hashed at position j are a prefix. Total work is one pass over the bytes.
    """
    n = len(offsets) - 1
    starts = offsets[:-1]
    lengths = offsets[1:] - starts
    longest_key = lengths.max() if n else 0
    # Longest first; as uint16 when the lengths fit, numpy's stable sort is a radix sort (linear time).
    key = (np.uint16(longest_key) - lengths.astype(np.uint16)) if longest_key < 2**16 else -lengths
    order = np.argsort(key, kind="stable")
    starts, lengths = starts[order], lengths[order]
    h = np.zeros(n, dtype=np.uint64)
    longest = int(lengths[0]) if n else 0
    active = np.searchsorted(-lengths, -np.arange(longest, dtype=np.int64), side="left")  # strings longer than j
    prime, base = np.uint64(_HASH_PRIME), np.uint64(256)
    for j in range(longest - 1, -1, -1):
        k = int(active[j])
        part = h[:k]
        part *= base
        part += data[starts[:k] + j]
        part %= prime
    h ^= h >> np.uint64(30)
    h *= np.uint64(_MIX1)
    h ^= h >> np.uint64(27)
    h *= np.uint64(_MIX2)
    h ^= h >> np.uint64(31)
    out = np.empty(n, dtype=np.uint64)
    out[order] = h
    return out


def _packed(strings: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(UTF-8 bytes as uint8, int64 offsets from 0) of an arrow string array, without copying the bytes."""
    strings = strings.cast(pa.large_string(), memory_pool=_POOL)
    n, first = len(strings), strings.offset
    offsets_buffer, data_buffer = strings.buffers()[1], strings.buffers()[2]
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64)[first:first + n + 1] if n else np.zeros(1, np.int64)
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.empty(0, np.uint8)
    return data, offsets


def _hash_order(strings: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The (stable) order that sorts ``strings`` by table hash, and the sorted hashes."""
    data, offsets = _packed(strings)
    hashes = _hash_packed(data, offsets)
    order = np.argsort(hashes, kind="stable")
    return order, hashes[order]


def _scalar_view(array_: np.ndarray, code: str) -> memoryview:
    """A memoryview over a (possibly mmap'd) 1-D array whose items index as plain Python ints (the fastest scalar
    access CPython has: numpy scalar indexing costs ~10x more)."""
    return memoryview(np.ascontiguousarray(array_)).cast("B").cast(code)


class _HashDirectory:
    """Exact lookup in a string table stored in table-hash order: a bucket directory over the top bits of the hashes.

    With about one bucket per string, a lookup reads two bucket bounds and one or two hashes, then the caller compares
    bytes once. Files: ``<stem>.hash.npy`` (uint64, sorted) and ``<stem>.bucket.npy`` (int64 bucket starts).
    """

    __slots__ = ("_hashes", "_shift", "_starts")

    def __init__(self, hashes: np.ndarray, starts: np.ndarray) -> None:
        self._hashes = _scalar_view(hashes, "Q")
        self._starts = _scalar_view(starts, "q")
        self._shift = 64 - ((len(starts) - 1).bit_length() - 1)

    @staticmethod
    def save(directory: Path, stem: str, sorted_hashes: np.ndarray) -> None:
        bits = min(max(1, (len(sorted_hashes) - 1).bit_length()), 40)  # about one bucket per string
        starts = np.zeros((1 << bits) + 1, dtype=np.int64)
        np.cumsum(np.bincount((sorted_hashes >> np.uint64(64 - bits)).astype(np.int64), minlength=1 << bits),
                  out=starts[1:])
        np.save(directory / f"{stem}.hash.npy", np.ascontiguousarray(sorted_hashes, dtype=np.uint64))
        np.save(directory / f"{stem}.bucket.npy", starts.astype(np.int64))

    @classmethod
    def load(cls, directory: Path, stem: str) -> _HashDirectory:
        return cls(np.load(directory / f"{stem}.hash.npy", mmap_mode="r"),
                   np.load(directory / f"{stem}.bucket.npy", mmap_mode="r"))

    def candidates(self, key: bytes) -> list[int]:
        """Positions whose hash equals ``key``'s (the caller compares the strings)."""
        h = _key_hash(key)
        bucket = h >> self._shift
        hashes = self._hashes
        return [i for i in range(self._starts[bucket], self._starts[bucket + 1]) if hashes[i] == h]


def _gather_ranges(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate ``arange(lo[i], hi[i])`` for all i; also return, per element, which i it came from."""
    counts = hi - lo
    total = int(counts.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    owners = np.repeat(np.arange(len(lo), dtype=np.int64), counts)
    starts = np.repeat(lo - (np.cumsum(counts) - counts), counts)
    return starts + np.arange(total, dtype=np.int64), owners


def _run_starts(ordered: np.ndarray) -> np.ndarray:
    """Mask of the positions of a sorted array where a new value begins (the first of each run of equal values)."""
    starts = np.empty(len(ordered), dtype=bool)
    if len(ordered):
        starts[0] = True
        np.not_equal(ordered[1:], ordered[:-1], out=starts[1:])
    return starts


def _first_occurrence_unique(values: np.ndarray) -> np.ndarray:
    """Distinct values in order of first appearance (stable, unlike np.unique)."""
    if len(values) == 0:
        return values
    # Sort-based: numpy 2.4's hash-based np.unique is 20-40x slower on large integer arrays.
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    return values[np.sort(order[_run_starts(ordered)])]


def _unique_sorted(values: np.ndarray) -> np.ndarray:
    """``np.unique`` for 1-D integer arrays, by sorting (see :func:`_first_occurrence_unique`)."""
    if len(values) == 0:
        return values
    ordered = np.sort(values)
    return ordered[_run_starts(ordered)]


class _Adjacency:
    """One direction of the graph: a CSR over distinct (node, relation) pairs (see the module docstring).

    Files ``<stem>.pair_key.npy`` (int64, sorted), ``<stem>.pair_ptr.npy`` (int64, pairs + 1: where each pair's edges
    start), ``<stem>.other.npy`` (int32: the other end of every edge, sorted within a pair) and ``<stem>.node_ptr.npy``
    (int64, nodes + 1: where each node's pairs start).
    """

    __slots__ = ("_key_v", "_node_ptr_v", "_other_v", "_ptr_v", "node_ptr", "other", "pair_key", "pair_ptr")

    def __init__(self, pair_key: np.ndarray, pair_ptr: np.ndarray, other: np.ndarray, node_ptr: np.ndarray) -> None:
        # Plain ndarray views of the mmap'd files for vectorised work, memoryviews for scalar reads.
        self.pair_key, self.pair_ptr = pair_key.view(np.ndarray), pair_ptr.view(np.ndarray)
        self.other, self.node_ptr = other.view(np.ndarray), node_ptr.view(np.ndarray)
        self._key_v, self._ptr_v = _scalar_view(pair_key, "q"), _scalar_view(pair_ptr, "q")
        self._other_v, self._node_ptr_v = _scalar_view(other, "i"), _scalar_view(node_ptr, "q")

    @staticmethod
    def save(directory: Path, stem: str, edge_keys: np.ndarray, others: np.ndarray, nodes: int, relations: int) -> int:
        """Write one direction from its edges sorted by (key = node * R + relation, other end); returns the pair count."""
        starts = np.flatnonzero(_run_starts(edge_keys))
        pair_key = edge_keys[starts]
        np.save(directory / f"{stem}.pair_key.npy", pair_key)
        np.save(directory / f"{stem}.pair_ptr.npy", np.append(starts, len(edge_keys)).astype(np.int64))
        del starts
        np.save(directory / f"{stem}.other.npy", others.astype(np.int32, copy=False))
        node_bounds = np.arange(nodes + 1, dtype=np.int64) * relations
        np.save(directory / f"{stem}.node_ptr.npy", np.searchsorted(pair_key, node_bounds).astype(np.int64))
        return len(pair_key)

    @classmethod
    def load(cls, directory: Path, stem: str) -> _Adjacency:
        def part(name: str) -> np.ndarray:
            return np.load(directory / f"{stem}.{name}.npy", mmap_mode="r")

        return cls(part("pair_key"), part("pair_ptr"), part("other"), part("node_ptr"))

    def pair_keys_of(self, node: int) -> list[int]:
        return self._key_v[self._node_ptr_v[node]:self._node_ptr_v[node + 1]].tolist()

    def others(self, node: int, key: int, limit: int) -> list[int]:
        """Other ends of the edges with pair key ``key`` (which belongs to ``node``), at most ``limit``."""
        lo, hi = self._node_ptr_v[node], self._node_ptr_v[node + 1]
        j = bisect.bisect_left(self._key_v, key, lo, hi)
        if j == hi or self._key_v[j] != key:
            return []
        start, end = self._ptr_v[j], self._ptr_v[j + 1]
        return self._other_v[start:min(end, start + max(limit, 0))].tolist()

    def hop(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every edge whose pair key is in ``keys``: (position in ``keys``, other end)."""
        if len(self.pair_key) == 0 or len(keys) == 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        j = np.minimum(np.searchsorted(self.pair_key, keys), len(self.pair_key) - 1)
        found = np.flatnonzero(self.pair_key[j] == keys)
        j = j[found]
        edge_idx, owners = _gather_ranges(self.pair_ptr[j], self.pair_ptr[j + 1])
        return found[owners], self.other[edge_idx].astype(np.int64)

    def pair_keys_of_many(self, nodes: np.ndarray) -> np.ndarray:
        idx, _ = _gather_ranges(self.node_ptr[nodes], self.node_ptr[nodes + 1])
        return self.pair_key[idx]

    def iter_edges(self, chunk: int = 100_000) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(pair key, other end) of every edge, in storage order, ``chunk`` pairs at a time."""
        for start in range(0, len(self.pair_key), chunk):
            stop = min(start + chunk, len(self.pair_key))
            bounds = self.pair_ptr[start:stop + 1]
            yield np.repeat(self.pair_key[start:stop], np.diff(bounds)), self.other[bounds[0]:bounds[-1]]


class EmbeddedKG:
    """A knowledge graph held in numpy arrays, persisted to a directory. See the module docstring."""

    def __init__(self, directory: Path, meta: dict, *, max_frontier: int = DEFAULT_MAX_FRONTIER) -> None:
        self.directory = directory
        self._meta = meta
        self._schema = get_schema(meta.get("schema", "generic"))
        self.max_frontier = max_frontier
        self._nodes = _StringTable.load(directory, "nodes")
        self._node_hashes = _HashDirectory.load(directory, "nodes")
        self._names = _StringTable.load(directory, "names")
        self._has_name = np.load(directory / "has_name.npy", mmap_mode="r")
        self._relations: list[str] = meta["relations"]
        self._rel_index = {r: i for i, r in enumerate(self._relations)}
        self._noise = np.array([self._schema.is_noise_relation(r) for r in self._relations], dtype=bool)
        self._noise_list: list[bool] = self._noise.tolist()
        self._R = max(len(self._relations), 1)
        self._node_count = max(len(self._nodes), 1)
        self._adjacency = {d: _Adjacency.load(directory, d.value) for d in Direction}
        self._label_keys = _StringTable.load(directory, "label_keys")
        self._label_hashes = _HashDirectory.load(directory, "label_keys")
        self._label_nodes = _scalar_view(np.load(directory / "label_nodes.npy", mmap_mode="r"), "i")
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
        key = entity.encode("utf-8")
        raw = self._nodes.raw
        for i in self._node_hashes.candidates(key):
            if raw(i) == key:
                return i
        return None

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

    def has_entity(self, entity: str) -> bool:
        return self._node(entity) is not None

    def has_relation(self, relation: str) -> bool:
        return relation in self._rel_index

    # -- one-hop operations ----------------------------------------------------------------------------------------

    def relations(self, entity: str, direction: Direction | str = Direction.OUT) -> list[str]:
        node = self._node(entity)
        if node is None:
            return []
        adj = self._adjacency[Direction.parse(direction)]
        base = node * self._R
        # A node's pairs are distinct and sorted by relation: no search and no deduplication, hubs included.
        noise, names = self._noise_list, self._relations
        return [names[r] for r in (k - base for k in adj.pair_keys_of(node)) if not noise[r]]

    def neighbors(self, entity: str, relation: str, direction: Direction | str = Direction.OUT,
                  limit: int = 100) -> list[str]:
        rel = self._relation(relation)
        node = self._node(entity)
        if node is None:
            return []
        return self._ids(self._adjacency[Direction.parse(direction)].others(node, node * self._R + rel, limit))

    # -- chains ----------------------------------------------------------------------------------------------------

    def _hop(self, frontier: np.ndarray, rel: int, direction: Direction) -> tuple[np.ndarray, np.ndarray]:
        """All edges (frontier position, reached node) for one hop; positions index into ``frontier``."""
        return self._adjacency[direction].hop(frontier * self._R + rel)

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
        rels = _unique_sorted(self._adjacency[Direction.parse(direction)].pair_keys_of_many(end) % self._R)
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
        exact = self._nodes_labelled(key)
        matches = [EntityMatch(e, self._names.get(n), 1.0) for n, e in zip(exact, self._ids(exact), strict=True)]
        if not fuzzy or len(matches) >= limit:
            return matches[:limit]
        from kgqa.kg.label_index import FuzzyLabelIndex

        if self._fuzzy is None:
            self._fuzzy = FuzzyLabelIndex.open(self.directory / "fuzzy", self._label_keys.get, len(self._label_keys))
        seen = {m.id for m in matches}
        for position, score in self._fuzzy.search(key, limit=limit * 3):
            node = self._label_nodes[position]
            entity = self._nodes.get(node)
            if entity not in seen and score < 1.0:
                seen.add(entity)
                matches.append(EntityMatch(entity, self._names.get(node), score))
        matches.sort(key=lambda m: -m.score)
        return matches[:limit]

    def _nodes_labelled(self, key: str) -> list[int]:
        """Nodes whose normalised name is ``key``, in node order."""
        wanted = key.encode("utf-8")
        raw, nodes = self._label_keys.raw, self._label_nodes
        return [nodes[i] for i in self._label_hashes.candidates(wanted) if raw(i) == wanted]

    # -- vocabulary and statistics ---------------------------------------------------------------------------------

    def vocabulary(self) -> list[str]:
        return list(self._relations)

    def stats(self) -> KGStats:
        m = self._meta
        return KGStats(backend="embedded", schema=self._schema.name, triples=m["triples"], entities=m["entities"],
                       relations=len(self._relations), literals=m["literals"], names=m["names"],
                       extra={"directory": str(self.directory), "noise_relations": int(self._noise.sum()),
                              "build_seconds": m.get("build_seconds", {})})

    def iter_triples(self) -> Iterator[tuple[str, str, str]]:
        """Every triple as (head, relation, tail) strings, in storage order."""
        get, relations, R = self._nodes.get, self._relations, self._R
        for keys, others in self._adjacency[Direction.OUT].iter_edges():
            for k, o in zip(keys.tolist(), others.tolist(), strict=True):
                yield get(k // R), relations[k % R], get(o)

    def iter_names(self) -> Iterator[tuple[str, str]]:
        """Every (entity, name) pair of a named, non-literal node."""
        for node in np.flatnonzero(self._has_name):
            entity = self._nodes.get(int(node))
            if not is_literal(entity):
                yield entity, self._names.get(int(node))


StringColumn = Sequence[str] | pa.Array | pa.ChunkedArray


def _unify(strings: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """The distinct strings of ``strings`` and, for each element, the index of its string among them.

    Equal strings have equal lengths and equal last bytes, so the strings are split in two by the parity of (last byte
    + length), which balances ids like ``m.0abc`` that all share one length, and the halves are encoded on two threads
    (arrow releases the GIL). At ten million triples this is the largest single step of a build.
    """
    data, offsets = _packed(strings)
    if len(strings) < 100_000 or len(data) == 0:
        encoded = pc.dictionary_encode(strings, memory_pool=_POOL)
        return encoded.dictionary, encoded.indices.to_numpy().astype(np.int64)
    ends = offsets[1:]
    lengths = ends - offsets[:-1]
    mask = ((data[np.maximum(ends - 1, 0)] + lengths) & 1).astype(bool) & (lengths > 0)
    del data, ends, lengths
    odd = pa.array(mask)
    halves = [pc.filter(strings, pc.invert(odd), memory_pool=_POOL), pc.filter(strings, odd, memory_pool=_POOL)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        encoded = list(pool.map(lambda half: pc.dictionary_encode(half, memory_pool=_POOL), halves))
    del halves
    index = np.empty(len(strings), dtype=np.int64)
    index[~mask] = encoded[0].indices.to_numpy()
    index[mask] = encoded[1].indices.to_numpy() + len(encoded[0].dictionary)
    return pa.concat_arrays([encoded[0].dictionary, encoded[1].dictionary], memory_pool=_POOL), index


_FLAT_EDGE_KEY_LIMIT = 2**62  # (node * R + relation) * N + other end must fit an int64 for the flat sort


def _sorted_edges(sources: np.ndarray, rels: np.ndarray, others: np.ndarray, N: int, R: int, flat: bool, *,
                  distinct: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Edges sorted by (key = source * R + relation, other end), duplicates dropped: (keys, other ends), int64.

    ``sources`` is consumed (used as scratch space) on the flat path.
    """
    if flat:
        # In place: the temporaries of a plain expression would double the peak memory of the import.
        combined = sources
        combined *= R
        combined += rels
        combined *= N
        combined += others
        combined.sort()
        if not distinct:
            combined = combined[_run_starts(combined)]
        return np.divmod(combined, N)
    keys = sources * R + rels
    order = np.lexsort((others, keys))
    keys, others = keys[order], np.asarray(others, dtype=np.int64)[order]
    if len(keys) and not distinct:
        keep = np.concatenate(([True], (keys[1:] != keys[:-1]) | (others[1:] != others[:-1])))
        keys, others = keys[keep], others[keep]
    return keys, others


class _PhaseClock:
    """Wall seconds of each build phase, kept in the store's metadata (``build_seconds``) for anyone tuning imports."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.laps[phase] = round(now - self._last, 3)
        self._last = now


def _large_strings(values: StringColumn, what: str) -> pa.Array:
    """Any column of strings as one arrow large_string array, or DataError naming ``what``."""
    if isinstance(values, pa.Array | pa.ChunkedArray) and not (pa.types.is_string(values.type)
                                                               or pa.types.is_large_string(values.type)):
        raise DataError(f"{what} must be strings, not arrow {values.type}")
    try:
        if isinstance(values, pa.ChunkedArray):  # chunk by chunk: a 32-bit-offset column over 2 GiB cannot combine
            return pa.concat_arrays([c.cast(pa.large_string(), memory_pool=_POOL) for c in values.chunks]
                                    or [pa.array([], type=pa.large_string())], memory_pool=_POOL)
        if isinstance(values, pa.Array):
            return values.cast(pa.large_string(), memory_pool=_POOL)
        return pa.array(values, type=pa.large_string(), memory_pool=_POOL)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise DataError(f"{what} must be strings: {exc}") from None


def _string_column(values: StringColumn, what: str) -> pa.Array:
    """A column of ids as an arrow large_string array, or DataError naming ``what`` and the first bad row."""
    column = _large_strings(values, what)
    if column.null_count:
        row = pc.index(pc.is_null(column), True).as_py()
        raise DataError(f"{what} has no value in row {row} of the batch")
    if len(column) and pc.min(pc.binary_length(column)).as_py() == 0:
        row = pc.index(pc.equal(pc.binary_length(column), 0), True).as_py()
        raise DataError(f"{what} is empty in row {row} of the batch")
    return column


class EmbeddedKGBuilder:
    """Collects triples and names, then writes an :class:`EmbeddedKG` directory.

    Two ways in: ``add_triple`` / ``add_name`` one at a time (what the file loaders use; each call is validated at once so
    an error can name its line), or ``add_triple_columns`` / ``add_names`` with whole columns (lists of str or arrow
    string arrays). Ids are interned a batch at a time by arrow's ``dictionary_encode`` (a C++ hash table over packed
    bytes): a Python dict, looked up string by string, spends most of a large import on cache misses (65 s for the ids
    of 10M triples, against a few seconds here). Each batch gives provisional codes into its own list of distinct ids;
    ``build`` unifies those lists once. Memory during import: the distinct ids of each batch, packed, and 12 bytes per
    triple (three int32 code columns).
    """

    _CHUNK = 1 << 18  # rows buffered by add_triple / add_name before they are encoded as one batch
    _IN_FLIGHT = 2
    MAX_CODES = 2**31 - 1  # codes are stored as int32

    def __init__(self, schema: str | Schema | None = "generic") -> None:
        self.schema = get_schema(schema)
        self._node_batches: list[pa.Array] = []  # per batch: its distinct ids, in order of first appearance
        self._codes = 0  # provisional codes handed out so far (the total length of _node_batches)
        self._rel_ids: dict[str, int] = {}
        self._heads = array.array("i")
        self._rels = array.array("i")
        self._tails = array.array("i")
        self._name_nodes = array.array("i")
        self._name_values: list[pa.Array] = []
        self._pending: tuple[list[str], list[str], list[str]] = ([], [], [])
        self._pending_names: tuple[list[str], list[str]] = ([], [])
        self._submitted_triples = 0
        # Batches are encoded on one worker thread (arrow releases the GIL), overlapping with whatever produces the next
        # batch: parsing a file, or reading a columnar source. At most _IN_FLIGHT batches wait, which bounds memory.
        self._worker: ThreadPoolExecutor | None = None
        self._in_flight: deque[Future[None]] = deque()
        # Once a batch fails or the store is built, the builder's columns no longer describe what was added: refuse more.
        self._failed: BaseException | None = None
        self._built = False

    # -- adding ----------------------------------------------------------------------------------------------------

    def add_triple(self, head: str, relation: str, tail: str) -> None:
        # The hot path of every file import: the checks folded into one test, then three list appends.
        if (head.__class__ is not str or relation.__class__ is not str or tail.__class__ is not str
                or not head or not relation or not tail or head[0] == '"'):
            if not all(isinstance(v, str) for v in (head, relation, tail)):
                raise DataError(f"a triple's fields must be strings: ({head!r}, {relation!r}, {tail!r})")
            if is_literal(head):
                raise DataError(f"a literal cannot be the head of a triple: {head!r}")
            raise DataError(f"empty field in triple ({head!r}, {relation!r}, {tail!r})")
        heads, rels, tails = self._pending
        heads.append(head)
        rels.append(relation)
        tails.append(tail)
        if len(heads) >= self._CHUNK:
            self._flush_triples()

    def add_triples(self, triples: Iterable[tuple[str, str, str]]) -> int:
        count = 0
        add = self.add_triple
        for head, relation, tail in triples:
            add(head, relation, tail)
            count += 1
        return count

    def add_triple_columns(self, heads: StringColumn, relations: StringColumn, tails: StringColumn) -> int:
        """Add ``len(heads)`` triples given as three equally long columns of ids; returns how many were added.

        The whole batch is checked before any of it is added: a missing or empty field or a literal head raises
        DataError naming the first offending row, and the builder is left as it was.
        """
        self._check_usable()
        head_col = _string_column(heads, "head column")
        rel_col = _string_column(relations, "relation column")
        tail_col = _string_column(tails, "tail column")
        if not len(head_col) == len(rel_col) == len(tail_col):
            raise DataError(f"triple columns differ in length: {len(head_col)} heads, {len(rel_col)} relations, "
                            f"{len(tail_col)} tails")
        literal_heads = pc.starts_with(head_col, '"')
        if pc.any(literal_heads).as_py():
            row = pc.index(literal_heads, True).as_py()
            raise DataError(f"a literal cannot be the head of a triple (row {row} of the batch): "
                            f"{head_col[row].as_py()!r}")
        self._flush_triples()
        self._append_triples(head_col, rel_col, tail_col)
        return len(head_col)

    def add_name(self, entity: str, name: str | None) -> None:
        """Give ``entity`` a display name (the first one given wins). Naming an entity makes it a node even with no edge;
        an empty or missing name makes the node but names nothing, so a later real name still wins."""
        if entity.__class__ is not str or not entity or (name is not None and name.__class__ is not str):
            raise DataError(f"a name needs a non-empty entity id and a string name, got ({entity!r}, {name!r})")
        entities, names = self._pending_names
        entities.append(entity)
        names.append(name)
        if len(entities) >= self._CHUNK:
            self._flush_names()

    def add_names(self, entities: StringColumn, names: StringColumn) -> int:
        """:meth:`add_name` for two equally long columns; returns how many pairs were added."""
        self._check_usable()
        entity_col = _string_column(entities, "entity column")
        name_col = _large_strings(names, "name column")  # a missing or empty name names nothing (see add_name)
        if len(entity_col) != len(name_col):
            raise DataError(f"name columns differ in length: {len(entity_col)} entities, {len(name_col)} names")
        self._flush_names()
        self._append_names(entity_col, name_col)
        return len(entity_col)

    @property
    def triple_count(self) -> int:
        return self._submitted_triples + len(self._pending[0])

    # -- encoding --------------------------------------------------------------------------------------------------

    def _node_codes(self, *columns: pa.Array) -> list[np.ndarray]:
        """Provisional int32 codes of the ids in ``columns``, encoded as one batch."""
        combined = columns[0] if len(columns) == 1 else pa.concat_arrays(list(columns), memory_pool=_POOL)
        encoded = pc.dictionary_encode(combined, memory_pool=_POOL)
        if self._codes + len(encoded.dictionary) > self.MAX_CODES:
            raise DataError(f"more than {self.MAX_CODES:,} batch-distinct ids (each batch counts its distinct ids) in "
                            "one import: too large for the embedded store")
        codes = encoded.indices.to_numpy() + np.int32(self._codes)
        self._node_batches.append(encoded.dictionary)
        self._codes += len(encoded.dictionary)
        bounds = np.cumsum([len(c) for c in columns])[:-1]
        return np.split(codes, bounds)

    def _relation_codes(self, relations: pa.Array) -> np.ndarray:
        # Relations are few: encode the batch, then give each distinct one its global id through a small dict.
        encoded = pc.dictionary_encode(relations, memory_pool=_POOL)
        distinct = encoded.dictionary.to_pylist()
        table = self._rel_ids
        for relation in distinct:
            if relation not in table:
                table[relation] = len(table)
        lookup = np.fromiter(map(table.__getitem__, distinct), dtype=np.int32, count=len(distinct))
        return lookup[encoded.indices.to_numpy()]

    def _check_usable(self) -> None:
        if self._built:
            raise ImportAborted("this builder has already built its store; start a new EmbeddedKGBuilder for another")
        if self._failed is not None:
            raise ImportAborted(f"this import failed earlier and cannot go on: {self._failed}") from self._failed

    def _settle(self, future: Future[None]) -> None:
        """Wait for one batch; a failure marks the builder failed and is raised as DataError."""
        try:
            future.result()
        except (KGQAError, pa.ArrowException, ValueError, TypeError, MemoryError) as exc:
            self._failed = exc
            raise ImportAborted(f"a batch of the import could not be encoded: {exc}") from exc

    def _submit(self, job: Callable[..., None], *args: object) -> None:
        self._check_usable()
        while self._in_flight and self._in_flight[0].done():  # report a failed batch at the first call that can
            self._settle(self._in_flight.popleft())
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kgqa-encode")
        self._in_flight.append(self._worker.submit(job, *args))
        while len(self._in_flight) > self._IN_FLIGHT:
            self._settle(self._in_flight.popleft())

    def _drain(self) -> None:
        """Wait for every submitted batch (raising the first failure as DataError)."""
        try:
            while self._in_flight:
                self._settle(self._in_flight.popleft())
        finally:
            if self._worker is not None:
                self._worker.shutdown(wait=True, cancel_futures=True)
                self._worker = None
            self._in_flight.clear()

    def _append_triples(self, heads: pa.Array | list[str], relations: pa.Array | list[str],
                        tails: pa.Array | list[str]) -> None:
        self._submitted_triples += len(heads)
        self._submit(self._encode_triples, heads, relations, tails)

    def _encode_triples(self, heads: pa.Array | list[str], relations: pa.Array | list[str],
                        tails: pa.Array | list[str]) -> None:
        heads, relations, tails = (_large_strings(col, what) for col, what in
                                   ((heads, "head column"), (relations, "relation column"), (tails, "tail column")))
        # Everything is encoded before anything is appended, so an error leaves the columns the same length.
        head_codes, tail_codes = self._node_codes(heads, tails)
        rel_codes = self._relation_codes(relations)
        self._heads.frombytes(head_codes.astype(np.int32, copy=False).tobytes())
        self._rels.frombytes(rel_codes.astype(np.int32, copy=False).tobytes())
        self._tails.frombytes(tail_codes.astype(np.int32, copy=False).tobytes())

    def _append_names(self, entities: pa.Array | list[str], names: pa.Array | list[str]) -> None:
        self._submit(self._encode_names, entities, names)

    def _encode_names(self, entities: pa.Array | list[str], names: pa.Array | list[str]) -> None:
        entities = _large_strings(entities, "entity column")
        names = pc.coalesce(_large_strings(names, "name column"), "", memory_pool=_POOL)  # a missing name: names nothing
        (codes,) = self._node_codes(entities)
        self._name_nodes.frombytes(codes.astype(np.int32, copy=False).tobytes())
        self._name_values.append(names)

    def _flush_triples(self) -> None:
        heads, rels, tails = self._pending
        if heads:
            self._pending = ([], [], [])
            self._append_triples(heads, rels, tails)

    def _flush_names(self) -> None:
        entities, names = self._pending_names
        if entities:
            self._pending_names = ([], [])
            self._append_names(entities, names)

    # -- writing ---------------------------------------------------------------------------------------------------

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
        self._check_usable()
        self._flush_triples()
        self._flush_names()
        self._drain()
        self._built = True  # from here on the builder's state is consumed, whether or not the write succeeds
        # Millions of new objects would trigger repeated full collections of a heap that holds no cycles.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._write_tables(directory)
        finally:
            if gc_was_enabled:
                gc.enable()

    def _write_tables(self, directory: Path) -> dict:
        clock = _PhaseClock()
        # Unify the batches: one more dictionary_encode over their distinct ids gives every node its id.
        batches, self._node_batches, self._codes = self._node_batches, [], 0
        all_codes = pa.concat_arrays(batches, memory_pool=_POOL) if batches else pa.array([], type=pa.large_string())
        del batches
        distinct, node_of_code = _unify(all_codes)
        del all_codes
        clock.lap("unify ids")
        # Node ids in table-hash order (see _HashDirectory); provisional codes are remapped to their rank in that order.
        order, sorted_hashes = _hash_order(distinct)
        nodes = pc.take(distinct, order, memory_pool=_POOL)
        del distinct
        N = len(nodes)
        rank = np.empty(N, dtype=np.int64)
        rank[order] = np.arange(N, dtype=np.int64)
        rank = rank[node_of_code]  # provisional code -> final node id
        del order, node_of_code
        clock.lap("order nodes")
        _StringTable.from_arrow(nodes).save(directory, "nodes")
        _HashDirectory.save(directory, "nodes", sorted_hashes)
        del sorted_hashes
        literal_mask = pc.starts_with(nodes, '"').to_numpy(zero_copy_only=False)
        clock.lap("write nodes")

        relations = sorted(self._rel_ids)
        rel_rank = np.empty(max(len(relations), 1), dtype=np.int64)
        for new, rel in enumerate(relations):
            rel_rank[self._rel_ids[rel]] = new
        R = max(len(relations), 1)
        # The edge tables (numpy sorts, which release the GIL) are written on a second thread while names and labels
        # are built here; the name resolution takes what it needs from the builder first.
        name_codes, name_values = self._name_nodes, self._name_values
        self._name_nodes, self._name_values = array.array("i"), []
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kgqa-edges") as pool:
            edges = pool.submit(self._write_edges, directory, rank, rel_rank, max(N, 1), R)
            names, has_name = self._resolve_names(rank, name_codes, name_values, nodes, literal_mask)
            del rank, nodes, name_codes, name_values
            _StringTable.from_arrow(names).save(directory, "names")
            np.save(directory / "has_name.npy", has_name)
            clock.lap("names (edges alongside)")
            self._write_labels(directory, names, has_name & ~literal_mask, clock)
            triples = edges.result()
        clock.lap("edges (rest)")

        literals = int(literal_mask.sum())
        return {
            "format_version": FORMAT_VERSION,
            "schema": self.schema.name,
            "relations": relations,
            "triples": int(triples),
            "entities": N - literals,
            "literals": literals,
            "names": int((has_name & ~literal_mask).sum()),
            "build_seconds": clock.laps,
        }

    def _write_edges(self, directory: Path, rank: np.ndarray, rel_rank: np.ndarray, N: int, R: int) -> int:
        heads = rank[np.frombuffer(self._heads, dtype=np.int32)]
        rels = rel_rank[np.frombuffer(self._rels, dtype=np.int32)] if len(self._rels) else np.empty(0, np.int64)
        tails = rank[np.frombuffer(self._tails, dtype=np.int32)]
        self._heads, self._rels, self._tails = array.array("i"), array.array("i"), array.array("i")
        # Each direction is sorted by one int64 per edge, (node * R + relation) * N + other end, when it fits: a flat
        # sort is several times faster than a lexsort of (key, other end), the fallback for very large KGs.
        flat = N * N * R < _FLAT_EDGE_KEY_LIMIT
        out_key, out_other = _sorted_edges(heads, rels, tails, N, R, flat)
        del heads, rels, tails
        _Adjacency.save(directory, Direction.OUT.value, out_key, out_other, N, R)
        triples = len(out_key)
        # Incoming: key (tail * R + relation), other end the head (already distinct).
        if flat:  # in place, one temporary at a time (the peak of the edge phase)
            in_combined = out_other
            in_combined *= R
            in_combined += out_key % R
            in_combined *= N
            in_combined += out_key // R
            del out_key, out_other
            in_combined.sort()
            in_key, in_other = np.divmod(in_combined, N)
            del in_combined
        else:
            in_key, in_other = _sorted_edges(out_other, out_key % R, out_key // R, N, R, flat, distinct=True)
            del out_key, out_other
        _Adjacency.save(directory, Direction.IN.value, in_key, in_other, N, R)
        return triples

    @staticmethod
    def _resolve_names(rank: np.ndarray, name_codes: array.array, name_values: list[pa.Array], nodes: pa.Array,
                       literal_mask: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        """The display name of every node (first name given wins; a literal without one shows its value)."""
        N = len(nodes)
        named = rank[np.frombuffer(name_codes, dtype=np.int32)]
        values = pa.concat_arrays(name_values, memory_pool=_POOL) if name_values else pa.array([], type=pa.large_string())
        # An empty name names nothing: the first non-empty name given wins.
        given = np.flatnonzero(pc.greater(pc.binary_length(values), 0).to_numpy(zero_copy_only=False))
        by_node = given[np.argsort(named[given], kind="stable")]
        ordered = named[by_node]
        first = by_node[_run_starts(ordered)]
        del by_node, ordered
        source = np.full(N, -1, dtype=np.int64)  # where each node's name comes from in ``values``
        source[named[first]] = first
        del named, first
        unnamed_literals = np.flatnonzero(literal_mask & (source < 0))
        if len(unnamed_literals):
            shown = [literal_value(v) for v in pc.take(nodes, unnamed_literals).to_pylist()]
            source[unnamed_literals] = len(values) + np.arange(len(shown), dtype=np.int64)
            values = pa.concat_arrays([values, pa.array(shown, type=pa.large_string())], memory_pool=_POOL)
        has_name = source >= 0
        names = pc.coalesce(pc.take(values, pa.array(source, mask=~has_name), memory_pool=_POOL), "", memory_pool=_POOL)
        return names, has_name

    def _write_labels(self, directory: Path, names: pa.Array, labelled: np.ndarray, clock: _PhaseClock) -> None:
        """Exact label table (normalised name -> nodes, in table-hash order of the name) and the fuzzy index over it.
        Literals are values, not entities, so they get no label entry."""
        candidates = np.flatnonzero(labelled)
        keys = pa.array(normalize_labels(pc.take(names, candidates).to_pylist()), type=pa.large_string(),
                        memory_pool=_POOL)
        kept = pc.greater(pc.binary_length(keys), 0)
        keys, label_nodes = pc.filter(keys, kept, memory_pool=_POOL), candidates[kept.to_numpy(zero_copy_only=False)]
        order, sorted_hashes = _hash_order(keys)
        keys = pc.take(keys, order, memory_pool=_POOL)
        _StringTable.from_arrow(keys).save(directory, "label_keys")
        _HashDirectory.save(directory, "label_keys", sorted_hashes)
        np.save(directory / "label_nodes.npy", label_nodes[order].astype(np.int32))
        clock.lap("exact labels")

        from kgqa.kg.label_index import FuzzyLabelIndex

        FuzzyLabelIndex.build(directory / "fuzzy", keys.to_pylist())
        clock.lap("fuzzy index")
