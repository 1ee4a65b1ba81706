"""FoG's trainers: the foresight scorer (``kgqa train fog``), the answer-type prior (``kgqa train answer-types``) and
scorers combined into one (``kgqa train ensemble``). Each is a :class:`~kgqa.methods.trainer.Trainer` whose settings
are the command's options.

``kgqa train fog --dataset metaqa-1hop --dataset metaqa-2hop --dataset metaqa-3hop --split dev --kg KG --out MODELDIR``
writes MODELDIR/weights.pt, scorer.json (network shape, encoder, settings, history), config.json (the training
configuration), history.json, loss.png, MODEL_CARD.md and scorer-phase.pt (where the scorer phase ended: ``kgqa train
fog --reuse-scorer-phase MODELDIR --out NEWDIR [propagation options]`` trains the propagation phase again alone). Use
it with ``--method-config scorer=MODELDIR``. ``kgqa train fog --synthetic --kg KG --out MODELDIR [--questions N]``
trains on questions generated from the KG itself instead of (or beside) a dataset's (:mod:`kgqa.datasets.synthetic`).
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any, Literal

from kgqa.errors import ConfigError
from kgqa.methods.fog.model_card import ensemble_card, plot_history, scorer_card
from kgqa.methods.trainer import (
    Trainer,
    TrainerSettings,
    TrainingReport,
    TrainingSession,
    flag_of,
    kg_spec,
    new_out_dir,
    setting,
)
from kgqa.provenance import source_commit

_DATA_DIR_HELP = "Benchmark data directory (default: KGQA_DATA_DIR or the config's data_dir)."


class ScorerSettings(TrainerSettings):
    """``kgqa train fog``: the foresight scorer's training (the defaults are kgqa's recipe; docs/fog.md)."""

    dataset: list[str] = setting([], metavar="NAME", help="Training dataset (repeatable; required unless --synthetic, "
                                 "or --reuse-scorer-phase gives them).")
    synthetic: bool = setting(False, help="Train on questions generated from the KG itself (relation paths of 1-3 hops "
                              "sampled from it, worded from its relation labels; no labelled question), beside any "
                              "--dataset (kgqa.datasets.synthetic; docs/fog.md).")
    questions: int = setting(5000, ge=1, help="With --synthetic: how many questions to generate.")
    synthetic_hops: str = setting("1:1,2:1,3:1", metavar="MIX", help="With --synthetic: the mix of entity hops, as "
                                  "hops:weight pairs (a CVT hop counts one).")
    paraphrase_llm: str | None = setting(None, metavar="SPEC", help="With --synthetic: reword every generated question "
                                         "by this model (one call each; a reply that fails the checks keeps the "
                                         "question as generated, counted).")
    split: str = setting("dev", help="Split to train on (MetaQA's train split is not in the data directory: dev is "
                                     "the protocol here).")
    kg: str | None = setting(None, help="The KG (an embedded directory, a SPARQL URL, demo); default: the configured "
                                        "kg.")
    out: Path = setting(help="Model directory to write.", directory=True)
    encoder: str = setting("minilm", help="Frozen text encoder (an embedder spec: minilm, hash, st:MODEL_NAME).")
    lr: float = setting(1e-3, gt=0, lt=1, help="AdamW learning rate (the paper's 1e-5 is too slow for a 384-d "
                                               "encoder; docs/fog.md).")
    epochs: int = setting(5, ge=1, help="Scorer epochs (early stopping on validation).")
    propagation_epochs: int = setting(5, ge=0, help="Propagation epochs.")
    propagation_questions: int = setting(3000, ge=0, help="Questions whose expanded subgraphs train the propagation.")
    propagation_lr: float | None = setting(None, gt=0, lt=1, help="AdamW learning rate of the propagation phase "
                                                                  "(default: --lr).")
    propagation_weighting: Literal["edge", "question"] = setting(
        "edge", help="Propagation loss and early stopping as a mean over edges, or over questions (each subgraph's "
                     "mean edge loss, so hub-heavy subgraphs do not dominate; docs/fog.md).")
    propagation_select: Literal["loss", "answers"] = setting(
        "loss", help="Keep the propagation epoch with the lowest validation loss, or with the best graph-mode "
                     "answers on the validation questions (hit, then Hits@1; docs/fog.md).")
    propagation_seed: int | None = setting(
        None, help="Reseed the propagation phase (its subgraph sample, order and dropout); default: --seed's "
                   "generators go on from the scorer phase. With --reuse-scorer-phase, trains another propagation of "
                   "the same scorer.")
    batch_size: int = setting(512, ge=1, help="Triples per batch.")
    kappa: int = setting(10, ge=1, help="Negatives per positive triple.")
    stop_negatives: int = setting(3, ge=0, help="Extra negatives per (relation, direction) leading on from a gold "
                                                "answer (0: none).")
    hidden: int = setting(128, ge=8, help="Hidden size of the network (a multiple of 4).")
    limit: int | None = setting(None, ge=1, help="Questions per dataset, a random sample seeded by --seed (default: "
                                                 "all).")
    validation_share: float = setting(0.05, ge=0, lt=0.5, help="Share of the questions held out for validation and "
                                                               "early stopping.")
    validation_by: Literal["question", "template"] = setting(
        "question", help="Hold out a share of the questions, or of the question templates (topic abstracted): the "
                         "latter validates on wordings the scorer never saw.")
    validation_fold: int | None = setting(
        None, metavar="K", help="Hold out fold K (from 0) of round(1 / --validation-share) fixed folds of the "
        "templates (or questions) instead of a share drawn by --seed: ensemble members given different folds never "
        "hold out the same template (docs/fog.md).")
    word_dropout: float = setting(0.0, ge=0, lt=1, help="Share of each question's words deleted or masked in an "
                                  "augmented copy the scorer also trains on (0: none; docs/fog.md).")
    composed_wordings: str | None = setting(
        None, metavar="TABLE", help="Phrase table composing one more copy of every question from its relation chain, "
        "in other words than the dataset's templates: a packaged name (metaqa) or a TOML file (docs/fog.md).")
    template_wordings: str | None = setting(
        None, metavar="TEMPLATES", help="Question templates per relation chain writing one more copy of every question "
        "in another author's words: a packaged name (metaqa) or a JSON file (docs/fog.md).")
    synonyms: str | None = setting(
        None, metavar="WORDNET", help="One more copy of every question with words swapped for WordNet synonyms: "
        "'wordnet' (KGQA_WORDNET or /usr/share/wordnet, Debian's wordnet-base) or a WordNet database directory "
        "(docs/fog.md).")
    synonym_share: float = setting(0.5, gt=0, le=1, help="Probability of swapping each word that has a synonym, in "
                                                         "the --synonyms copy.")
    question_weight: float = setting(
        1.0, gt=0, help="With copies (--word-dropout, --composed-wordings, --template-wordings, --synonyms): how often "
        "a triple reads its question as written against once for each kind of copy (1: uniformly).")
    seed: int = setting(0, help="Seed of the sample, the split and the training.")
    data_dir: Path | None = setting(None, directory=True, help=_DATA_DIR_HELP)
    reuse_scorer_phase: Path | None = setting(
        None, metavar="MODELDIR", directory=True, help="Train the propagation phase alone, from where MODELDIR's "
        "scorer phase ended (its scorer-phase.pt): the datasets, limit, seed, encoder and scorer settings are "
        "MODELDIR's, the propagation options this command's; --kg defaults to MODELDIR's KG (docs/fog.md).")


#: The scorer-phase settings a reused phase keeps (``--reuse-scorer-phase``): the rest are this run's.
SCORER_PHASE_SETTINGS = ("dataset", "split", "encoder", "lr", "epochs", "batch_size", "kappa", "stop_negatives",
                         "hidden", "limit", "validation_share", "validation_by", "validation_fold", "word_dropout",
                         "composed_wordings", "template_wordings", "synonyms", "synonym_share", "question_weight",
                         "seed", "synthetic", "questions", "synthetic_hops", "paraphrase_llm")


class ScorerTrainer(Trainer):
    """Train FoG's foresight scorer on the gold paths of DATASETs and write MODELDIR."""

    name = "fog"
    summary = "FoG's foresight scorer, trained on the gold relation chains of benchmark questions"
    Settings = ScorerSettings

    def check(self, settings: ScorerSettings) -> None:
        if settings.reuse_scorer_phase is None and not settings.dataset and not settings.synthetic:
            raise ConfigError("give --dataset (repeatable), --synthetic (questions made from the KG), or "
                              "--reuse-scorer-phase MODELDIR to train on its datasets")
        if settings.paraphrase_llm is not None and not settings.synthetic:
            raise ConfigError("--paraphrase-llm rewords the generated questions: it needs --synthetic")
        if settings.synthetic:
            from kgqa.datasets.synthetic import parse_hop_mix

            parse_hop_mix(settings.synthetic_hops)
        if settings.hidden % 4:
            raise ConfigError(f"--hidden must be a multiple of 4 (the network's attention heads), got {settings.hidden}")
        if settings.validation_fold is not None:
            from kgqa.methods.fog.training import check_validation_fold

            check_validation_fold(settings.validation_fold, settings.validation_share, name="--validation-fold")
        _check_wordings(settings.composed_wordings, settings.template_wordings)
        if settings.synonyms:
            from kgqa.methods.fog.wordings.synonyms import WordNet

            WordNet.load(settings.synonyms)  # a missing database is a one-line error before any work

    def train(self, settings: ScorerSettings, session: TrainingSession) -> TrainingReport:
        from kgqa.steps.foresight.scorer import _torch

        _torch()  # a clear error when torch is missing, before anything imports it
        from kgqa.methods.fog.training import ScorerPhase

        reused = None
        if settings.reuse_scorer_phase is not None:
            reused = _reused_scorer_phase(Path(settings.reuse_scorer_phase).expanduser(), settings, session.given)
            settings = settings.model_copy(update={**reused["settings"], "kg": settings.kg or reused["kg"]})
        out = new_out_dir(settings.out)
        spec = kg_spec(settings.kg)
        scorer_phase = ScorerPhase.load(settings.reuse_scorer_phase) if reused else None
        started = time.perf_counter()
        result, data, training_settings, net, validation, synthetic = _train(settings, spec, scorer_phase, session)
        training = {"command": session.command, "datasets": list(settings.dataset), "split": settings.split,
                    "limit": settings.limit, "kg": spec, "encoder": settings.encoder, "synthetic": synthetic,
                    "settings": training_settings.to_dict(), "net": net.to_dict(), "data": data.describe(),
                    "kgqa_commit": source_commit(), "seconds": round(time.perf_counter() - started, 1),
                    "scorer_phase_from": reused and {"model": reused["model"], "command": reused["command"],
                                                     "kgqa_commit": reused["kgqa_commit"]}}
        held_out = [data.questions[i].source for i in result.summary.pop("validation_ids", [])]
        out.mkdir(parents=True, exist_ok=True)
        result.scorer.save(out, {"trained_on": training, "history": result.history, "summary": result.summary,
                                 "validation": validation, "validation_questions": held_out,
                                 "training_questions": [q.source for q in data.questions]})
        if result.scorer_phase is not None:
            result.scorer_phase.save(out)
        (out / "config.json").write_text(json.dumps(training, indent=2) + "\n", encoding="utf-8")
        (out / "history.json").write_text(json.dumps(result.history, indent=2) + "\n", encoding="utf-8")
        plotted = plot_history(result.history, out / "loss.png")
        (out / "MODEL_CARD.md").write_text(scorer_card(training, result.history, result.summary, validation, plotted),
                                           encoding="utf-8")
        return TrainingReport(out, (f"wrote {out} ({training['seconds']:.0f} s); use it with --method fog "
                                    f"--method-config scorer={out}",))


