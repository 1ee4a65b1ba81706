"""What an ask may load from the server's disk: artifacts by name, never a path, and never built by a request.

* :class:`ArtifactCatalog` names what a request may point a method setting at: the subdirectories of the allow-listed
  directories (``kgqa serve --artifacts DIR``, config ``serve_artifacts``) by their directory name, and the artifacts of
  the server's store by ``KIND:DIGEST`` (a digest prefix of at least 4 hex digits). A name resolves to a directory that
  sits directly in an allow-listed directory (a symlink out of it is refused) or in the store; anything else is refused.
* :class:`ServiceArtifactStore` is the artifact store of the served asks: it loads what is built and refuses to build
  (:class:`MissingArtifact`, answered 409), so a request never starts training or a long build.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgqa.artifacts import ArtifactError, ArtifactStore
from kgqa.artifacts.kinds import ArtifactInputs, ArtifactKind, Progress
from kgqa.artifacts.store import ArtifactRef

#: A name in an allow-listed directory: one directory name, no separators, no dot-only names.
NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+@=-]{0,127}$")
#: A built artifact of the store: ``KIND:DIGEST`` (the digest or a prefix of it, 4+ hex digits).
STORE_NAME_RE = re.compile(r"^([a-z0-9][a-z0-9._-]{0,63}):([0-9a-f]{4,64})$")
#: Entries a listing shows at most.
MAX_LISTED = 500


class MissingArtifact(ArtifactError):
    """A method needs an artifact this server has not built; the service never builds one (answered 409)."""

    def __init__(self, name: str, digest: str, params: Mapping[str, Any]) -> None:
        shown = " ".join(f"--param {k}={v}" for k, v in params.items())
        super().__init__(f"the method needs artifact {name} ({digest}), which this server has not built, and the service "
                         f"never builds or trains: build it on the server with `kgqa artifacts build {name}"
                         f"{' ' + shown if shown else ''}`, then ask again")
        self.artifact = name
        self.digest = digest


class ServiceArtifactStore(ArtifactStore):
    """The artifact store of the served asks: loads what is built, refuses to build (:class:`MissingArtifact`).

    ``shown_params`` replaces a build parameter's value in the refusal (the server's KG spec rather than its
    directory), so the message names what the operator types and no server path."""

    def __init__(self, root: str | Path | None = None, *, shown_params: Mapping[str, str] | None = None) -> None:
        super().__init__(root)
        self.shown_params = dict(shown_params or {})

    def _build(self, kind: ArtifactKind, inputs: ArtifactInputs, digest: str, progress: Progress, *,
               rebuild: bool) -> ArtifactRef:
        params = {key: self.shown_params.get(key, value) for key, value in inputs.params.items()
                  if key in self.shown_params or (isinstance(value, (str, int, float)) and not _path_like(str(value)))}
        raise MissingArtifact(kind.name, digest, params)


@dataclass(frozen=True)
class Entry:
    """One artifact a request may name."""

    name: str
    source: str  # "directory" or "store"
    kind: str | None
    path: Path

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "kind": self.kind}


class ArtifactCatalog:
    """The artifacts a request may name: subdirectories of ``directories`` by name, the store's by ``KIND:DIGEST``."""

    def __init__(self, directories: Sequence[Path], store: ArtifactStore) -> None:
        self.directories = [Path(d).resolve() for d in directories]
        self.store = store

    def resolve(self, name: str) -> Path | None:
        """The directory ``name`` names, or None when it names nothing here (never a path outside the catalog)."""
        if NAME_RE.match(name) and ".." not in name:
            for root in self.directories:
                path = (root / name).resolve()
                if path.parent == root and path.is_dir():
                    return path
            return None
        match = STORE_NAME_RE.match(name)
        if match is None:
            return None
        kind, prefix = match.groups()
        kind_dir = (self.store.root / kind).resolve()
        if not kind_dir.is_dir() or kind_dir.parent != self.store.root.resolve():
            return None
        found = [d for d in kind_dir.iterdir() if d.name.startswith(prefix) and not d.name.startswith(".")]
        if len(found) != 1:
            return None
        path = found[0].resolve()
        return path if path.parent == kind_dir and (path / "manifest.json").is_file() else None

    def entries(self) -> list[Entry]:
        """Every artifact a request may name (at most :data:`MAX_LISTED`), allow-listed directories first."""
        out: list[Entry] = []
        for root in self.directories:
            if not root.is_dir():
                continue
            for child in sorted(root.iterdir()):
                if len(out) >= MAX_LISTED:
                    return out
                if NAME_RE.match(child.name) and ".." not in child.name and self.resolve(child.name) == child.resolve():
                    out.append(Entry(child.name, "directory", _kind_of(child), child.resolve()))
        for ref in self.store.list():
            if len(out) >= MAX_LISTED:
                break
            out.append(Entry(f"{ref.name}:{ref.digest}", "store", ref.name, ref.path))
        return out

    def display(self, text: str) -> str:
        """``text`` with the catalog's directories on this server shown by name (for messages to a client)."""
        for entry in sorted(self.entries(), key=lambda e: -len(str(e.path))):
            text = text.replace(str(entry.path), entry.name)
        for root in self.directories:
            text = text.replace(str(root), "(artifacts)")
        return text.replace(str(self.store.root), "(artifact store)")


def _kind_of(directory: Path) -> str | None:
    """What a directory holds when it says so (the name in its store manifest), else None."""
    import json

    manifest = directory / "manifest.json"
    if manifest.is_file():
        try:
            value = json.loads(manifest.read_text(encoding="utf-8"))
            return str(value.get("name")) if isinstance(value, dict) and value.get("name") else None
        except (OSError, ValueError):
            return None
    return None


def _path_like(text: str) -> bool:
    return "/" in text or "\\" in text or text.startswith(("~", "."))
