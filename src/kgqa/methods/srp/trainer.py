"""SRP's trainer: ``kgqa train srp`` builds the reference base (:mod:`kgqa.methods.srp.references`) SRP's planner reads
as worked examples, from the checked gold chains of a dataset's questions (docs/srp.md)."""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kgqa.core import Question
from kgqa.errors import ConfigError
from kgqa.methods.srp.references import META_FILE
from kgqa.methods.trainer import Trainer, TrainerSettings, TrainingReport, TrainingSession, kg_spec, setting
from kgqa.provenance import source_commit

if TYPE_CHECKING:
    from kgqa.methods.srp.references import ReferenceBase


def _quiet(message: str) -> None:
    """Says nothing (the default progress of :func:`draw_reference_base`)."""


class ReferenceBaseSettings(TrainerSettings):
    """``kgqa train srp``: which questions the base draws from, and how many by k-means clusters."""

    dataset: list[str] = setting(metavar="NAME", help="Dataset to draw references from (repeatable: the base draws "
                                                      "from the union).")
    split: str = setting("dev", help="Split to draw from (the demo dataset has only test); evaluate on another one: "
                                     "kgqa eval refuses a run on the split its references come from.")
    kg: str | None = setting(None, help="The KG the gold chains are checked on (an embedded directory, a SPARQL URL, "
                                        "demo); default: the configured kg.")
    out: Path = setting(help="Directory to write the base to.", directory=True)
    size: int = setting(100, ge=1, help="References in the base (over all datasets).")
    clusters: int = setting(10, ge=1, help="k-means clusters; each gives an equal share.")
    seed: int = setting(0, help="Seed of k-means and of the draw within clusters.")
    data_dir: Path | None = setting(None, directory=True, help="Benchmark data directory (default: KGQA_DATA_DIR or "
                                                               "the config's data_dir).")
    embedder: str = setting("minilm", help="Embedder of the questions (minilm, hash, hash:DIM); SRP retrieves with the "
                                           "same one.")


class ReferenceBaseTrainer(Trainer):
    """Build SRP's reference base: solved questions of DATASETs whose gold chain reaches a gold answer on the KG,
    clustered by k-means with an equal share per cluster (docs/srp.md)."""

    name = "srp"
    summary = "SRP's reference base: solved questions whose gold chain reaches a gold answer on the KG"
    Settings = ReferenceBaseSettings

    def check(self, settings: ReferenceBaseSettings) -> None:
        if settings.clusters > settings.size:
            raise ConfigError(f"--clusters must be between 1 and --size ({settings.size}), got {settings.clusters}")
        out = Path(settings.out).expanduser()
        if out.exists() and not out.is_dir():
            raise ConfigError(f"--out {out}: exists and is not a directory")
        if out.is_dir() and any(out.iterdir()):
            if (out / META_FILE).is_file():
                raise ConfigError(f"--out {out}: holds a reference base already; remove it first or choose another "
                                  "directory (an existing base is never overwritten)")
            raise ConfigError(f"--out {out}: the directory exists and is not empty (choose a new one)")

    def train(self, settings: ReferenceBaseSettings, session: TrainingSession) -> TrainingReport:
        from kgqa.datasets import load_dataset

        out = Path(settings.out).expanduser()
        spec = kg_spec(settings.kg)
        names = list(dict.fromkeys(settings.dataset))
        data_dir = None if settings.data_dir is None else str(settings.data_dir)
        loaded = [(name, load_dataset(name, split=settings.split, data_dir=data_dir)) for name in names]
        started = time.perf_counter()
        base = draw_reference_base(loaded, split=settings.split, kg=spec, embedder=settings.embedder,
                                   size=settings.size, clusters=settings.clusters, seed=settings.seed,
                                   command=_rebuild_command(names, settings, spec, out), say=session.say)
        seconds = round(time.perf_counter() - started, 1)
        base.info["seconds"]["total"] = seconds
        base.save(out)
        info = base.info
        dropped = info["counts_by_reason"]
        lines = [f"questions: {info['questions']} in {', '.join(names)} ({settings.split})",
                 f"kept: {info['candidates']} candidates (the gold chain reaches a gold answer on the KG)"]
        lines += [f"dropped: {count} ({reason})"
                  for reason, count in sorted(dropped.items(), key=lambda item: (-item[1], item[0]))] or ["dropped: none"]
        lines += [f"clusters: {info['clusters']} (asked for {settings.clusters}); candidates per cluster: "
                  f"{' '.join(map(str, info['cluster_sizes']))}",
                  f"references per cluster: {' '.join(map(str, info['cluster_shares']))} "
                  f"(total {len(base)}, asked for {settings.size})",
                  f"wrote {out} ({seconds:.0f} s); use it with --method srp --method-config references={out} on "
                  f"another split than {settings.split} (kgqa eval refuses the split the base was drawn from)"]
        return TrainingReport(out, tuple(lines))


