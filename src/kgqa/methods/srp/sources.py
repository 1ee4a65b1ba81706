"""Where SRP's references come from, and the checks on it.

* **The run's split.** A reference base records the datasets and split it was drawn from (``reference-base.json``:
  ``datasets``, ``split``; a base drawn from a subset of a split also lists the questions it read). :func:`check_split`
  refuses an evaluation on the dataset and split the base comes from: the gold paths and answers of that split's other
  questions would reach the prompts (SRP's paper draws its references from the training set). Unless the run's
  questions are disjoint from the subset the base read, or ``allow_same_split=true`` makes the run a labelled ablation.
* **The demo KG's default base.** ``kgqa ask --method srp`` on the demo KG with no ``references`` uses the artifact
  :data:`DEMO_REFERENCES`, built on first use into the artifact store (``<cache_dir>/artifacts``) from the 61 demo
  questions, their gold chains checked on the demo KG (docs/srp.md). Elsewhere ``kgqa ask`` says that it found none
  and how to build a base, then answers without references (the paper's w/o-references ablation).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kgqa.artifacts.inputs import resolve_embedder
from kgqa.artifacts.kinds import ArtifactInputs, ArtifactKind, Progress, register_artifact
from kgqa.core import Question
from kgqa.errors import ConfigError

#: The demo KG's default reference base (an artifact; ``references=demo`` names it).
DEMO_REFERENCES = "srp-demo-references"
#: The ``references`` value that names the demo KG's default base.
DEMO = "demo"
#: What the demo base is drawn from (its provenance, known before it is built).
DEMO_DATASET, DEMO_SPLIT = "demo", "test"
#: The demo base's draw: the paper's 100 (all 61 demo questions) over 10 clusters, seed 0.
DEMO_SIZE, DEMO_CLUSTERS, DEMO_SEED = 100, 10, 0


def describe_base(references: str | None, base: Any) -> str:
    """The base as a line names it: its directory and what it was drawn from."""
    if references == DEMO:
        where = f" {base.directory}" if base is not None and base.directory is not None else ""
        return f"the default demo reference base{where} (artifact {DEMO_REFERENCES}, drawn from {DEMO_DATASET}/{DEMO_SPLIT})"
    drawn = f"{', '.join(base.datasets) or '?'}/{base.split or '?'}" if base is not None else "?"
    return f"{references} ({drawn}, {len(base) if base is not None else '?'} references)"


def check_split(references: str | None, base: Any, *, dataset: str, split: str, questions: Sequence[Question],
                allow_same_split: bool) -> dict[str, Any]:
    """Check a run of ``dataset``/``split`` (its ``questions``) against the base it reads; returns what config.json
    records (``references``: where they come from and how they relate to the run; ``ablation`` when the run reads
    the gold of its own split). Raises :class:`ConfigError` (one line naming both) when the base was drawn from the
    run's dataset and split, unless the run's questions avoid the subset the base read or ``allow_same_split``."""
    if references == DEMO:
        datasets, base_split, source_ids = [DEMO_DATASET], DEMO_SPLIT, None
    else:
        datasets, base_split, source_ids = base.datasets, base.split, base.source_ids
    name = "the default demo reference base" if references == DEMO else f"the reference base {references}"
    record: dict[str, Any] = {"base": references, "datasets": datasets, "split": base_split}
    shared = {q.id for q in questions} & set(source_ids) if source_ids is not None else set()
    if not datasets or base_split is None:
        relation = "unknown"  # a base that does not say where it comes from cannot be cleared
        why = f"{name} does not record the dataset and split it was drawn from"
    elif dataset not in datasets or split.strip().lower() != base_split.strip().lower():
        return {"references": {**record, "relation": "another dataset or split"}}
    elif source_ids is not None and not shared:
        return {"references": {**record, "relation": f"a subset of the split ({len(source_ids)} questions) "
                                                     "disjoint from the run's questions"}}
    else:
        relation = "the run's split"
        overlap = f" ({len(shared)} of the run's questions among the {len(source_ids)} it read)" if source_ids else ""
        why = f"{name} was drawn from {', '.join(datasets)}/{base_split}{overlap} and this run evaluates {dataset}/{split}"
    if not allow_same_split:
        raise ConfigError(f"srp: {why}: other questions' gold paths and answers would reach the prompts; build the "
                          f"references from another split (kgqa train srp --dataset {dataset} --split OTHER ...) or "
                          "pass --method-config allow_same_split=true to run it as a labelled ablation")
    return {"references": {**record, "relation": relation},
            "ablation": f"srp references from the evaluated split ({why}; allow_same_split=true): other questions' "
                        "gold paths and answers reach the prompts"}


def announce(references: str | None, base: Any, *, use_references: bool, kg_spec: str, say: Callable[[str], None]
             ) -> None:
    """The line ``kgqa ask`` prints about SRP's references."""
    if not use_references:
        say("srp: references off (use_references=false)")
    elif references is not None:
        say(f"srp: references from {describe_base(references, base)}")
    else:
        say(f"srp: no reference base found for KG {kg_spec} (none given with --method-config references=DIR); "
            "answering without references. Build one from a dataset of that KG with: kgqa train srp --dataset NAME "
            f"--split dev --kg {kg_spec} --out DIR, then pass --method-config references=DIR")


