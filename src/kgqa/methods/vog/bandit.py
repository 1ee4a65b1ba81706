"""VoG's context bandit and the reward of a plan revision (issue 14, items 3 and 4, as shared steps).

When a step's prediction disagrees with the KG, VoG revises the plan, and a UCB bandit chooses how much context the
revision sees: ``local`` (the step's KG observation), ``lookahead`` (plus the next step's candidate relations) or
``global`` (the whole plan and every observation so far). The score of an arm c is

    UCB(c) = R_c / N_c + alpha * sqrt(ln N / N_c) + B_ent(c) + B_KG(c) + B_look(c) - B_div(c)

* exploit R_c / N_c: the mean reward of the arm; explore alpha * sqrt(ln N / N_c) with alpha = 1.4 and N the pulls of
  all arms together;
* B_ent (global only): ``0.1 * sigmoid(6 * (H - 0.5))``, H the normalised entropy of the answer distribution in [0, 1]
  (:func:`normalized_entropy`);
* B_KG (global only): ``+0.2`` when an entity repeats (an entity retrieved at an earlier step is retrieved again);
* B_look (lookahead only): ``-0.1 * tanh(4 * D / 3)``, where D is **the number of plan steps after the current one**
  (``steps_ahead``). The paper does not define D; this is the choice made here, so the bonus is 0 at the plan's last
  step and more negative the further the plan still runs. (The authors' public code passes the current step's depth,
  1-based, divided by a maximum depth of 3: same formula, another D.)
* B_div: the arm's consecutive-choice penalty (local 0.2, lookahead 0.05, global 0.1 by default) times the length of its
  current streak: how many of the most recent pulls in a row were this arm (0 when the last pull was another arm).

Arms never pulled go first, in the order local, lookahead, global; ties between scores go to the earlier arm in that
order, so the bandit is deterministic and needs no random numbers. :meth:`ContextBandit.choose` only reads the state; a
pull is recorded by :meth:`ContextBandit.update` (so the counts, the means and the streaks follow the updates).

The reward of one revision (:func:`revision_reward`) is ``0.3 validation + 0.3 quality + 0.2 alignment + 0.2
coherence`` (:func:`reward_parts`: four embedding cosines mapped to [0, 1]), minus 0.5 when the second checker
(:mod:`kgqa.methods.vog.contradiction`) finds a contradiction. An empty revision (:func:`is_empty_revision`) has no parts:
its reward is only the penalty, -0.1 (-0.6 with a checker failure). It is fused with the answer consistency across
candidate plans (:func:`fuse_reward`): ``lambda = 0.4 * exp(-H)``, ``nu = (1 - lambda) * nu_local + lambda * nu_conf``.
"""

from __future__ import annotations

import math
import numbers
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from kgqa.errors import ConfigError
from kgqa.normalize import normalize_label
from kgqa.text.base import Embedder

#: The three context arms, in the order untried arms are pulled and ties are broken.
ARMS: tuple[str, ...] = ("local", "lookahead", "global")

#: Weights of the four parts of a revision's reward.
REWARD_WEIGHTS: Mapping[str, float] = MappingProxyType(
    {"validation": 0.3, "quality": 0.3, "alignment": 0.2, "coherence": 0.2})
#: Subtracted from a revision's reward when the second checker finds a contradiction.
CHECKER_PENALTY = 0.5
#: The whole reward of an empty revision (before a checker penalty).
EMPTY_REVISION_PENALTY = 0.1
#: beta of the fusion weight lambda = beta * exp(-H).
FUSION_BETA = 0.4

_DEFAULT_STREAK_PENALTY: Mapping[str, float] = MappingProxyType({"local": 0.2, "lookahead": 0.05, "global": 0.1})
_ENTROPY_SLACK = 1e-9  # float noise allowed around [0, 1] before an entropy is refused


