"""SRP's reference base: solved questions (question, relation path, answers) a planner reads as worked examples.

A base is drawn once from checked candidates (each a question whose gold relation chain, run on the KG from its topic
entities, reaches at least one of its gold answers: :func:`check_candidates`) and written to a directory by ``kgqa
train srp`` (docs/srp.md):

* the candidates' questions are embedded (all-MiniLM-L6-v2 in practice; any :class:`~kgqa.text.base.Embedder`) and
  clustered by k-means (scikit-learn, ``n_init=10``, ``random_state=seed``);
* every cluster gets an equal share of ``size``; a cluster smaller than its share gives all it has and the shortfall is
  handed out one reference at a time to the clusters that still have questions left, largest cluster first;
* within a cluster the share is a seeded random sample (not the questions nearest the centroid: on templated data such
  as MetaQA those are near-copies of one template), kept in candidate order.

The same candidates, embedder and seed give the same base. :meth:`ReferenceBase.nearest` ranks the references by cosine
to a question, ties broken by file order, and never returns the question itself (by id or by its text).

Provenance: ``reference-base.json`` records the datasets and the split the base was drawn from (``datasets``,
``split``); a base drawn from a subset of a split also lists the ids of the questions it read in ``source-ids.txt``
(``source_ids`` in the description), so ``kgqa eval`` can tell a run whose questions are disjoint from that subset
from one that would see the gold of its own split (:mod:`kgqa.methods.srp.sources`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from kgqa.core import Question
from kgqa.datasets.gold_chains import answer_keys, gold_chain
from kgqa.errors import ConfigError, KGError, KGQAError
from kgqa.kg.base import KnowledgeGraph, format_chain, parse_chain
from kgqa.normalize import fold
from kgqa.text.base import Embedder, l2_normalize

#: What ``reference-base.json`` says it is, and the version of this directory layout.
FORMAT = "kgqa-srp-references"
FORMAT_VERSION = 1
REFERENCES_FILE = "references.jsonl"
EMBEDDINGS_FILE = "embeddings.npy"
META_FILE = "reference-base.json"
CARD_FILE = "README.md"
#: The ids of the questions a base drawn from a subset of a split read, one a line (absent for a whole split).
SOURCE_IDS_FILE = "source-ids.txt"
#: Answer names kept per reference (the prompt shows a few, not MetaQA's dozens).
MAX_ANSWERS = 5
#: k-means restarts (scikit-learn keeps the best of these by inertia).
KMEANS_INIT = 10
_FIELDS = ("id", "question", "topics", "path", "answers", "cluster")


@dataclass(frozen=True)
class Reference:
    """One solved question: its text, topic names, gold relation path (:func:`kgqa.kg.base.format_chain` form,
    ``r1,^r2``), up to :data:`MAX_ANSWERS` gold answer names the path reaches, and its k-means cluster (-1 before a
    base is drawn). ``dataset`` says where it came from."""

    id: str
    question: str
    topics: list[str]
    path: str
    answers: list[str]
    cluster: int = -1
    dataset: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def normalize_question(text: str) -> str:
    """The key two question texts are compared by: folded case and accents, whitespace collapsed."""
    return " ".join(fold(text).split())


def embedder_spec_of(embedder: Embedder) -> str:
    """A spec :func:`kgqa.text.embedders.load_embedder` reads back for ``embedder`` (``hash256`` -> ``hash:256``)."""
    name = str(embedder.name)
    match = re.fullmatch(r"hash(\d+)", name)
    return f"hash:{match.group(1)}" if match else name


def plan_shares(cluster_sizes: Sequence[int], size: int) -> list[int]:
    """How many references each cluster gives: an equal share of ``size`` (the remainder to the largest clusters), a
    small cluster giving all it has and the shortfall going, one at a time, to the clusters with questions left,
    largest first (ties: lower cluster number). Never more than ``sum(cluster_sizes)`` in all."""
    shares = [0] * len(cluster_sizes)
    order = sorted(range(len(cluster_sizes)), key=lambda c: (-cluster_sizes[c], c))
    left = min(size, sum(cluster_sizes))
    while left > 0:
        for c in order:
            if left == 0:
                break
            if shares[c] < cluster_sizes[c]:
                shares[c] += 1
                left -= 1
    return shares


def _kmeans(vectors: np.ndarray, clusters: int, seed: int) -> np.ndarray:
    try:
        from sklearn.cluster import KMeans
    except ImportError:
        raise ConfigError("the SRP reference base clusters with scikit-learn, which is not installed (it comes with "
                          "the text extra: run .ci/install_local_model.sh, or pip install scikit-learn)") from None
    model = KMeans(n_clusters=clusters, n_init=KMEANS_INIT, random_state=seed)
    return np.asarray(model.fit_predict(vectors.astype(np.float64)), dtype=np.int64)


def _renumber(labels: np.ndarray) -> np.ndarray:
    """Cluster numbers by size, largest first (ties: the cluster whose first member comes first), so the numbering does
    not depend on k-means' arbitrary label order."""
    found = sorted(set(labels.tolist()), key=lambda c: (-int(np.sum(labels == c)), int(np.argmax(labels == c))))
    mapping = {old: new for new, old in enumerate(found)}
    return np.array([mapping[int(c)] for c in labels], dtype=np.int64)


