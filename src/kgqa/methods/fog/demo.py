"""The demo KG's own foresight scorer: trained once, in about a minute and a half, into the artifact store as ``fog-demo-scorer``
(:data:`kgqa.steps.foresight.loading.DEMO_SCORER`, which every method reading a foresight scorer loads on the demo KG:
FoG, and ``chains``, kgqa ask's default) so ``kgqa ask`` works offline with no training step of the user's.

What it trains on (:func:`demo_scorer_questions`):

* the 61 demo questions with their gold chains (``questions.jsonl``), read :data:`DEMO_REPEATS` times an epoch;
* each demo question without a constraint asked again of other entities of the demo KG (:func:`swapped_questions`:
  "In which city was the director of Parasite born?" becomes "... of Jaws born?", the chain run from Jaws on the KG
  for the answers), so the scorer meets each question's relations with many heads and tails and reads the question's
  words rather than remembering which entity answered;
* with every question, a second wording composed from its chain by the demo's phrase table
  (``src/kgqa/data/demo/wordings.toml``, :mod:`kgqa.methods.fog.wordings`): "the composer of", "who scored".

Chosen on the first-use benchmark's dev set, the 61 demo questions and the methods' runs under the oracle reasoner
(``benchmarks/first_use.py``, ``tests/llm/test_oracle.py``), against the earlier recipe (the demo questions and
one-hop questions written from the relations, 40 epochs: five minutes to build) and against training on the questions
:mod:`kgqa.datasets.synthetic` makes from the demo KG (random relation paths worded by the same table or by the
generator): within a minute of training, the swapped demo questions read unseen questions as well (chains: 4 of the
10 dev questions, as the five-minute scorer), and reading the demo questions three times an epoch keeps them answered
(FoG and chains under the oracle: 98 and 85 % of the 61, against 100 and 84 % with the five-minute scorer).
Twelve swaps per question rather than five (issue 52, on the 32 questions of the benchmark's ``dev`` and ``dev2`` sets,
with the answer-type prior below): ``chains`` 22 right against 20, twenty swaps 22 as well in a longer build.

With the scorer, the build trains an answer-type prior on the same questions (``answer_types/`` in the artifact,
:data:`kgqa.steps.foresight.answer_types.BUNDLED`; ten seconds): ``chains`` reads it to choose the answer pattern it
tries first, so "Which country is the director of Gravity from?" ends on a country, not at the director. Its heads
read the question's focus phrase beside the sentence (:data:`TYPE_FOCUS`; "Who directed the films Harrison Ford starred
in?" asks for a person, not a film): on the benchmark's 32 tuning questions the type read first is right for 31
against 29 without it.

The build says what it is building and how long it takes before it starts, then reports each epoch; it is atomic (the
artifact store stages it in a dot-directory and renames it into place), so an interrupted build leaves nothing that
looks built and the next ask builds it again.

It answers the demo questions because it was trained on them: it shows the mechanism, it measures nothing. A scorer
for real work comes from ``kgqa train fog`` on a dataset's dev split (or ``--synthetic`` on any KG).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from importlib import resources
from pathlib import Path
from typing import Any

from kgqa.artifacts.inputs import resolve_embedder
from kgqa.artifacts.kinds import ArtifactInputs, ArtifactKind, Progress, register_artifact
from kgqa.datasets.gold_chains import TrainingQuestion
from kgqa.kg.base import Direction, is_literal, parse_chain
from kgqa.kg.demo import demo_files, open_demo_kg
from kgqa.methods.fog.training import TrainSettings, train_scorer
from kgqa.methods.fog.training.copies import composed_copies
from kgqa.steps.foresight.answer_types import BUNDLED, train_answer_types
from kgqa.steps.foresight.loading import DEMO_SCORER
from kgqa.steps.foresight.scorer import ForesightScorer, LabelVectors

#: Settings for several hundred questions trained in about a minute: more epochs at a higher rate than the paper's 5
#: (which assume thousands of questions), fewer negatives per positive (kappa 3, 2 "stop here" negatives). The phrase
#: table is added at build time (its content is in the artifact's identity, its path is not).
DEMO_SETTINGS = TrainSettings(lr=1e-3, epochs=14, batch_size=64, kappa=3, max_positives_per_layer=4, stop_negatives=2,
                              validation_share=0.0, propagation_questions=61, propagation_epochs=20,
                              propagation_lr=1e-3, seed=0)
#: How often the demo questions themselves are read per epoch (the methods answer them best when the scorer knows them
#: well: FoG under the oracle reasoner, tests/llm/test_oracle.py).
DEMO_REPEATS = 3
#: Each unconstrained demo question asked again of this many other entities.
SWAPS_PER_QUESTION = 12
#: Answers a swapped question may have at most (more: a hub, which says little about the relation asked for).
MAX_SWAP_ANSWERS = 30
#: What the build takes on 2 shared cores with the MiniLM encoder (measured: benchmarks/results/first_use.md), said
#: before it starts.
EXPECTED_SECONDS = 85
WORDINGS = "wordings.toml"
#: Composed wordings of each question the answer-type prior also reads (besides the question as written).
TYPE_COPIES = 2
#: The answer-type prior's focus reading (:func:`kgqa.steps.foresight.answer_types.focus_phrase`): its first rule.
TYPE_FOCUS = "first"


def demo_wordings() -> Path:
    """The demo's phrase table (``src/kgqa/data/demo/wordings.toml``)."""
    return Path(str(resources.files("kgqa.data.demo").joinpath(WORDINGS)))