def _train(settings: ScorerSettings, spec: str, scorer_phase: Any, session: TrainingSession) -> tuple[Any, ...]:
    """Read (or generate) the training questions, train on the KG ``spec`` and validate: (result, data, settings, net,
    validation, what the synthetic questions were or None)."""
    from kgqa.artifacts import ArtifactStore
    from kgqa.datasets.gold_chains import TrainingSet, training_questions
    from kgqa.kg import open_kg
    from kgqa.methods.fog.training import TrainSettings, train_scorer, validate_answers
    from kgqa.steps.foresight.model import NetSpec
    from kgqa.steps.foresight.scorer import LabelVectors
    from kgqa.text import load_embedder

    say = session.say
    data = TrainingSet()
    if settings.dataset:
        data = training_questions(list(settings.dataset), settings.split, limit=settings.limit,
                                  data_dir=None if settings.data_dir is None else str(settings.data_dir),
                                  seed=settings.seed)
        say(f"{len(data.questions)} questions with gold chains ({data.per_dataset}; skipped {dict(data.skipped)})")
    kg = open_kg(spec)
    synthetic = None
    try:
        if settings.synthetic:
            synthetic = _synthetic_questions(settings, kg, data, say)
        embedder = load_embedder(settings.encoder)
        table = None
        if hasattr(kg, "iter_names"):
            table = ArtifactStore(progress=say).get("label-embeddings", kg=kg, embedder=embedder)
        labels = LabelVectors(kg, embedder, table)
        training_settings = TrainSettings(**{name: getattr(settings, name) for name in TRAIN_SETTINGS})
        net = NetSpec(input_dim=int(embedder.dim), hidden=settings.hidden)
        result = train_scorer(kg, data.questions, labels, settings=training_settings, net_spec=net,
                              encoder=settings.encoder, progress=say, bar=session.bar, scorer_phase=scorer_phase)
        say("answering the validation questions in graph mode")
        validation = validate_answers(kg, result.scorer, labels, result.summary["validation_ids"], data.questions)
        say(f"validation (graph mode, {validation['questions']} questions): hit {validation['hit']:.1f}, "
            f"Hits@1 {validation['hits1']:.1f}, F1 {validation['f1']:.1f}")
    finally:
        kg.close()
    return result, data, training_settings, net, validation, synthetic


