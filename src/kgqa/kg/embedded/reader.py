"""The reader of the embedded store: :class:`EmbeddedKG` answers the KG protocol from the mmap'd arrays of a store
directory (see the package docstring for the layout and why)."""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from kgqa.errors import KGError
from kgqa.kg.base import (
    DEFAULT_CHAIN_LIMIT,
    DEFAULT_MAX_FRONTIER,
    DEFAULT_MAX_PATHS,
    DEFAULT_MAX_PER_NODE,
    DEFAULT_MAX_TRIPLES,
    DEFAULT_SUBGRAPH_DEPTH,
    Chain,
    ChainResult,
    ConstraintChain,
    Direction,
    EntityMatch,
    KGStats,
    Subgraph,
    Triple,
    is_literal,
    literal_value,
)
from kgqa.kg.derived import DerivedOps, check_constraint, check_count, check_ids, check_subgraph_args, fair_shares
from kgqa.kg.embedded.arrays import (
    FORMAT_VERSION,
    META_FILE,
    STATEMENT_COUNTS_FILE,
    _Adjacency,
    _first_occurrence_unique,
    _gather_ranges,
    _HashDirectory,
    _scalar_view,
    _StringTable,
    _unique_sorted,
)
from kgqa.kg.schema import Schema, get_schema
from kgqa.normalize import normalize_label


