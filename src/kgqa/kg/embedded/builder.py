"""The builder of the embedded store: :class:`EmbeddedKGBuilder` interns ids in bulk and writes a store directory
(see the package docstring for the layout; the class docstring for the import path and its memory)."""

from __future__ import annotations

import array
import gc
import json
import os
import shutil
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kgqa.errors import DataError, ImportAborted, KGQAError
from kgqa.kg.base import Direction, is_literal, literal_value
from kgqa.kg.embedded.aliases import alias_labels, with_aliases
from kgqa.kg.embedded.arrays import (
    _POOL,
    FORMAT_VERSION,
    META_FILE,
    STATEMENT_COUNTS_FILE,
    _Adjacency,
    _hash_order,
    _HashDirectory,
    _packed,
    _run_starts,
    _StringTable,
)
from kgqa.kg.embedded.reader import EmbeddedKG
from kgqa.kg.embedded.staging import clean_stale_builds, staging_dir
from kgqa.kg.schema import Schema, get_schema
from kgqa.normalize import normalize_labels

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
                  distinct: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Edges sorted by (key = source * R + relation, other end), duplicates dropped: (keys, other ends, statement
    counts), int64. The counts (how many times each kept edge was added) are None when no edge was added twice, and
    always when ``distinct`` says the input has no duplicates.

    ``sources`` is consumed (used as scratch space) on the flat path.
    """
    counts: np.ndarray | None = None
    if flat:
        # In place: the temporaries of a plain expression would double the peak memory of the import.
        combined = sources
        combined *= R
        combined += rels
        combined *= N
        combined += others
        combined.sort()
        if not distinct:
            starts = _run_starts(combined)
            counts = _repeat_counts(starts)
            combined = combined[starts]
            del starts
        keys, other_ends = np.divmod(combined, N)
        return keys, other_ends, counts
    keys = sources * R + rels
    order = np.lexsort((others, keys))
    keys, others = keys[order], np.asarray(others, dtype=np.int64)[order]
    if len(keys) and not distinct:
        keep = np.concatenate(([True], (keys[1:] != keys[:-1]) | (others[1:] != others[:-1])))
        counts = _repeat_counts(keep)
        keys, others = keys[keep], others[keep]
    return keys, others, counts


def _repeat_counts(starts: np.ndarray) -> np.ndarray | None:
    """How long each run of a sorted array is, from the mask of its run starts; None when every run has length one
    (the common case costs no array)."""
    if starts.all():
        return None
    first = np.flatnonzero(starts)
    return np.diff(first, append=len(starts))


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
        clean_stale_builds(out.parent)  # staging directories of killed builds (kgqa.kg.embedded.staging)
        tmp = staging_dir(out.parent)
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
        # aliases (common.topic.alias, skos:altLabel) are read before the edge thread consumes the code columns
        aliases = alias_labels(self._rel_ids, self._heads, self._rels, self._tails, rank, nodes, self.schema.language)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kgqa-edges") as pool:
            edges = pool.submit(self._write_edges, directory, rank, rel_rank, max(N, 1), R)
            names, has_name = self._resolve_names(rank, name_codes, name_values, nodes, literal_mask)
            del rank, nodes, name_codes, name_values
            _StringTable.from_arrow(names).save(directory, "names")
            np.save(directory / "has_name.npy", has_name)
            clock.lap("names (edges alongside)")
            alias_rows = self._write_labels(directory, names, has_name & ~literal_mask, clock, aliases)
            triples, repeated = edges.result()
        clock.lap("edges (rest)")

        literals = int(literal_mask.sum())
        return {
            "format_version": FORMAT_VERSION,
            "schema": self.schema.name,
            "relations": relations,
            "triples": int(triples),
            "repeated_triples": repeated,
            "entities": N - literals,
            "literals": literals,
            "names": int((has_name & ~literal_mask).sum()),
            "alias_labels": alias_rows,
            "build_seconds": clock.laps,
        }

    def _write_edges(self, directory: Path, rank: np.ndarray, rel_rank: np.ndarray, N: int,
                     R: int) -> tuple[int, int]:
        """Both directions' adjacency (and the statement counts); returns (distinct triples, triples asserted more than
        once)."""
        heads = rank[np.frombuffer(self._heads, dtype=np.int32)]
        rels = rel_rank[np.frombuffer(self._rels, dtype=np.int32)] if len(self._rels) else np.empty(0, np.int64)
        tails = rank[np.frombuffer(self._tails, dtype=np.int32)]
        self._heads, self._rels, self._tails = array.array("i"), array.array("i"), array.array("i")
        # Each direction is sorted by one int64 per edge, (node * R + relation) * N + other end, when it fits: a flat
        # sort is several times faster than a lexsort of (key, other end), the fallback for very large KGs.
        flat = N * N * R < _FLAT_EDGE_KEY_LIMIT
        out_key, out_other, counts = _sorted_edges(heads, rels, tails, N, R, flat)
        del heads, rels, tails
        _Adjacency.save(directory, Direction.OUT.value, out_key, out_other, N, R)
        if counts is not None:  # some triple was asserted more than once: keep how often (see statement_counts)
            np.save(directory / STATEMENT_COUNTS_FILE, np.minimum(counts, np.iinfo(np.uint32).max).astype(np.uint32))
        repeated = 0 if counts is None else int(np.count_nonzero(counts > 1))
        del counts
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
            in_key, in_other, _ = _sorted_edges(out_other, out_key % R, out_key // R, N, R, flat, distinct=True)
            del out_key, out_other
        _Adjacency.save(directory, Direction.IN.value, in_key, in_other, N, R)
        return triples, repeated

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

    def _write_labels(self, directory: Path, names: pa.Array, labelled: np.ndarray, clock: _PhaseClock,
                      aliases: tuple[np.ndarray, list[str]]) -> int:
        """Exact label table (normalised name or alias -> nodes, in table-hash order of the label) and the fuzzy index
        over it; returns how many alias rows it holds (:mod:`kgqa.kg.embedded.aliases`). Literals are values, not
        entities, so they get no label entry."""
        candidates = np.flatnonzero(labelled)
        keys = pa.array(normalize_labels(pc.take(names, candidates).to_pylist()), type=pa.large_string(),
                        memory_pool=_POOL)
        kept = pc.greater(pc.binary_length(keys), 0)
        keys, label_nodes = pc.filter(keys, kept, memory_pool=_POOL), candidates[kept.to_numpy(zero_copy_only=False)]
        alias_nodes, alias_texts = aliases
        keys, label_nodes, alias_rows = with_aliases(keys, label_nodes, alias_nodes, normalize_labels(alias_texts),
                                                     labelled)
        order, sorted_hashes = _hash_order(keys)
        keys = pc.take(keys, order, memory_pool=_POOL)
        _StringTable.from_arrow(keys).save(directory, "label_keys")
        _HashDirectory.save(directory, "label_keys", sorted_hashes)
        np.save(directory / "label_nodes.npy", label_nodes[order].astype(np.int32))
        clock.lap("exact labels")

        from kgqa.kg.label_index import FuzzyLabelIndex

        FuzzyLabelIndex.build(directory / "fuzzy", keys.to_pylist())
        clock.lap("fuzzy index")
        return alias_rows
