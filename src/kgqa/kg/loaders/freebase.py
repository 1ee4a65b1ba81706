"""The Freebase-flavoured pieces: FB15k-237 (OpenKE id files, compound relations through synthetic CVTs) and the
directory of gold-path triples, names and FB15k-237 that ``freebase-pieces`` loads."""

from __future__ import annotations

import hashlib
import re
import time
from pathlib import Path

from kgqa.errors import DataError
from kgqa.kg.loaders.common import (
    LoadReport,
    Sink,
    _add_triple,
    _BadLine,
    _finish,
    _handle_bad,
    _line_problem,
    _lines,
    _node,
)
from kgqa.kg.loaders.text import _load_tsv_triples

# The Freebase dumps (and files derived from them) escape double quotes inside names.
_ESCAPED_QUOTE_RE = re.compile(r'\\"')


def fb15k_mid(mid: str) -> str:
    """``/m/0abc`` -> ``m.0abc`` (FB15k writes mids as paths)."""
    if mid.startswith("/") and mid.count("/") == 2:
        return mid[1:].replace("/", ".", 1)
    return mid


def fb15k_relation(relation: str) -> tuple[str, ...]:
    """``/a/b/c`` -> ``("a.b.c",)``; a compound ``/film/actor/film./film/performance/film`` (a collapsed CVT) ->
    ``("film.actor.film", "film.performance.film")``."""
    parts = relation.split("./")
    out = []
    for i, part in enumerate(parts):
        text = part if i == 0 else "/" + part
        if not text.startswith("/") or len(text) < 2:
            raise _BadLine(f"relation {relation!r} is not a Freebase path like /a/b/c")
        out.append(text[1:].replace("/", "."))
    return tuple(out)


def synthetic_cvt(head: str, relation: str, tail: str) -> str:
    """The id of the mediator node re-inserted into a compound FB15k-237 relation: deterministic, nameless, and
    inside the Freebase id grammar (``m.cvt_`` + 16 hex digits)."""
    digest = hashlib.blake2b(f"{head}\t{relation}\t{tail}".encode(), digest_size=8).hexdigest()
    return f"m.cvt_{digest}"


def _read_id_table(path: Path, report: LoadReport, skip_bad: bool) -> dict[int, str]:
    """OpenKE ``entity2id.txt`` / ``relation2id.txt``: a count line, then ``name<TAB>id`` lines."""
    table: dict[int, str] = {}
    expected: int | None = None
    for number, line in _lines(path, report, skip_bad):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        if expected is None:
            try:
                expected = int(line.strip())
            except ValueError:
                raise DataError(f"{where}: an OpenKE id file starts with a count line, found {line[:80]!r}") from None
            continue
        parts = line.split("\t") if "\t" in line else line.split()
        try:
            _line_problem(line)
            if len(parts) != 2 or not parts[1].strip().isdigit():
                raise _BadLine("expected name<TAB>integer id")
            name, index = _node(parts[0], "name"), int(parts[1])
            if index in table:
                raise _BadLine(f"id {index} given twice")
        except _BadLine as exc:
            _handle_bad(report, where, str(exc), skip_bad)
            continue
        table[index] = name
    if expected is None:
        raise DataError(f"{path}: empty OpenKE id file")
    if expected != len(table) and not skip_bad:
        raise DataError(f"{path}: the count line says {expected} ids but {len(table)} were listed")
    return table


