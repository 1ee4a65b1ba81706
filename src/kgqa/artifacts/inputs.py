"""Parameters most artifact kinds share: a KG and an embedder, each given as a spec string or as a live object.

Each helper returns the live object, its JSON form for the manifest, its identity for the digest, and, when the helper
opened the object itself, how to close it. Identities hold content, never locations: two copies of one KG in different
directories have the same identity, so they share their artifacts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kgqa import config
from kgqa.artifacts.kinds import ArtifactInputs
from kgqa.errors import ConfigError, KGQAError


@dataclass
class Resolved:
    """A parameter turned into its object: ``value`` for ``build``, ``json`` for the manifest's params, ``identity``
    for the digest, ``closer`` when the helper opened ``value`` (so the store closes it)."""

    value: Any
    json: Any
    identity: dict[str, Any]
    closer: Callable[[], None] | None = None


def vocabulary_sha256(relations: list[str]) -> str:
    """The fingerprint of a relation vocabulary: sha256 of the relations, sorted, one per line."""
    digest = hashlib.sha256()
    for relation in sorted(relations):
        digest.update(relation.encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def resolve_kg(value: Any, *, param: str = "kg", counts: bool = False) -> Resolved:
    """A KG parameter: a spec (``demo``, a directory, an endpoint URL; default the configured ``kg``) or a KG object.

    The identity is the schema and the vocabulary fingerprint (and, with ``counts``, the triple/entity/literal/name
    counts from ``stats()``: for kinds whose result depends on more than the vocabulary).
    """
    closer: Callable[[], None] | None = None
    if value is None or isinstance(value, str):
        spec = str(value if value is not None else config.get("kg") or "").strip()
        if not spec:
            raise ConfigError(f"parameter {param!r}: no KG given and no default KG configured")
        from kgqa.kg import open_kg

        try:
            kg = open_kg(spec)
        except KGQAError as exc:
            raise ConfigError(f"parameter {param}={spec!r}: {exc}") from None
        closer = kg.close
        as_json: Any = spec
    else:
        kg = value
        if not all(hasattr(kg, attr) for attr in ("vocabulary", "stats", "schema")):
            raise ConfigError(f"parameter {param!r} must be a KG spec or a KnowledgeGraph, not {type(value).__name__}")
        as_json = kg_location(kg)
    try:
        relations = list(kg.vocabulary())
        identity: dict[str, Any] = {"schema": kg.schema.name, "relations": len(relations),
                                    "vocabulary_sha256": vocabulary_sha256(relations)}
        if counts:
            stats = kg.stats()
            identity.update({key: getattr(stats, key) for key in ("triples", "entities", "literals", "names")})
    except BaseException:
        if closer is not None:
            closer()
        raise
    return Resolved(kg, as_json, identity, closer)


def kg_location(kg: Any) -> str:
    """Where a KG object lives, for the manifest: its directory or endpoint, else its type (never a query: this runs
    on every lookup)."""
    for attr in ("directory", "endpoint"):
        value = getattr(kg, attr, None)
        if value:
            return str(value)
    return f"<{type(kg).__name__}>"


def describe_kg(kg: Any, spec: Any) -> dict[str, Any]:
    """The manifest's description of a KG: the spec it was given as, backend, schema and counts, and where it lives."""
    stats = kg.stats()
    out: dict[str, Any] = {"spec": spec, "backend": stats.backend, "schema": stats.schema}
    out.update({key: getattr(stats, key) for key in ("triples", "entities", "relations", "literals", "names")})
    for key in ("directory", "endpoint"):
        if stats.extra.get(key):
            out[key] = str(stats.extra[key])
    return out


def resolve_embedder(value: Any, *, param: str = "embedder", default: str = "minilm") -> Resolved:
    """An embedder parameter: a spec (``minilm``, ``hash``, ``hash:DIM``; default ``minilm``) or an embedder object.

    The identity is the embedder's name and dimension (``hash`` and ``hash:256`` are one embedder).
    """
    if value is None or isinstance(value, str):
        spec = str(value if value is not None else default).strip()
        as_json = spec
        from kgqa.text import load_embedder

        try:
            embedder = load_embedder(spec)
        except KGQAError as exc:
            raise ConfigError(f"parameter {param}={spec!r}: {exc}") from None
    else:
        embedder = value
        as_json = str(getattr(embedder, "name", ""))
        if not (hasattr(embedder, "embed") and hasattr(embedder, "name") and hasattr(embedder, "dim")):
            raise ConfigError(f"parameter {param!r} must be an embedder spec or an Embedder, not {type(value).__name__}")
    identity = {"name": str(embedder.name), "dim": int(embedder.dim)}
    return Resolved(embedder, as_json, identity)


def kg_embedder_inputs(kg: Resolved, embedder: Resolved, **identity: Any) -> ArtifactInputs:
    """The inputs of a kind built from a KG and an embedder (``identity`` adds what else its files depend on); the
    KG is closed with the store when this helper's caller opened it."""
    return ArtifactInputs(
        params={"kg": kg.json, "embedder": embedder.json},
        identity={"kg": kg.identity, "embedder": embedder.identity, **identity},
        describe=lambda: {"kg": describe_kg(kg.value, kg.json), "embedder": embedder.identity},
        resources={"kg": kg.value, "embedder": embedder.value},
        closers=[kg.closer] if kg.closer is not None else [],
    )