@dataclass
class ReferenceBase:
    """A drawn reference base: references in file order, their unit embeddings (one row each) and how it was made."""

    references: list[Reference]
    embeddings: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)
    #: the ids of the questions the base was drawn from, when that was a subset of its split (None: the whole split)
    source_ids: list[str] | None = None
    #: the directory the base was loaded from (None: built in memory)
    directory: Path | None = None

    def __post_init__(self) -> None:
        self.embeddings = np.ascontiguousarray(self.embeddings, dtype=np.float32)
        if self.embeddings.ndim != 2 or self.embeddings.shape[0] != len(self.references):
            raise ConfigError(f"a reference base needs one embedding row per reference: {len(self.references)} "
                              f"references, embeddings of shape {self.embeddings.shape}")
        self._keys = [normalize_question(r.question) for r in self.references]

    def __len__(self) -> int:
        return len(self.references)

    # -- building --------------------------------------------------------------------------------------------------

    @classmethod
    def build(cls, candidates: Sequence[Reference], embedder: Embedder, *, size: int = 100, clusters: int = 10,
              seed: int = 0, embedder_spec: str | None = None,
              provenance: Mapping[str, Any] | None = None) -> ReferenceBase:
        """Draw ``size`` references from checked ``candidates``: embed, k-means into ``clusters``, an equal share per
        cluster (see the module docstring). With fewer candidates than ``size`` every candidate is kept; with fewer
        distinct questions than ``clusters`` there are as many clusters as distinct questions. ``provenance``
        (datasets, split, KG, counts by reason, command ...) is written into ``reference-base.json``."""
        if size < 1:
            raise ConfigError(f"reference base size must be at least 1, got {size}")
        if clusters < 1:
            raise ConfigError(f"reference base clusters must be at least 1, got {clusters}")
        if not candidates:
            raise ConfigError("no candidate references to draw from (no question's gold chain reached its answers)")
        items = [replace(c, cluster=-1) for c in candidates]
        seen: set[str] = set()
        for item in items:
            if item.id in seen:
                raise ConfigError(f"candidate reference id {item.id!r} appears twice")
            seen.add(item.id)
            try:
                parse_chain(item.path)  # a path the method can read back
            except KGQAError as exc:
                raise ConfigError(f"candidate reference {item.id!r}: path {item.path!r} is not a relation chain "
                                  f"({exc})") from None
        vectors = l2_normalize(np.asarray(embedder.embed([c.question for c in items]), dtype=np.float32))
        if vectors.shape != (len(items), int(embedder.dim)):
            raise ConfigError(f"embedder {embedder.name} returned shape {vectors.shape} for {len(items)} questions "
                              f"(expected ({len(items)}, {embedder.dim}))")
        empty = np.flatnonzero(np.linalg.norm(vectors, axis=1) == 0)
        if len(empty):
            raise ConfigError(f"candidate reference {items[int(empty[0])].id!r}: its question "
                              f"{items[int(empty[0])].question!r} embeds to a zero vector")
        distinct = len(np.unique(vectors, axis=0))
        k = min(clusters, distinct)
        labels = _renumber(_kmeans(vectors, k, seed)) if k > 1 else np.zeros(len(items), dtype=np.int64)
        members = [np.flatnonzero(labels == c) for c in range(k)]
        sizes = [len(m) for m in members]
        shares = plan_shares(sizes, size)
        rng = np.random.default_rng(seed)
        chosen: list[int] = []
        for c in range(k):
            picked = rng.choice(members[c], size=shares[c], replace=False) if shares[c] < sizes[c] else members[c]
            chosen.extend(int(i) for i in sorted(picked.tolist()))
        references = [replace(items[i], cluster=int(labels[i])) for i in chosen]
        info: dict[str, Any] = {
            "format": FORMAT, "format_version": FORMAT_VERSION, "size": len(references), "requested_size": size,
            "clusters": k, "requested_clusters": clusters, "seed": seed,
            "embedder": {"spec": embedder_spec or embedder_spec_of(embedder), "name": str(embedder.name),
                         "dim": int(embedder.dim)},
            "candidates": len(items), "cluster_sizes": sizes, "cluster_shares": shares,
            "kmeans": {"library": "scikit-learn", "n_init": KMEANS_INIT, "random_state": seed},
        }
        info.update(dict(provenance or {}))
        return cls(references, vectors[chosen], info)

    # -- files -----------------------------------------------------------------------------------------------------

    def save(self, directory: str | Path) -> Path:
        """Write ``references.jsonl``, ``embeddings.npy``, ``reference-base.json`` and a ``README.md`` card into
        ``directory`` (created; files of an earlier base there are replaced, so the CLI refuses such a directory)."""
        out = Path(directory).expanduser()
        out.mkdir(parents=True, exist_ok=True)
        with (out / REFERENCES_FILE).open("w", encoding="utf-8") as fh:
            for ref in self.references:
                fh.write(json.dumps(ref.to_dict(), ensure_ascii=False) + "\n")
        np.save(out / EMBEDDINGS_FILE, self.embeddings.astype(np.float32), allow_pickle=False)
        info = {**self.info, "size": len(self.references)}
        if self.source_ids is not None:
            (out / SOURCE_IDS_FILE).write_text("".join(f"{i}\n" for i in self.source_ids), encoding="utf-8")
            info["source_ids"] = {**dict(info.get("source_ids") or {}), "file": SOURCE_IDS_FILE,
                                  "count": len(self.source_ids)}
        (out / META_FILE).write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        (out / CARD_FILE).write_text(self._card(), encoding="utf-8")
        return out

    @classmethod
    def load(cls, directory: str | Path) -> ReferenceBase:
        """Read a base written by :meth:`save`, checking every file; a missing or inconsistent file is a
        :class:`~kgqa.errors.ConfigError` naming it and saying what is wrong."""
        root = Path(directory).expanduser()
        if not root.is_dir():
            raise ConfigError(f"reference base {root}: not a directory (build one with kgqa train srp)")
        info = _read_meta(root / META_FILE)
        references = _read_references(root / REFERENCES_FILE)
        vectors = _read_embeddings(root / EMBEDDINGS_FILE)
        name = f"reference base {root}"
        if vectors.shape[0] != len(references):
            raise ConfigError(f"{name}: {REFERENCES_FILE} has {len(references)} rows but {EMBEDDINGS_FILE} has "
                              f"{vectors.shape[0]}")
        if info["size"] != len(references):
            raise ConfigError(f"{name}: {META_FILE} says size {info['size']} but {REFERENCES_FILE} has "
                              f"{len(references)} rows")
        if vectors.shape[1] != info["embedder"]["dim"]:
            raise ConfigError(f"{name}: {EMBEDDINGS_FILE} rows have {vectors.shape[1]} dimensions but {META_FILE} "
                              f"says the embedder has {info['embedder']['dim']}")
        norms = np.linalg.norm(vectors, axis=1)
        bad = np.flatnonzero(np.abs(norms - 1.0) > 1e-3)
        if len(bad):
            raise ConfigError(f"{name}: {EMBEDDINGS_FILE} row {int(bad[0]) + 1} is not unit length (norm "
                              f"{float(norms[bad[0]]):.4f}); the rows must be L2-normalised")
        source_ids = None
        if info.get("source_ids") is not None:
            ids_path = root / SOURCE_IDS_FILE
            if not ids_path.is_file():
                raise ConfigError(f"{ids_path}: missing ({META_FILE} says the base was drawn from a subset of its split "
                                  "and lists its questions there)")
            source_ids = [line.strip() for line in ids_path.read_text(encoding="utf-8").splitlines() if line.strip()]
        return cls(references, vectors, info, source_ids, root)

    # -- retrieval -------------------------------------------------------------------------------------------------

    @property
    def embedder_spec(self) -> str:
        """The embedder the base was built with, as a spec for :func:`kgqa.text.embedders.load_embedder`."""
        return str(self.info.get("embedder", {}).get("spec", ""))

    def check_embedder(self, embedder: Embedder) -> None:
        """Refuse an embedder whose vectors are not comparable with the base's (another model or dimension)."""
        recorded = self.info.get("embedder", {})
        dim, name = recorded.get("dim"), recorded.get("name")
        if int(embedder.dim) != dim or (name and str(embedder.name) != name):
            raise ConfigError(f"the reference base was embedded with {name} ({dim} dimensions) but the embedder given "
                              f"is {embedder.name} ({embedder.dim} dimensions); use --embedder {self.embedder_spec} "
                              "or rebuild the base with kgqa train srp")

    @property
    def datasets(self) -> list[str]:
        """The datasets the base was drawn from (empty when it does not say)."""
        return [str(d) for d in self.info.get("datasets") or []]

    @property
    def split(self) -> str | None:
        """The split the base was drawn from (None when it does not say)."""
        split = self.info.get("split")
        return None if split is None else str(split)

    def nearest(self, question_text: str, embedder: Embedder, k: int = 4, *, exclude_ids: Iterable[str] = (),
                exclude_text: str | None = None) -> list[Reference]:
        """The ``k`` references most similar to ``question_text`` by cosine, ties broken by file order; never one whose
        id is in ``exclude_ids`` or whose question equals ``exclude_text`` (case and whitespace folded)."""
        if k < 0:
            raise ConfigError(f"k must be non-negative, got {k}")
        self.check_embedder(embedder)
        if k == 0 or not self.references:
            return []
        query = l2_normalize(np.asarray(embedder.embed([question_text]), dtype=np.float32))[0]
        scores = self.embeddings @ query
        order = np.argsort(-scores, kind="stable")
        banned_ids = set(exclude_ids)
        banned_text = normalize_question(exclude_text) if exclude_text is not None else None
        out: list[Reference] = []
        for i in order.tolist():
            ref = self.references[i]
            if ref.id in banned_ids or (banned_text is not None and self._keys[i] == banned_text):
                continue
            out.append(ref)
            if len(out) == k:
                break
        return out

    # -- the card --------------------------------------------------------------------------------------------------

    def _card(self) -> str:
        info = self.info
        emb = info.get("embedder", {})
        counts = info.get("counts_by_reason") or {}
        dropped = "; ".join(f"{reason}: {n}" for reason, n in counts.items()) or "none"
        shares = ", ".join(f"{c}: {s}/{n}" for c, (s, n) in enumerate(zip(info.get("cluster_shares", []),
                                                                             info.get("cluster_sizes", []), strict=False)))
        source = info.get("source_ids") or {}
        subset = (f", a subset of {len(self.source_ids)} questions listed in {SOURCE_IDS_FILE}: {source.get('how', '')}"
                  if self.source_ids is not None else "")
        return f"""# SRP reference base

Solved questions (question, topic entities, gold relation path, answers) that SRP's planner reads as worked examples:
each test question retrieves its nearest references by cosine of their {emb.get('name')} embeddings, never itself.

- Command: `{info.get('command', '(built from Python)')}`
- kgqa commit: {info.get('kgqa_commit')}
- Data: {', '.join(info.get('datasets', [])) or '?'} ({info.get('split', '?')} split{subset}); KG `{info.get('kg', '?')}`
- Candidates: {info.get('candidates')} questions whose gold chain, run on the KG from their topic entities, reaches
  at least one gold answer; dropped: {dropped}
- Drawn: {len(self.references)} references (asked for {info.get('requested_size')}); embedder `{emb.get('spec')}`
  ({emb.get('dim')} dimensions); k-means with {info.get('clusters')} clusters (scikit-learn, n_init {KMEANS_INIT},
  random_state {info.get('seed')}); an equal share per cluster, the shortfall of small clusters taken from the largest;
  a seeded random sample within each cluster
- References per cluster (drawn/candidates): {shares}

Files: `references.jsonl` (one reference a line: id, question, topics, path in `r1,^r2` form, answers, cluster,
dataset), `embeddings.npy` (float32, L2-normalised, one row per line of references.jsonl), `reference-base.json` (how it
was built). Use it with `--method-config references=DIR`; docs/srp.md.
"""


