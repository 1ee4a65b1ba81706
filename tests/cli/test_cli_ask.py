"""The README's `kgqa ask` example: offline, no data directory, fresh cache, the shipped demo KG and local model."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_ask_command() -> list[str]:
    """The `kgqa ask "..."` invocation on the README's first command line."""
    first = next(line for line in README.read_text(encoding="utf-8").splitlines() if "kgqa ask" in line)
    match = re.search(r'kgqa ask "([^"]+)"', first)
    assert match, f"no kgqa ask example in: {first}"
    return ["ask", match.group(1)]


@pytest.fixture(scope="module")
def local_model_available() -> None:
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip("llama_cpp is not installed (bash .ci/setup.sh installs it)")


def test_readme_ask_example_answers_offline_from_the_kg(tmp_path: Path, local_model_available: None) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("KGQA_DATA_DIR", "KGQA_KG", "KGQA_LLM", "OPENAI_BASE_URL")}
    env.update({"KGQA_CACHE_DIR": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                "KGQA_LLM_THREADS": env.get("KGQA_LLM_THREADS", "1")})
    trace = tmp_path / "trace.json"
    proc = subprocess.run([sys.executable, "-m", "kgqa", *readme_ask_command(), "--json", "--trace", str(trace)],
                          capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert [a["name"] for a in payload["answers"]] == ["Christopher Nolan"]
    assert payload["grounding"] == "structured"
    assert payload["main_chain"] == "film.film.directed_by"
    assert payload["usage"]["calls"] >= 1 and payload["usage"]["prompt_tokens"] > 0
    saved = json.loads(trace.read_text(encoding="utf-8"))
    assert ["m.0demo_inception", "film.film.directed_by", "m.0demo_christopher_nolan"] in saved["evidence"]
    assert any(event["step"] == "main.decision" for event in saved["trace"])
