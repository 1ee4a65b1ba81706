"""Cut a Freebase RDF dump down to what KGQA queries, in one streaming pass with constant memory.

Google's last dump (``freebase-rdf-latest.gz``, 2015) is gzipped N-Triples with tab-separated terms: 22 GB gzipped,
250 GB uncompressed, about 1.9 billion triples by Google's count. Much of it is never asked by KGQA methods:
namespace keys, names and descriptions in dozens of languages, review bookkeeping, blobs and web links. Loading only
the rest makes a Freebase endpoint faster to build and smaller on disk.

A line is kept unless a rule drops it, in this order:

1. a predicate outside ``http://rdf.freebase.com/ns/`` (``rdf:type``, ``rdfs:label``, ``owl:*``: duplicates or schema
   glue, never asked in the ``ns:`` form the seed papers' SPARQL uses) is dropped, unless ``keep_foreign`` or a keep
   rule names it;
2. a predicate matching a keep rule (``--keep``) is kept whatever the drop rules say;
3. a predicate matching a drop rule (:data:`DEFAULT_DROPS` plus ``--drop``) is dropped;
4. a literal object tagged with a language not in ``languages`` (default ``en``; ``en-gb`` counts as ``en``) is dropped;
   untagged and typed literals are kept.

Nothing is decided per entity, so CVT (mediator) nodes keep every edge, and ``type.object.name`` / ``common.topic.alias``
stay in English. Kept lines are written as standard N-Triples (``<s> <p> <o> .``, single spaces); the output is
gzipped when its name ends in ``.gz`` and appears only when the pass finishes (it is written to ``OUT.part`` first).
"""

from __future__ import annotations

import gzip
import io
import os
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kgqa.errors import ConfigError, DataError

__all__ = ["DEFAULT_DROPS", "DEFAULT_KEEPS", "FREEBASE_NS", "FilterReport", "FilterRules", "filter_freebase", "filter_lines"]

FREEBASE_NS = "http://rdf.freebase.com/ns/"

#: Predicates (Freebase ids; a trailing ``.`` is a whole domain or type) dropped by default, each for a reason a KGQA
#: method never needs: they are bulky and no seed paper's SPARQL asks them. Checked against the gold reasoning paths of
#: about 1,000 WebQSP and 1,000 CWQ questions (../shared/data/freebase/goldpath_triples.tsv): none of their 8,823
#: triples is dropped (``user.*`` domains and ``common.topic.image`` occur on a few gold paths, so they stay).
DEFAULT_DROPS: dict[str, str] = {
    "type.object.key": "namespace keys (/wikipedia/en_id/..., /authority/...): lookup paths, not facts",
    "type.object.permission": "write permissions of the old Freebase site",
    "type.object.attribution": "who made an edit",
    "freebase.valuenotation.": "review bookkeeping (has_value, is_reviewed)",
    "freebase.user_profile.": "user accounts of the old site",
    "dataworld.": "data-loading provenance (gardening hints, mass operations)",
    "common.topic.topic_equivalent_webpage": "web links to other sites",
    "common.topic.webpage": "web link mediators",
    "common.document.": "article blobs behind descriptions",
    "common.licensed_object.": "licence records of blobs",
    "type.content.": "blob content metadata",
    "type.content_import.": "import records of blobs",
}

#: Kept although a default drop rule matches: ``split_to`` points from a split topic to its parts, and it is on a gold
#: path of the shared WebQSP/CWQ data.
DEFAULT_KEEPS: tuple[str, ...] = ("dataworld.gardening_hint.split_to",)


@dataclass(frozen=True)
class FilterRules:
    """What to keep. ``drops`` and ``keeps`` are predicate prefixes as Freebase ids (``common.topic.description``) or
    full IRIs; ``languages`` the language tags of literals that stay."""

    languages: tuple[str, ...] = ("en",)
    drops: tuple[str, ...] = tuple(DEFAULT_DROPS)
    keeps: tuple[str, ...] = DEFAULT_KEEPS
    keep_foreign: bool = False

    @classmethod
    def default(cls, *, languages: Iterable[str] = ("en",), drops: Iterable[str] = (), keeps: Iterable[str] = (),
                default_drops: bool = True, keep_foreign: bool = False) -> FilterRules:
        """The default rules plus ``drops`` and ``keeps`` (``default_drops=False`` starts from no drop rule)."""
        langs = tuple(lang.strip().lower() for lang in languages if lang.strip())
        if not langs:
            raise ConfigError("at least one language must be kept (--lang en)")
        base_drops, base_keeps = (tuple(DEFAULT_DROPS), DEFAULT_KEEPS) if default_drops else ((), ())
        return cls(languages=langs, drops=(*base_drops, *(d.strip() for d in drops if d.strip())),
                   keeps=(*base_keeps, *(k.strip() for k in keeps if k.strip())), keep_foreign=keep_foreign)

    def compiled(self) -> _Compiled:
        def iris(prefixes: tuple[str, ...]) -> tuple[bytes, ...]:
            return tuple((p if "://" in p else FREEBASE_NS + p).encode() for p in prefixes)

        return _Compiled(drops=iris(self.drops), keeps=iris(self.keeps),
                         languages=tuple(lang.encode() for lang in self.languages), keep_foreign=self.keep_foreign)


@dataclass(frozen=True)
class _Compiled:
    drops: tuple[bytes, ...]
    keeps: tuple[bytes, ...]
    languages: tuple[bytes, ...]
    keep_foreign: bool


@dataclass
class FilterReport:
    """Counts of one pass: lines read, kept, dropped per reason, and the time it took."""

    read: int = 0
    kept: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    input_bytes: int = 0
    output_bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"read": self.read, "kept": self.kept, "dropped": dict(self.dropped.most_common()),
                "seconds": round(self.seconds, 3), "input_bytes": self.input_bytes,
                "output_bytes": self.output_bytes}