def _read_meta(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"{path}: missing (not a reference base written by kgqa train srp)")
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        raise ConfigError(f"{path}: not a reference base description (format {FORMAT!r} expected)")
    if info.get("format_version") != FORMAT_VERSION:
        raise ConfigError(f"{path}: format version {info.get('format_version')!r}, this kgqa reads {FORMAT_VERSION}; "
                          "rebuild the base with kgqa train srp")
    size, embedder = info.get("size"), info.get("embedder")
    if not isinstance(size, int) or size < 0:
        raise ConfigError(f"{path}: 'size' must be a non-negative integer, got {size!r}")
    if (not isinstance(embedder, dict) or not isinstance(embedder.get("dim"), int) or
            not isinstance(embedder.get("name"), str) or not isinstance(embedder.get("spec"), str)):
        raise ConfigError(f"{path}: 'embedder' must give the embedder's spec, name and dim, got {embedder!r}")
    return info


def _read_references(path: Path) -> list[Reference]:
    if not path.is_file():
        raise ConfigError(f"{path}: missing (a reference base needs its references)")
    references: list[Reference] = []
    seen: set[str] = set()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}: line {number}"
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{where}: not valid JSON ({exc.msg})") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}: expected a JSON object")
        missing = [key for key in _FIELDS if key not in raw]
        if missing:
            raise ConfigError(f"{where}: missing {', '.join(missing)}")
        strings = all(isinstance(raw[key], str) for key in ("id", "question", "path"))
        lists = all(isinstance(raw[key], list) and all(isinstance(x, str) for x in raw[key])
                    for key in ("topics", "answers"))
        if not strings or not lists or not isinstance(raw["cluster"], int) or isinstance(raw["cluster"], bool):
            raise ConfigError(f"{where}: id, question and path must be strings, topics and answers lists of strings, "
                              "cluster an integer")
        try:
            parse_chain(raw["path"])
        except KGQAError as exc:
            raise ConfigError(f"{where}: path {raw['path']!r} is not a relation chain ({exc})") from None
        if raw["id"] in seen:
            raise ConfigError(f"{where}: id {raw['id']!r} appears twice")
        seen.add(raw["id"])
        references.append(Reference(id=raw["id"], question=raw["question"], topics=list(raw["topics"]),
                                     path=raw["path"], answers=list(raw["answers"]), cluster=raw["cluster"],
                                     dataset=str(raw.get("dataset", ""))))
    return references


