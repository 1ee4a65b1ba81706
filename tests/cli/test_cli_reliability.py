"""Issue 52 on the command line: one deadline per `kgqa ask` question, honoured against a SPARQL endpoint that never
answers (item 5), and the oddities a hostile probe found (item 10): each refused with one line naming the input."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kgqa import config
from kgqa.cli import main
from kgqa.eval.runner import run_eval

QUESTION = "Who directed Titanic?"


class HangingServer:
    """A real HTTP endpoint on 127.0.0.1 that accepts every connection, reads the request and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.accepted: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/sparql"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted.append(conn)  # held open, never answered

    def __enter__(self) -> HangingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for conn in self.accepted:
            conn.close()
        self.sock.close()


@pytest.fixture
def hanging() -> Iterator[HangingServer]:
    with HangingServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    config_file = tmp_path / "kgqa-test-config.toml"
    config_file.write_text("", encoding="utf-8")
    monkeypatch.setenv("KGQA_CONFIG", str(config_file))
    monkeypatch.setenv("KGQA_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("KGQA_QUESTION_TIMEOUT", "KGQA_KG_TIMEOUT", "KGQA_KG_RETRIES", "KGQA_METHOD", "KGQA_KG", "KGQA_LLM"):
        monkeypatch.delenv(name, raising=False)
    config._file_values.cache_clear()  # the config file is read once per process
    yield
    config._file_values.cache_clear()


@pytest.fixture
def rules(tmp_path: Path) -> Path:
    path = tmp_path / "rules.jsonl"
    path.write_text(json.dumps({"reply": {"answers": ["James Cameron"]}}) + "\n", encoding="utf-8")
    return path


def _elapsed(message: str) -> float:
    """The seconds the question had run when its deadline error was raised, as the error says."""
    found = re.search(r"\(([0-9.]+) s elapsed\)", message)
    assert found, message
    return float(found.group(1))


def _ask(hanging: HangingServer, rules: Path, *extra: str) -> tuple[int, float]:
    # ToG over the endpoint, with the model-free embedder; the KG's own settings stay the defaults (30 s per attempt,
    # 2 retries), so without the deadline the first query alone would wait 90 s and more.
    started = time.monotonic()
    code = main(["ask", QUESTION, "--kg", hanging.url, "--method", "tog", "--llm", f"scripted:{rules}",
                 "--embedder", "hash:64", *extra])
    return code, time.monotonic() - started


def test_ask_against_a_hanging_endpoint_fails_within_its_deadline(hanging: HangingServer, rules: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, elapsed = _ask(hanging, rules, "--timeout", "2")
    err = capsys.readouterr().err
    assert code == 2
    assert hanging.accepted  # the endpoint was really asked
    [line] = [line for line in err.splitlines() if line.startswith("kgqa: error:")]
    assert "ran out of its 2 s deadline" in line and f"waiting for the SPARQL endpoint {hanging.url}" in line
    assert "--timeout" in line and "Traceback" not in err
    assert _elapsed(line) < 6.0  # the question's own clock: within ~3x the deadline
    assert elapsed < 30.0  # the whole command, loading included: not the KG's 30 s per attempt, 3 attempts


def test_eval_against_a_hanging_endpoint_stops_within_the_deadline(hanging: HangingServer, rules: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # before its first question, a run checks that the KG holds the questions' topics: that lookup gets the deadline too
    started = time.monotonic()
    code = main(["eval", "--dataset", "demo", "--method", "tog", "--kg", hanging.url, "--llm", f"scripted:{rules}",
                 "--embedder", "hash:64", "--limit", "2", "--out", str(tmp_path / "run"), "--no-progress",
                 "--timeout", "2"])
    elapsed = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 2 and "the KG is not answering" in err and "ran out of its 2 s deadline" in err
    assert _elapsed(err) < 6.0 and elapsed < 30.0


@pytest.mark.parametrize("where", ["environment", "config file"])
def test_the_deadline_also_comes_from_the_environment_and_the_config_file(hanging: HangingServer, rules: Path,
                                                                          where: str, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    if where == "environment":
        monkeypatch.setenv("KGQA_QUESTION_TIMEOUT", "1.5")
    else:
        (tmp_path / "kgqa-test-config.toml").write_text("question_timeout = 1.5\n", encoding="utf-8")
        config._file_values.cache_clear()
    code, elapsed = _ask(hanging, rules)
    err = capsys.readouterr().err
    assert code == 2 and "ran out of its 1.5 s deadline" in err
    assert _elapsed(err) < 4.5 and elapsed < 30.0


@pytest.mark.parametrize(("value", "said"), [("-3", "-3"), ("later", "later")])
def test_a_bad_timeout_is_refused_before_anything_is_loaded(rules: Path, value: str, said: str,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KGQA_QUESTION_TIMEOUT", value)
    code = main(["ask", QUESTION, "--method", "io", "--llm", f"scripted:{rules}"])
    err = capsys.readouterr().err
    assert code == 2 and "question_timeout from $KGQA_QUESTION_TIMEOUT" in err and said in err
    # the flag is checked by click: a negative --timeout is a usage error naming it
    assert main(["ask", QUESTION, "--method", "io", "--llm", f"scripted:{rules}", "--timeout", "-1"]) == 2
    assert "--timeout" in capsys.readouterr().err


def test_a_question_within_its_deadline_is_answered(rules: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", QUESTION, "--method", "io", "--llm", f"scripted:{rules}", "--timeout", "60", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["answers"][0]["name"] == "James Cameron"


# -- item 10: the oddities -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["", " ", ",,,"])
def test_kg_chain_refuses_a_path_without_relations(path: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kg", "chain", "demo", "--from", "Titanic", "--path", path]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing printed as if a chain had been followed (the start entity, before)
    assert "has no relations" in captured.err and repr(path) in captured.err


@pytest.mark.parametrize("command", ["ask", "eval"])
def test_a_method_config_key_given_twice_is_refused_naming_it(command: str, rules: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    given = ["--method", "tog", "--method-config", "top_k=3", "--method-config", "depth=2", "--method-config", "top_k=5"]
    args = ["ask", QUESTION] if command == "ask" else ["eval", "--dataset", "demo", "--out", str(tmp_path / "run")]
    assert main([*args, *given, "--llm", f"scripted:{rules}"]) == 2
    err = capsys.readouterr().err
    assert "--method-config top_k is given twice ('top_k=3' and 'top_k=5')" in err
    assert not (tmp_path / "run").exists()


def test_eval_limit_zero_is_refused(tmp_path: Path, rules: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main(["eval", "--dataset", "demo", "--method", "io", "--llm", f"scripted:{rules}", "--limit", "0",
                 "--out", str(out)]) == 2
    assert "--limit" in capsys.readouterr().err and not out.exists()
    with pytest.raises(Exception, match="--limit must be a whole number >= 1"):
        run_eval("demo", method="io", llm=f"scripted:{rules}", limit=0, out=out, progress=False)
    assert not out.exists()


@pytest.mark.parametrize("args", [
    ["eval", "--dataset", "demo", "--method", "io", "--limit", "1", "--out", ""],
    ["eval", "--dataset", "demo", "--method", "io", "--limit", "1", "--out", "  "],
    ["kg", "import", "SOURCE", "--out", ""],
])
def test_an_empty_out_is_refused_naming_the_option(args: list[str], tmp_path: Path, rules: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "kb.txt"
    source.write_text("Titanic|directed_by|James Cameron\n", encoding="utf-8")
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)  # before: an empty --out wrote into the current directory (or said "Invalid argument: .")
    args = [str(source) if a == "SOURCE" else a for a in args]
    if args[0] == "eval":
        args += ["--llm", f"scripted:{rules}"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "Invalid value for '--out'" in err and "is empty: name a directory" in err
    assert list(work.iterdir()) == []
