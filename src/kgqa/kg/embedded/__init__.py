"""The embedded store: the default KG backend. In-process, persisted to a directory, zero setup.

Modules: :mod:`~kgqa.kg.embedded.arrays` (the store format's array primitives: string tables, the table hash and its
bucket directory, the per-direction adjacency), :mod:`~kgqa.kg.embedded.reader` (:class:`EmbeddedKG`, which answers
queries) and :mod:`~kgqa.kg.embedded.builder` (:class:`EmbeddedKGBuilder`, which writes a store).

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

from kgqa.kg.embedded.arrays import FORMAT_VERSION, META_FILE
from kgqa.kg.embedded.arrays import _hash_packed as _hash_packed  # the store's internals, re-exported for its tests
from kgqa.kg.embedded.arrays import _key_hash as _key_hash
from kgqa.kg.embedded.arrays import _packed as _packed
from kgqa.kg.embedded.builder import EmbeddedKGBuilder, StringColumn
from kgqa.kg.embedded.builder import _unify as _unify
from kgqa.kg.embedded.reader import EmbeddedKG

__all__ = ["FORMAT_VERSION", "META_FILE", "EmbeddedKG", "EmbeddedKGBuilder", "StringColumn"]
