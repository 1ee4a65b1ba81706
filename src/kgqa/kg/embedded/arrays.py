"""The array primitives of the embedded store's format (version 2): string tables, the table hash of ids and labels
with its bucket directory, and the per-direction adjacency (a CSR over (node, relation) pairs), plus the numpy helpers
the reader and the builder share. Everything here is a file format: the builder writes these arrays, the reader maps them.
"""

from __future__ import annotations

import array
import bisect
import mmap
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

FORMAT_VERSION = 2
META_FILE = "kgqa-embedded.json"
# How many times each outgoing edge was asserted by the source (uint32, aligned with ``out.other.npy``); written only
# when some triple was asserted more than once (MetaQA's kb.txt lists each remake of a title as its own block, and the
# store merges them into one entity: a fact true of both films is asserted twice). Absent: every count is 1.
STATEMENT_COUNTS_FILE = "out.count.npy"

# The builder's arrow buffers come from the system allocator: arrow's default (mimalloc) keeps freed batches mapped, which
# put a 1M-triple import at 190 bytes of RAM per triple against 116 here, at the same speed (faster at 10M).
_POOL = pa.system_memory_pool()


class _StringTable:
    """Immutable strings stored as one UTF-8 blob + int64 offsets.

    The blob is memory-mapped (slicing an ``mmap`` yields bytes without numpy overhead); the offsets are read into memory
    (8 bytes per string) as an ``array.array``, which hands out plain Python ints (numpy scalars cost ~10x more).
    """

    __slots__ = ("_blob", "_offsets", "_offsets_np")

    def __init__(self, blob: bytes | mmap.mmap, offsets: np.ndarray) -> None:
        self._blob = blob
        self._offsets = array.array("q", np.ascontiguousarray(offsets, dtype=np.int64).tobytes())
        self._offsets_np = np.frombuffer(self._offsets, dtype=np.int64)  # the same memory, for gathers

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

    def get_many(self, indices: np.ndarray) -> list[str]:
        """The strings at ``indices`` (an integer array): the offsets gathered at once, then one slice and one decode
        each (about twice as fast as :meth:`get` per string from a few dozen strings on)."""
        offsets, blob = self._offsets_np, self._blob
        return [blob[a:b].decode("utf-8") for a, b in zip(offsets[indices].tolist(), offsets[indices + 1].tolist(),
                                                          strict=True)]

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


# Costs (ns) of the two ways to hash, measured on one core: the vectorised loop pays a fixed cost per byte position
# plus a gather per byte of every string still active at that position; hashing one string as a Python int pays a fixed
# cost per string plus a (smaller) cost per byte. Only their ratios matter: they pick which strings go which way.
_VEC_PER_POSITION, _VEC_PER_BYTE = 4000.0, 12.0
_INT_PER_STRING, _INT_PER_BYTE = 1000.0, 7.0
_MAX_ONE_BY_ONE = 1 << 16  # most strings ever hashed one at a time (beyond that the loop's fixed costs are negligible)


def _int_share(lengths: np.ndarray) -> int:
    """How many of the longest strings (``lengths`` sorted longest first) to hash one at a time as Python ints so that
    the vectorised loop, which runs once per byte position of the longest string it is given, stays cheap.

    The choice minimises the modelled cost: m strings one at a time, then the loop over the others, whose longest sets
    the number of positions. A lone long field goes one at a time (a 30 MB field is 0.2 s, against minutes of loop);
    millions of short ids stay in the loop, which hashes them about 5x faster than one at a time.
    """
    limit = min(len(lengths), _MAX_ONE_BY_ONE)
    if limit == 0:
        return 0
    head = lengths[:limit + 1].astype(np.float64)
    taken = np.concatenate(([0.0], np.cumsum(head[:limit])))  # bytes of the m longest, m = 0..limit
    positions = np.append(head, 0.0)[:limit + 1]  # the loop's longest string when the m longest are taken out
    rest = float(lengths.sum()) - taken
    m = np.arange(limit + 1, dtype=np.float64)
    cost = (_VEC_PER_POSITION * positions + _VEC_PER_BYTE * rest + _INT_PER_STRING * m + _INT_PER_BYTE * taken)
    return int(np.argmin(cost))


