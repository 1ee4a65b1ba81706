"""``kgqa train``: train what a method loads (``kgqa train fog``: FoG's foresight scorer) into a model directory, or
build it (``kgqa train srp``: SRP's reference base; ``kgqa train ensemble``: scorers combined into one; ``kgqa train
answer-types``: FoG's answer-type prior, MODELDIR/answer_types.json).

``kgqa train fog --dataset metaqa-1hop --dataset metaqa-2hop --dataset metaqa-3hop --split dev --kg KG --out MODELDIR``
writes MODELDIR/weights.pt, scorer.json (network shape, encoder, settings, history), config.json (the training
configuration), history.json, loss.png, MODEL_CARD.md and scorer-phase.pt (where the scorer phase ended: ``kgqa train
fog --reuse-scorer-phase MODELDIR --out NEWDIR [propagation options]`` trains the propagation phase again alone). Use
it with ``--method-config scorer=MODELDIR``.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from kgqa import config as kgqa_config
from kgqa.errors import ConfigError


@click.group("train")
def train_group() -> None:
    """Train or build what methods load (FoG's foresight scorer and answer types, SRP's reference base)."""


@train_group.command("fog")
@click.option("--dataset", "datasets", multiple=True, help="Training dataset (repeatable; required unless "
                                                             "--reuse-scorer-phase gives them).")
@click.option("--split", default="dev", show_default=True, help="Split to train on (MetaQA's train split is not "
                                                                "in the data directory: dev is the protocol here).")
@click.option("--kg", "kg_spec", default=None, help="The KG (an embedded directory, a SPARQL URL, demo); default: "
                                                    "the configured kg.")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Model directory to write.")
@click.option("--encoder", default="minilm", show_default=True, help="Frozen text encoder (an embedder spec: minilm, "
                                                                      "hash, st:MODEL_NAME).")
@click.option("--lr", type=float, default=1e-3, show_default=True, help="AdamW learning rate (the paper's 1e-5 is "
                                                                         "too slow for a 384-d encoder; docs/fog.md).")
@click.option("--epochs", type=int, default=5, show_default=True, help="Scorer epochs (early stopping on validation).")
@click.option("--propagation-epochs", type=int, default=5, show_default=True, help="Propagation epochs.")
@click.option("--propagation-questions", type=int, default=3000, show_default=True,
              help="Questions whose expanded subgraphs train the propagation.")
@click.option("--propagation-lr", type=float, default=None, help="AdamW learning rate of the propagation phase "
                                                                 "(default: --lr).")
# the choices are training.PROPAGATION_WEIGHTINGS and PROPAGATION_SELECTIONS, written out so the CLI starts without
# importing the trainer
@click.option("--propagation-weighting", type=click.Choice(["edge", "question"]), default="edge", show_default=True,
              help="Propagation loss and early stopping as a mean over edges, or over questions (each subgraph's mean "
                   "edge loss, so hub-heavy subgraphs do not dominate; docs/fog.md).")
@click.option("--propagation-select", type=click.Choice(["loss", "answers"]), default="loss", show_default=True,
              help="Keep the propagation epoch with the lowest validation loss, or with the best graph-mode answers "
                   "on the validation questions (hit, then Hits@1; docs/fog.md).")
@click.option("--propagation-seed", type=int, default=None,
              help="Reseed the propagation phase (its subgraph sample, order and dropout); default: --seed's "
                   "generators go on from the scorer phase. With --reuse-scorer-phase, trains another propagation of "
                   "the same scorer.")
@click.option("--batch-size", type=int, default=512, show_default=True)
@click.option("--kappa", type=int, default=10, show_default=True, help="Negatives per positive triple.")
@click.option("--stop-negatives", type=int, default=3, show_default=True,
              help="Extra negatives per (relation, direction) leading on from a gold answer (0: none).")
@click.option("--hidden", type=int, default=128, show_default=True, help="Hidden size of the network.")
@click.option("--limit", type=int, default=None, help="Questions per dataset, a random sample seeded by --seed "
                                                     "(default: all).")
@click.option("--validation-share", type=float, default=0.05, show_default=True,
              help="Share of the questions held out for validation and early stopping.")
@click.option("--validation-by", type=click.Choice(["question", "template"]), default="question", show_default=True,
              help="Hold out a share of the questions, or of the question templates (topic abstracted): the latter "
                   "validates on wordings the scorer never saw.")
@click.option("--validation-fold", type=int, default=None, metavar="K",
              help="Hold out fold K (from 0) of round(1 / --validation-share) fixed folds of the templates (or "
                   "questions) instead of a share drawn by --seed: ensemble members given different folds never hold "
                   "out the same template (docs/fog.md).")
@click.option("--word-dropout", type=float, default=0.0, show_default=True,
              help="Share of each question's words deleted or masked in an augmented copy the scorer also trains on "
                   "(0: none; docs/fog.md).")
@click.option("--composed-wordings", default=None, metavar="TABLE",
              help="Phrase table composing one more copy of every question from its relation chain, in other words "
                   "than the dataset's templates: a packaged name (metaqa) or a TOML file (docs/fog.md).")
@click.option("--template-wordings", default=None, metavar="TEMPLATES",
              help="Question templates per relation chain writing one more copy of every question in another author's "
                   "words: a packaged name (metaqa) or a JSON file (docs/fog.md).")
@click.option("--synonyms", default=None, metavar="WORDNET",
              help="One more copy of every question with words swapped for WordNet synonyms: 'wordnet' (KGQA_WORDNET "
                   "or /usr/share/wordnet, Debian's wordnet-base) or a WordNet database directory (docs/fog.md).")
@click.option("--synonym-share", type=float, default=0.5, show_default=True,
              help="Probability of swapping each word that has a synonym, in the --synonyms copy.")
@click.option("--question-weight", type=float, default=1.0, show_default=True,
              help="With copies (--word-dropout, --composed-wordings, --template-wordings, --synonyms): how often a "
                   "triple reads its question as written against once for each kind of copy (1: uniformly).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--data-dir", default=None, type=click.Path(file_okay=False),
              help="Benchmark data directory (default: KGQA_DATA_DIR or the config's data_dir).")
@click.option("--reuse-scorer-phase", "reuse_from", default=None, type=click.Path(file_okay=False), metavar="MODELDIR",
              help="Train the propagation phase alone, from where MODELDIR's scorer phase ended (its "
                   "scorer-phase.pt): the datasets, limit, seed, encoder and scorer settings are MODELDIR's, the "
                   "propagation options this command's; --kg defaults to MODELDIR's KG (docs/fog.md).")
def train_fog(datasets: tuple[str, ...], split: str, kg_spec: str | None, out_dir: str, encoder: str, lr: float,
              epochs: int, propagation_epochs: int, propagation_questions: int, propagation_lr: float | None,
              propagation_weighting: str, propagation_select: str, propagation_seed: int | None, batch_size: int,
              kappa: int, stop_negatives: int,
              hidden: int, limit: int | None, validation_share: float, validation_by: str,
              validation_fold: int | None, word_dropout: float, composed_wordings: str | None,
              template_wordings: str | None, synonyms: str | None, synonym_share: float, question_weight: float,
              seed: int, data_dir: str | None, reuse_from: str | None) -> None:
    """Train FoG's foresight scorer on the gold paths of DATASETs and write MODELDIR."""
    from kgqa.artifacts import ArtifactStore
    from kgqa.eval.gold_paths import training_questions
    from kgqa.kg import open_kg
    from kgqa.steps.foresight.scorer import _torch

    _torch()  # a clear error when torch is missing, before anything imports it
    from kgqa.steps.foresight.model import NetSpec
    from kgqa.steps.foresight.scorer import LabelVectors
    from kgqa.steps.foresight.training import ScorerPhase, TrainSettings, train_scorer, validate_answers
    from kgqa.text import load_embedder

    scorer_phase, reused = None, None
    if reuse_from:
        options = {"datasets": datasets, "split": split, "encoder": encoder, "lr": lr, "epochs": epochs,
                   "batch_size": batch_size, "kappa": kappa, "stop_negatives": stop_negatives, "hidden": hidden,
                   "limit": limit, "validation_share": validation_share, "validation_by": validation_by,
                   "validation_fold": validation_fold, "word_dropout": word_dropout,
                   "composed_wordings": composed_wordings, "template_wordings": template_wordings,
                   "synonyms": synonyms, "synonym_share": synonym_share, "question_weight": question_weight,
                   "seed": seed}
        reused = _reused_scorer_phase(Path(reuse_from).expanduser(), options, click.get_current_context())
        kept = reused["options"]  # by name: a model written before an option existed has that option's default
        datasets, split, encoder, lr, epochs = (kept["datasets"], kept["split"], kept["encoder"], kept["lr"],
                                                kept["epochs"])
        batch_size, kappa, stop_negatives, hidden, limit = (kept["batch_size"], kept["kappa"],
                                                            kept["stop_negatives"], kept["hidden"], kept["limit"])
        validation_share, validation_by, validation_fold = (kept["validation_share"], kept["validation_by"],
                                                            kept["validation_fold"])
        word_dropout, composed_wordings, synonyms, synonym_share, seed = (
            kept["word_dropout"], kept["composed_wordings"], kept["synonyms"], kept["synonym_share"], kept["seed"])
        template_wordings, question_weight = kept["template_wordings"], kept["question_weight"]
        kg_spec = kg_spec or reused["kg"]
        scorer_phase = ScorerPhase.load(reuse_from)
    elif not datasets:
        raise ConfigError("give --dataset (repeatable), or --reuse-scorer-phase MODELDIR to train on its datasets")
    for name, value, low in (("--epochs", epochs, 1), ("--batch-size", batch_size, 1), ("--kappa", kappa, 1),
                             ("--hidden", hidden, 8), ("--propagation-epochs", propagation_epochs, 0),
                             ("--propagation-questions", propagation_questions, 0), ("--stop-negatives", stop_negatives, 0)):
        if value < low:
            raise ConfigError(f"{name} must be at least {low}, got {value}")
    if hidden % 4:
        raise ConfigError(f"--hidden must be a multiple of 4 (the network's attention heads), got {hidden}")
    if limit is not None and limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {limit}")
    for name, rate in (("--lr", lr), ("--propagation-lr", propagation_lr)):
        if rate is not None and not 0 < rate < 1:
            raise ConfigError(f"{name} must be between 0 and 1, got {rate}")
    if not 0 <= validation_share < 0.5:
        raise ConfigError(f"--validation-share must be in [0, 0.5), got {validation_share}")
    if validation_fold is not None:  # before any work, not at the split
        from kgqa.steps.foresight.training import check_validation_fold

        check_validation_fold(validation_fold, validation_share, name="--validation-fold")
    if not 0 <= word_dropout < 1:
        raise ConfigError(f"--word-dropout must be in [0, 1), got {word_dropout}")
    if question_weight <= 0:
        raise ConfigError(f"--question-weight must be positive, got {question_weight}")
    if composed_wordings:
        from kgqa.steps.foresight.wordings import ChainWordings

        ChainWordings.load(composed_wordings)  # a bad table is a one-line error before any work
    if template_wordings:
        from kgqa.steps.foresight.wordings.templates import ChainTemplates

        ChainTemplates.load(template_wordings)
    if not 0 < synonym_share <= 1:
        raise ConfigError(f"--synonym-share must be in (0, 1], got {synonym_share}")
    if synonyms:
        from kgqa.steps.foresight.wordings.synonyms import WordNet

        WordNet.load(synonyms)  # a missing database is a one-line error before any work
    out = _new_out_dir(out_dir)
    spec = _kg_spec(kg_spec)
    say = _reporter("train fog")

    started = time.perf_counter()
    data = training_questions(list(datasets), split, limit=limit, data_dir=data_dir, seed=seed)
    say(f"{len(data.questions)} questions with gold chains ({data.per_dataset}; skipped {dict(data.skipped)})")
    kg = open_kg(spec)
    try:
        embedder = load_embedder(encoder)
        table = None
        if hasattr(kg, "iter_names"):
            store = ArtifactStore(progress=say)
            table = store.get("label-embeddings", kg=kg, embedder=embedder)
        labels = LabelVectors(kg, embedder, table)
        settings = TrainSettings(lr=lr, epochs=epochs, batch_size=batch_size, kappa=kappa, seed=seed,
                                 stop_negatives=stop_negatives,
                                 validation_share=validation_share, validation_by=validation_by,
                                 validation_fold=validation_fold,
                                 word_dropout=word_dropout, composed_wordings=composed_wordings,
                                 template_wordings=template_wordings, synonyms=synonyms, synonym_share=synonym_share,
                                 question_weight=question_weight,
                                 propagation_epochs=propagation_epochs,
                                 propagation_questions=propagation_questions, propagation_lr=propagation_lr,
                                 propagation_weighting=propagation_weighting,
                                 propagation_select=propagation_select, propagation_seed=propagation_seed)
        net = NetSpec(input_dim=int(embedder.dim), hidden=hidden)
        result = train_scorer(kg, data.questions, labels, settings=settings, net_spec=net, encoder=encoder,
                              progress=say, bar=sys.stderr.isatty(), scorer_phase=scorer_phase)
        say("answering the validation questions in graph mode")
        validation = validate_answers(kg, result.scorer, labels, result.summary["validation_ids"], data.questions)
        say(f"validation (graph mode, {validation['questions']} questions): hit {validation['hit']:.1f}, "
            f"Hits@1 {validation['hits1']:.1f}, F1 {validation['f1']:.1f}")
    finally:
        kg.close()
    command = _command_line("kgqa train fog")
    training = {"command": command, "datasets": list(datasets), "split": split, "limit": limit, "kg": spec,
                "encoder": encoder, "settings": settings.to_dict(), "net": net.to_dict(), "data": data.describe(),
                "kgqa_commit": _commit(), "seconds": round(time.perf_counter() - started, 1),
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
    plotted = _plot(result.history, out / "loss.png")
    (out / "MODEL_CARD.md").write_text(_card(training, result.history, result.summary, validation, plotted),
                                       encoding="utf-8")
    click.echo(f"wrote {out} ({training['seconds']:.0f} s); use it with --method fog --method-config scorer={out}")


@train_group.command("answer-types")
@click.option("--dataset", "datasets", multiple=True, help="Training dataset (repeatable; required unless --like "
                                                             "gives them).")
@click.option("--split", default="dev", show_default=True, help="Split to train on.")
@click.option("--like", "like", default=None, type=click.Path(file_okay=False), metavar="SCORERDIR",
              help="Train on the questions a FoG scorer (or every member of an ensemble) trained on or held out, "
                   "with its datasets and split, so its unseen questions stay unseen here too.")
@click.option("--limit", type=int, default=None, help="Questions per dataset, a random sample seeded by --seed "
                                                     "(default: all).")
@click.option("--kg", "kg_spec", default=None, help="The KG whose relations are typed (default: --like's KG or "
                                                    "the configured kg).")
@click.option("--encoder", default=None, help="Frozen text encoder (default: --like's, else minilm).")
@click.option("--composed-wordings", default="none", show_default=True, metavar="TABLE",
              help="Phrase table composing one more wording of every question from its chain (metaqa, a TOML file, "
                   "or none).")
@click.option("--template-wordings", default="none", show_default=True, metavar="TEMPLATES",
              help="Question templates per chain writing one more wording of every question (metaqa, a JSON file, "
                   "or none).")
@click.option("--containment", type=float, default=0.7, show_default=True,
              help="Two relation ends are one type when at least this share of the entities sampled at one can be "
                   "reached at the other (either way round).")
@click.option("--question-weight", type=float, default=1.0, show_default=True,
              help="How much a question in its own wording weighs in the loss against one composed or template copy.")
@click.option("--focus-phrase/--no-focus-phrase", "focus", default=False, show_default=True,
              help="Also read each question's focus phrase (its wh-word and the words around it) beside the whole "
                   "sentence.")
@click.option("--focus-rule", type=click.Choice(["first", "clause"]), default="first", show_default=True,
              help="How --focus-phrase finds the phrase: the first wh-word (first), or a request verb or wh-word "
                   "where a clause opens (clause).")
@click.option("--fine-tune/--no-fine-tune", "fine_tune", default=False, show_default=True,
              help="Also fine-tune a copy of the encoder to read the answer type in place of the answer head "
                   "(minilm or st:FOLDER; the copy is saved in OUT/reader).")
@click.option("--fine-tune-wordings", default=None, metavar="TEMPLATES",
              help="With --fine-tune: templates the reader also learns from, every template once (metaqa_many2, a "
                   "JSON file, or none; default: --template-wordings).")
@click.option("--fine-tune-epochs", type=int, default=2, show_default=True, help="With --fine-tune: epochs.")
@click.option("--fine-tune-lr", type=float, default=5e-5, show_default=True, help="With --fine-tune: learning rate.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--data-dir", default=None, type=click.Path(file_okay=False),
              help="Benchmark data directory (default: KGQA_DATA_DIR or the config's data_dir).")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Model directory to write.")
def train_answer_types_command(datasets: tuple[str, ...], split: str, like: str | None, limit: int | None,
                               kg_spec: str | None, encoder: str | None, composed_wordings: str,
                               template_wordings: str, containment: float, question_weight: float,
                               focus: bool, focus_rule: str, fine_tune: bool, fine_tune_wordings: str | None,
                               fine_tune_epochs: int, fine_tune_lr: float, seed: int, data_dir: str | None,
                               out_dir: str) -> None:
    """Train FoG's answer-type prior: the types of the KG's relation ends and a classifier of the type a question
    asks for (kgqa's addition; use with --method-config answer_types=OUT; docs/fog.md)."""
    import random

    from kgqa.eval.gold_paths import training_questions
    from kgqa.kg import open_kg
    from kgqa.steps.foresight.answer_types import MASK, hop_end, train_answer_types
    from kgqa.steps.foresight.training import composed_copies, template_copies
    from kgqa.steps.foresight.type_reader import ReaderSettings, transformer_path
    from kgqa.text import load_embedder

    if not 0 < containment <= 1:
        raise ConfigError(f"--containment must be in (0, 1], got {containment}")
    if question_weight <= 0:
        raise ConfigError(f"--question-weight must be positive, got {question_weight}")
    reader = None
    if fine_tune:
        reader = ReaderSettings(epochs=fine_tune_epochs, lr=fine_tune_lr, seed=seed)
        reader.check()
    elif fine_tune_wordings is not None:
        raise ConfigError("--fine-tune-wordings needs --fine-tune")
    out = _new_out_dir(out_dir)
    wanted: set[str] | None = None
    if like:
        from kgqa.steps.foresight.scorer import load_scorer

        try:
            scorer = load_scorer(like)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"--like {like}: not a FoG scorer or ensemble directory ({exc})") from None
        wanted = set()
        for member in scorer.members:
            trained_on = member.meta.get("trained_on") or {}
            wanted.update(member.meta.get("training_questions") or [])
            datasets = datasets or tuple(trained_on.get("datasets") or ())
            split = trained_on.get("split") or split
            kg_spec = kg_spec or trained_on.get("kg")
            encoder = encoder or trained_on.get("encoder")
        if not wanted:
            raise ConfigError(f"--like {like}: the scorer does not list its training questions")
    if not datasets:
        raise ConfigError("give --dataset (one or more) or --like SCORERDIR")
    table = None if composed_wordings.lower() == "none" else composed_wordings
    if table:
        from kgqa.steps.foresight.wordings import ChainWordings

        ChainWordings.load(table)
    templates = None if template_wordings.lower() == "none" else template_wordings
    if templates:
        from kgqa.steps.foresight.wordings.templates import ChainTemplates

        ChainTemplates.load(templates)
    reader_templates = templates if fine_tune_wordings is None else (
        None if fine_tune_wordings.lower() == "none" else fine_tune_wordings)
    reader_wordings = []
    if reader is not None:
        transformer_path(encoder or "minilm")  # a clear error before minutes of embedding
        if reader_templates:
            from kgqa.steps.foresight.wordings.templates import ChainTemplates

            reader_wordings = [(text.replace("{topic}", MASK), hop_end(chain[-1]))
                               for chain, options in ChainTemplates.load(reader_templates).templates.items()
                               for text in options]
    spec = _kg_spec(kg_spec)
    say = _reporter("train answer-types")

    started = time.perf_counter()
    data = training_questions(list(datasets), split, limit=None if wanted is not None else limit,
                              data_dir=data_dir, seed=seed)
    questions = [q for q in data.questions if wanted is None or q.source in wanted]
    say(f"{len(questions)} questions with gold chains" + (f" (those {like} trained on)" if wanted is not None else ""))
    copies = composed_copies(questions, table, random.Random(f"{seed}:composed")) if table else []
    if templates:
        copies += template_copies(questions, templates, random.Random(f"{seed}:templates"))
    kg = open_kg(spec)
    try:
        model = train_answer_types(kg, questions, load_embedder(encoder or "minilm"), encoder=encoder or "minilm",
                                   copies=copies, seed=seed, containment=containment,
                                   question_weight=question_weight, focus=focus, focus_rule=focus_rule,
                                   reader=reader, reader_wordings=reader_wordings, progress=say)
    finally:
        kg.close()
    command = _command_line("kgqa train answer-types")
    model.meta["trained_on"] = {"command": command, "datasets": list(datasets), "split": split, "kg": spec,
                                "like": like, "composed_wordings": table,
                                "template_wordings": templates, "kgqa_commit": _commit(),
                                **({"reader_wordings": reader_templates} if reader is not None else {}),
                                "seconds": round(time.perf_counter() - started, 1)}
    model.save(out)
    click.echo(f"wrote {out} ({model.meta['trained_on']['seconds']:.0f} s); use it with --method fog "
               f"--method-config answer_types={out}")