def _finite(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ConfigError(f"{what} must be a finite number, got {value!r}")
    return float(value)


def _check_arm(arm: Any, what: str = "arm") -> str:
    if arm not in ARMS:
        raise ConfigError(f"{what} {arm!r} is not a context arm; the arms are {', '.join(ARMS)}")
    return str(arm)


def _unit(value: Any, what: str) -> float:
    """A number in [0, 1] (float noise of 1e-9 either side is clamped away)."""
    number = _finite(value, what)
    if not -_ENTROPY_SLACK <= number <= 1.0 + _ENTROPY_SLACK:
        raise ConfigError(f"{what} must be in [0, 1], got {value!r}")
    return min(max(number, 0.0), 1.0)


def sigmoid(x: float) -> float:
    """The logistic function 1 / (1 + e^-x)."""
    return 1.0 / (1.0 + math.exp(-x))


@dataclass(frozen=True)
class BanditSettings:
    """The bandit's constants (the paper's values by default) and the fixed-arm ablation.

    ``streak_penalty`` maps every arm to its consecutive-choice penalty (stored read-only); ``fixed_arm`` names the
    one arm the ablation always pulls (None: the bandit chooses).
    """

    exploration: float = 1.4
    streak_penalty: Mapping[str, float] = field(default_factory=lambda: _DEFAULT_STREAK_PENALTY, hash=False)
    global_entropy_bonus: float = 0.1
    repeat_bonus: float = 0.2
    lookahead_bonus: float = 0.1
    fixed_arm: str | None = None

    def __post_init__(self) -> None:
        for name in ("exploration", "global_entropy_bonus", "repeat_bonus", "lookahead_bonus"):
            if _finite(getattr(self, name), f"bandit setting {name}") < 0:
                raise ConfigError(f"bandit setting {name} must be >= 0, got {getattr(self, name)!r}")
        if not isinstance(self.streak_penalty, Mapping):
            raise ConfigError(f"bandit setting streak_penalty must map each arm to a number, got {self.streak_penalty!r}")
        penalties = dict(self.streak_penalty)
        for arm in penalties:
            _check_arm(arm, "streak_penalty key")
        missing = [arm for arm in ARMS if arm not in penalties]
        if missing:
            raise ConfigError(f"bandit setting streak_penalty lacks the arm(s) {', '.join(missing)}; "
                              f"give one penalty for each of {', '.join(ARMS)}")
        for arm in ARMS:
            if _finite(penalties[arm], f"streak_penalty[{arm!r}]") < 0:
                raise ConfigError(f"streak_penalty[{arm!r}] must be >= 0, got {penalties[arm]!r}")
        object.__setattr__(self, "streak_penalty",
                           MappingProxyType({arm: float(penalties[arm]) for arm in ARMS}))
        if self.fixed_arm is not None:
            _check_arm(self.fixed_arm, "fixed_arm")

    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON-ready data (for the trace and the run's config)."""
        return {"exploration": self.exploration, "streak_penalty": dict(self.streak_penalty),
                "global_entropy_bonus": self.global_entropy_bonus, "repeat_bonus": self.repeat_bonus,
                "lookahead_bonus": self.lookahead_bonus, "fixed_arm": self.fixed_arm}


def _json_number(value: float) -> float | None:
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class ArmChoice:
    """One choice: the arm, every arm's score and its terms, and why this arm.

    ``parts[arm]`` holds the signed terms that add up to ``scores[arm]``: exploit, explore, entropy_bonus,
    repeat_bonus, lookahead_bonus (<= 0) and streak_penalty (<= 0). An arm never pulled has exploit 0 and explore
    (hence score) ``inf``. ``reason`` is "untried" (an arm never pulled goes first), "ucb" (the highest score) or
    "fixed" (the ablation's arm, scores computed all the same).
    """

    arm: str
    scores: dict[str, float]
    parts: dict[str, dict[str, float]]
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (strict JSON has no infinity: an untried arm's score and explore term become None)."""
        return {"arm": self.arm, "reason": self.reason,
                "scores": {arm: _json_number(score) for arm, score in self.scores.items()},
                "parts": {arm: {name: _json_number(v) for name, v in terms.items()}
                          for arm, terms in self.parts.items()}}


class ContextBandit:
    """UCB over the context arms with VoG's context-aware priors (see the module docstring for the formula)."""

    def __init__(self, settings: BanditSettings | None = None) -> None:
        if settings is not None and not isinstance(settings, BanditSettings):
            raise ConfigError(f"ContextBandit takes BanditSettings, got {type(settings).__name__}")
        self.settings = settings or BanditSettings()
        self._counts: dict[str, int] = dict.fromkeys(ARMS, 0)
        self._sums: dict[str, float] = dict.fromkeys(ARMS, 0.0)
        self._history: list[tuple[str, float]] = []

    @property
    def total_pulls(self) -> int:
        """N: the pulls of all arms together."""
        return len(self._history)

    def streak(self, arm: str) -> int:
        """How many of the most recent pulls in a row were ``arm`` (0 when the last pull was another arm)."""
        _check_arm(arm)
        length = 0
        for pulled, _ in reversed(self._history):
            if pulled != arm:
                break
            length += 1
        return length

    def _parts(self, arm: str, *, entropy: float, entity_repeats: bool, steps_ahead: int) -> dict[str, float]:
        s = self.settings
        n_arm = self._counts[arm]
        if n_arm == 0:
            exploit, explore = 0.0, math.inf
        else:
            exploit = self._sums[arm] / n_arm
            explore = s.exploration * math.sqrt(math.log(self.total_pulls) / n_arm)
        is_global = arm == "global"
        return {
            "exploit": exploit,
            "explore": explore,
            "entropy_bonus": s.global_entropy_bonus * sigmoid(6.0 * (entropy - 0.5)) if is_global else 0.0,
            "repeat_bonus": s.repeat_bonus if is_global and entity_repeats else 0.0,
            "lookahead_bonus": -s.lookahead_bonus * math.tanh(4.0 * steps_ahead / 3.0) if arm == "lookahead" else 0.0,
            "streak_penalty": -s.streak_penalty[arm] * self.streak(arm),
        }

    def choose(self, *, entropy: float, entity_repeats: bool, steps_ahead: int) -> ArmChoice:
        """The arm for the next revision (the state is not changed: call :meth:`update` with its reward).

        ``entropy``: normalised entropy H of the answer distribution, in [0, 1]; ``entity_repeats``: an entity
        retrieved at an earlier step was retrieved again; ``steps_ahead``: plan steps after the current one (D).
        """
        h = _unit(entropy, "entropy")
        if not isinstance(entity_repeats, bool | np.bool_):
            raise ConfigError(f"entity_repeats must be True or False, got {entity_repeats!r}")
        if isinstance(steps_ahead, bool) or not isinstance(steps_ahead, numbers.Integral) or steps_ahead < 0:
            raise ConfigError(f"steps_ahead must be an integer >= 0, got {steps_ahead!r}")
        parts = {arm: self._parts(arm, entropy=h, entity_repeats=entity_repeats, steps_ahead=int(steps_ahead))
                 for arm in ARMS}
        scores = {arm: math.fsum(terms.values()) for arm, terms in parts.items()}
        if self.settings.fixed_arm is not None:
            arm, reason = self.settings.fixed_arm, "fixed"
        else:
            untried = [a for a in ARMS if self._counts[a] == 0]
            if untried:
                arm, reason = untried[0], "untried"
            else:
                arm, reason = max(ARMS, key=lambda a: scores[a]), "ucb"  # max keeps the first of equal scores
        return ArmChoice(arm=arm, scores=scores, parts=parts, reason=reason)

    def update(self, arm: str, reward: float) -> None:
        """Record one pull of ``arm`` with its (fused) reward."""
        _check_arm(arm)
        value = _finite(reward, "reward")
        self._counts[arm] += 1
        self._sums[arm] += value
        self._history.append((arm, value))

    def state(self) -> dict[str, Any]:
        """JSON-ready state for the trace: counts, reward sums, means (None for an arm never pulled), the history of
        ``[arm, reward]`` pulls, the current streak ``{"arm", "length"}``, total pulls and the settings."""
        last = self._history[-1][0] if self._history else None
        return {
            "counts": dict(self._counts),
            "reward_sums": dict(self._sums),
            "means": {arm: (self._sums[arm] / n if n else None) for arm, n in self._counts.items()},
            "history": [[arm, reward] for arm, reward in self._history],
            "streak": {"arm": last, "length": self.streak(last) if last else 0},
            "total_pulls": self.total_pulls,
            "settings": self.settings.to_dict(),
        }


# ---------------------------------------------------------------------------------------------------------- rewards


@dataclass(frozen=True)
class RewardParts:
    """The four similarities of a revision, each in [0, 1] (see :func:`reward_parts`)."""

    validation: float
    quality: float
    alignment: float
    coherence: float

    def __post_init__(self) -> None:
        for name in REWARD_WEIGHTS:
            _unit(getattr(self, name), f"reward part {name}")

    def weighted(self) -> float:
        """``0.3 validation + 0.3 quality + 0.2 alignment + 0.2 coherence``, in [0, 1]."""
        return math.fsum(weight * getattr(self, name) for name, weight in REWARD_WEIGHTS.items())


def is_empty_revision(revised_observation: str, revised_thought: str, revised_action: str) -> bool:
    """An empty revision: the reviser gave no revised step, i.e. its observation, thought and action are all blank.

    Its reward is only the penalty (:func:`revision_reward` with ``parts=None``).
    """
    return not any(text.strip() for text in (revised_observation, revised_thought, revised_action))


def revision_reward(parts: RewardParts | None, *, checker_failed: bool) -> float:
    """The local reward nu_local of one revision, in [-0.6, 1].

    ``parts.weighted()`` minus 0.5 when the second checker found a contradiction; an empty revision (``parts`` None)
    scores only the penalty -0.1 (minus 0.5 more with a checker failure).
    """
    if parts is not None and not isinstance(parts, RewardParts):
        raise ConfigError(f"revision_reward takes RewardParts or None, got {type(parts).__name__}")
    if not isinstance(checker_failed, bool | np.bool_):
        raise ConfigError(f"checker_failed must be True or False, got {checker_failed!r}")
    base = -EMPTY_REVISION_PENALTY if parts is None else parts.weighted()
    return base - (CHECKER_PENALTY if checker_failed else 0.0)


def reward_parts(embedder: Embedder, *, kg_observation: str, revised_observation: str, revised_step: str,
                 revised_action: str, revised_thought: str, question: str) -> RewardParts:
    """The four similarities of a revision, each an embedding cosine mapped from [-1, 1] to [0, 1] by (x + 1) / 2.

    validation: revised observation vs KG observation; quality: revised step (its whole text) vs question;
    alignment: revised step's action vs question; coherence: revised thought vs KG observation. A blank text on
    either side of a pair scores 0 for that part (nothing to agree with). One embedder call for all six texts.
    """
    texts = {"kg": kg_observation, "obs": revised_observation, "step": revised_step, "action": revised_action,
             "thought": revised_thought, "question": question}
    for name, text in texts.items():
        if not isinstance(text, str):
            raise ConfigError(f"reward_parts: {name} must be a string, got {type(text).__name__}")
    keys = list(texts)
    vectors = np.asarray(embedder.embed([texts[k] for k in keys]), dtype=float)
    row = {k: vectors[i] for i, k in enumerate(keys)}

    def similarity(a: str, b: str) -> float:
        if not texts[a].strip() or not texts[b].strip():
            return 0.0
        cosine = float(row[a] @ row[b])
        return min(max((cosine + 1.0) / 2.0, 0.0), 1.0)

    return RewardParts(validation=similarity("obs", "kg"), quality=similarity("step", "question"),
                       alignment=similarity("action", "question"), coherence=similarity("thought", "kg"))


# ----------------------------------------------------------------------------------------- consistency and entropy


def _answer_keys(answers: Sequence[str]) -> frozenset[str]:
    if isinstance(answers, str):
        raise ConfigError(f"answers must be a sequence of strings, not the single string {answers!r}")
    keys = set()
    for answer in answers:
        if not isinstance(answer, str):
            raise ConfigError(f"an answer must be a string, got {answer!r}")
        key = normalize_label(answer)
        if key:
            keys.add(key)
    return frozenset(keys)


def answer_consistency(answers: Sequence[str], candidates: Sequence[Sequence[str]]) -> float:
    """nu_conf: the share of candidate plans whose final answer agrees with ``answers`` (this plan's).

    Two answers agree when they share at least one normalised answer (:func:`kgqa.normalize.normalize_label`); a
    plan without answers agrees with none. Pass this plan among ``candidates`` if it is one of them (the paper's
    sum runs over all candidate plans). No candidates: 0.0.
    """
    mine = _answer_keys(answers)
    keyed = [_answer_keys(c) for c in candidates]
    if not keyed:
        return 0.0
    return sum(1 for theirs in keyed if mine & theirs) / len(keyed)


def normalized_entropy(answers_per_candidate: Sequence[Sequence[str]]) -> float:
    """H: the entropy of the distribution of the candidates' answers over ln(number of candidates), in [0, 1].

    Each candidate's answer set is one outcome, keyed by its sorted normalised answers (a candidate with no answer
    is the outcome "no answer"). 0 for one candidate or none; 1 when every candidate answers differently.
    """
    keys = [tuple(sorted(_answer_keys(c))) for c in answers_per_candidate]
    n = len(keys)
    if n <= 1:
        return 0.0
    entropy = -math.fsum((k / n) * math.log(k / n) for k in Counter(keys).values())
    return min(max(entropy / math.log(n), 0.0), 1.0)


def fusion_weight(entropy: float, *, beta: float = FUSION_BETA) -> float:
    """lambda = beta * exp(-H)."""
    h = _unit(entropy, "entropy")
    return _unit(beta, "fusion beta") * math.exp(-h)


def fuse_reward(local: float, consistency: float, entropy: float, *, beta: float = FUSION_BETA) -> float:
    """nu = (1 - lambda) * nu_local + lambda * nu_conf with lambda = beta * exp(-H) (0.4 at H = 0, 0.4 / e at H = 1)."""
    weight = fusion_weight(entropy, beta=beta)
    return (1.0 - weight) * _finite(local, "local reward") + weight * _unit(consistency, "answer consistency")