def _demo_records() -> list[dict[str, Any]]:
    lines = demo_files()["questions"].read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def demo_training_questions() -> list[TrainingQuestion]:
    """The demo questions with their gold chains, as training questions (the topic names as their mentions)."""
    out = []
    for raw in _demo_records():
        if not raw.get("chain"):
            continue
        mentions = tuple(t["name"] for t in raw["topic_entities"] if t.get("name") and t["name"] in raw["question"])
        out.append(TrainingQuestion(raw["question"], tuple(t["id"] for t in raw["topic_entities"]),
                                    parse_chain(raw["chain"]), frozenset(a["id"] for a in raw["answers"] if a.get("id")),
                                    source=raw["id"], mentions=mentions))
    return out


def swapped_questions(kg: Any, *, per_question: int = SWAPS_PER_QUESTION, seed: int = 0) -> list[TrainingQuestion]:
    """Each demo question with one topic, no constraint and its topic's name in its text, asked of ``per_question``
    other named entities its chain's first hop starts from (a seeded sample): the name swapped in the text, the
    answers the chain run from the new topic on ``kg`` (1 to :data:`MAX_SWAP_ANSWERS` of them, never the topic)."""
    rng = random.Random(f"demo-swaps:{seed}")
    starts: dict[tuple[str, Direction], list[str]] = {}
    records = [r for r in _demo_records() if not r.get("constraint") and len(r["topic_entities"]) == 1
               and r["topic_entities"][0].get("name") and r["topic_entities"][0]["name"] in r["question"]]
    wanted = {parse_chain(r["chain"])[0] for r in records}
    for head, relation, tail in kg.iter_triples():
        for hop in wanted:
            if hop.relation == relation:
                node = head if hop.direction is Direction.OUT else tail
                if not is_literal(node):
                    starts.setdefault((relation, hop.direction), []).append(node)
    out: list[TrainingQuestion] = []
    for record in records:
        topic = record["topic_entities"][0]
        chain = parse_chain(record["chain"])
        candidates = sorted(set(starts.get((chain[0].relation, chain[0].direction), [])) - {topic["id"]})
        rng.shuffle(candidates)
        made = 0
        for entity in candidates:
            if made >= per_question:
                break
            name = kg.names([entity]).get(entity)
            answers = [a for a in kg.run_chain([entity], chain).entities if a != entity] if name else []
            if not answers or len(answers) > MAX_SWAP_ANSWERS:
                continue
            out.append(TrainingQuestion(record["question"].replace(topic["name"], name), (entity,), chain,
                                        frozenset(answers), source=f"swap:{record['id']}", mentions=(name,)))
            made += 1
    return out


