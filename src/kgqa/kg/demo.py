"""The demo KG shipped with kgqa (src/kgqa/data/demo): built into the cache directory on first use, then reused."""

from __future__ import annotations

import hashlib
import shutil
from importlib import resources
from pathlib import Path

from kgqa import config
from kgqa.errors import KGQAError
from kgqa.kg.embedded import FORMAT_VERSION, EmbeddedKG, EmbeddedKGBuilder

DEMO_PACKAGE = "kgqa.data.demo"


def demo_files() -> dict[str, Path]:
    root = Path(str(resources.files(DEMO_PACKAGE)))
    return {"triples": root / "triples.tsv", "names": root / "names.tsv", "questions": root / "questions.jsonl"}


def build_demo_kg(out_dir: Path) -> EmbeddedKG:
    from kgqa.kg.loaders import load_into

    files = demo_files()
    builder = EmbeddedKGBuilder(schema="freebase")
    load_into(builder, files["triples"], "tsv", names=files["names"])
    return builder.build(out_dir)


def open_demo_kg() -> EmbeddedKG:
    """Open the demo KG, building it once per content version into ``<cache_dir>/demo-kg-<digest>``.

    The store's format version is part of the digest, so a kgqa that writes a new format builds a fresh copy. A cached
    copy that does not open and answer (a build cut short, a file lost or damaged, another format) is built again.
    """
    target = demo_kg_dir()
    if target.exists():
        kg = _open_sound(target)
        if kg is not None:
            return kg
        shutil.rmtree(target, ignore_errors=True)
    try:
        return build_demo_kg(target)
    except OSError:
        kg = _open_sound(target)  # another process built it at the same moment (its rename won)
        if kg is None:
            raise
        return kg


def _open_sound(target: Path) -> EmbeddedKG | None:
    """The cached demo KG if it opens and finds the first head of the demo triples by id and name, else None."""
    with demo_files()["triples"].open(encoding="utf-8") as fh:
        probe = fh.readline().split("\t", 1)[0]
    try:
        kg = EmbeddedKG.open(target)
        if kg.has_entity(probe) and kg.names([probe]).get(probe) and kg.relations(probe):
            return kg
    except (KGQAError, OSError, ValueError, KeyError, IndexError, TypeError):
        pass
    return None


def demo_kg_dir() -> Path:
    """Where :func:`open_demo_kg` keeps the demo KG of this kgqa version."""
    files = demo_files()
    content = files["triples"].read_bytes() + files["names"].read_bytes() + f"format {FORMAT_VERSION}".encode()
    return config.cache_dir() / f"demo-kg-{hashlib.sha256(content).hexdigest()[:12]}"


def is_demo_kg(kg: object) -> bool:
    """Whether ``kg`` is the demo KG (an embedded KG opened from :func:`demo_kg_dir`)."""
    directory = getattr(kg, "directory", None)
    return directory is not None and Path(directory).resolve() == demo_kg_dir().resolve()