@train_group.command("ensemble")
@click.option("--member", "members", multiple=True, required=True, type=click.Path(file_okay=False),
              help="A trained scorer directory (`kgqa train fog --out DIR`); repeat for each member.")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Ensemble directory to write.")
def train_ensemble(members: tuple[str, ...], out_dir: str) -> None:
    """Combine trained FoG scorers (e.g. the same command with other --seed values) into one ensemble directory: the
    mean of their scores, used like a scorer with --method-config scorer=OUT (docs/fog.md)."""
    from kgqa.steps.foresight.scorer import ENSEMBLE, ForesightScorer, ScorerEnsemble

    if len(members) < 2:
        raise ConfigError(f"an ensemble needs at least two --member directories, got {len(members)}")
    out = _new_out_dir(out_dir)
    paths = [Path(m).expanduser().resolve() for m in members]
    if len(set(paths)) < len(paths):
        raise ConfigError("--member: the same directory is given twice")
    loaded = ScorerEnsemble([ForesightScorer.load(p) for p in paths])  # checks each member and the shared encoder
    out.mkdir(parents=True, exist_ok=True)
    (out / ENSEMBLE).write_text(json.dumps({"members": [str(p) for p in paths]}, indent=2) + "\n", encoding="utf-8")
    lines = ["# FoG scorer ensemble", "", f"- Encoder (shared): `{loaded.encoder}`", f"- kgqa commit: {_commit()}",
             "- Scores: the members' mean s_t at expansion and after propagation", "", "| member | validation hit | "
             "Hits@1 | F1 | validated by | word dropout | composed wordings |", "|---|---|---|---|---|---|---|"]
    for path, member in zip(paths, loaded.members, strict=True):
        val = member.meta.get("validation")
        val = val if isinstance(val, dict) else {}
        trained_on = member.meta.get("trained_on")
        settings = trained_on.get("settings") if isinstance(trained_on, dict) else None
        settings = settings if isinstance(settings, dict) else {}
        lines.append(f"| `{path}` | {val.get('hit', float('nan')):.1f} | {val.get('hits1', float('nan')):.1f} | "
                     f"{val.get('f1', float('nan')):.1f} | {settings.get('validation_by', 'question')} | "
                     f"{settings.get('word_dropout', 0.0)} | {settings.get('composed_wordings') or '-'} |")
    (out / "MODEL_CARD.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    click.echo(f"wrote {out} ({len(paths)} members); use it with --method fog --method-config scorer={out}")


@train_group.command("srp")
@click.option("--dataset", "datasets", multiple=True, required=True,
              help="Dataset to draw references from (repeatable: the base draws from the union).")
@click.option("--split", default="dev", show_default=True, help="Split to draw from (the demo dataset has only test).")
@click.option("--kg", "kg_spec", default=None, help="The KG the gold chains are checked on (an embedded directory, a "
                                                    "SPARQL URL, demo); default: the configured kg.")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Directory to write the base to.")
@click.option("--size", type=int, default=100, show_default=True, help="References in the base (over all datasets).")
@click.option("--clusters", type=int, default=10, show_default=True, help="k-means clusters; each gives an equal share.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of k-means and of the draw within clusters.")
@click.option("--data-dir", default=None, type=click.Path(file_okay=False),
              help="Benchmark data directory (default: KGQA_DATA_DIR or the config's data_dir).")
@click.option("--embedder", "embedder_spec", default="minilm", show_default=True,
              help="Embedder of the questions (minilm, hash, hash:DIM); SRP retrieves with the same one.")
def train_srp(datasets: tuple[str, ...], split: str, kg_spec: str | None, out_dir: str, size: int, clusters: int,
              seed: int, data_dir: str | None, embedder_spec: str) -> None:
    """Build SRP's reference base: solved questions of DATASETs whose gold chain reaches a gold answer on the KG,
    clustered by k-means with an equal share per cluster (docs/srp.md)."""
    from kgqa.eval.datasets import load_dataset
    from kgqa.eval.gold_paths import check_candidates
    from kgqa.kg import open_kg
    from kgqa.steps.references import META_FILE, ReferenceBase
    from kgqa.text import load_embedder

    if size < 1:
        raise ConfigError(f"--size must be at least 1, got {size}")
    if not 1 <= clusters <= size:
        raise ConfigError(f"--clusters must be between 1 and --size ({size}), got {clusters}")
    out = Path(out_dir).expanduser()
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        if (out / META_FILE).is_file():
            raise ConfigError(f"--out {out}: holds a reference base already; remove it first or choose another "
                              "directory (an existing base is never overwritten)")
        raise ConfigError(f"--out {out}: the directory exists and is not empty (choose a new one)")
    spec = _kg_spec(kg_spec)
    names = list(dict.fromkeys(datasets))
    say = _reporter("train srp")

    started = time.perf_counter()
    loaded = [(name, load_dataset(name, split=split, data_dir=data_dir)) for name in names]
    kg = open_kg(spec)
    try:
        candidates = []
        dropped: dict[str, int] = {}
        per_dataset: dict[str, dict[str, Any]] = {}
        for name, questions in loaded:
            kept, counts = check_candidates(questions, kg)
            say(f"{name} ({split}): {len(questions)} questions, {len(kept)} kept; dropped {dict(counts) or 'none'}")
            if not kept:
                raise ConfigError(f"dataset {name!r} ({split}): no question's gold chain reaches a gold answer on KG "
                                  f"{spec} (dropped: {dict(counts)}); is it the dataset's KG?")
            per_dataset[name] = {"questions": len(questions), "kept": len(kept), "dropped": dict(counts)}
            candidates.extend(kept)
            for reason, count in counts.items():
                dropped[reason] = dropped.get(reason, 0) + count
    finally:
        kg.close()
    checked = time.perf_counter() - started
    embedder = load_embedder(embedder_spec)
    say(f"embedding {len(candidates)} questions with {embedder_spec} and clustering them")
    # the command as run, every setting spelled out (defaults and the configured KG included), to rebuild the base
    command = " ".join(["kgqa train srp", *(f"--dataset {shlex.quote(n)}" for n in names), f"--split {shlex.quote(split)}",
                        f"--kg {shlex.quote(spec)}", f"--out {shlex.quote(str(out))}", f"--size {size}",
                        f"--clusters {clusters}", f"--seed {seed}", f"--embedder {shlex.quote(embedder_spec)}",
                        *([f"--data-dir {shlex.quote(data_dir)}"] if data_dir else [])])
    provenance = {"datasets": names, "split": split, "kg": spec, "questions": sum(len(q) for _, q in loaded),
                  "counts_by_reason": dropped, "per_dataset": per_dataset, "command": command, "kgqa_commit": _commit()}
    base = ReferenceBase.build(candidates, embedder, size=size, clusters=clusters, seed=seed,
                               embedder_spec=embedder_spec, provenance=provenance)
    seconds = round(time.perf_counter() - started, 1)
    base.info["seconds"] = {"check": round(checked, 1), "total": seconds}
    base.save(out)
    info = base.info
    click.echo(f"questions: {info['questions']} in {', '.join(names)} ({split})")
    click.echo(f"kept: {len(candidates)} candidates (the gold chain reaches a gold answer on the KG)")
    for reason, count in sorted(dropped.items(), key=lambda item: (-item[1], item[0])):
        click.echo(f"dropped: {count} ({reason})")
    if not dropped:
        click.echo("dropped: none")
    click.echo(f"clusters: {info['clusters']} (asked for {clusters}); candidates per cluster: "
               f"{' '.join(map(str, info['cluster_sizes']))}")
    click.echo(f"references per cluster: {' '.join(map(str, info['cluster_shares']))} "
               f"(total {len(base)}, asked for {size})")
    click.echo(f"wrote {out} ({seconds:.0f} s); use it with --method srp --method-config references={out}")


def _reused_scorer_phase(source: Path, options: dict[str, Any], ctx: click.Context) -> dict[str, Any]:
    """The scorer-phase options of the model in ``source`` (in the order of ``options``), its KG and provenance; an
    option given on this command line with another value is an error, as the reused phase was trained with its own."""
    try:
        recorded = json.loads((source / "config.json").read_text(encoding="utf-8"))
        settings = recorded["settings"]
        values = {"datasets": tuple(recorded["datasets"]), "split": recorded["split"], "encoder": recorded["encoder"],
                  "hidden": recorded["net"]["hidden"], "limit": recorded["limit"]}
        from kgqa.steps.foresight.training import TrainSettings

        defaults = TrainSettings().to_dict()  # options added after the model was written: their defaults
        values |= {name: settings[name] if name in settings else defaults[name] for name in options
                   if name not in values}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"--reuse-scorer-phase {source}: its config.json cannot be read ({type(exc).__name__}: "
                          f"{exc}); only a directory written by `kgqa train fog` can be reused") from None
    from click.core import ParameterSource

    for name, value in options.items():
        if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE and value != values[name]:
            flag = "--dataset" if name == "datasets" else "--" + name.replace("_", "-")
            shown = " ".join(value) if name == "datasets" else value
            raise ConfigError(f"{flag} {shown}: the reused scorer phase ({source}) was trained with "
                              f"{values[name]!r}; leave the option out (a reused phase keeps its own settings)")
    return {"options": {name: values[name] for name in options}, "kg": recorded.get("kg"), "model": str(source),
            "command": recorded.get("command"), "kgqa_commit": recorded.get("kgqa_commit")}


