"""A trained foresight scorer at work: label vectors of a KG, question vectors, scoring a batch of frontier triples,
and feedback propagation with re-scoring over an expanded graph.

A scorer directory (``kgqa train fog --out MODELDIR``) holds ``weights.pt`` (the network's state), ``scorer.json``
(the network's shape, the frozen encoder's name and how it was trained), ``MODEL_CARD.md`` and ``loss.png``.

An *ensemble* directory (``kgqa train ensemble --member DIR ... --out DIR``) holds ``ensemble.json``
({"members": [dir, ...]}, paths relative to it or absolute) naming scorer directories: every member scores each
triple and the ensemble's s_t is their mean, at expansion and after propagation (each member propagates with its own
network over the shared subgraph). Members trained on different seeds disagree most where a question is worded unlike
their training questions; the mean is steadier there than any one of them (docs/fog.md).
"""

from __future__ import annotations

import json
import pickle
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kgqa.errors import ConfigError
from kgqa.kg.base import is_literal, literal_value
from kgqa.kg.schema import relation_words
from kgqa.steps.foresight.graph import ExpandedGraph, Triple

WEIGHTS = "weights.pt"
META = "scorer.json"
ENSEMBLE = "ensemble.json"
UNNAMED = "unnamed node"
_CHUNK = 4096


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise ConfigError("FoG's foresight scorer needs torch (the CPU build 2.13.0): run .ci/install_local_model.sh") \
            from None
    return torch


