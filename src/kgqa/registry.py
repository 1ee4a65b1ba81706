"""One registry kind for every pluggable thing: methods, datasets, schemas, KG backends, LLM backends, embedders, artifacts.

A :class:`Registry` maps lower-case names to entries. Built-in entries register themselves when their module is
imported; a registry may name a ``discover`` hook that imports those modules the first time a name is asked for, so
importing kgqa stays cheap. Third-party packages add entries through the entry-point group ``kgqa.<kind>`` (for example
``[project.entry-points."kgqa.methods"] mymethod = "mypkg.method:MyMethod"``), loaded at the same moment. An entry that
fails to import is remembered and reported when its name is asked for, so one broken plugin never hides the others.

A plugin may also be a plain module that registers its entries when imported: name it in the config key ``plugins``
(``KGQA_PLUGINS=mypkg.methods,otherpkg`` or ``plugins = ["mypkg.methods"]`` in the config file); every registry imports
those modules before its first lookup.

Every registry of kgqa is listed in :data:`REGISTRIES` by kind.
"""

from __future__ import annotations

import importlib.metadata
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from kgqa.errors import ConfigError

T = TypeVar("T")

#: Every registry by kind (``"method"``, ``"dataset"``, ...), filled as registries are created.
REGISTRIES: dict[str, Registry[Any]] = {}


def registry_key(name: str) -> str:
    """How names are compared: case-insensitive, surrounding spaces ignored."""
    return str(name).strip().lower()


class Registry(Generic[T]):
    """Entries of one kind by name, with lazy discovery of built-ins and ``kgqa.<group>`` entry points.

    ``kind`` names the thing in error messages ("method", "dataset"); ``group`` is the entry-point group suffix
    (default: ``kind`` + "s"); ``discover`` imports the built-in modules that register themselves.
    """

    def __init__(self, kind: str, *, group: str | None = None, discover: Callable[[], None] | None = None,
                 noun: str | None = None) -> None:
        self.kind = kind
        self.noun = noun or kind
        self.entry_point_group = f"kgqa.{group or kind + 's'}"
        self._discover_builtins = discover
        self._entries: dict[str, T] = {}
        self._errors: dict[str, str] = {}
        self._lock = threading.RLock()
        # Held while importing plugin modules; separate from _lock so a module that registers itself while another
        # thread is discovering never waits on a lock held by a thread that waits for that module's import.
        self._discovery_lock = threading.RLock()
        self._discovered = False
        REGISTRIES[kind] = self

    # -- adding ----------------------------------------------------------------------------------------------------

    def add(self, name: str, entry: T, *, replace: bool = False) -> T:
        """Register ``entry`` under ``name``. Two different entries under one name are a bug unless ``replace``."""
        key = registry_key(name)
        if not key:
            raise ValueError(f"a {self.noun} name must not be empty")
        with self._lock:
            previous = self._entries.get(key)
            if previous is not None and not replace and not _same_entry(previous, entry):
                raise ValueError(f"{self.noun} name {name!r} is already registered by {previous!r}")
            self._entries[key] = entry
            self._errors.pop(key, None)
        return entry

    def register(self, name: str) -> Callable[[T], T]:
        """A decorator form of :meth:`add`."""

        def decorator(entry: T) -> T:
            return self.add(name, entry)

        return decorator

    def remove(self, name: str) -> None:
        with self._lock:
            self._entries.pop(registry_key(name), None)
            self._errors.pop(registry_key(name), None)

    def note_error(self, name: str, error: str) -> None:
        """Remember that the entry ``name`` exists but could not be loaded (reported by :meth:`get`)."""
        with self._lock:
            if registry_key(name) not in self._entries:
                self._errors[registry_key(name)] = error

    # -- discovery -------------------------------------------------------------------------------------------------

    def discover(self, *, force: bool = False) -> None:
        """Import the built-ins and load the entry points of ``kgqa.<group>``, once (again with ``force``)."""
        with self._discovery_lock:
            if self._discovered and not force:
                return
            if self._discover_builtins is not None:
                self._discover_builtins()
            load_plugins()
            for ep in _entry_points(self.entry_point_group):
                if registry_key(ep.name) in self._entries and not force:
                    continue
                try:
                    entry = ep.load()
                except Exception as exc:  # a broken plugin must not break the registry
                    self.note_error(ep.name, f"{type(exc).__name__}: {exc}")
                    continue
                with self._lock:
                    self._entries.setdefault(registry_key(ep.name), entry)
            self._discovered = True

    # -- looking up ------------------------------------------------------------------------------------------------

    def names(self) -> list[str]:
        self.discover()
        with self._lock:
            return sorted(self._entries)

    def items(self) -> list[tuple[str, T]]:
        self.discover()
        with self._lock:
            return sorted(self._entries.items())

    def __contains__(self, name: object) -> bool:
        self.discover()
        with self._lock:
            return isinstance(name, str) and registry_key(name) in self._entries

    def find(self, name: str) -> T | None:
        """The entry, or None (no error) when the name is unknown."""
        self.discover()
        with self._lock:
            return self._entries.get(registry_key(name))

    def get(self, name: str, *, unknown: str | None = None) -> T:
        """The entry ``name``; an unknown or broken name is a :class:`ConfigError` that lists the known ones (or says
        ``unknown``, the caller's own message for a name nobody registered; a broken plugin is always named as such)."""
        self.discover()
        key = registry_key(name)
        with self._lock:
            entry = self._entries.get(key)
            error = self._errors.get(key)
        if entry is not None:
            return entry
        if error is not None:
            raise ConfigError(f"{self.noun} {name!r} could not be loaded: {error}")
        if unknown is not None:
            raise ConfigError(unknown)
        known = ", ".join(self.names()) or "(none registered)"
        raise ConfigError(f"unknown {self.noun} {name!r}; known {self.noun}s: {known}")

    def errors(self) -> dict[str, str]:
        """Entries that failed to load, with the reason."""
        self.discover()
        with self._lock:
            return dict(self._errors)

    # -- tests -----------------------------------------------------------------------------------------------------

    @contextmanager
    def restored(self) -> Iterator[Registry[T]]:
        """Run a block and put the registry back as it was (for tests that register throwaway entries)."""
        self.discover()
        with self._lock:
            entries, errors, discovered = dict(self._entries), dict(self._errors), self._discovered
        try:
            yield self
        finally:
            with self._lock:
                self._entries.clear()
                self._entries.update(entries)
                self._errors.clear()
                self._errors.update(errors)
                self._discovered = discovered

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {len(self._entries)} entries)"