def _synonym_line(settings: dict[str, Any]) -> str:
    if not settings.get("synonyms"):
        return "none"
    return (f"{settings['synonyms']}, each word swapped with probability {settings.get('synonym_share', 0.5)} "
            "(WordNet synonyms in a copy of each question)")


def _new_out_dir(out_dir: str) -> Path:
    """``--out`` as a path, refused when it holds anything (a model directory is never written over)."""
    out = Path(out_dir).expanduser()
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"--out {out}: the directory exists and is not empty (choose a new one)")
    return out


def _kg_spec(kg_spec: str | None) -> str:
    """``--kg`` or the configured kg, refused when neither is set."""
    spec = kg_spec or kgqa_config.get("kg")
    if not spec:
        raise ConfigError("no KG: give --kg (an embedded directory, a SPARQL URL or demo)")
    return str(spec)


def _reporter(command: str) -> Callable[[str], None]:
    """Progress lines on stderr, prefixed with the command (``train fog: ...``)."""
    def say(message: str) -> None:
        click.echo(f"{command}: {message}", err=True)

    return say


def _command_line(default: str) -> str:
    """The command as typed (for a model's record), or ``default`` when there is no argv."""
    return "kgqa " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv else default


def _commit() -> str | None:
    from kgqa.provenance import source_commit

    return source_commit()