class LabelVectors:
    """Vectors of node labels and relation words for one KG and one embedder: rows of a ``label-embeddings`` table
    when given, else (and for nodes missing from it) embedded on the fly and kept in a bounded cache."""

    def __init__(self, kg: Any, embedder: Any, table: Any | None = None, *, cache_size: int = 200_000) -> None:
        if table is not None and getattr(table, "embedder", embedder.name) != embedder.name:
            raise ConfigError(f"label table made with embedder {table.embedder!r}, not {embedder.name!r}")
        self.kg, self.embedder, self.table = kg, embedder, table
        self.dim = int(embedder.dim)
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def _texts_for(self, ids: list[str]) -> list[str]:
        names = self.kg.names([i for i in ids if not is_literal(i)]) if ids else {}
        texts = []
        for node in ids:
            if is_literal(node):
                texts.append(literal_value(node))
            else:
                texts.append(names.get(node) or UNNAMED)
        return texts

    def _lookup(self, keys: list[str], texts_of: Any) -> np.ndarray:
        out = np.zeros((len(keys), self.dim), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        with self._lock:
            for i, key in enumerate(keys):
                vec = self._cache.get(key)
                if vec is not None:
                    out[i] = vec
                    continue
                missing.setdefault(key, []).append(i)
        if missing:
            wanted = list(missing)
            vectors = np.asarray(self.embedder.embed(texts_of(wanted)), dtype=np.float32)
            with self._lock:
                for key, vec in zip(wanted, vectors, strict=True):
                    for i in missing[key]:
                        out[i] = vec
                    self._cache[key] = vec
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return out

    def entities(self, ids: Sequence[str]) -> np.ndarray:
        ids = list(ids)
        if self.table is None:
            return self._lookup(ids, self._texts_for)
        rows = np.fromiter((self.table.row.get(i, -1) for i in ids), dtype=np.int64, count=len(ids))
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        known = rows >= 0
        if known.any():
            out[known] = np.asarray(self.table.matrix[rows[known]], dtype=np.float32)
        if not known.all():
            others = [i for i, k in zip(ids, known, strict=True) if not k]
            out[~known] = self._lookup(others, self._texts_for)
        return out

    def relations(self, relations: Sequence[str]) -> np.ndarray:
        prefix = "\x00rel:"  # relation keys never collide with node ids in the cache
        return self._lookup([prefix + r for r in relations],
                            lambda keys: [relation_words(k[len(prefix):]) or k[len(prefix):] for k in keys])

    def texts(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)

    def tokens(self, texts: Sequence[str], *, max_tokens: int = 48) -> tuple[np.ndarray, np.ndarray]:
        """Token vectors of each text padded to one length: ((N, T, dim) float32, (N, T) bool, True at padding).
        An embedder without token outputs gives its sentence vector as the one token."""
        items = list(texts)
        per_text = (self.embedder.embed_tokens(items) if hasattr(self.embedder, "embed_tokens")
                    else [v[None, :] for v in self.texts(items)])
        length = max([min(len(t), max_tokens) for t in per_text] or [1])
        out = np.zeros((len(items), length, self.dim), dtype=np.float32)
        mask = np.ones((len(items), length), dtype=bool)
        for i, vectors in enumerate(per_text):
            n = min(len(vectors), max_tokens)
            out[i, :n] = vectors[:n]
            mask[i, :n] = False
        return out, mask


class ForesightScorer:
    """The trained network with the facts needed to use it (encoder name, thresholds it was validated with)."""

    def __init__(self, net: Any, meta: dict[str, Any], path: Path | None = None) -> None:
        self.net = net
        self.meta = meta
        self.path = path
        self.encoder = str(meta.get("encoder", "minilm"))
        self.net.eval()

    @property
    def members(self) -> list[ForesightScorer]:
        """The networks behind this scorer: itself (a :class:`ScorerEnsemble` lists its members)."""
        return [self]

    @classmethod
    def load(cls, path: str | Path) -> ForesightScorer:
        torch = _torch()
        from kgqa.steps.foresight.model import ForesightNet, NetSpec

        directory = Path(path).expanduser()
        if not (directory / META).is_file() or not (directory / WEIGHTS).is_file():
            raise ConfigError(f"scorer={str(path)!r}: not a FoG scorer directory (expected {META} and {WEIGHTS}; "
                              "make one with `kgqa train fog ... --out DIR`)")
        try:
            meta = json.loads((directory / META).read_text(encoding="utf-8"))
            net = ForesightNet(NetSpec.from_dict(meta["net"]))
            net.load_state_dict(torch.load(directory / WEIGHTS, map_location="cpu", weights_only=True))
        except (OSError, EOFError, KeyError, TypeError, ValueError, RuntimeError, pickle.UnpicklingError) as exc:
            raise ConfigError(f"scorer={str(path)!r}: cannot be loaded ({type(exc).__name__}: {exc})") from None
        return cls(net, meta, directory)

    def save(self, path: str | Path, extra: dict[str, Any] | None = None) -> None:
        torch = _torch()
        directory = Path(path)
        directory.mkdir(parents=True, exist_ok=True)
        torch.save(self.net.state_dict(), directory / WEIGHTS)
        meta = {**self.meta, **(extra or {}), "net": self.net.spec.to_dict()}
        (directory / META).write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    # -- scoring -----------------------------------------------------------------------------------------------------

    def questions(self, labels: LabelVectors, texts: Sequence[str]) -> tuple[Any, Any]:
        """The sub-questions' token vectors (1, S, T, dim) and padding mask (1, S, T)."""
        torch = _torch()
        tokens, mask = labels.tokens(texts)
        return torch.from_numpy(tokens).unsqueeze(0), torch.from_numpy(mask).unsqueeze(0)

    def score_triples(self, labels: LabelVectors, questions: Any, triples: list[Triple], layers: np.ndarray,
                      backward: np.ndarray) -> tuple[np.ndarray, Any]:
        """s_t (node states zero) of each triple and its z_t rows (the payload propagation reads)."""
        scores, z = _encode_and_score(self, [self], labels, questions, triples, layers, backward)
        return scores[0], z

    def scorer_for(self, labels: LabelVectors, questions: Any) -> Any:
        """The ``score_batch`` callback of :func:`kgqa.steps.foresight.graph.expand` for these sub-questions."""
        return lambda triples, layers, backward: self.score_triples(labels, questions, triples, layers, backward)

    def propagate(self, graph: ExpandedGraph, *, undirected: bool = False) -> None:
        """Far-to-near feedback propagation over ``graph`` and re-scoring of every edge (``graph.scores``)."""
        if not len(graph):
            return
        graph.scores = self.rescored(kept_payload(graph), edge_tensors(graph), undirected=undirected).tolist()

    def rescored(self, z: Any, edges: dict[str, Any], *, undirected: bool = False) -> np.ndarray:
        """Every edge's s_t after propagation, from its z_t rows (``kept_payload``) and ``edge_tensors``."""
        torch = _torch()
        with torch.inference_mode():
            h = self.net.propagate(z, edges["near"], edges["far"], edges["depth"], edges["nodes"], undirected=undirected)
            scores = torch.sigmoid(self.net.rescore(z, edges["heads"], edges["tails"], h))
        return scores.numpy().astype(float)


def _encode_and_score(encoder: ForesightScorer, heads: Sequence[ForesightScorer], labels: LabelVectors,
                      questions: Any, triples: list[Triple], layers: np.ndarray, backward: np.ndarray
                      ) -> tuple[list[np.ndarray], Any]:
    """The triples' z_t rows by ``encoder``'s network, and s_t (node states zero) by each of ``heads``' scoring heads:
    networks that share one triple encoder (:meth:`ForesightNet.encoder_fingerprint`) encode each triple once."""
    torch = _torch()
    if not triples:
        return [np.zeros(0, dtype=np.float32) for _ in heads], torch.zeros(0, encoder.net.spec.hidden)
    head_vectors = labels.entities([t[0] for t in triples])
    rels = labels.relations([t[1] for t in triples])
    tails = labels.entities([t[2] for t in triples])
    zs: list[Any] = []
    scores: list[list[Any]] = [[] for _ in heads]
    with torch.inference_mode():
        for lo in range(0, len(triples), _CHUNK):
            hi = lo + _CHUNK
            z = encoder.net.encode(torch.from_numpy(head_vectors[lo:hi]), torch.from_numpy(rels[lo:hi]),
                                   torch.from_numpy(tails[lo:hi]), torch.from_numpy(layers[lo:hi]),
                                   torch.from_numpy(backward[lo:hi].astype(np.int64)), *questions)
            zs.append(z)
            for k, member in enumerate(heads):
                scores[k].append(torch.sigmoid(member.net.score(z)))
    return [torch.cat(s).numpy() for s in scores], torch.cat(zs)


def kept_payload(graph: ExpandedGraph) -> Any:
    """The scorer payload (z_t rows) of the edges ``graph`` kept, in edge order."""
    torch = _torch()
    return torch.cat([payload[torch.from_numpy(rows)] for payload, rows in graph.payloads if len(rows)])


def edge_tensors(graph: ExpandedGraph) -> dict[str, Any]:
    """The oriented edges of ``graph`` as the tensors propagation reads (built once per graph)."""
    torch = _torch()
    heads, tails = graph.head_tail_nodes()
    return {"near": torch.tensor(graph.near, dtype=torch.long), "far": torch.tensor(graph.far, dtype=torch.long),
            "depth": torch.tensor(graph.layers, dtype=torch.long), "heads": torch.tensor(heads),
            "tails": torch.tensor(tails), "nodes": len(graph.node_entity)}


class ScorerEnsemble:
    """The mean of several foresight scorers that read with one encoder (see the module docstring)."""

    def __init__(self, members: Sequence[ForesightScorer], path: Path | None = None) -> None:
        if not members:
            raise ConfigError("a scorer ensemble needs at least one member")
        encoders = {m.encoder for m in members}
        if len(encoders) > 1:
            raise ConfigError(f"the members of a scorer ensemble must share an encoder, found {sorted(encoders)}")
        self.members = list(members)
        self.encoder = self.members[0].encoder
        # members trained on one scorer phase (``kgqa train fog --reuse-scorer-phase``) differ only in their
        # propagation and scoring head: they encode each triple once, so extra propagations cost little at run time
        groups: dict[str, list[int]] = {}
        for k, member in enumerate(self.members):
            groups.setdefault(member.net.encoder_fingerprint(), []).append(k)
        self.encoder_groups = list(groups.values())
        self.meta: dict[str, Any] = {"encoder": self.encoder, "members": [str(m.path) for m in self.members]}
        self.path = path

    @classmethod
    def load(cls, path: str | Path) -> ScorerEnsemble:
        directory = Path(path).expanduser()
        try:
            listed = json.loads((directory / ENSEMBLE).read_text(encoding="utf-8"))["members"]
            if not isinstance(listed, list) or not all(isinstance(m, str) for m in listed):
                raise TypeError("'members' must be a list of directory names")
        except (OSError, KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"scorer={str(path)!r}: {ENSEMBLE} cannot be read ({type(exc).__name__}: {exc})") from None
        return cls([ForesightScorer.load(directory / m) for m in listed], directory)

    def questions(self, labels: LabelVectors, texts: Sequence[str]) -> tuple[Any, Any]:
        return self.members[0].questions(labels, texts)

    def score_triples(self, labels: LabelVectors, questions: Any, triples: list[Triple], layers: np.ndarray,
                      backward: np.ndarray) -> tuple[np.ndarray, Any]:
        """The members' mean s_t; the payload stacks their z_t rows (triples x members x hidden). Members that share
        a triple encoder encode each triple once."""
        torch = _torch()
        scores: list[Any] = [None] * len(self.members)
        zs: list[Any] = [None] * len(self.members)
        for group in self.encoder_groups:
            heads = [self.members[k] for k in group]
            group_scores, z = _encode_and_score(heads[0], heads, labels, questions, triples, layers, backward)
            for k, s in zip(group, group_scores, strict=True):
                scores[k], zs[k] = s, z
        return np.mean(scores, axis=0).astype(np.float32), torch.stack(zs, dim=1)

    scorer_for = ForesightScorer.scorer_for

    def propagate(self, graph: ExpandedGraph, *, undirected: bool = False) -> None:
        """Each member propagates over ``graph`` with its own z_t (column k of the payload); the re-scores are
        averaged."""
        if not len(graph):
            return
        z, edges = kept_payload(graph), edge_tensors(graph)
        totals = sum(member.rescored(z[:, k], edges, undirected=undirected) for k, member in enumerate(self.members))
        graph.scores = (totals / len(self.members)).tolist()


def load_scorer(path: str | Path) -> ForesightScorer | ScorerEnsemble:
    """A scorer directory or an ensemble directory (``ensemble.json``), whichever ``path`` holds."""
    directory = Path(path).expanduser()
    if (directory / ENSEMBLE).is_file():
        return ScorerEnsemble.load(directory)
    return ForesightScorer.load(directory)
