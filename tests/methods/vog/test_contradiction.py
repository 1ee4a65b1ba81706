"""The second checker (kgqa.methods.vog.contradiction): the embedding proxy on hand pairs, the NLI verdict and label
order, a real (tiny, random) cross-encoder built on disk, spec parsing, and the clear error offline."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kgqa.errors import ConfigError
from kgqa.methods.vog.contradiction import (
    BLANK,
    DEFAULT_THRESHOLD,
    ContradictionChecker,
    CrossEncoderNLI,
    EmbeddingContradictionProxy,
    contradiction_index,
    load_checker,
    nli_verdict,
)
from kgqa.testing import offline_embedder

PREDICTED = "The director of Inception is Christopher Nolan"
KG_AGREES = "(Inception, film.film.directed_by, Christopher Nolan)"
OFF_TOPIC = ("The river Danube flows through Vienna", "(Costa Rica, location.country.currency_used, Costa Rican colón)")
SAME_TOPIC_OTHER_VALUE = ("The currency of Costa Rica is the US dollar",
                          "(Costa Rica, location.country.currency_used, Costa Rican colón)")


@pytest.fixture(scope="module")
def proxy() -> EmbeddingContradictionProxy:
    return EmbeddingContradictionProxy(offline_embedder())


# ------------------------------------------------------------------------------------------------ embedding proxy


def test_identical_text_is_no_contradiction(proxy: EmbeddingContradictionProxy) -> None:
    result = proxy.check(PREDICTED, PREDICTED)
    assert not result.contradiction
    assert result.score == pytest.approx(0.0, abs=1e-6)
    assert result.detail == f"cosine 1.00 >= {DEFAULT_THRESHOLD:.2f}"


def test_hand_pairs_at_the_default_threshold(proxy: EmbeddingContradictionProxy) -> None:
    # hash embedder cosines: agreeing 0.66, off topic 0.03, empty observation -0.04 (threshold 0.4)
    agrees = proxy.check(PREDICTED, KG_AGREES)
    assert not agrees.contradiction and agrees.detail.startswith("cosine 0.66 >= 0.40")
    off_topic = proxy.check(*OFF_TOPIC)
    assert off_topic.contradiction and off_topic.detail == "cosine 0.03 < 0.40"
    assert off_topic.score == pytest.approx((1 - proxy.cosine(*OFF_TOPIC)) / 2)
    assert proxy.check(PREDICTED, "no triples found").contradiction
    assert off_topic.score > agrees.score


def test_cosine_is_symmetric_so_both_directions_agree(proxy: EmbeddingContradictionProxy) -> None:
    for premise, hypothesis in ((PREDICTED, KG_AGREES), OFF_TOPIC, SAME_TOPIC_OTHER_VALUE):
        assert proxy.check(premise, hypothesis) == proxy.check(hypothesis, premise)


def test_the_threshold_moves_the_verdict() -> None:
    embedder = offline_embedder()
    # "US dollar" vs the KG's colón: same subject and relation, cosine 0.48 with the hash embedder. The proxy sees no
    # contradiction at 0.4 (its documented blind spot: that is the LLM verifier's job) and one at 0.5.
    assert not EmbeddingContradictionProxy(embedder, threshold=0.4).check(*SAME_TOPIC_OTHER_VALUE).contradiction
    assert EmbeddingContradictionProxy(embedder, threshold=0.5).check(*SAME_TOPIC_OTHER_VALUE).contradiction
    # the threshold for the hash embedder in the module docstring still splits the hand pairs
    low = EmbeddingContradictionProxy(embedder, threshold=0.25)
    assert not low.check(PREDICTED, KG_AGREES).contradiction and low.check(*OFF_TOPIC).contradiction


def test_blank_text_is_nothing_to_compare(proxy: EmbeddingContradictionProxy) -> None:
    assert proxy.check("", KG_AGREES) == BLANK
    assert proxy.check(PREDICTED, "   ") == BLANK
    assert not BLANK.contradiction


def test_bad_proxy_arguments_raise_config_error() -> None:
    for threshold in (1.5, -2.0, float("nan")):
        with pytest.raises(ConfigError, match="threshold"):
            EmbeddingContradictionProxy(offline_embedder(), threshold=threshold)
    with pytest.raises(ConfigError, match="embedder"):
        EmbeddingContradictionProxy(None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="premise"):
        EmbeddingContradictionProxy(offline_embedder()).check(None, "x")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------- spec parsing


def test_load_checker_specs() -> None:
    embedder = offline_embedder()
    default = load_checker("embedding", embedder=embedder)
    assert isinstance(default, EmbeddingContradictionProxy) and default.threshold == DEFAULT_THRESHOLD
    assert default.name == "embedding" and isinstance(default, ContradictionChecker)
    assert load_checker("embedding:0.3", embedder=embedder).threshold == 0.3  # type: ignore[attr-defined]
    assert load_checker(" embedding : -0.1 ", embedder=embedder).threshold == -0.1  # type: ignore[attr-defined]
    nli = load_checker("nli:cross-encoder/nli-deberta-v3-base", embedder=None)
    assert isinstance(nli, CrossEncoderNLI) and isinstance(nli, ContradictionChecker)
    assert nli.model_name == "cross-encoder/nli-deberta-v3-base" and nli.name == "nli"
    assert load_checker("nli:C:/models/nli", embedder=None).model_name == "C:/models/nli"  # type: ignore[attr-defined]


@pytest.mark.parametrize("spec, fragment", [
    ("none", "unknown contradiction checker 'none'"),
    ("deberta", "unknown contradiction checker 'deberta'"),
    ("", "unknown contradiction checker ''"),
    ("embedding:high", "threshold 'high' is not a number"),
    ("embedding:2", "threshold must be a cosine in"),
    ("nli:", "names no model"),
])
def test_bad_specs_name_the_spec_and_the_valid_forms(spec: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment) as info:
        load_checker(spec, embedder=offline_embedder())
    if "unknown" in fragment or "names no model" in fragment:
        assert '"embedding:THRESHOLD"' in str(info.value) and '"nli:MODEL"' in str(info.value)


def test_embedding_spec_needs_an_embedder() -> None:
    with pytest.raises(ConfigError, match="needs an embedder"):
        load_checker("embedding", embedder=None)


# ------------------------------------------------------------------------------------------------------------ NLI


def test_contradiction_label_is_read_from_id2label() -> None:
    assert contradiction_index({0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}, "m") == 0
    assert contradiction_index({"0": "entailment", "1": "neutral", "2": "contradiction"}, "m") == 2
    with pytest.raises(ConfigError, match="'my/model' has no contradiction label"):
        contradiction_index({0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}, "my/model")


def test_nli_verdict_in_both_directions() -> None:
    forward = nli_verdict([0.9, 0.05, 0.05], [0.1, 0.1, 0.8], 0)
    assert forward.contradiction and forward.score == pytest.approx(0.9)
    assert forward.detail == "nli: contradiction 0.90 (p->h), 0.10 (h->p)"
    backward = nli_verdict([0.1, 0.1, 0.8], [0.7, 0.2, 0.1], 0)
    assert backward.contradiction and backward.score == pytest.approx(0.7)
    # the top label but not above 0.5; above 0.5 is impossible without being the top label
    assert not nli_verdict([0.45, 0.3, 0.25], [0.2, 0.4, 0.4], 0).contradiction
    assert not nli_verdict([0.3, 0.6, 0.1], [0.3, 0.1, 0.6], 0).contradiction
    with pytest.raises(ConfigError, match="contradiction label 3"):
        nli_verdict([0.3, 0.6, 0.1], [0.3, 0.1, 0.6], 3)


def test_unloadable_nli_model_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("sentence_transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    checker = CrossEncoderNLI("kgqa-tests/absent-nli-model")  # lazy: constructing loads nothing
    with pytest.raises(ConfigError, match=r"'kgqa-tests/absent-nli-model'.*no NLI model ships offline"):
        checker.check("Obama was born in Honolulu", "Obama was born in Chicago")
    with pytest.raises(ConfigError, match="needs a model name"):
        CrossEncoderNLI("  ")


def _tiny_nli(folder: Path, id2label: dict[int, str], favoured: int) -> str:
    """A real, tiny BERT cross-encoder on disk whose classifier always favours output ``favoured`` (zero weights,
    bias 6 there): random text features, a fixed verdict, so the label order is what the test checks."""
    torch = pytest.importorskip("torch")
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "obama", "was", "born", "in", "honolulu", "chicago"]
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab={w: i for i, w in enumerate(words)},
                                                                 unk_token="[UNK]"))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tokenizer.post_processor = tokenizers.processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]",
                                                cls_token="[CLS]", sep_token="[SEP]", model_max_length=32)
    config = transformers.BertConfig(vocab_size=len(words), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=16, max_position_embeddings=32, num_labels=len(id2label),
                                     id2label=id2label, label2id={v: k for k, v in id2label.items()})
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(config)
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.zero_()
        model.classifier.bias[favoured] = 6.0
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return str(folder)


def test_a_real_cross_encoder_reads_its_label_order(tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers")
    labels = {0: "entailment", 1: "neutral", 2: "contradiction"}
    says_contradiction = CrossEncoderNLI(_tiny_nli(tmp_path / "c", labels, favoured=2))
    result = says_contradiction.check("obama was born in honolulu", "obama was born in chicago")
    favoured = math.exp(6) / (math.exp(6) + 2)  # softmax of the bias (0, 0, 6): the classifier ignores the text
    assert result.contradiction and result.score == pytest.approx(favoured, abs=1e-5)
    assert result.detail == "nli: contradiction 1.00 (p->h), 1.00 (h->p)"
    # the same outputs under another label order: index 2 is now entailment, so no contradiction
    reordered = {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}
    says_entailment = CrossEncoderNLI(_tiny_nli(tmp_path / "e", reordered, favoured=2))
    result = says_entailment.check("obama was born in honolulu", "obama was born in honolulu")
    assert not result.contradiction and result.score == pytest.approx(1 / (math.exp(6) + 2), abs=1e-5)
    unlabelled = CrossEncoderNLI(_tiny_nli(tmp_path / "u", {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}, favoured=0))
    with pytest.raises(ConfigError, match="no contradiction label"):
        unlabelled.load()
