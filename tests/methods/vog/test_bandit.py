"""VoG's context bandit and revision rewards (kgqa.methods.vog.bandit): the UCB arithmetic by hand, each prior alone,
the reward, fusion, consistency and entropy formulas, determinism, and the errors for bad input."""

from __future__ import annotations

import json
import math
import random

import pytest

from kgqa.errors import ConfigError
from kgqa.methods.vog.bandit import (
    ARMS,
    ArmChoice,
    BanditSettings,
    ContextBandit,
    RewardParts,
    answer_consistency,
    fuse_reward,
    fusion_weight,
    is_empty_revision,
    normalized_entropy,
    revision_reward,
    reward_parts,
)
from kgqa.steps.pruning import cosine_scores
from kgqa.testing import offline_embedder

NEUTRAL = {"entropy": 0.5, "entity_repeats": False, "steps_ahead": 0}


def pulled(*pulls: tuple[str, float], settings: BanditSettings | None = None) -> ContextBandit:
    bandit = ContextBandit(settings)
    for arm, reward in pulls:
        bandit.update(arm, reward)
    return bandit


# ------------------------------------------------------------------------------------------------------ choosing


def test_untried_arms_go_first_in_order_whatever_the_rewards() -> None:
    bandit = ContextBandit()
    first = bandit.choose(**NEUTRAL)
    assert (first.arm, first.reason) == ("local", "untried")
    assert first.scores == {"local": math.inf, "lookahead": math.inf, "global": math.inf}
    bandit.update("local", 10.0)  # a huge reward does not make local go again before the others were tried
    second = bandit.choose(**NEUTRAL)
    assert (second.arm, second.reason) == ("lookahead", "untried")
    assert math.isfinite(second.scores["local"]) and second.scores["lookahead"] == math.inf
    bandit.update("lookahead", -1.0)
    third = bandit.choose(entropy=0.0, entity_repeats=False, steps_ahead=5)
    assert (third.arm, third.reason) == ("global", "untried")
    bandit.update("global", 0.0)
    assert bandit.choose(**NEUTRAL).reason == "ucb"
    assert bandit.total_pulls == 3


def test_ucb_arithmetic_on_a_hand_computed_case() -> None:
    # pulls: local 0.9, lookahead 0.2, global 0.1, local 0.7 -> N = 4; counts 2 / 1 / 1; local's streak is 1.
    bandit = pulled(("local", 0.9), ("lookahead", 0.2), ("global", 0.1), ("local", 0.7))
    choice = bandit.choose(entropy=0.5, entity_repeats=False, steps_ahead=0)
    # explore: 1.4 * sqrt(ln 4 / 2) = 1.1655765 (local), 1.4 * sqrt(ln 4 / 1) = 1.6483740 (the others)
    # local     = 0.8 + 1.1655765 - 0.2 * 1                           = 1.7655765
    # lookahead = 0.2 + 1.6483740 - 0.1 * tanh(0)                      = 1.8483740
    # global    = 0.1 + 1.6483740 + 0.1 * sigmoid(6 * (0.5 - 0.5))     = 1.7983740
    assert choice.parts["local"]["exploit"] == pytest.approx(0.8)
    assert choice.parts["local"]["explore"] == pytest.approx(1.1655765, abs=1e-7)
    assert choice.parts["local"]["streak_penalty"] == pytest.approx(-0.2)
    assert choice.parts["lookahead"]["explore"] == pytest.approx(1.6483740, abs=1e-7)
    assert choice.parts["global"]["entropy_bonus"] == pytest.approx(0.05)
    assert choice.scores == pytest.approx({"local": 1.7655765, "lookahead": 1.8483740, "global": 1.7983740}, abs=1e-7)
    assert (choice.arm, choice.reason) == ("lookahead", "ucb")
    # without its streak penalty local would have won (1.9655765): the penalty is what hands the pick to lookahead
    assert choice.scores["local"] - choice.parts["local"]["streak_penalty"] > choice.scores["lookahead"]
    # an entity repeating adds 0.2 to global only: 1.9983740 now beats lookahead
    repeated = bandit.choose(entropy=0.5, entity_repeats=True, steps_ahead=0)
    assert repeated.scores["global"] == pytest.approx(1.9983740, abs=1e-7)
    assert repeated.scores["lookahead"] == choice.scores["lookahead"]
    assert repeated.arm == "global"
    # every score is the sum of its terms
    for arm in ARMS:
        assert choice.scores[arm] == pytest.approx(sum(choice.parts[arm].values()))


def test_choose_does_not_change_the_state() -> None:
    bandit = pulled(("local", 0.5), ("lookahead", 0.4), ("global", 0.3))
    before = bandit.state()
    assert bandit.choose(**NEUTRAL) == bandit.choose(**NEUTRAL)
    assert bandit.state() == before