def _synthetic_questions(settings: ScorerSettings, kg: Any, data: Any, say: Any) -> dict[str, Any]:
    """Generate the --synthetic questions from ``kg`` into ``data``; what was asked for and made (config.json)."""
    from kgqa.datasets.synthetic import SyntheticSettings, parse_hop_mix, synthetic_questions

    llm = None
    if settings.paraphrase_llm is not None:
        from kgqa import llm as llms

        llm = llms.load(settings.paraphrase_llm)
    made = synthetic_questions(kg, SyntheticSettings(questions=settings.questions, seed=settings.seed,
                                                     hop_mix=parse_hop_mix(settings.synthetic_hops)), progress=say)
    if llm is not None:
        from kgqa.steps.paraphrase import answer_names_from, paraphrase_all

        paraphrase_all(llm, made, progress=say, answer_names=answer_names_from(kg))
    if not made.questions:
        raise ConfigError(f"--synthetic: no question could be made from {kg_spec(settings.kg)} (see the reasons above)")
    data.questions.extend(made.questions)
    data.per_dataset["synthetic"] = len(made.questions)
    return {"requested": settings.questions, "hops": settings.synthetic_hops, "paraphrase_llm": settings.paraphrase_llm,
            "seed": settings.seed, **made.describe()}


#: The command's settings that are the training loop's own (kgqa.methods.fog.training.TrainSettings), by name.
TRAIN_SETTINGS = ("lr", "epochs", "batch_size", "kappa", "seed", "stop_negatives", "validation_share", "validation_by",
                  "validation_fold", "word_dropout", "composed_wordings", "template_wordings", "synonyms",
                  "synonym_share", "question_weight", "propagation_epochs", "propagation_questions", "propagation_lr",
                  "propagation_weighting", "propagation_select", "propagation_seed")