class EmbeddedKG(DerivedOps):
    """A knowledge graph held in numpy arrays, persisted to a directory (see the package docstring). Every derived
    operation of :class:`~kgqa.kg.derived.DerivedOps` is overridden with a native one over the arrays."""

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
        counts = directory / STATEMENT_COUNTS_FILE
        self._statement_counts = (_scalar_view(np.load(counts, mmap_mode="r"), "I") if counts.is_file() else None)

    # -- opening ---------------------------------------------------------------------------------------------------

    @classmethod
    def open(cls, directory: str | os.PathLike[str], **options: int) -> EmbeddedKG:
        path = Path(directory)
        meta_path = path / META_FILE
        if not meta_path.is_file():
            raise KGError(f"{path} is not a kgqa embedded KG (no {META_FILE}); build one with `kgqa kg import`")
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise KGError(f"{meta_path} is damaged ({type(exc).__name__}: {exc}); import the KG again with "
                          "`kgqa kg import ... --force`") from None
        if not isinstance(meta, dict):
            raise KGError(f"{meta_path} is damaged (not a JSON object); import the KG again with `kgqa kg import ... "
                          "--force`")
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
            if len(nodes) > 32:
                return self._nodes.get_many(nodes)
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

    def statement_counts(self, triples: Sequence[Triple]) -> list[int]:
        """How many times the source asserted each (head, relation, tail) triple: 0 for a triple the KG lacks, 1 for
        most; more where the importer merged records (MetaQA's remakes: a fact true of two films sharing a title is
        listed once per film). Ids as everywhere else; an unknown relation or entity counts 0."""
        out: list[int] = []
        adj = self._adjacency[Direction.OUT]
        for head, relation, tail in triples:
            h, t, rel = self._node(head), self._node(tail), self._rel_index.get(relation)
            index = None if h is None or t is None or rel is None else adj.edge_index(h, h * self._R + rel, t)
            if index is None:
                out.append(0)
            else:
                out.append(1 if self._statement_counts is None else int(self._statement_counts[index]))
        return out

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

    def neighbors_many(self, entities: Sequence[str], relation: str, direction: Direction | str = Direction.OUT,
                       limit_per_entity: int = 100) -> dict[str, list[str]]:
        check_ids(entities, "entities")
        limit = check_count(limit_per_entity, "limit_per_entity")
        rel = self._relation(relation)
        adj = self._adjacency[Direction.parse(direction)]
        out: dict[str, list[str]] = {e: [] for e in dict.fromkeys(entities)}
        asked = [(e, n) for e in out if (n := self._node(e)) is not None]
        if not asked or limit == 0:
            return out
        lo, hi = adj.edge_ranges(np.fromiter((n for _, n in asked), dtype=np.int64, count=len(asked)) * self._R + rel)
        hi = np.minimum(hi, lo + limit)
        edge_idx, _ = _gather_ranges(lo, hi)
        found = self._ids(adj.other[edge_idx])
        start = 0
        for (entity, _), count in zip(asked, (hi - lo).tolist(), strict=True):
            out[entity] = found[start:start + count]
            start += count
        return out

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

    def _sources_on_paths(self, start: np.ndarray, main: Chain, source: int) -> tuple[np.ndarray, bool]:
        frontiers, edges, truncated = self._walk(start, main)
        return self._alive(frontiers, edges, frontiers[-1])[source], truncated

    def constraint_values(self, topics: Sequence[str], main: Chain, constraint: ConstraintChain,
                          limit: int = DEFAULT_CHAIN_LIMIT) -> ChainResult:
        check_constraint(main, constraint)
        sources, truncated = self._sources_on_paths(self._nodes_of(topics), main, constraint.source)
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
        check_constraint(main, constraint)
        if constraint.target is None:
            raise KGError("filter_by_constraint needs a constraint target; use constraint_values to list candidates")
        start = self._nodes_of(topics)
        sources, truncated = self._sources_on_paths(start, main, constraint.source)
        # Which source entities reach the target: walk the constraint chain keeping each start as its own origin.
        frontiers, edges, cut = self._walk(sources, constraint.chain)
        hit_end = frontiers[-1][self._matches_target(frontiers[-1], constraint.target)]
        satisfied = self._alive(frontiers, edges, hit_end)[0]
        result = self._run(start, main, {constraint.source: satisfied}, bindings=False, limit=limit)
        result.truncated = result.truncated or truncated or cut
        return result

    # -- subgraphs -------------------------------------------------------------------------------------------------

    def subgraph(self, seeds: Sequence[str], *, depth: int = DEFAULT_SUBGRAPH_DEPTH,
                 max_per_node: int = DEFAULT_MAX_PER_NODE, max_triples: int = DEFAULT_MAX_TRIPLES,
                 relations: Collection[str] | None = None) -> Subgraph:
        """The generic BFS subgraph (:meth:`kgqa.kg.derived.DerivedOps.subgraph`), one level at a time over the arrays:
        the same triples in the same order as the generic version over this store's primitives."""
        allowed = check_subgraph_args(seeds, depth, max_per_node, max_triples, relations)
        follow = ~self._noise if len(self._noise) else np.zeros(self._R, dtype=bool)
        if allowed is not None:
            wanted = np.zeros(len(follow), dtype=bool)
            wanted[[self._rel_index[r] for r in allowed if r in self._rel_index]] = True
            follow = follow & wanted
        nodes = [n for n in dict.fromkeys(self._node(s) for s in seeds) if n is not None]
        seen_nodes = set(nodes)
        triples: list[tuple[int, int, int]] = []
        seen: set[tuple[int, int, int]] = set()
        truncated = False
        frontier = nodes
        for level in range(depth):
            expand = [n for n in frontier if not (level and self._nodes.raw(n)[:1] == b'"')]
            if not expand:
                break
            heads, rels, tails, others, cut = self._level_edges(np.asarray(expand, dtype=np.int64), max_per_node, follow)
            truncated = truncated or cut
            frontier = []
            for h, r, t, other in zip(heads, rels, tails, others, strict=True):
                triple = (h, r, t)
                if triple in seen:
                    continue
                if len(triples) >= max_triples:
                    return self._subgraph_of(triples, nodes, True)
                seen.add(triple)
                triples.append(triple)
                if other not in seen_nodes:
                    seen_nodes.add(other)
                    nodes.append(other)
                    frontier.append(other)
            if not frontier:
                break
        return self._subgraph_of(triples, nodes, truncated)

    def _level_edges(self, expand: np.ndarray, cap: int,
                     follow: np.ndarray) -> tuple[list[int], list[int], list[int], list[int], bool]:
        """The edges one BFS level keeps: (heads, relations, tails, far ends) in subgraph order, and whether the
        per-node cap cut some. Groups (one relation and direction of a node) are ordered node by node, outgoing before
        incoming, relations sorted; a node over the cap keeps :func:`~kgqa.kg.derived.fair_shares` of its groups."""
        R = self._R
        parts = []
        for d, direction in enumerate((Direction.OUT, Direction.IN)):
            adj = self._adjacency[direction]
            pairs, owner = adj.pairs_of_many(expand)
            rel = adj.pair_key[pairs] - expand[owner] * R
            keep = follow[rel]
            pairs, owner, rel = pairs[keep], owner[keep], rel[keep]
            lo = adj.pair_ptr[pairs]
            parts.append((np.full(len(pairs), d, dtype=np.int64), owner, rel, lo, adj.pair_ptr[pairs + 1] - lo))
        direction_of, owner, rel, lo, count = (np.concatenate(columns) for columns in zip(*parts, strict=True))
        order = np.argsort(owner * 2 + direction_of, kind="stable")  # node, then out before in, then relation
        direction_of, owner, rel, lo, count = direction_of[order], owner[order], rel[order], lo[order], count[order]
        take = count.copy()
        over = np.flatnonzero(np.bincount(owner, weights=count, minlength=len(expand)) > cap)
        if len(over):
            first, last = np.searchsorted(owner, over, "left"), np.searchsorted(owner, over, "right")
            for a, b in zip(first.tolist(), last.tolist(), strict=True):
                take[a:b] = fair_shares(count[a:b].tolist(), cap)
        # The kept edges of each direction, then all of them in group order (a stable sort keeps storage order within
        # a group).
        group_of, far = [], []
        for d, direction in enumerate((Direction.OUT, Direction.IN)):
            groups = np.flatnonzero(direction_of == d)
            edge_idx, which = _gather_ranges(lo[groups], lo[groups] + take[groups])
            group_of.append(groups[which])
            far.append(self._adjacency[direction].other[edge_idx].astype(np.int64))
        group = np.concatenate(group_of)
        order = np.argsort(group, kind="stable")
        group, other = group[order], np.concatenate(far)[order]
        node = expand[owner[group]]
        outgoing = direction_of[group] == 0
        heads = np.where(outgoing, node, other)
        tails = np.where(outgoing, other, node)
        return heads.tolist(), rel[group].tolist(), tails.tolist(), other.tolist(), bool(len(over))

    def _subgraph_of(self, triples: list[tuple[int, int, int]], nodes: list[int], truncated: bool) -> Subgraph:
        # Every end of a triple is a node: each id is decoded once.
        ids = self._ids(np.asarray(nodes, dtype=np.int64))
        of, names = dict(zip(nodes, ids, strict=True)), self._relations
        return Subgraph([(of[h], names[r], of[t]) for h, r, t in triples], ids, truncated)

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
                              "repeated_triples": m.get("repeated_triples", 0),
                              "alias_labels": m.get("alias_labels", 0),
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