def test_entropy_bonus_goes_to_global_only() -> None:
    bandit = ContextBandit()
    for entropy, expected in ((0.0, 0.1 / (1 + math.exp(3))), (0.5, 0.05), (1.0, 0.1 / (1 + math.exp(-3)))):
        parts = bandit.choose(entropy=entropy, entity_repeats=False, steps_ahead=0).parts
        assert parts["global"]["entropy_bonus"] == pytest.approx(expected)
        assert parts["local"]["entropy_bonus"] == parts["lookahead"]["entropy_bonus"] == 0.0
    assert bandit.choose(entropy=1.0, entity_repeats=False, steps_ahead=0).parts["global"]["entropy_bonus"] == \
        pytest.approx(0.0952574, abs=1e-7)


def test_repeat_bonus_goes_to_global_only_when_an_entity_repeats() -> None:
    bandit = ContextBandit()
    with_repeat = bandit.choose(entropy=0.5, entity_repeats=True, steps_ahead=0).parts
    without = bandit.choose(entropy=0.5, entity_repeats=False, steps_ahead=0).parts
    assert with_repeat["global"]["repeat_bonus"] == pytest.approx(0.2)
    assert without["global"]["repeat_bonus"] == 0.0
    assert with_repeat["local"]["repeat_bonus"] == with_repeat["lookahead"]["repeat_bonus"] == 0.0


def test_lookahead_bonus_follows_the_steps_ahead() -> None:
    bandit = ContextBandit()
    values = [bandit.choose(entropy=0.5, entity_repeats=False, steps_ahead=d).parts["lookahead"]["lookahead_bonus"]
              for d in range(5)]
    assert values[0] == 0.0
    assert values[3] == pytest.approx(-0.1 * math.tanh(4.0))
    assert values[3] == pytest.approx(-0.0999329, abs=1e-7)
    assert values == sorted(values, reverse=True)  # more steps ahead, a larger malus
    parts = bandit.choose(entropy=0.5, entity_repeats=False, steps_ahead=3).parts
    assert parts["local"]["lookahead_bonus"] == parts["global"]["lookahead_bonus"] == 0.0


def test_streak_penalty_grows_with_the_streak_and_resets() -> None:
    bandit = ContextBandit()
    penalties = []
    for _ in range(3):
        bandit.update("local", 0.5)
        penalties.append(bandit.choose(**NEUTRAL).parts["local"]["streak_penalty"])
    assert penalties == pytest.approx([-0.2, -0.4, -0.6])
    assert bandit.streak("local") == 3
    bandit.update("lookahead", 0.5)
    parts = bandit.choose(**NEUTRAL).parts
    assert parts["local"]["streak_penalty"] == 0.0
    assert parts["lookahead"]["streak_penalty"] == pytest.approx(-0.05)
    bandit.update("global", 0.5)
    bandit.update("global", 0.5)
    assert bandit.choose(**NEUTRAL).parts["global"]["streak_penalty"] == pytest.approx(-0.2)
    assert bandit.state()["streak"] == {"arm": "global", "length": 2}


def test_custom_settings_change_the_terms() -> None:
    settings = BanditSettings(exploration=0.0, streak_penalty={"local": 1.0, "lookahead": 0.0, "global": 0.0},
                              global_entropy_bonus=0.0, repeat_bonus=0.0, lookahead_bonus=0.0)
    bandit = pulled(("lookahead", 0.2), ("global", 0.1), ("local", 0.9), settings=settings)  # local's streak: 1
    choice = bandit.choose(entropy=1.0, entity_repeats=True, steps_ahead=3)
    assert choice.scores == pytest.approx({"local": 0.9 - 1.0, "lookahead": 0.2, "global": 0.1})
    assert choice.arm == "lookahead"
    assert dict(settings.streak_penalty) == {"local": 1.0, "lookahead": 0.0, "global": 0.0}


def test_fixed_arm_ablation_always_pulls_that_arm() -> None:
    bandit = ContextBandit(BanditSettings(fixed_arm="global"))
    rng = random.Random(3)
    for _ in range(6):
        choice = bandit.choose(entropy=rng.random(), entity_repeats=False, steps_ahead=rng.randrange(4))
        assert (choice.arm, choice.reason) == ("global", "fixed")
        assert set(choice.scores) == set(ARMS)
        bandit.update(choice.arm, rng.random())
    assert bandit.state()["counts"] == {"local": 0, "lookahead": 0, "global": 6}
    assert ContextBandit(BanditSettings(fixed_arm="local")).choose(**NEUTRAL).arm == "local"