def demo_scorer_questions(kg: Any) -> list[TrainingQuestion]:
    """Everything the demo scorer trains on (see the module docstring), the demo questions first (the propagation
    phase trains on the first :attr:`TrainSettings.propagation_questions`), :data:`DEMO_REPEATS` times."""
    return demo_training_questions() * DEMO_REPEATS + swapped_questions(kg)


def _resolve(params: dict[str, Any]) -> ArtifactInputs:
    embedder = resolve_embedder(params.get("embedder"))
    files = demo_files()
    data = files["questions"].read_bytes() + files["triples"].read_bytes() + demo_wordings().read_bytes()
    recipe = {"settings": DEMO_SETTINGS.to_dict(), "repeats": DEMO_REPEATS, "swaps": SWAPS_PER_QUESTION,
              "max_swap_answers": MAX_SWAP_ANSWERS, "questions": "demo + swapped", "answer_types": TYPE_COPIES,
              "answer_type_focus": TYPE_FOCUS}
    return ArtifactInputs(params={"embedder": embedder.json},
                          identity={"embedder": embedder.identity, "data": hashlib.sha256(data).hexdigest(),
                                    **recipe},
                          describe=lambda: {"data": "kgqa demo questions over the demo KG, swapped and composed"},
                          resources={"embedder": embedder.value})


def _build(inputs: ArtifactInputs, out_dir: Path, progress: Progress) -> dict[str, Any]:
    embedder = inputs.resources["embedder"]
    kg = open_demo_kg()
    try:
        questions = demo_scorer_questions(kg)
        progress(f"training the demo KG's foresight scorer on {len(questions)} questions, once: about "
                 f"{EXPECTED_SECONDS} s on 2 cores (then kept in the artifact store; an interrupted build keeps "
                 "nothing, and the next ask starts it again)")
        labels = LabelVectors(kg, embedder)
        settings = dataclasses.replace(DEMO_SETTINGS, composed_wordings=str(demo_wordings()))
        result = train_scorer(kg, questions, labels, settings=settings, encoder=str(inputs.params["embedder"]),
                              progress=progress)
        counts: dict[str, int] = {}
        for q in questions:
            kind = q.source.split(":", 1)[0] if ":" in q.source else "demo"
            counts[kind] = counts.get(kind, 0) + 1
        result.scorer.save(out_dir, {"trained_on": f"demo questions ({counts.get('demo', 0) // DEMO_REPEATS}, read "
                                                   f"{DEMO_REPEATS} times) and the same asked of "
                                                   f"other entities ({counts.get('swap', 0)}), each also worded by "
                                                   "the demo phrase table",
                                     "history": result.history, "summary": result.summary})
        progress("training the demo KG's answer-type prior on the same questions (about 10 s)")
        rng = random.Random(f"demo-answer-types:{DEMO_SETTINGS.seed}")
        copies = [text for _ in range(TYPE_COPIES) for text in composed_copies(questions, str(demo_wordings()), rng)]
        types = train_answer_types(kg, questions, embedder, encoder=str(inputs.params["embedder"]), copies=copies,
                                   seed=DEMO_SETTINGS.seed, focus=True, focus_rule=TYPE_FOCUS)
        types.save(out_dir / BUNDLED)
    finally:
        kg.close()
    return {"questions": result.summary["questions"], "seconds": round(result.summary["seconds"], 1)}


#: replace: a re-imported module registers an equal recipe again
register_artifact(ArtifactKind(
    name=DEMO_SCORER, summary="FoG scorer trained on the demo questions (the demo KG's default FoG scorer), with its "
    "answer-type prior", version="9",
    params={"embedder": "embedder spec; default: minilm"}, resolve=_resolve, build=_build,
    load=ForesightScorer.load), replace=True)