_NS = FREEBASE_NS.encode()


def _split(line: bytes) -> tuple[bytes, bytes, bytes] | None:
    """Subject, predicate and object terms of an N-Triples line (tab- or space-separated), or None if malformed.
    IRIs cannot contain ``>`` or whitespace, so the first two terms end at their ``>``."""
    if not line.startswith(b"<"):
        return None
    s_end = line.find(b">")
    p_start = line.find(b"<", s_end)
    if s_end < 0 or p_start < 0 or line[s_end + 1:p_start].strip():
        return None
    p_end = line.find(b">", p_start)
    if p_end < 0:
        return None
    obj = line[p_end + 1:].strip()
    if not obj.endswith(b"."):
        return None
    obj = obj[:-1].rstrip()
    if not obj:
        return None
    return line[:s_end + 1], line[p_start:p_end + 1], obj


def _language(obj: bytes) -> bytes | None:
    """The lower-cased language tag of a literal term (``"x"@en-GB`` -> ``en-gb``), else None."""
    if not obj.startswith(b'"'):
        return None
    close = obj.rfind(b'"')
    if close <= 0 or obj[close + 1:close + 2] != b"@":
        return None
    return obj[close + 2:].lower()


def filter_lines(lines: Iterable[bytes], out: IO[bytes], rules: FilterRules, report: FilterReport | None = None,
                 *, tick: int = 0, on_tick: Any = None) -> FilterReport:
    """Filter N-Triples ``lines`` (bytes) into ``out``; the counts go to ``report``. ``on_tick()`` is called every
    ``tick`` lines (the progress bar)."""
    report = report or FilterReport()
    compiled = rules.compiled()
    drops, keeps, languages, keep_foreign = compiled.drops, compiled.keeps, compiled.languages, compiled.keep_foreign
    dropped = report.dropped
    write = out.write
    read = kept = 0
    for raw in lines:
        read += 1
        if tick and read % tick == 0 and on_tick is not None:
            on_tick()
        line = raw.strip()
        if not line or line.startswith(b"#"):
            dropped["blank or comment"] += 1
            continue
        parts = _split(line)
        if parts is None:
            dropped["malformed line"] += 1
            continue
        subject, predicate, obj = parts
        iri = predicate[1:-1]
        if keeps and iri.startswith(keeps):
            pass
        elif not iri.startswith(_NS):
            if not keep_foreign:
                dropped["predicate outside ns:"] += 1
                continue
        elif drops and iri.startswith(drops):
            for rule in drops:
                if iri.startswith(rule):
                    name = rule[len(_NS):] if rule.startswith(_NS) else rule
                    dropped["predicate " + name.decode(errors="replace")] += 1
                    break
            continue
        lang = _language(obj)
        if lang is not None and not any(lang == want or lang.startswith(want + b"-") for want in languages):
            dropped["literal in another language"] += 1
            continue
        write(subject + b" " + predicate + b" " + obj + b" .\n")
        kept += 1
    report.read += read
    report.kept += kept
    return report


class _Counting(io.RawIOBase):
    """A raw reader that counts the (compressed) bytes read, for a progress bar on the input file."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self.raw.readinto(buffer)  # type: ignore[attr-defined]
        self.count += n or 0
        return n or 0


def filter_freebase(dump: str | os.PathLike[str], out: str | os.PathLike[str], rules: FilterRules | None = None, *,
                    progress: bool = True) -> FilterReport:
    """Stream ``dump`` (gzipped or plain N-Triples) through ``rules`` into ``out`` (gzipped if it ends in .gz).

    Memory does not grow with the dump: lines are read, judged and written one at a time through fixed buffers, and the
    report holds one counter per rule. The progress bar follows the compressed bytes read.
    """
    rules = rules or FilterRules()
    source, target = Path(dump), Path(out)
    if not source.is_file():
        raise ConfigError(f"dump {source} does not exist")
    if target.resolve() == source.resolve():
        raise ConfigError("--out must differ from the dump")
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(target.name + ".part")
    total = source.stat().st_size
    report = FilterReport(input_bytes=total)
    started = time.perf_counter()
    with source.open("rb") as raw_file:
        magic = raw_file.read(2)
        raw_file.seek(0)
        counting = _Counting(raw_file)
        buffered = io.BufferedReader(counting, buffer_size=1 << 20)
        reader: IO[bytes] = gzip.GzipFile(fileobj=buffered) if magic == b"\x1f\x8b" else buffered  # type: ignore[assignment]
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=total, unit="B", unit_scale=True, desc=f"filtering {source.name}", leave=False)
        last = 0

        def tick() -> None:
            nonlocal last
            if bar is not None:
                bar.update(counting.count - last)
                last = counting.count

        try:
            with part.open("wb") as plain:
                sink: IO[bytes] = gzip.GzipFile(fileobj=plain, mode="wb", compresslevel=4) \
                    if target.name.endswith(".gz") else plain  # type: ignore[assignment]
                with io.BufferedWriter(sink, buffer_size=1 << 20) as out_fh:  # type: ignore[arg-type]
                    filter_lines(reader, out_fh, rules, report, tick=100_000, on_tick=tick)
                if sink is not plain:
                    sink.close()
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            part.unlink(missing_ok=True)
            raise DataError(f"cannot read {source}: {exc}") from None
        except BaseException:
            part.unlink(missing_ok=True)
            raise
        finally:
            tick()
            if bar is not None:
                bar.close()
    os.replace(part, target)
    report.seconds = time.perf_counter() - started
    report.output_bytes = target.stat().st_size
    return report
