"""How methods plug in, beyond the registry: dataset facts reach CCoR, its needs agree with what it runs, settings
given as text keep their declared type, and every registry names a broken plugin as broken."""

from __future__ import annotations

import pytest
from pydantic import Field

from kgqa.core import MethodContext, Prediction
from kgqa.errors import ConfigError
from kgqa.methods import KGQAMethod, MethodConfig, get_method, parse_method_config, register_method, solve
from kgqa.methods.registry import METHODS
from kgqa.testing import PolicyModel, by_step, context, offline_embedder, question, shared_movie_kg

NOLAN = ("m.nolan", "Christopher Nolan")
ALWAYS_FORWARD = by_step({
    "ccor.prune": lambda p: {"relations": list(p.options().values())},
    "ccor.reason": {"chain_status": "incomplete", "answer_space_reached": False, "reason": "go on"},
    "ccor.generate": {"reasoning": "fallback", "answers": ["x"]},
})


def _depth_limits(**settings: object) -> list[int]:
    metadata = settings.pop("metadata", {})
    ctx, _, _ = context(shared_movie_kg(), ALWAYS_FORWARD)
    prediction = solve(get_method("ccor", pruner="llm", top_k=1, **settings),
                       question("deep?", NOLAN, **metadata), ctx)  # type: ignore[arg-type]
    return sorted({e["max_depth"] for e in prediction.trace if e["step"] == "main.depth_limit"})


def test_ccor_takes_its_depth_from_the_dataset_facts_unless_configured() -> None:
    assert _depth_limits(metadata={"max_depth": 1}) == [1]
    assert _depth_limits(metadata={"max_depth": 2}) == [2]
    config = get_method("ccor").config  # type: ignore[attr-defined]
    assert config.depth_for(question("?")) == 3 and config.depth_for(question("?", max_depth=4)) == 4  # CWQ's fact
    assert _depth_limits(metadata={"max_depth": 2}, max_depth=1) == [1]  # an explicit setting wins


@pytest.mark.parametrize(("model_name", "scorer"), [("local:smollm2", "embedding"), ("LOCAL:smollm2", "embedding"),
                                                    ("openai:gpt-4.1-mini", "llm")])
def test_ccor_needs_exactly_the_embedder_its_auto_pruner_uses(model_name: str, scorer: str) -> None:
    method = get_method("ccor")
    assert method.needs(model_name).embedder is (scorer == "embedding")  # type: ignore[attr-defined]
    model = PolicyModel(by_step({"ccor.reason": {"chain_status": "complete", "reason": "done"},
                                 "ccor.prune": lambda p: {"relations": list(p.options().values())}}),
                        name=model_name)
    ctx = MethodContext(kg=shared_movie_kg(), llm=model, embedder=offline_embedder())
    prediction = solve(method, question("Which films did Christopher Nolan direct?", NOLAN), ctx)
    assert {e["scorer"] for e in prediction.trace if e["step"] == "ccor.prune"} == {scorer}


class _Labelled(KGQAMethod):
    name = "test-labelled"

    class Config(MethodConfig):
        label: str = "x"
        note: str | None = None
        size: int = Field(default=1, ge=1)

    def answer(self, question, ctx) -> Prediction:  # type: ignore[no-untyped-def]
        return Prediction(answers=[f"{self.config.label}/{self.config.note}/{self.config.size}"])


def test_settings_given_as_text_keep_the_type_the_method_declares() -> None:
    with METHODS.restored():
        register_method("test-labelled")(_Labelled)
        settings = parse_method_config(["label=2024", "note=none", "size=3"], method="test-labelled")
        assert settings == {"label": "2024", "note": None, "size": 3}
        method = get_method("test-labelled", **settings)
        assert solve(method, question("?"), MethodContext(kg=None, llm=None)).names == ["2024/None/3"]  # type: ignore[arg-type]
        assert parse_method_config(["label=true"], method="test-labelled") == {"label": "true"}
    assert parse_method_config(["label=2024"]) == {"label": 2024}  # without a method: converted by its spelling


def test_a_setting_given_twice_is_refused_by_every_caller_not_only_the_cli() -> None:
    with pytest.raises(ConfigError, match=r"method config top_k is given twice \(top_k=3 and 'top_k=5'\)"):
        parse_method_config(["top_k=3", "pruner=embedding", "top_k=5"])


def test_llm_backends_and_embedders_name_a_broken_plugin() -> None:
    from kgqa.llm import LLM_BACKENDS, load
    from kgqa.text.embedders import EMBEDDERS, load_embedder

    with LLM_BACKENDS.restored(), EMBEDDERS.restored():
        LLM_BACKENDS.note_error("brokenllm", "ModuleNotFoundError: No module named 'vendor_sdk'")
        EMBEDDERS.note_error("brokenemb", "ImportError: cannot import name 'Encoder'")
        with pytest.raises(ConfigError, match=r"LLM backend 'brokenllm' could not be loaded: ModuleNotFoundError"):
            load("brokenllm:model")
        with pytest.raises(ConfigError, match=r"embedder 'brokenemb' could not be loaded: ImportError"):
            load_embedder("brokenemb")
    with pytest.raises(ConfigError, match=r"model spec 'nosuch:x' is not understood"):
        load("nosuch:x")
    with pytest.raises(ConfigError, match=r"unknown embedder 'nosuch'; known: hash, minilm"):
        load_embedder("nosuch")
