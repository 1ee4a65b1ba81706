"""Trained and built artifacts: what methods train or precompute, built once, cached by content digest, loaded by name.

``ArtifactStore().get("relation-embeddings", kg="demo", embedder="hash")`` returns the loaded artifact, building it
first when the store (``<cache_dir>/artifacts``) does not hold it. Each built artifact has a ``manifest.json`` saying how
it was made (data, command, date, metrics). ``kgqa artifacts`` lists, shows, builds and locates them. Kinds are
registered in :data:`ARTIFACTS` (built-ins on first lookup, third-party ones from the entry-point group
``kgqa.artifacts``). See docs/artifacts.md.
"""

from __future__ import annotations

from kgqa.artifacts.inputs import Resolved, describe_kg, resolve_embedder, resolve_kg, vocabulary_sha256
from kgqa.artifacts.kinds import (
    ARTIFACTS,
    ArtifactInputs,
    ArtifactKind,
    Progress,
    artifact_digest,
    get_kind,
    register_artifact,
)
from kgqa.artifacts.store import MANIFEST, ArtifactError, ArtifactRef, ArtifactStore

__all__ = [
    "ARTIFACTS", "MANIFEST", "ArtifactError", "ArtifactInputs", "ArtifactKind", "ArtifactRef", "ArtifactStore", "Progress",
    "Resolved", "artifact_digest", "describe_kg", "get_kind", "register_artifact", "resolve_embedder", "resolve_kg",
    "vocabulary_sha256",
]
