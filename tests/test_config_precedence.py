"""Configuration precedence with a real config file: a command-line flag beats the environment (``KGQA_*``), which beats
the config file (``$KGQA_CONFIG``), which beats the defaults; through :func:`kgqa.config.get` and through ``kgqa ask``
(issue 16: no test wrote a config file, so a file beating the environment passed every test)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from kgqa import config
from kgqa.cli import main
from kgqa.errors import ConfigError

KEYS = ("kg", "llm", "method", "data_dir", "cache_dir", "kg_timeout")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """No KGQA_* variable of the caller, no config file but the one a test writes, the working directory a temp one
    (a ./kgqa.toml there would be read), and the config cache emptied before and after."""
    for name in list(os.environ):
        if name.startswith("KGQA_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.config/kgqa/config.toml either
    config._file_values.cache_clear()
    yield tmp_path
    config._file_values.cache_clear()


def _write_config(path: Path, values: dict[str, str]) -> Path:
    path.write_text("".join(f"{key} = {json.dumps(value)}\n" for key, value in values.items()), encoding="utf-8")
    return path


def _use_config(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    monkeypatch.setenv("KGQA_CONFIG", str(path))
    config._file_values.cache_clear()


def test_flag_beats_environment_beats_config_file_beats_default(clean_env: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    tmp = clean_env
    dirs = {origin: tmp / origin for origin in ("file", "env", "flag")}
    for path in dirs.values():
        path.mkdir()
    values = {origin: {"kg": f"{origin}-kg", "llm": f"scripted:{origin}.jsonl", "method": f"{origin}-method",
                       "data_dir": str(dirs[origin]), "cache_dir": str(dirs[origin] / "cache"),
                       "kg_timeout": {"file": "7.5", "env": "4", "flag": "1.5"}[origin]}
              for origin in ("file", "env", "flag")}

    assert {key: config.get(key) for key in ("kg", "llm", "method")} == \
        {"kg": "demo", "llm": "local:smollm2", "method": "chains"}  # the defaults, with nothing set

    config_path = _write_config(tmp / "kgqa-config.toml", values["file"])
    _use_config(monkeypatch, config_path)
    for key in KEYS:
        value, origin = config.get_with_origin(key)
        assert (value, origin) == (values["file"][key], f"{key} in {config_path}"), key

    for key in KEYS:
        monkeypatch.setenv(f"KGQA_{key.upper()}", values["env"][key])
    for key in KEYS:
        assert config.get_with_origin(key) == (values["env"][key], f"$KGQA_{key.upper()}"), key
        assert config.get(key, values["flag"][key]) == values["flag"][key], key
    assert config.data_dir() == dirs["env"] and config.cache_dir() == dirs["env"] / "cache"
    assert config.data_dir(dirs["flag"]) == dirs["flag"]

    # A key the environment leaves unset still comes from the file.
    monkeypatch.delenv("KGQA_METHOD")
    assert config.get_with_origin("method") == ("file-method", f"method in {config_path}")


def test_a_config_file_that_is_not_toml_or_missing_is_a_clear_error(clean_env: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    broken = clean_env / "broken.toml"
    broken.write_text("kg = [unclosed\n", encoding="utf-8")
    _use_config(monkeypatch, broken)
    with pytest.raises(ConfigError, match=re.escape(f"config file {broken} is not valid TOML")):
        config.get("kg")
    _use_config(monkeypatch, clean_env / "missing.toml")
    with pytest.raises(ConfigError, match=r"KGQA_CONFIG names .*missing\.toml, which is not a file"):
        config.get("kg")


def _rules(path: Path, answer: str) -> Path:
    path.write_text(json.dumps({"reply": {"answers": [answer]}}) + "\n", encoding="utf-8")
    return path


def _ask(capsys: pytest.CaptureFixture[str], *flags: str) -> dict:
    code = main(["ask", "Who directed Inception?", "--json", *flags])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_kgqa_ask_takes_method_and_model_by_the_same_precedence(clean_env: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    tmp = clean_env
    monkeypatch.setenv("KGQA_CACHE_DIR", str(tmp / "cache"))
    rules = {origin: _rules(tmp / f"{origin}.jsonl", f"answer from the {origin}") for origin in ("file", "env", "flag")}
    # The file names a KG that does not exist: io and cot use no KG, so it is never opened.
    config_path = _write_config(tmp / "kgqa.toml", {"llm": f"scripted:{rules['file']}", "method": "cot",
                                                    "kg": str(tmp / "no-such-kg")})
    _use_config(monkeypatch, config_path)

    payload = _ask(capsys)
    assert (payload["method"], [a["name"] for a in payload["answers"]]) == ("cot", ["answer from the file"])

    monkeypatch.setenv("KGQA_LLM", f"scripted:{rules['env']}")
    monkeypatch.setenv("KGQA_METHOD", "io")
    payload = _ask(capsys)
    assert (payload["method"], [a["name"] for a in payload["answers"]]) == ("io", ["answer from the env"])

    payload = _ask(capsys, "--llm", f"scripted:{rules['flag']}", "--method", "cot")
    assert (payload["method"], [a["name"] for a in payload["answers"]]) == ("cot", ["answer from the flag"])