def _reused_scorer_phase(source: Path, settings: ScorerSettings, given: frozenset[str]) -> dict[str, Any]:
    """The scorer-phase settings of the model in ``source``, its KG and provenance; a setting given on this command line
    with another value is an error, as the reused phase was trained with its own."""
    try:
        recorded = json.loads((source / "config.json").read_text(encoding="utf-8"))
        trained = recorded["settings"]
        values: dict[str, Any] = {"dataset": list(recorded["datasets"]), "split": recorded["split"],
                                  "encoder": recorded["encoder"], "hidden": recorded["net"]["hidden"],
                                  "limit": recorded["limit"]}
        synthetic = recorded.get("synthetic") or {}
        fields = ScorerSettings.model_fields
        values |= {"synthetic": bool(synthetic),
                   "questions": synthetic.get("requested", fields["questions"].default),
                   "synthetic_hops": synthetic.get("hops", fields["synthetic_hops"].default),
                   "paraphrase_llm": synthetic.get("paraphrase_llm")}
        from kgqa.methods.fog.training import TrainSettings

        defaults = TrainSettings().to_dict()  # settings added after the model was written: their defaults
        values |= {name: trained[name] if name in trained else defaults[name] for name in SCORER_PHASE_SETTINGS
                   if name not in values}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"--reuse-scorer-phase {source}: its config.json cannot be read ({type(exc).__name__}: "
                          f"{exc}); only a directory written by `kgqa train fog` can be reused") from None
    for name in SCORER_PHASE_SETTINGS:
        mine = getattr(settings, name)
        if name in given and mine != values[name]:
            shown = " ".join(mine) if name == "dataset" else mine
            raise ConfigError(f"{flag_of(ScorerSettings, name)} {shown}: the reused scorer phase ({source}) was "
                              f"trained with {values[name]!r}; leave the option out (a reused phase keeps its own "
                              "settings)")
    return {"settings": values, "kg": recorded.get("kg"), "model": str(source), "command": recorded.get("command"),
            "kgqa_commit": recorded.get("kgqa_commit")}