def _read_embeddings(path: Path) -> np.ndarray:
    if not path.is_file():
        raise ConfigError(f"{path}: missing (a reference base needs the embeddings of its questions)")
    try:
        vectors = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable .npy array ({exc})") from None
    if vectors.dtype != np.float32 or vectors.ndim != 2:
        raise ConfigError(f"{path}: expected a 2-D float32 array, found {vectors.ndim}-D {vectors.dtype}")
    return vectors


# ---------------------------------------------------------------------------------------------------------------------
# Reference candidates: questions whose gold chain, run on the KG, reaches a gold answer

#: Why a question is not a reference candidate (the keys of :func:`check_candidates`' counts).
NO_CHAIN = "no gold chain"
NO_TOPIC = "no topic entity"
NO_ANSWER = "no gold answer"
TOPIC_NOT_IN_KG = "topic not in the KG"
RELATION_NOT_IN_KG = "relation of the chain not in the KG"
CHAIN_FAILED = "chain refused by the KG"
CHAIN_TRUNCATED = "chain result truncated before a gold answer"
CHAIN_MISSES = "chain reaches no gold answer"
DUPLICATE = "same text as an earlier question"
#: Cap on the entities one checked chain may return (MetaQA's widest 3-hop chains stay far below it).
CHECK_LIMIT = 100_000


