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
    assert payload["method"] == "chains"  # the default (config.py): its main chain is chosen on the graph side
    assert [a["name"] for a in payload["answers"]] == ["Christopher Nolan"]
    assert payload["grounding"] == "structured"
    assert payload["main_chain"] == "film.film.directed_by"
    assert payload["usage"]["calls"] <= 3  # the local model only for constraints and fallbacks, at most 3 calls
    assert "training the demo KG's foresight scorer" in proc.stderr  # a fresh cache: said before it trains
    saved = json.loads(trace.read_text(encoding="utf-8"))
    assert ["m.0demo_inception", "film.film.directed_by", "m.0demo_christopher_nolan"] in saved["evidence"]
    assert any(event["step"] == "main.decision" for event in saved["trace"])


# -- error paths: exit 2 and one line naming the input, never a traceback (issue 16) ----------------------------------


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No KGQA_* variable or config file of the caller; a cache of the test's own."""
    from kgqa import config

    for name in list(os.environ):
        if name.startswith("KGQA_"):
            monkeypatch.delenv(name)
    empty = tmp_path / "empty.toml"
    empty.write_text("", encoding="utf-8")
    monkeypatch.setenv("KGQA_CONFIG", str(empty))
    monkeypatch.setenv("KGQA_CACHE_DIR", str(tmp_path / "cache"))
    config._file_values.cache_clear()
    yield tmp_path
    config._file_values.cache_clear()


ASK_ERRORS = [
    pytest.param(["Who?", "--method", "no-such-method"], r"unknown method 'no-such-method'; known methods: .*\bio\b",
                 id="unknown method"),
    pytest.param(["Who?", "--method", ""], r"unknown method ''", id="empty method"),
    pytest.param(["Who directed Inception?", "--kg", "/no/such/kg"], r"KG '/no/such/kg' is neither 'demo'",
                 id="missing KG directory"),
    pytest.param(["Who directed Inception?", "--kg", "ftp://example.org/kg"], r"KG 'ftp://example.org/kg' is neither",
                 id="KG of no known kind"),
    pytest.param(["Who directed Inception?", "--kg", "http://"], r"'http://' is not an http\(s\) URL",
                 id="malformed endpoint URL"),
    pytest.param(["Who?", "--method", "io", "--llm", "no-such-backend:model"], r"model spec 'no-such-backend:model'",
                 id="unknown LLM backend"),
    pytest.param(["Who?", "--method", "io", "--llm", ""], r"the model spec is empty", id="empty LLM spec"),
    pytest.param(["Who?", "--method", "io", "--llm", "openai:"], r"model spec 'openai:' is malformed",
                 id="malformed LLM spec"),
    pytest.param(["Who?", "--method", "io", "--llm", "scripted:/no/such/rules.jsonl"],
                 r"scripted model file /no/such/rules\.jsonl does not exist", id="missing scripted rules"),
    pytest.param(["Who directed Inception?", "--kg", "demo", "--llm", "no-such-backend:x"],
                 r"model spec 'no-such-backend:x'", id="unknown LLM backend with a KG method"),
    pytest.param([""], r"the question is empty", id="empty question"),
    pytest.param(["  \t "], r"the question is empty", id="blank question"),
    pytest.param(["Who?", "--method", "io", "--method-config", "no_such_key=1"], r"'no_such_key' is not a setting",
                 id="unknown method setting"),
]


@pytest.mark.parametrize(("args", "message"), ASK_ERRORS)
def test_ask_error_paths_exit_2_with_one_line(isolated: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                              message: str) -> None:
    from kgqa.cli import main

    code = main(["ask", *args])
    out, err = capsys.readouterr()
    assert code == 2, err
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("kgqa: error: "), err
    assert re.search(message, err), err
    assert "Traceback" not in err


def test_ask_error_from_the_console_script_is_one_line(isolated: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "kgqa", "ask", "Who?", "--method", "no-such-method"],
                          capture_output=True, text=True, env=dict(os.environ), timeout=120, cwd=isolated)
    assert proc.returncode == 2
    assert proc.stdout == "" and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "unknown method 'no-such-method'" in proc.stderr