def _check_wordings(table: str | None, templates: str | None) -> None:
    """A bad phrase table or template file is a one-line error before any work."""
    if table:
        from kgqa.methods.fog.wordings import ChainWordings

        ChainWordings.load(table)
    if templates:
        from kgqa.methods.fog.wordings.templates import ChainTemplates

        ChainTemplates.load(templates)


def _none_word(value: str | None) -> str | None:
    """A wordings option where "none" (any case) means none."""
    return None if value is None or value.lower() == "none" else value


class AnswerTypesSettings(TrainerSettings):
    """``kgqa train answer-types``: FoG's answer-type prior (kgqa's addition)."""

    dataset: list[str] = setting([], metavar="NAME", help="Training dataset (repeatable; required unless --like "
                                                          "gives them).")
    split: str = setting("dev", help="Split to train on.")
    like: Path | None = setting(None, metavar="SCORERDIR", directory=True, help="Train on the questions a FoG scorer "
                                "(or every member of an ensemble) trained on or held out, with its datasets and split, "
                                "so its unseen questions stay unseen here too.")
    limit: int | None = setting(None, ge=1, help="Questions per dataset, a random sample seeded by --seed (default: "
                                                 "all).")
    kg: str | None = setting(None, help="The KG whose relations are typed (default: --like's KG or the configured kg).")
    encoder: str | None = setting(None, help="Frozen text encoder (default: --like's, else minilm).")
    composed_wordings: str = setting("none", metavar="TABLE", help="Phrase table composing one more wording of every "
                                     "question from its chain (metaqa, a TOML file, or none).")
    template_wordings: str = setting("none", metavar="TEMPLATES", help="Question templates per chain writing one more "
                                     "wording of every question (metaqa, a JSON file, or none).")
    containment: float = setting(0.7, gt=0, le=1, help="Two relation ends are one type when at least this share of "
                                 "the entities sampled at one can be reached at the other (either way round).")
    question_weight: float = setting(1.0, gt=0, help="How much a question in its own wording weighs in the loss "
                                                     "against one composed or template copy.")
    focus_phrase: bool = setting(False, help="Also read each question's focus phrase (its wh-word and the words around "
                                             "it) beside the whole sentence.")
    focus_rule: Literal["first", "clause"] = setting("first", help="How --focus-phrase finds the phrase: the first "
                                                     "wh-word (first), or a request verb or wh-word where a clause "
                                                     "opens (clause).")
    fine_tune: bool = setting(False, help="Also fine-tune a copy of the encoder to read the answer type in place of the "
                                          "answer head (minilm or st:FOLDER; the copy is saved in OUT/reader).")
    fine_tune_wordings: str | None = setting(None, metavar="TEMPLATES", help="With --fine-tune: templates the reader "
                                             "also learns from, every template once (metaqa_many2, a JSON file, or "
                                             "none; default: --template-wordings).")
    fine_tune_epochs: int = setting(2, ge=1, help="With --fine-tune: epochs.")
    fine_tune_lr: float = setting(5e-5, gt=0, lt=1, help="With --fine-tune: learning rate.")
    seed: int = setting(0, help="Seed of the sample and the training.")
    data_dir: Path | None = setting(None, directory=True, help=_DATA_DIR_HELP)
    out: Path = setting(help="Model directory to write.", directory=True)