def draw_reference_base(loaded: Sequence[tuple[str, Sequence[Question]]], *, split: str, kg: str, embedder: str,
                        size: int = 100, clusters: int = 10, seed: int = 0, subset: str | None = None,
                        command: str | None = None, say: Callable[[str], None] = _quiet) -> ReferenceBase:
    """The reference base drawn from ``loaded`` ((dataset, its questions of ``split``) pairs): every question whose gold
    chain reaches a gold answer on KG ``kg`` is a candidate, embedded with ``embedder`` and clustered (docs/srp.md).
    ``subset`` says how the questions were chosen when they are not the whole split (e.g. "the 5000 questions a seeded
    sample draws"); the base then lists their ids (``source-ids.txt``), so a run on the rest of the split is allowed.
    """
    from kgqa.methods.srp.references import ReferenceBase
    from kgqa.text import load_embedder

    names = [name for name, _ in loaded]
    started = time.perf_counter()
    candidates, dropped, per_dataset, asked = _checked_candidates(loaded, split, kg, say)
    checked = time.perf_counter() - started
    model = load_embedder(embedder)
    say(f"embedding {len(candidates)} questions with {embedder} and clustering them")
    provenance: dict[str, Any] = {
        "datasets": names, "split": split, "kg": kg, "questions": asked, "counts_by_reason": dropped,
        "per_dataset": per_dataset, "command": command or "(drawn from Python: kgqa.methods.srp.trainer."
                                                          "draw_reference_base)", "kgqa_commit": source_commit()}
    if subset is not None:
        provenance["source_ids"] = {"how": subset}
    base = ReferenceBase.build(candidates, model, size=size, clusters=clusters, seed=seed, embedder_spec=embedder,
                               provenance=provenance)
    if subset is not None:
        base.source_ids = list(dict.fromkeys(q.id for _, questions in loaded for q in questions))
    base.info["seconds"] = {"check": round(checked, 1), "total": round(time.perf_counter() - started, 1)}
    return base


def _checked_candidates(loaded: Sequence[tuple[str, Sequence[Question]]], split: str, spec: str,
                        say: Callable[[str], None]) -> tuple[list[Any], dict[str, int], dict[str, dict[str, Any]], int]:
    """The reference candidates of every dataset (its questions whose gold chain reaches a gold answer on the KG), the
    counts dropped by reason, the counts per dataset and how many questions were read."""
    from kgqa.kg import open_kg
    from kgqa.methods.srp.references import check_candidates

    candidates: list[Any] = []
    dropped: dict[str, int] = {}
    per_dataset: dict[str, dict[str, Any]] = {}
    kg = open_kg(spec)
    try:
        for name, questions in loaded:
            kept, counts = check_candidates(list(questions), kg)
            say(f"{name} ({split}): {len(questions)} questions, {len(kept)} kept; dropped {dict(counts) or 'none'}")
            if not kept:
                raise ConfigError(f"dataset {name!r} ({split}): no question's gold chain reaches a gold answer "
                                  f"on KG {spec} (dropped: {dict(counts)}); is it the dataset's KG?")
            per_dataset[name] = {"questions": len(questions), "kept": len(kept), "dropped": dict(counts)}
            candidates.extend(kept)
            for reason, count in counts.items():
                dropped[reason] = dropped.get(reason, 0) + count
    finally:
        kg.close()
    return candidates, dropped, per_dataset, sum(len(q) for _, q in loaded)


def _rebuild_command(names: list[str], settings: ReferenceBaseSettings, spec: str, out: Path) -> str:
    """The command as run with every setting spelled out (defaults and the configured KG included), to rebuild the base."""
    return " ".join(["kgqa train srp", *(f"--dataset {shlex.quote(n)}" for n in names),
                     f"--split {shlex.quote(settings.split)}", f"--kg {shlex.quote(spec)}",
                     f"--out {shlex.quote(str(out))}", f"--size {settings.size}", f"--clusters {settings.clusters}",
                     f"--seed {settings.seed}", f"--embedder {shlex.quote(settings.embedder)}",
                     *([f"--data-dir {shlex.quote(str(settings.data_dir))}"] if settings.data_dir else [])])


#: SRP's trainers.
TRAINERS: tuple[type[Trainer], ...] = (ReferenceBaseTrainer,)