def _same_entry(a: object, b: object) -> bool:
    # Re-registering the same object, or the same class from a re-imported module, is harmless.
    if a is b:
        return True
    return (getattr(a, "__qualname__", None) is not None
            and getattr(a, "__qualname__", None) == getattr(b, "__qualname__", None)
            and getattr(a, "__module__", None) == getattr(b, "__module__", None))


_PLUGINS_LOADED: set[str] = set()
_PLUGINS_LOCK = threading.RLock()


def plugin_modules() -> list[str]:
    """The modules named by the config key ``plugins`` (a list, or a comma-separated string from the environment)."""
    from kgqa import config

    value = config.get("plugins")
    if not value:
        return []
    items = value if isinstance(value, list | tuple) else str(value).split(",")
    return [str(item).strip() for item in items if str(item).strip()]


def load_plugins() -> None:
    """Import each plugin module once; one that fails is a :class:`ConfigError` naming it and where it was named."""
    import importlib

    from kgqa import config

    with _PLUGINS_LOCK:
        for module in plugin_modules():
            if module in _PLUGINS_LOADED:
                continue
            try:
                importlib.import_module(module)
            except Exception as exc:
                _value, origin = config.get_with_origin("plugins")
                raise ConfigError(f"plugin module {module!r} (from {origin}) could not be imported: "
                                  f"{type(exc).__name__}: {exc}") from None
            _PLUGINS_LOADED.add(module)


def _entry_points(group: str) -> list[importlib.metadata.EntryPoint]:
    try:
        return list(importlib.metadata.entry_points(group=group))
    except Exception:  # pragma: no cover - broken metadata of some other distribution
        return []


def import_submodules(package: str, *, registry: Registry[Any], packages_only: bool = True) -> None:
    """Import each (sub)package of ``package`` so its entries register; a failure is noted under the module's name."""
    import importlib
    import pkgutil

    pkg = importlib.import_module(package)
    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name.startswith("_") or (packages_only and not info.ispkg):
            continue
        try:
            importlib.import_module(f"{package}.{info.name}")
        except Exception as exc:
            registry.note_error(info.name, f"{type(exc).__name__}: {exc}")
