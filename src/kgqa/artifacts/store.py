"""The artifact store: builds artifacts once, keeps them under the cache directory by content digest, loads them.

Layout (``root`` is ``<cache_dir>/artifacts`` unless given)::

    <root>/<name>/<digest>/manifest.json     how it was made (see docs/artifacts.md)
    <root>/<name>/<digest>/...               the kind's files
    <root>/<name>/.build-<digest>-XXXX/      a build in progress (never read)
    <root>/<name>/.<digest>.lock             held while building, so two processes never build the same one twice

A build writes into a fresh temporary directory beside its final place, writes ``manifest.json`` last, and renames the
directory into place; a directory under ``<name>/<digest>/`` therefore always holds a complete artifact, and a build that
fails or is killed leaves only a dot-directory that nothing reads (and the next build of that digest removes).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import secrets
import shutil
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kgqa import __version__
from kgqa.artifacts.kinds import ArtifactInputs, ArtifactKind, Progress, artifact_digest, get_kind, no_progress
from kgqa.config import cache_dir
from kgqa.errors import ConfigError, KGQAError

try:  # POSIX: advisory locks between processes; elsewhere builds are still atomic, only not deduplicated
    import fcntl
except ImportError:  # pragma: no cover - not on Linux or macOS
    fcntl = None  # type: ignore[assignment]

MANIFEST = "manifest.json"
#: Bumped when the manifest's fields change meaning.
MANIFEST_FORMAT = 1


class ArtifactError(KGQAError):
    """An artifact could not be built or loaded; the message names the artifact and what failed."""


@dataclass(frozen=True)
class ArtifactRef:
    """A built artifact: its kind's name, its digest, its directory and its manifest."""

    name: str
    digest: str
    path: Path
    manifest: dict[str, Any]

    @property
    def created(self) -> str:
        return str(self.manifest.get("created", ""))

    @property
    def size_bytes(self) -> int:
        return int(self.manifest.get("size_bytes", 0))

    def load(self) -> Any:
        """The loaded artifact (by its kind's ``load``)."""
        kind = get_kind(self.name)
        try:
            return kind.load(self.path)
        except KGQAError:
            raise
        except Exception as exc:
            raise ArtifactError(f"artifact {self.name} at {self.path} cannot be loaded ({type(exc).__name__}: {exc}); "
                                f"rebuild it with `kgqa artifacts build {self.name} --rebuild ...`") from exc