def _plot(history: list[dict[str, Any]], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for ax, phase in zip(axes, ("scorer", "propagation"), strict=True):
        rows = [r for r in history if r["phase"] == phase]
        if rows:
            ax.plot([r["epoch"] for r in rows], [r["train_loss"] for r in rows], marker="o", label="train")
            ax.plot([r["epoch"] for r in rows], [r["val_loss"] for r in rows], marker="o", label="validation")
            ax.legend()
        else:  # e.g. --propagation-epochs 0: say so rather than draw an empty legend
            ax.text(0.5, 0.5, "no epochs", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(f"{phase} phase")
        ax.set_xlabel("epoch")
        ax.set_ylabel("BCE loss")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def _card(training: dict[str, Any], history: list[dict[str, Any]], summary: dict[str, Any],
          validation: dict[str, Any], plotted: bool) -> str:
    rows = "\n".join(f"| {r['phase']} | {r['epoch']} | {r['train_loss']:.4f} | {r['val_loss']:.4f} | "
                     f"{r['val_accuracy']:.4f} | {r['seconds']:.0f} |" for r in history)
    s = training["settings"]
    prop_seed = "" if s.get("propagation_seed") is None else f"; propagation seed {s['propagation_seed']}"
    source = training.get("scorer_phase_from")
    reuse = (f"\n- Scorer phase reused from `{source['model']}` (`{source['command']}`, kgqa {source['kgqa_commit']}); "
             "only the propagation phase trained here" if source else "")
    held_note = ": every question of a held-out template" if s.get("validation_by") == "template" else ""
    if s.get("validation_fold") is not None:
        from kgqa.steps.foresight.training import validation_folds

        held_note += f"; fixed fold {s['validation_fold']} of {validation_folds(s['validation_share'])}"
    return f"""# FoG foresight scorer

- Command: `{training['command']}`
- kgqa commit: {training['kgqa_commit']}
- KG: `{training['kg']}`; encoder (frozen): `{training['encoder']}`
- Data: {', '.join(training['datasets'])} ({training['split']} split): {training['data']['questions']} questions with gold
  chains ({training['data']['per_dataset']}); skipped {training['data']['skipped']}
- Held out for validation and early stopping: {summary.get('validation_questions')} questions
  (by {s.get('validation_by', 'question')}{held_note})
- Word dropout: {s.get('word_dropout', 0.0)} (share of words deleted or masked in each question's augmented copy)
- Composed wordings: {s.get('composed_wordings') or 'none'} (phrase table writing a copy of each question from its chain)
- Template wordings: {s.get('template_wordings') or 'none'} (question templates per chain writing a copy of each question)
- Synonym copies: {_synonym_line(s)}
- Question weight: {s.get('question_weight', 1.0)} (a triple reads its question as written this often against once per
  kind of copy)
- Triples: {summary.get('train_triples')} training, {summary.get('validation_triples')} validation
  ({summary.get('positives')} positive; kappa = {s['kappa']} negatives per positive)
- Optimiser: AdamW lr {s['lr']}, betas {tuple(s['betas'])}, weight decay {s['weight_decay']}, batch {s['batch_size']},
  dropout 0.1, seed {s['seed']}; scorer epochs {s['epochs']}, propagation epochs {s['propagation_epochs']} on
  {summary.get('propagation', {}).get('train_graphs')} expanded subgraphs (loss a mean over
  {'questions' if s.get('propagation_weighting') == 'question' else 'edges'}; lr {s.get('propagation_lr') or s['lr']};
  epoch kept by validation {'answers' if s.get('propagation_select') == 'answers' else 'loss'}{prop_seed}){reuse}
- Network: {training['net']}
- Training time: {training['seconds']} s

## Validation (held-out questions, graph mode with its default reading: tau_e 0.02, tau_p 0.7, L 3)

hit {validation['hit']:.1f}, Hits@1 {validation['hits1']:.1f}, F1 {validation['f1']:.1f} on {validation['questions']}
questions ({validation['seconds_per_question']:.3f} s per question).

## Loss per epoch

| phase | epoch | train loss | validation loss | validation accuracy | seconds |
|---|---|---|---|---|---|
{rows}

{'![loss curves](loss.png)' if plotted else '(matplotlib not installed: no loss.png)'}
"""