def load_demo_base(store: Any, embedder: Any) -> Any:
    """The demo KG's default base for ``embedder`` (built into the artifact store ``store`` on first use)."""
    return store.get(DEMO_REFERENCES, embedder=embedder)


# -- the artifact ----------------------------------------------------------------------------------------------------


def _resolve(params: dict[str, Any]) -> ArtifactInputs:
    from kgqa.kg.demo import demo_files

    embedder = resolve_embedder(params.get("embedder"))
    data = demo_files()["questions"].read_bytes() + demo_files()["triples"].read_bytes()
    settings = {"size": DEMO_SIZE, "clusters": DEMO_CLUSTERS, "seed": DEMO_SEED}
    return ArtifactInputs(params={"embedder": embedder.json},
                          identity={"embedder": embedder.identity, "data": hashlib.sha256(data).hexdigest(),
                                    "settings": settings},
                          describe=lambda: {"data": f"kgqa demo questions ({DEMO_DATASET}/{DEMO_SPLIT}) over the demo "
                                                    "KG", **settings},
                          resources={"embedder": embedder.value})


def _build(inputs: ArtifactInputs, out_dir: Path, progress: Progress) -> dict[str, Any]:
    from kgqa.datasets import load_dataset
    from kgqa.kg.demo import open_demo_kg
    from kgqa.methods.srp.references import ReferenceBase, check_candidates, embedder_spec_of

    embedder = inputs.resources["embedder"]
    questions = load_dataset(DEMO_DATASET, split=DEMO_SPLIT)
    kg = open_demo_kg()
    try:
        candidates, dropped = check_candidates(questions, kg)
    finally:
        kg.close()
    if not candidates:
        raise ConfigError(f"no demo question's gold chain reaches its answers on the demo KG (dropped: {dict(dropped)})")
    progress(f"srp: building the default demo reference base from {len(candidates)} demo questions")
    base = ReferenceBase.build(candidates, embedder, size=DEMO_SIZE, clusters=DEMO_CLUSTERS, seed=DEMO_SEED,
                               embedder_spec=embedder_spec_of(embedder),
                               provenance={"datasets": [DEMO_DATASET], "split": DEMO_SPLIT, "kg": "demo",
                                           "questions": len(questions), "counts_by_reason": dict(dropped),
                                           "command": f"(the {DEMO_REFERENCES} artifact: kgqa artifacts build "
                                                      f"{DEMO_REFERENCES})"})
    base.save(out_dir)
    return {"references": len(base), "candidates": len(candidates)}


def _load(path: Path) -> Any:
    from kgqa.methods.srp.references import ReferenceBase

    return ReferenceBase.load(path)


#: replace: a re-imported module registers an equal recipe again
register_artifact(ArtifactKind(
    name=DEMO_REFERENCES, summary="SRP reference base drawn from the demo questions (the demo KG's default for "
                                  "kgqa ask)", version="1",
    params={"embedder": "embedder spec; default: minilm"}, resolve=_resolve, build=_build, load=_load), replace=True)