class ArtifactStore:
    """Artifacts by name and parameters: ``get`` loads one, building it first when it is not in the store yet.

    ``root``: the store directory (default ``<cache_dir>/artifacts``). ``command``: the command line recorded in new
    manifests (default ``sys.argv``). ``progress``: where builds report progress (default: nowhere).
    Loaded artifacts are kept in memory, so asking again for the same one (every question of a run) costs only the
    digest.
    """

    def __init__(self, root: str | os.PathLike[str] | None = None, *, command: Sequence[str] | None = None,
                 progress: Progress | None = None) -> None:
        self.root = Path(root).expanduser() if root is not None else cache_dir() / "artifacts"
        self.command = list(command) if command is not None else None
        self.progress = progress or no_progress
        self._loaded: dict[tuple[str, str], Any] = {}
        self._used: dict[tuple[str, str], ArtifactRef] = {}
        self._lock = threading.Lock()
        self._key_locks: dict[tuple[str, str], threading.Lock] = {}

    def __repr__(self) -> str:
        return f"ArtifactStore({str(self.root)!r})"

    # -- by name and parameters ------------------------------------------------------------------------------------

    def get(self, name: str, /, **params: Any) -> Any:
        """The artifact ``name`` for ``params``, loaded; built first if the store does not hold it yet."""
        with self._resolved(name, params) as (kind, inputs, digest):
            key = (kind.name, digest)
            with self._lock:
                if key in self._loaded:
                    return self._loaded[key]
            ref = self._find(kind, digest) or self._build(kind, inputs, digest, self.progress, rebuild=False)
            value = ref.load()
            with self._lock:
                self._used.setdefault(key, ref)
                return self._loaded.setdefault(key, value)

    def used(self) -> list[ArtifactRef]:
        """The artifacts this store has loaded through :meth:`get` (for a run to record which ones it read)."""
        with self._lock:
            return sorted(self._used.values(), key=lambda r: (r.name, r.digest))

    def path(self, name: str, /, **params: Any) -> Path:
        """The directory of the artifact ``name`` for ``params``; built first if missing."""
        return self.build(name, params).path

    def manifest(self, name: str, /, **params: Any) -> dict[str, Any]:
        """The manifest of the artifact ``name`` for ``params``; built first if missing."""
        return self.build(name, params).manifest

    def build(self, name: str, params: Mapping[str, Any] | None = None, *, rebuild: bool = False,
              progress: Progress | None = None) -> ArtifactRef:
        """The artifact ``name`` for ``params``, built if missing (or, with ``rebuild``, built again and replaced)."""
        with self._resolved(name, params or {}) as (kind, inputs, digest):
            ref = None if rebuild else self._find(kind, digest)
            if ref is None:
                ref = self._build(kind, inputs, digest, progress or self.progress, rebuild=rebuild)
                with self._lock:
                    self._loaded.pop((kind.name, digest), None)
            return ref

    def find(self, name: str, params: Mapping[str, Any] | None = None) -> ArtifactRef | None:
        """The built artifact ``name`` for ``params``, or None when it is not built (nothing is built)."""
        with self._resolved(name, params or {}) as (kind, _inputs, digest):
            return self._find(kind, digest)

    def digest(self, name: str, params: Mapping[str, Any] | None = None) -> str:
        """The digest the artifact ``name`` has (or would have) for ``params``."""
        with self._resolved(name, params or {}) as (_kind, _inputs, digest):
            return digest

    def location(self, name: str, digest: str) -> Path:
        """Where the artifact ``name`` with ``digest`` lives (whether or not it is built)."""
        return self.root / name / digest

    # -- what is there ---------------------------------------------------------------------------------------------

    def list(self) -> list[ArtifactRef]:
        """Every built artifact in the store (of any kind, registered or not), by name then creation date."""
        refs: list[ArtifactRef] = []
        if not self.root.is_dir():
            return refs
        for kind_dir in sorted(self.root.iterdir()):
            if kind_dir.name.startswith(".") or not kind_dir.is_dir():
                continue
            for directory in sorted(kind_dir.iterdir()):
                if directory.name.startswith(".") or not (directory / MANIFEST).is_file():
                    continue
                manifest = _read_manifest(directory / MANIFEST, strict=False)
                if manifest is not None:
                    refs.append(ArtifactRef(kind_dir.name, directory.name, directory, manifest))
        refs.sort(key=lambda r: (r.name, r.created))
        return refs

    def by_digest(self, prefix: str) -> ArtifactRef:
        """The built artifact whose digest starts with ``prefix`` (at least 4 characters); else a ConfigError."""
        wanted = prefix.strip().lower()
        if len(wanted) < 4 or any(c not in "0123456789abcdef" for c in wanted):
            raise ConfigError(f"{prefix!r} is not a digest (at least 4 hex digits)")
        matches = [r for r in self.list() if r.digest.startswith(wanted)]
        if not matches:
            raise ConfigError(f"no artifact in {self.root} has a digest starting with {prefix!r}")
        if len(matches) > 1:
            listed = ", ".join(f"{r.name}/{r.digest}" for r in matches)
            raise ConfigError(f"digest prefix {prefix!r} is ambiguous: {listed}")
        return matches[0]

    # -- internals -------------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _resolved(self, name: str, params: Mapping[str, Any]) -> Iterator[tuple[ArtifactKind, ArtifactInputs, str]]:
        kind = get_kind(name)
        checked = kind.check_params(params)
        inputs = kind.resolve(checked)
        try:
            yield kind, inputs, artifact_digest(kind, inputs.identity)
        finally:
            inputs.close()

    def _find(self, kind: ArtifactKind, digest: str) -> ArtifactRef | None:
        directory = self.location(kind.name, digest)
        if not (directory / MANIFEST).is_file():
            return None
        manifest = _read_manifest(directory / MANIFEST, strict=True)
        assert manifest is not None
        if manifest.get("name") != kind.name or manifest.get("digest") != digest:
            raise ArtifactError(f"{directory} holds a manifest of {manifest.get('name')}/{manifest.get('digest')}, not "
                                f"{kind.name}/{digest}; remove that directory")
        return ArtifactRef(kind.name, digest, directory, manifest)

    def _key_lock(self, key: tuple[str, str]) -> threading.Lock:
        with self._lock:
            return self._key_locks.setdefault(key, threading.Lock())

    @contextlib.contextmanager
    def _exclusive(self, kind_dir: Path, digest: str, progress: Progress) -> Iterator[None]:
        """Held while building one digest: by one thread of this store, and by one process on this machine."""
        with self._key_lock((kind_dir.name, digest)):
            if fcntl is None:  # pragma: no cover
                yield
                return
            with open(kind_dir / f".{digest}.lock", "a+b") as handle:
                try:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    progress(f"waiting for another process that is building {kind_dir.name} {digest}")
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def _build(self, kind: ArtifactKind, inputs: ArtifactInputs, digest: str, progress: Progress, *,
               rebuild: bool) -> ArtifactRef:
        kind_dir = self.root / kind.name
        try:
            kind_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"artifact store {self.root} cannot be created: {exc}") from None
        final = kind_dir / digest
        with self._exclusive(kind_dir, digest, progress):
            if not rebuild:
                ref = self._find(kind, digest)
                if ref is not None:  # another thread or process built it while this one waited
                    return ref
            if fcntl is not None:  # we hold the lock: any leftover of this digest is from a build that died
                _sweep(kind_dir, digest)
            tmp = kind_dir / f".build-{digest}-{os.getpid()}-{secrets.token_hex(4)}"
            tmp.mkdir()  # (not mkdtemp: the artifact keeps the umask's permissions, like the rest of the cache)
            old: Path | None = None
            try:
                progress(f"building {kind.name} {digest}")
                started = time.perf_counter()
                metrics = kind.build(inputs, tmp, progress)
                seconds = time.perf_counter() - started
                manifest = self._manifest(kind, inputs, digest, tmp, metrics, seconds)
                _write_json(tmp / MANIFEST, manifest)
                if final.exists():
                    old = kind_dir / f".old-{digest}-{os.getpid()}-{time.time_ns()}"
                    os.rename(final, old)
                os.rename(tmp, final)
            except Exception as exc:
                shutil.rmtree(tmp, ignore_errors=True)
                if old is not None and not final.exists():
                    os.rename(old, final)  # a failed rebuild keeps the artifact it was to replace
                    old = None
                what = str(exc) if isinstance(exc, KGQAError) else f"{type(exc).__name__}: {exc}"
                raise ArtifactError(f"building artifact {kind.name} ({digest}) failed: {what}; nothing was kept") from exc
            except BaseException:  # interrupted: leave nothing that looks built
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            finally:
                if old is not None:
                    shutil.rmtree(old, ignore_errors=True)
            progress(f"built {kind.name} {digest} in {seconds:.2f} s: {final}")
            return ArtifactRef(kind.name, digest, final, manifest)

    def _manifest(self, kind: ArtifactKind, inputs: ArtifactInputs, digest: str, directory: Path,
                  metrics: Mapping[str, Any], seconds: float) -> dict[str, Any]:
        if not isinstance(metrics, Mapping):
            raise ArtifactError(f"the build returned {type(metrics).__name__}, not a dict of metrics")
        files = {str(p.relative_to(directory)): p.stat().st_size for p in sorted(directory.rglob("*")) if p.is_file()}
        if not files:
            raise ArtifactError("the build wrote no files")
        if MANIFEST in files:
            raise ArtifactError(f"the build wrote its own {MANIFEST}; that name belongs to the store")
        manifest = {
            "manifest_format": MANIFEST_FORMAT,
            "name": kind.name,
            "summary": kind.summary,
            "kind_version": str(kind.version),
            "digest": digest,
            "params": inputs.params,
            "inputs": inputs.describe(),
            "identity": inputs.identity,
            "command": self.command if self.command is not None else list(sys.argv),
            "kgqa_version": __version__,
            "python": platform.python_version(),
            "created": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
            "build_seconds": round(seconds, 3),
            "metrics": dict(metrics),
            "files": files,
            "size_bytes": sum(files.values()),
        }
        try:
            json.dumps(manifest, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ArtifactError(f"the manifest is not JSON (params, inputs or metrics hold a non-JSON value: {exc})") \
                from None
        return manifest


def _sweep(kind_dir: Path, digest: str) -> None:
    """Remove what builds of ``digest`` that died left behind (only called while holding that digest's lock)."""
    for leftover in kind_dir.glob(f".build-{digest}-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    for leftover in kind_dir.glob(f".old-{digest}-*"):
        shutil.rmtree(leftover, ignore_errors=True)


def _write_json(path: Path, payload: Mapping[str, Any]) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def _read_manifest(path: Path, *, strict: bool) -> dict[str, Any] | None:
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(manifest, dict):
            raise ValueError("not a JSON object")
        return manifest
    except (OSError, ValueError) as exc:
        if not strict:
            return None
        raise ArtifactError(f"artifact manifest {path} is unreadable ({exc}); remove {path.parent} to rebuild it") from None
