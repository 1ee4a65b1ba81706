"""What a FoG training writes for people: the model card (MODEL_CARD.md) and the loss curves (loss.png) of a scorer, and
the card of an ensemble."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kgqa.methods.fog.training import validation_folds


def _synonym_line(settings: dict[str, Any]) -> str:
    if not settings.get("synonyms"):
        return "none"
    return (f"{settings['synonyms']}, each word swapped with probability {settings.get('synonym_share', 0.5)} "
            "(WordNet synonyms in a copy of each question)")


def _data_line(training: dict[str, Any]) -> str:
    """What the scorer trained on: the datasets' questions with gold chains, the synthetic ones, or both."""
    data, synthetic = training["data"], training.get("synthetic")
    parts = []
    if training["datasets"]:
        labelled = data["questions"] - (synthetic or {}).get("questions", 0)
        parts.append(f"{', '.join(training['datasets'])} ({training['split']} split): {labelled} labelled questions with "
                     f"gold chains; skipped {data['skipped']}")
    if synthetic:
        paraphrase = "not paraphrased"
        if synthetic.get("paraphrase_llm"):
            paraphrase = (f"paraphrased by `{synthetic['paraphrase_llm']}`: {synthetic['paraphrased']} reworded, kept as "
                          f"generated {synthetic['paraphrase_failed']}")
        parts.append(f"{synthetic['questions']} synthetic questions generated from the KG (of {synthetic['requested']} "
                     f"asked; no labelled question; hops {synthetic['per_hops']}; {synthetic['keys_covered']} of "
                     f"{synthetic['relation_keys']} relation keys covered; {paraphrase})")
    return "; ".join(parts) + f" ({data['questions']} questions in all: {data['per_dataset']})"


def plot_history(history: list[dict[str, Any]], path: Path) -> bool:
    """Loss curves of both phases into ``path``; False when matplotlib is not installed."""
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


def scorer_card(training: dict[str, Any], history: list[dict[str, Any]], summary: dict[str, Any],
          validation: dict[str, Any], plotted: bool) -> str:
    """The MODEL_CARD.md of a trained scorer: how it was made, its validation and its loss per epoch."""
    rows = "\n".join(f"| {r['phase']} | {r['epoch']} | {r['train_loss']:.4f} | {r['val_loss']:.4f} | "
                     f"{r['val_accuracy']:.4f} | {r['seconds']:.0f} |" for r in history)
    s = training["settings"]
    prop_seed = "" if s.get("propagation_seed") is None else f"; propagation seed {s['propagation_seed']}"
    source = training.get("scorer_phase_from")
    reuse = (f"\n- Scorer phase reused from `{source['model']}` (`{source['command']}`, kgqa {source['kgqa_commit']}); "
             "only the propagation phase trained here" if source else "")
    held_note = ": every question of a held-out template" if s.get("validation_by") == "template" else ""
    if s.get("validation_fold") is not None:
        held_note += f"; fixed fold {s['validation_fold']} of {validation_folds(s['validation_share'])}"
    return f"""# FoG foresight scorer

- Command: `{training['command']}`
- kgqa commit: {training['kgqa_commit']}
- KG: `{training['kg']}`; encoder (frozen): `{training['encoder']}`
- Data: {_data_line(training)}
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


def ensemble_card(paths: Sequence[Path], ensemble: Any, commit: str | None) -> str:
    """The MODEL_CARD.md of an ensemble: its shared encoder and each member's validation and training choices."""
    lines = ["# FoG scorer ensemble", "", f"- Encoder (shared): `{ensemble.encoder}`", f"- kgqa commit: {commit}",
             "- Scores: the members' mean s_t at expansion and after propagation", "", "| member | validation hit | "
             "Hits@1 | F1 | validated by | word dropout | composed wordings |", "|---|---|---|---|---|---|---|"]
    for path, member in zip(paths, ensemble.members, strict=True):
        val = member.meta.get("validation")
        val = val if isinstance(val, dict) else {}
        trained_on = member.meta.get("trained_on")
        settings = trained_on.get("settings") if isinstance(trained_on, dict) else None
        settings = settings if isinstance(settings, dict) else {}
        lines.append(f"| `{path}` | {val.get('hit', float('nan')):.1f} | {val.get('hits1', float('nan')):.1f} | "
                     f"{val.get('f1', float('nan')):.1f} | {settings.get('validation_by', 'question')} | "
                     f"{settings.get('word_dropout', 0.0)} | {settings.get('composed_wordings') or '-'} |")
    return "\n".join(lines) + "\n"