def _run(seed: int, pulls: int = 40) -> list[str]:
    rng = random.Random(seed)
    bandit = ContextBandit()
    arms = []
    for _ in range(pulls):
        choice = bandit.choose(entropy=rng.random(), entity_repeats=rng.random() < 0.3, steps_ahead=rng.randrange(4))
        arms.append(choice.arm)
        # lookahead pays best on average: the bandit should come to pull it most
        base = {"local": 0.3, "lookahead": 0.7, "global": 0.4}[choice.arm]
        bandit.update(choice.arm, base + rng.uniform(-0.2, 0.2))
    return arms


def test_seeded_reward_stream_gives_the_same_choices_twice() -> None:
    first, second = _run(7), _run(7)
    assert first == second
    assert first[:3] == list(ARMS)
    assert set(first) == set(ARMS)
    assert max(ARMS, key=first.count) == "lookahead"


def test_state_and_choice_are_json_ready() -> None:
    bandit = pulled(("local", 0.25), ("local", 0.75), ("global", -0.1))
    state = bandit.state()
    assert json.loads(json.dumps(state, allow_nan=False)) == state
    assert state["counts"] == {"local": 2, "lookahead": 0, "global": 1}
    assert state["reward_sums"] == pytest.approx({"local": 1.0, "lookahead": 0.0, "global": -0.1})
    assert state["means"] == {"local": 0.5, "lookahead": None, "global": pytest.approx(-0.1)}
    assert state["history"] == [["local", 0.25], ["local", 0.75], ["global", -0.1]]
    assert state["streak"] == {"arm": "global", "length": 1}
    assert state["total_pulls"] == bandit.total_pulls == 3
    assert state["settings"]["streak_penalty"] == {"local": 0.2, "lookahead": 0.05, "global": 0.1}
    choice = bandit.choose(**NEUTRAL)  # lookahead untried: its score is inf, which strict JSON cannot hold
    assert isinstance(choice, ArmChoice)
    data = json.loads(json.dumps(choice.to_dict(), allow_nan=False))
    assert data["arm"] == "lookahead" and data["reason"] == "untried"
    assert data["scores"]["lookahead"] is None and data["parts"]["lookahead"]["explore"] is None
    assert data["scores"]["local"] == pytest.approx(choice.scores["local"])