class AnswerTypesTrainer(Trainer):
    """Train FoG's answer-type prior: the types of the KG's relation ends and a classifier of the type a question asks
    for (kgqa's addition; use with --method-config answer_types=OUT; docs/fog.md)."""

    name = "answer-types"
    summary = "FoG's answer-type prior (kgqa's addition): the KG's end types and a question classifier"
    Settings = AnswerTypesSettings

    def check(self, settings: AnswerTypesSettings) -> None:
        if settings.fine_tune_wordings is not None and not settings.fine_tune:
            raise ConfigError("--fine-tune-wordings needs --fine-tune")
        new_out_dir(settings.out)
        if settings.like is None and not settings.dataset:
            raise ConfigError("give --dataset (one or more) or --like SCORERDIR")
        _check_wordings(_none_word(settings.composed_wordings), _none_word(settings.template_wordings))

    def train(self, settings: AnswerTypesSettings, session: TrainingSession) -> TrainingReport:
        from kgqa.datasets.gold_chains import training_questions
        from kgqa.kg import open_kg
        from kgqa.methods.fog.training import composed_copies, template_copies
        from kgqa.steps.foresight.answer_types import train_answer_types
        from kgqa.steps.foresight.type_reader import ReaderSettings
        from kgqa.text import load_embedder

        settings, wanted, synthetic = _like(settings)
        out = new_out_dir(settings.out)
        encoder = settings.encoder or "minilm"
        table, templates = _none_word(settings.composed_wordings), _none_word(settings.template_wordings)
        reader = reader_templates = None
        reader_wordings: list[Any] = []
        if settings.fine_tune:
            reader = ReaderSettings(epochs=settings.fine_tune_epochs, lr=settings.fine_tune_lr, seed=settings.seed)
            reader_templates = templates if settings.fine_tune_wordings is None else _none_word(settings.fine_tune_wordings)
            reader_wordings = _reader_wordings(encoder, reader_templates)
        spec = kg_spec(settings.kg)
        started = time.perf_counter()
        questions = []
        if settings.dataset:
            data = training_questions(list(settings.dataset), settings.split,
                                      limit=None if wanted is not None else settings.limit,
                                      data_dir=None if settings.data_dir is None else str(settings.data_dir),
                                      seed=settings.seed)
            questions = [q for q in data.questions if wanted is None or q.source in wanted]
            session.say(f"{len(questions)} questions with gold chains"
                        + (f" (those {settings.like} trained on)" if wanted is not None else ""))
        kg = open_kg(spec)
        try:
            if synthetic:  # a scorer trained on questions made from the KG: the same questions, made again
                from kgqa.datasets.synthetic import SyntheticSettings, parse_hop_mix, synthetic_questions

                made = synthetic_questions(kg, SyntheticSettings(questions=int(synthetic["requested"]),
                                                                 seed=int(synthetic["seed"]),
                                                                 hop_mix=parse_hop_mix(synthetic["hops"])),
                                           progress=session.say)
                questions += [q for q in made.questions if wanted is None or q.source in wanted]
                session.say(f"{len(questions)} questions in all, synthetic ones made again from the KG as "
                            f"{settings.like} trained on them")
            copies = composed_copies(questions, table, random.Random(f"{settings.seed}:composed")) if table else []
            if templates:
                copies += template_copies(questions, templates, random.Random(f"{settings.seed}:templates"))
            model = train_answer_types(kg, questions, load_embedder(encoder), encoder=encoder, copies=copies,
                                       seed=settings.seed, containment=settings.containment,
                                       question_weight=settings.question_weight, focus=settings.focus_phrase,
                                       focus_rule=settings.focus_rule, reader=reader, reader_wordings=reader_wordings,
                                       progress=session.say)
        finally:
            kg.close()
        model.meta["trained_on"] = {"command": session.command, "datasets": list(settings.dataset),
                                    "synthetic": synthetic,
                                    "split": settings.split, "kg": spec,
                                    "like": None if settings.like is None else str(settings.like),
                                    "composed_wordings": table, "template_wordings": templates,
                                    "kgqa_commit": source_commit(),
                                    **({"reader_wordings": reader_templates} if reader is not None else {}),
                                    "seconds": round(time.perf_counter() - started, 1)}
        model.save(out)
        return TrainingReport(out, (f"wrote {out} ({model.meta['trained_on']['seconds']:.0f} s); use it with --method "
                                    f"fog --method-config answer_types={out}",))


