"""Loaders that stream KG files into an :class:`~kgqa.kg.embedded.EmbeddedKGBuilder`.

Formats (``load_into(builder, source, fmt)``; ``guess_format(path)`` picks one from the file name):

* ``metaqa``: WikiMovies/MetaQA ``head|relation|tail``; ids are the labels and each entity is named by its label.
* ``tsv``: ``head<TAB>relation<TAB>tail[<TAB>ignored...]``; a field that starts with ``"`` is a literal in N-Triples
  form. Under the Freebase schema a bare number or date in the tail (``1967``, ``1967-05-01``) is a literal too.
* ``nt``, ``nq``, ``ttl``, ``trig``: RDF through pyoxigraph. IRIs become ids through the schema, the schema's name
  predicates become names (not edges), blank nodes become ``_:bN`` ids (nameless, so they act as CVT nodes), named graphs
  are merged.
* ``freebase-pieces``: the Freebase-flavoured directory (gold-path triples, names.tsv, FB15k-237), see
  :func:`load_freebase_pieces`.

Modules: :mod:`~kgqa.kg.loaders.common` (reports, line reading, field checks, the bad-line rule),
:mod:`~kgqa.kg.loaders.text` (``metaqa``, ``tsv``, names), :mod:`~kgqa.kg.loaders.rdf` (pyoxigraph formats),
:mod:`~kgqa.kg.loaders.freebase` (FB15k-237 and the Freebase pieces); this package picks one by format.

Every loader reads line by line (or through pyoxigraph's streaming parser) and returns a :class:`LoadReport`. A bad line
raises :class:`~kgqa.errors.DataError` naming ``file:line`` and the problem; with ``skip_bad=True`` it is counted and
skipped instead.

A field (id, relation, literal or name) longer than ``max_field_chars`` characters (default 1,048,576 = 1 MiB of ASCII)
is such a bad line. Raise the limit with ``load_into(..., max_field_chars=N)``, ``KGQA_MAX_FIELD_CHARS=N`` or
``max_field_chars = N`` in the config file (:func:`~kgqa.kg.loaders.common.max_field_chars`); the store itself takes
fields of any length in time linear in their bytes.
"""

from __future__ import annotations

import time
from pathlib import Path

from kgqa.errors import ConfigError
from kgqa.kg.loaders.common import (
    DEFAULT_MAX_FIELD_CHARS,
    MAX_KEPT_ERRORS,
    LoadReport,
    Sink,
    _check_file,
    _open_binary,
    field_limit,
    max_field_chars,
)
from kgqa.kg.loaders.freebase import fb15k_mid, fb15k_relation, load_fb15k237, load_freebase_pieces, synthetic_cvt
from kgqa.kg.loaders.rdf import RDF_FORMATS, load_rdf
from kgqa.kg.loaders.text import load_metaqa, load_names_tsv, load_tsv

FORMATS = ("metaqa", "tsv", "nt", "ttl", "nq", "trig", "freebase-pieces")
_SUFFIXES = {".nt": "nt", ".ntriples": "nt", ".ttl": "ttl", ".turtle": "ttl", ".nq": "nq", ".nquads": "nq",
             ".trig": "trig", ".tsv": "tsv"}


def guess_format(path: Path) -> str:
    """Guess a loader format from a path: a directory with ``goldpath_triples.tsv`` is ``freebase-pieces``, RDF and
    ``.tsv`` go by extension (``.gz`` ignored), a ``.txt`` file by its first non-blank line (``a|b|c`` = ``metaqa``)."""
    path = Path(path)
    if path.is_dir():
        if (path / "goldpath_triples.tsv").is_file():
            return "freebase-pieces"
        raise ConfigError(f"{path} is a directory but not the Freebase pieces (no goldpath_triples.tsv); "
                          "name a file, or pass --format")
    name = path.name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    suffix = Path(name).suffix
    if suffix in _SUFFIXES:
        return _SUFFIXES[suffix]
    if suffix in (".txt", ".csv", "") and path.is_file():
        with _open_binary(path) as fh:
            for raw in fh:
                line = raw.decode("utf-8", errors="replace").strip()
                if not line:
                    continue
                if "\t" in line and len(line.split("\t")) >= 3:
                    return "tsv"
                if "\t" not in line and len(line.split("|")) == 3:
                    return "metaqa"
                break
    raise ConfigError(f"cannot guess the format of {path}; pass one of: {', '.join(FORMATS)}")


def load_into(builder: Sink, source: Path, fmt: str, *, names: Path | None = None, skip_bad: bool = False,
              max_field_chars: int | None = None) -> LoadReport:
    """Load ``source`` in format ``fmt`` (one of :data:`FORMATS`; ``freebase-pieces`` takes the directory) into
    ``builder``; ``names`` is an optional ``id<TAB>name`` file loaded afterwards (any format). ``max_field_chars``
    overrides the configured longest field (see the package docstring)."""
    with field_limit(max_field_chars):
        return _load_into(builder, source, fmt, names=names, skip_bad=skip_bad)


def _load_into(builder: Sink, source: Path, fmt: str, *, names: Path | None, skip_bad: bool) -> LoadReport:
    started = time.perf_counter()
    source = Path(source)
    key = (fmt or "").strip().lower()
    aliases = {"ntriples": "nt", "n-triples": "nt", "turtle": "ttl", "nquads": "nq", "n-quads": "nq",
               "freebase": "freebase-pieces", "wikimovies": "metaqa"}
    key = aliases.get(key, key)
    if key not in FORMATS:
        raise ConfigError(f"unknown KG file format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if key == "freebase-pieces":
        report = load_freebase_pieces(source, builder, skip_bad=skip_bad)
    else:
        _check_file(source)
        if key == "metaqa":
            report = load_metaqa(builder, source, skip_bad=skip_bad)
        elif key == "tsv":
            report = load_tsv(builder, source, skip_bad=skip_bad)
        else:
            report = load_rdf(builder, source, key, skip_bad=skip_bad)
    if names is not None:
        load_names_tsv(builder, Path(names), skip_bad=skip_bad, report=report)
    report.seconds = time.perf_counter() - started
    return report


__all__ = [
    "DEFAULT_MAX_FIELD_CHARS", "FORMATS", "MAX_KEPT_ERRORS", "RDF_FORMATS", "LoadReport", "Sink", "fb15k_mid",
    "fb15k_relation", "field_limit", "guess_format", "load_fb15k237", "load_freebase_pieces", "load_into", "load_metaqa",
    "load_names_tsv", "load_rdf", "load_tsv", "max_field_chars", "synthetic_cvt",
]
