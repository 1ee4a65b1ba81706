"""Artifact kinds: the recipes the artifact store builds from, and their registry.

An :class:`ArtifactKind` says what an artifact is made of and how to make it. Its ``resolve`` turns the parameters a
caller gives (``kg="demo"``, ``embedder="hash"``, or live objects) into :class:`ArtifactInputs`: the JSON parameters
recorded in the manifest, the *identity* hashed into the digest (what the result depends on, such as the KG's vocabulary
fingerprint and the embedder's name and dimension), a description of the data for the manifest, and the live objects
that ``build`` uses. ``build`` writes files into a fresh directory and returns metrics; ``load`` reads them back.

Built-in kinds register themselves when their modules are imported, on the first lookup: the KG-wide kinds here
(:data:`BUILTIN_KIND_MODULES`) and the kinds a method package owns (the method packages under ``kgqa.methods`` are
imported by name, as plugins are, so this floor never imports a method). Third-party kinds come from the entry-point
group ``kgqa.artifacts``, each entry an :class:`ArtifactKind` instance.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgqa.errors import ConfigError
from kgqa.registry import Registry, import_submodules, registry_key

#: Reports one line of build progress (the CLI writes it to stderr).
Progress = Callable[[str], None]

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
DIGEST_LENGTH = 16


def no_progress(message: str) -> None:
    """The default progress sink: says nothing."""


@dataclass
class ArtifactInputs:
    """What one build of a kind is made from, as resolved from the caller's parameters.

    ``params``: the parameters as JSON (a KG spec string, an embedder name), written into the manifest. ``identity``:
    JSON that determines the result; it (with the kind's name and version) is hashed into the digest, so it must hold
    everything the files depend on and nothing that varies between equal inputs (a directory path, a timestamp).
    ``describe``: the data description for the manifest (KG spec and stats ...), called only when building.
    ``resources``: live objects for ``build`` (an opened KG, a loaded embedder). ``closers`` run when the store is done.
    """

    params: dict[str, Any]
    identity: dict[str, Any]
    describe: Callable[[], dict[str, Any]] = dict
    resources: dict[str, Any] = field(default_factory=dict)
    closers: list[Callable[[], None]] = field(default_factory=list)

    def close(self) -> None:
        """Release what ``resolve`` opened (a KG it opened from a spec); errors while closing are ignored."""
        while self.closers:
            closer = self.closers.pop()
            with contextlib.suppress(Exception):  # closing is best effort: the artifact is already built or loaded
                closer()


@dataclass(frozen=True)
class ArtifactKind:
    """A recipe for one kind of artifact.

    ``name``: lower-case, directory-safe (``relation-embeddings``). ``summary``: one line for ``kgqa artifacts list``.
    ``version``: bump it whenever the recipe changes what it writes, so old builds are no longer found. ``params``:
    each accepted parameter with a one-line help (anything else is refused). ``resolve(params) -> ArtifactInputs``;
    ``build(inputs, out_dir, progress) -> metrics`` writes files into the empty ``out_dir``; ``load(path) -> object``.
    """

    name: str
    summary: str
    version: str
    params: Mapping[str, str]
    resolve: Callable[[dict[str, Any]], ArtifactInputs]
    build: Callable[[ArtifactInputs, Path, Progress], Mapping[str, Any]]
    load: Callable[[Path], Any]

    def check_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` as a dict; a parameter the kind does not take is a ConfigError naming it and the valid ones."""
        unknown = [key for key in params if key not in self.params]
        if unknown:
            valid = ", ".join(self.params) or "none"
            raise ConfigError(f"artifact {self.name!r} takes no parameter {unknown[0]!r}; its parameters: {valid} "
                              "(`kgqa artifacts list` describes them)")
        return dict(params)


#: Modules of the built-in kinds, imported on the first lookup (each registers itself).
BUILTIN_KIND_MODULES = ("kgqa.artifacts.relation_embeddings", "kgqa.artifacts.label_embeddings")


#: The package whose subpackages (one per method) may register kinds of their own (a method's trained artifacts).
METHOD_PACKAGES = "kgqa.methods"


def _discover_builtin_kinds() -> None:
    for module in BUILTIN_KIND_MODULES:
        try:
            importlib.import_module(module)
        except Exception as exc:  # one broken kind must not hide the others
            ARTIFACTS.note_error(module.rsplit(".", 1)[-1].replace("_", "-"), f"{type(exc).__name__}: {exc}")
    import_submodules(METHOD_PACKAGES, registry=ARTIFACTS)


#: Every artifact kind by name.
ARTIFACTS: Registry[ArtifactKind] = Registry("artifact", discover=_discover_builtin_kinds)


def register_artifact(kind: ArtifactKind, *, replace: bool = False) -> ArtifactKind:
    """Make ``kind`` nameable by ``ArtifactStore.get(kind.name, ...)`` and ``kgqa artifacts``; returns it."""
    if not isinstance(kind, ArtifactKind):
        raise TypeError(f"register_artifact takes an ArtifactKind, not {type(kind).__name__}")
    check_name(kind.name)
    if not str(kind.version).strip():
        raise ValueError(f"artifact kind {kind.name!r} needs a non-empty version")
    return ARTIFACTS.add(kind.name, kind, replace=replace)


def check_name(name: str) -> str:
    """``name`` if it is a valid artifact name (lower-case letters, digits, ``.``, ``_``, ``-``); else ConfigError."""
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ConfigError(f"{name!r} is not a valid artifact name (lower-case letters, digits, '.', '_' and '-')")
    return name


def get_kind(name: str) -> ArtifactKind:
    """The kind ``name``; an unknown name is a ConfigError listing the known kinds."""
    kind = ARTIFACTS.get(name)
    if not isinstance(kind, ArtifactKind):
        raise ConfigError(f"artifact {name!r} is registered as {kind!r}, which is not a kgqa.artifacts.ArtifactKind")
    if registry_key(kind.name) != registry_key(name):  # an entry point whose name is not its kind's
        raise ConfigError(f"artifact {name!r} is registered with a kind named {kind.name!r}; the names must agree")
    check_name(kind.name)
    return kind


def canonical_json(value: Any) -> str:
    """The one JSON text of ``value`` that is hashed: sorted keys, no spaces; anything not JSON is an error."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def artifact_digest(kind: ArtifactKind, identity: Mapping[str, Any]) -> str:
    """The content digest of a build: sha256 over the kind's name and version and the inputs' identity."""
    try:
        text = canonical_json({"artifact": kind.name, "version": str(kind.version), "identity": identity})
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"artifact {kind.name!r}: its inputs' identity is not JSON ({exc})") from None
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:DIGEST_LENGTH]