def _hash_packed(data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Table hashes (uint64) of the strings ``data[offsets[i]:offsets[i + 1]]``, equal to :func:`_key_hash` of each.

    Strings sorted by length, longest first. The few longest (see :func:`_int_share`) are reduced one at a time as
    Python ints, which is linear in their bytes; the rest are reduced together, one byte position at a time from the
    last (Horner's rule), the strings still being hashed at position j being a prefix of the order. Total work is one
    pass over the bytes plus a loop as long as the longest string left to it, never the longest string of the batch.
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
    first = _int_share(lengths)
    if first:
        view = memoryview(np.ascontiguousarray(data)).cast("B")
        h[:first] = [int.from_bytes(view[a:a + b], "little") % _HASH_PRIME
                     for a, b in zip(starts[:first].tolist(), lengths[:first].tolist(), strict=True)]
    longest = int(lengths[first]) if first < n else 0
    active = np.searchsorted(-lengths, -np.arange(longest, dtype=np.int64), side="left")  # strings longer than j
    prime, base = np.uint64(_HASH_PRIME), np.uint64(256)
    for j in range(longest - 1, -1, -1):
        k = int(active[j])
        part = h[first:k]
        part *= base
        part += data[starts[first:k] + j]
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

    def _pair_range(self, node: int, key: int) -> tuple[int, int]:
        """Where the edges with pair key ``key`` (which belongs to ``node``) start and end in ``other`` (empty if none)."""
        lo, hi = self._node_ptr_v[node], self._node_ptr_v[node + 1]
        j = bisect.bisect_left(self._key_v, key, lo, hi)
        if j == hi or self._key_v[j] != key:
            return 0, 0
        return self._ptr_v[j], self._ptr_v[j + 1]

    def others(self, node: int, key: int, limit: int) -> list[int]:
        """Other ends of the edges with pair key ``key`` (which belongs to ``node``), at most ``limit``."""
        start, end = self._pair_range(node, key)
        return self._other_v[start:min(end, start + max(limit, 0))].tolist()

    def edge_index(self, node: int, key: int, other: int) -> int | None:
        """Where the edge (``node``, pair key ``key``, ``other``) sits in ``other``, or None when there is none."""
        start, end = self._pair_range(node, key)
        i = bisect.bisect_left(self._other_v, other, start, end)  # other ends are sorted within a pair
        return i if i < end and self._other_v[i] == other else None

    def hop(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every edge whose pair key is in ``keys``: (position in ``keys``, other end)."""
        if len(self.pair_key) == 0 or len(keys) == 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        j = np.minimum(np.searchsorted(self.pair_key, keys), len(self.pair_key) - 1)
        found = np.flatnonzero(self.pair_key[j] == keys)
        j = j[found]
        edge_idx, owners = _gather_ranges(self.pair_ptr[j], self.pair_ptr[j + 1])
        return found[owners], self.other[edge_idx].astype(np.int64)

    def edge_ranges(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Where the edges of each pair key start and end in ``other`` (an empty range for a key with no edges)."""
        if len(self.pair_key) == 0 or len(keys) == 0:
            empty = np.zeros(len(keys), dtype=np.int64)
            return empty, empty
        j = np.minimum(np.searchsorted(self.pair_key, keys), len(self.pair_key) - 1)
        found = self.pair_key[j] == keys
        return np.where(found, self.pair_ptr[j], 0), np.where(found, self.pair_ptr[j + 1], 0)

    def pairs_of_many(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The pairs of each node of ``nodes`` in storage order (by node, then relation): (pair index, position in
        ``nodes``)."""
        return _gather_ranges(self.node_ptr[nodes], self.node_ptr[nodes + 1])

    def pair_keys_of_many(self, nodes: np.ndarray) -> np.ndarray:
        idx, _ = _gather_ranges(self.node_ptr[nodes], self.node_ptr[nodes + 1])
        return self.pair_key[idx]

    def iter_edges(self, chunk: int = 100_000) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(pair key, other end) of every edge, in storage order, ``chunk`` pairs at a time."""
        for start in range(0, len(self.pair_key), chunk):
            stop = min(start + chunk, len(self.pair_key))
            bounds = self.pair_ptr[start:stop + 1]
            yield np.repeat(self.pair_key[start:stop], np.diff(bounds)), self.other[bounds[0]:bounds[-1]]