@pytest.mark.parametrize("kwargs, fragment", [
    ({"entropy": 1.5, "entity_repeats": False, "steps_ahead": 0}, "entropy"),
    ({"entropy": -0.1, "entity_repeats": False, "steps_ahead": 0}, "entropy"),
    ({"entropy": math.nan, "entity_repeats": False, "steps_ahead": 0}, "entropy"),
    ({"entropy": 0.5, "entity_repeats": False, "steps_ahead": -1}, "steps_ahead"),
    ({"entropy": 0.5, "entity_repeats": False, "steps_ahead": 1.5}, "steps_ahead"),
    ({"entropy": 0.5, "entity_repeats": "yes", "steps_ahead": 0}, "entity_repeats"),
])
def test_bad_choose_inputs_raise_config_error(kwargs: dict, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        ContextBandit().choose(**kwargs)


def test_bad_updates_and_settings_raise_config_error() -> None:
    bandit = ContextBandit()
    with pytest.raises(ConfigError, match="'middle'"):
        bandit.update("middle", 0.5)
    for reward in (math.nan, math.inf, "0.5", None):
        with pytest.raises(ConfigError, match="reward"):
            bandit.update("local", reward)  # type: ignore[arg-type]
    assert bandit.total_pulls == 0
    with pytest.raises(ConfigError, match="'Global'"):
        BanditSettings(fixed_arm="Global")
    with pytest.raises(ConfigError, match="exploration"):
        BanditSettings(exploration=-1.0)
    with pytest.raises(ConfigError, match="global"):
        BanditSettings(streak_penalty={"local": 0.2, "lookahead": 0.05})
    with pytest.raises(ConfigError, match="'side'"):
        BanditSettings(streak_penalty={"local": 0.2, "lookahead": 0.05, "global": 0.1, "side": 0.3})
    with pytest.raises(ConfigError, match="BanditSettings"):
        ContextBandit("local")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------------- rewards


def test_revision_reward_arithmetic() -> None:
    ones = RewardParts(validation=1.0, quality=1.0, alignment=1.0, coherence=1.0)
    assert revision_reward(ones, checker_failed=False) == pytest.approx(1.0)
    assert revision_reward(ones, checker_failed=True) == pytest.approx(0.5)
    assert revision_reward(None, checker_failed=False) == pytest.approx(-0.1)
    assert revision_reward(None, checker_failed=True) == pytest.approx(-0.6)
    mixed = RewardParts(validation=0.5, quality=1.0, alignment=0.0, coherence=0.25)
    assert revision_reward(mixed, checker_failed=False) == pytest.approx(0.3 * 0.5 + 0.3 * 1.0 + 0.2 * 0.0 + 0.2 * 0.25)
    with pytest.raises(ConfigError, match="validation"):
        RewardParts(validation=1.2, quality=1.0, alignment=1.0, coherence=1.0)
    with pytest.raises(ConfigError, match="checker_failed"):
        revision_reward(ones, checker_failed="no")  # type: ignore[arg-type]


def test_empty_revision_means_no_revised_step() -> None:
    assert is_empty_revision("", "  ", "\n")
    assert not is_empty_revision("", "I need the director", "")


def test_reward_parts_are_mapped_cosines_of_the_right_pairs() -> None:
    embedder = offline_embedder()
    same = "Inception was directed by Christopher Nolan"
    parts = reward_parts(embedder, kg_observation=same, revised_observation=same, revised_step=same,
                         revised_action=same, revised_thought=same, question=same)
    assert (parts.validation, parts.quality, parts.alignment, parts.coherence) == pytest.approx((1.0, 1.0, 1.0, 1.0))
    assert revision_reward(parts, checker_failed=False) == pytest.approx(1.0)

    question = "Who directed Inception?"
    kg = "(Inception, film.film.directed_by, Christopher Nolan)"
    texts = {"revised_observation": "(Inception, directed_by, Christopher Nolan)",
             "revised_step": "Thought: find the director. Action: Search[Inception director]",
             "revised_action": "Search[Inception director]", "revised_thought": "Nolan directed the film"}
    parts = reward_parts(embedder, kg_observation=kg, question=question, **texts)
    assert parts.validation == pytest.approx(cosine_scores(embedder, kg, [texts["revised_observation"]])[0])
    assert parts.quality == pytest.approx(cosine_scores(embedder, question, [texts["revised_step"]])[0])
    assert parts.alignment == pytest.approx(cosine_scores(embedder, question, [texts["revised_action"]])[0])
    assert parts.coherence == pytest.approx(cosine_scores(embedder, kg, [texts["revised_thought"]])[0])
    assert parts.validation > parts.coherence  # the revised observation nearly copies the KG's triple

    blank = reward_parts(embedder, kg_observation=kg, question=question, **{**texts, "revised_thought": " "})
    assert blank.coherence == 0.0 and blank.validation == parts.validation


def test_fusion_weight_and_fused_reward() -> None:
    assert fusion_weight(0.0) == pytest.approx(0.4)
    assert fusion_weight(1.0) == pytest.approx(0.4 / math.e)
    assert fusion_weight(1.0) == pytest.approx(0.1471518, abs=1e-7)
    assert fuse_reward(1.0, 0.0, 0.0) == pytest.approx(0.6)
    assert fuse_reward(0.0, 1.0, 0.0) == pytest.approx(0.4)
    assert fuse_reward(0.0, 1.0, 1.0) == pytest.approx(0.4 / math.e)
    assert fuse_reward(0.5, 0.5, 0.3) == pytest.approx(0.5)
    assert fuse_reward(-0.6, 1.0, 0.0) == pytest.approx(0.6 * -0.6 + 0.4)
    assert fuse_reward(1.0, 0.0, 0.0, beta=0.0) == pytest.approx(1.0)
    with pytest.raises(ConfigError, match="consistency"):
        fuse_reward(0.5, 1.5, 0.0)
    with pytest.raises(ConfigError, match="entropy"):
        fuse_reward(0.5, 0.5, 2.0)
    with pytest.raises(ConfigError, match="local reward"):
        fuse_reward(math.nan, 0.5, 0.5)


def test_answer_consistency_shares_of_agreeing_candidates() -> None:
    candidates = [["the matrix"], ["Matrix Reloaded"], ["THE MATRIX!", "Speed"], []]
    assert answer_consistency(["The Matrix"], candidates) == pytest.approx(2 / 4)
    assert answer_consistency(["Speed", "Matrix Reloaded"], candidates) == pytest.approx(2 / 4)
    assert answer_consistency([], candidates) == 0.0
    assert answer_consistency(["The Matrix"], []) == 0.0
    with pytest.raises(ConfigError, match="single string"):
        answer_consistency("The Matrix", candidates)


def test_normalized_entropy_of_candidate_answers() -> None:
    assert normalized_entropy([]) == 0.0
    assert normalized_entropy([["Nolan"]]) == 0.0
    assert normalized_entropy([["Nolan"], ["nolan!"]]) == 0.0
    assert normalized_entropy([["A", "B"], ["b", "a"]]) == 0.0  # an answer set is one outcome, order aside
    assert normalized_entropy([["a"], ["b"]]) == pytest.approx(1.0)
    assert normalized_entropy([["a"], ["b"], []]) == pytest.approx(1.0)  # "no answer" is an outcome too
    # a, a, b: -(2/3 ln 2/3 + 1/3 ln 1/3) / ln 3 = 0.5793802
    assert normalized_entropy([["a"], ["a"], ["b"]]) == pytest.approx(0.5793802, abs=1e-7)