def check_candidates(questions: Sequence[Question], kg: KnowledgeGraph, *,
                     max_answers: int = MAX_ANSWERS) -> tuple[list[Reference], Counter[str]]:
    """The reference candidates among ``questions``: each question's gold chain (:func:`gold_chain`) is run on ``kg``
    from its topic entities, and the question is kept when the chain reaches at least one of its gold answers. Returns
    the kept ones as :class:`Reference` (path in :func:`~kgqa.kg.base.format_chain` form, the
    reached gold answer names, at most ``max_answers``, in gold order) and how many were dropped for each reason (the
    module's constants; a question is counted once, under the first reason that applies, and a repeated question text
    keeps only its first checked occurrence)."""
    kept: list[Reference] = []
    dropped: Counter[str] = Counter()
    known_relations: dict[str, bool] = {}
    texts: set[str] = set()
    for question in questions:
        chain = gold_chain(question)
        if chain is None or not chain:
            dropped[NO_CHAIN] += 1
            continue
        if not question.topic_entities:
            dropped[NO_TOPIC] += 1
            continue
        answers = answer_keys(question)
        if not answers:
            dropped[NO_ANSWER] += 1
            continue
        topics = [t for t in question.topic_entities if kg.has_entity(t.id)]
        if not topics:
            dropped[TOPIC_NOT_IN_KG] += 1
            continue
        for hop in chain:
            if hop.relation not in known_relations:
                known_relations[hop.relation] = kg.has_relation(hop.relation)
        if not all(known_relations[hop.relation] for hop in chain):
            dropped[RELATION_NOT_IN_KG] += 1
            continue
        try:
            result = kg.run_chain([t.id for t in topics], chain, limit=CHECK_LIMIT)
        except KGError:
            dropped[CHAIN_FAILED] += 1
            continue
        reached = set(result.entities)
        names = [name for key, name in answers.items() if key in reached]
        if not names:
            dropped[CHAIN_TRUNCATED if result.truncated else CHAIN_MISSES] += 1
            continue
        key = normalize_question(question.text)
        if key in texts:
            dropped[DUPLICATE] += 1
            continue
        texts.add(key)
        kept.append(Reference(id=question.id, question=question.text, topics=[t.name for t in topics],
                              path=format_chain(chain), answers=list(dict.fromkeys(names))[:max_answers],
                              dataset=str(question.metadata.get("dataset") or "")))
    return kept, dropped