def _like(settings: AnswerTypesSettings) -> tuple[AnswerTypesSettings, set[str] | None, dict[str, Any] | None]:
    """With ``--like``: the settings completed from the scorer's training (datasets, split, KG, encoder, unless given),
    the questions it trained on or held out, and how its synthetic questions were made (``kgqa train fog
    --synthetic``; None when it had none); else the settings, None and None."""
    if settings.like is None:
        return settings, None, None
    from kgqa.steps.foresight.scorer import load_scorer

    try:
        scorer = load_scorer(settings.like)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--like {settings.like}: not a FoG scorer or ensemble directory ({exc})") from None
    wanted: set[str] = set()
    update: dict[str, Any] = {}
    synthetic: dict[str, Any] | None = None
    for member in scorer.members:
        trained_on = member.meta.get("trained_on") or {}
        made = trained_on.get("synthetic")
        if made:
            if made.get("paraphrase_llm"):
                raise ConfigError(f"--like {settings.like}: its synthetic questions were reworded by "
                                  f"{made['paraphrase_llm']}, which cannot be repeated here; give --dataset instead")
            if synthetic is not None and synthetic != made:
                raise ConfigError(f"--like {settings.like}: its members were trained on different synthetic questions")
            synthetic = made
        wanted.update(member.meta.get("training_questions") or [])
        update.setdefault("dataset", settings.dataset or list(trained_on.get("datasets") or ()))
        update.setdefault("split", trained_on.get("split") or settings.split)
        update.setdefault("kg", settings.kg or trained_on.get("kg"))
        update.setdefault("encoder", settings.encoder or trained_on.get("encoder"))
    if not wanted:
        raise ConfigError(f"--like {settings.like}: the scorer does not list its training questions")
    return settings.model_copy(update=update), wanted, synthetic


def _reader_wordings(encoder: str, templates: str | None) -> list[Any]:
    """Every template of ``templates`` once, masked, with the end its chain reaches (what the fine-tuned reader also
    learns from); checks first that ``encoder`` can be fine-tuned (before minutes of embedding)."""
    from kgqa.steps.foresight.answer_types import MASK, hop_end
    from kgqa.steps.foresight.type_reader import transformer_path

    transformer_path(encoder)
    if not templates:
        return []
    from kgqa.methods.fog.wordings.templates import ChainTemplates

    return [(text.replace("{topic}", MASK), hop_end(chain[-1]))
            for chain, options in ChainTemplates.load(templates).templates.items() for text in options]


class EnsembleSettings(TrainerSettings):
    """``kgqa train ensemble``: trained scorers combined into one."""

    member: list[Path] = setting(help="A trained scorer directory (`kgqa train fog --out DIR`); repeat for each "
                                      "member.", directory=True)
    out: Path = setting(help="Ensemble directory to write.", directory=True)


class EnsembleTrainer(Trainer):
    """Combine trained FoG scorers (e.g. the same command with other --seed values) into one ensemble directory: the
    mean of their scores, used like a scorer with --method-config scorer=OUT (docs/fog.md)."""

    name = "ensemble"
    summary = "FoG scorers combined into one ensemble (the mean of their scores)"
    Settings = EnsembleSettings

    def check(self, settings: EnsembleSettings) -> None:
        if len(settings.member) < 2:
            raise ConfigError(f"an ensemble needs at least two --member directories, got {len(settings.member)}")
        new_out_dir(settings.out)
        paths = [Path(m).expanduser().resolve() for m in settings.member]
        if len(set(paths)) < len(paths):
            raise ConfigError("--member: the same directory is given twice")

    def train(self, settings: EnsembleSettings, session: TrainingSession) -> TrainingReport:
        from kgqa.steps.foresight.scorer import ENSEMBLE, ForesightScorer, ScorerEnsemble

        out = new_out_dir(settings.out)
        paths = [Path(m).expanduser().resolve() for m in settings.member]
        loaded = ScorerEnsemble([ForesightScorer.load(p) for p in paths])  # checks each member and the shared encoder
        out.mkdir(parents=True, exist_ok=True)
        (out / ENSEMBLE).write_text(json.dumps({"members": [str(p) for p in paths]}, indent=2) + "\n",
                                    encoding="utf-8")
        (out / "MODEL_CARD.md").write_text(ensemble_card(paths, loaded, source_commit()), encoding="utf-8")
        return TrainingReport(out, (f"wrote {out} ({len(paths)} members); use it with --method fog --method-config "
                                    f"scorer={out}",))


#: FoG's trainers, in the order ``kgqa train --help`` lists them.
TRAINERS: tuple[type[Trainer], ...] = (ScorerTrainer, AnswerTypesTrainer, EnsembleTrainer)