def load_fb15k237(builder: Sink, directory: Path, *, skip_bad: bool = False,
                  entities: set[str] | None = None) -> LoadReport:
    """FB15k-237 from OpenKE id files (``train2id``/``valid2id``/``test2id``: a count line, then ``head tail relation``
    ids) with ``entity2id.txt`` and ``relation2id.txt``. Mids and relations are normalised to Freebase form; a compound
    relation becomes two triples through a synthetic CVT (:func:`synthetic_cvt`). Names are not loaded here.

    ``entities``, if given, collects every entity id seen (for name filtering).
    """
    started = time.perf_counter()
    directory = Path(directory)
    report = LoadReport("fb15k237")
    ent_path, rel_path = directory / "entity2id.txt", directory / "relation2id.txt"
    report.sources += [str(ent_path), str(rel_path)]
    mids = {i: fb15k_mid(m) for i, m in _read_id_table(ent_path, report, skip_bad).items()}
    relations: dict[int, tuple[str, ...]] = {}
    for i, rel in _read_id_table(rel_path, report, skip_bad).items():
        try:
            relations[i] = fb15k_relation(rel)
        except _BadLine as exc:
            _handle_bad(report, f"{rel_path} (relation id {i})", str(exc), skip_bad)
    for split in ("train2id.txt", "valid2id.txt", "test2id.txt"):
        path = directory / split
        report.sources.append(str(path))
        header_seen = False
        expected = listed = 0
        for number, line in _lines(path, report, skip_bad, sep=None):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            if not header_seen:
                header_seen = True
                try:
                    expected = int(line.strip())
                except ValueError:
                    raise DataError(f"{where}: an OpenKE triple file starts with a count line, "
                                    f"found {line[:80]!r}") from None
                continue
            parts = line.split()
            try:
                if len(parts) != 3 or not all(p.isdigit() for p in parts):
                    raise _BadLine("expected three integer ids 'head tail relation'")
                h, t, r = (int(p) for p in parts)
                if h not in mids or t not in mids:
                    raise _BadLine(f"entity id {h if h not in mids else t} is not in entity2id.txt")
                if r not in relations:
                    raise _BadLine(f"relation id {r} is not in relation2id.txt")
            except _BadLine as exc:
                _handle_bad(report, where, str(exc), skip_bad)
                continue
            listed += 1
            head, tail, hops = mids[h], mids[t], relations[r]
            if entities is not None:
                entities.add(head)
                entities.add(tail)
            if len(hops) == 1:
                _add_triple(builder, report, head, hops[0], tail, skip_bad, where)
                continue
            # A compound relation walks through one mediator per hop boundary (FB15k-237 only has two-hop ones).
            nodes = [head]
            for k in range(len(hops) - 1):
                nodes.append(synthetic_cvt(head, ".".join(hops[: k + 1]) + "|" + ".".join(hops), tail))
                report.synthetic_cvts += 1
            nodes.append(tail)
            for k, hop in enumerate(hops):
                _add_triple(builder, report, nodes[k], hop, nodes[k + 1], skip_bad, where)
        if header_seen and expected != listed and not skip_bad:
            raise DataError(f"{path}: the count line says {expected} triples but {listed} were listed")
    return _finish(report, started)


def _unescape_freebase_name(name: str) -> str:
    return _ESCAPED_QUOTE_RE.sub('"', name)


def load_freebase_pieces(data_dir: Path, builder: Sink, include_fb15k: bool = True, *,
                         skip_bad: bool = False) -> LoadReport:
    """Load the Freebase-flavoured directory (``../shared/data/freebase``) into a Freebase-schema builder.

    * ``goldpath_triples.tsv``: raw Freebase triples with MIDs and CVT nodes (the 4th column, question ids, is ignored);
    * ``fb15k237/`` (if ``include_fb15k``): normalised as in :func:`load_fb15k237`;
    * ``names.tsv`` then ``fb15k237/FB15k_mid2name.txt`` (underscores read as spaces) as a fallback: names only for
      entities that occur in the loaded triples (a name alone would add an edgeless node); ``\\"`` in names is read as
      ``"``. CVT nodes (real and synthetic) stay nameless.
    """
    started = time.perf_counter()
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise DataError(f"{data_dir}: not a directory (expected the Freebase pieces: goldpath_triples.tsv, names.tsv, "
                        "fb15k237/)")
    report = LoadReport("freebase-pieces")
    entities: set[str] = set()
    gold = data_dir / "goldpath_triples.tsv"
    _load_tsv_triples(builder, gold, report, skip_bad, freebase=True, entities=entities)
    report.sources.append(str(gold))
    fb_dir = data_dir / "fb15k237"
    if include_fb15k:
        report.merge(load_fb15k237(builder, fb_dir, skip_bad=skip_bad, entities=entities))
    names_report = LoadReport("names")
    named: set[str] = set()
    _load_freebase_names(builder, data_dir / "names.tsv", names_report, entities, named, skip_bad, fb15k=False)
    mid2name = fb_dir / "FB15k_mid2name.txt"
    if include_fb15k and mid2name.exists():
        _load_freebase_names(builder, mid2name, names_report, entities, named, skip_bad, fb15k=True)
    report.merge(names_report)
    return _finish(report, started)


def _load_freebase_names(builder: Sink, path: Path, report: LoadReport, entities: set[str], named: set[str],
                         skip_bad: bool, *, fb15k: bool) -> None:
    report.sources.append(str(path))
    for number, line in _lines(path, report, skip_bad):
        if not line.strip():
            continue
        parts = line.split("\t", 1)
        try:
            _line_problem(line)
            if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
                raise _BadLine("expected mid<TAB>name")
        except _BadLine as exc:
            _handle_bad(report, f"{path}:{number}", str(exc), skip_bad)
            continue
        mid = fb15k_mid(parts[0].strip()) if fb15k else parts[0].strip()
        if mid not in entities or mid in named:
            continue
        named.add(mid)
        name = parts[1].strip().replace("_", " ") if fb15k else parts[1].strip()
        builder.add_name(mid, _unescape_freebase_name(name))
        report.names += 1
