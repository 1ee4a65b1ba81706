"""Issue 16, findings 5 and 6 and the bad-input probe: every command, given input of the wrong form, exits 2 with one
line that names the input, never a traceback, and loses nothing already done.

The commands run in-process through :func:`kgqa.cli.main` (the console script's entry point) so the probe stays quick;
an argument that is not valid UTF-8 is passed as Python receives it from a shell (a lone surrogate).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgqa.cli import main

NOT_UTF8 = "caf\udce9"  # what Python makes of the bytes b"caf\xe9" in argv
LONG = "a" * 300


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bad-input")
    (root / "afile").write_text("not a directory\n", encoding="utf-8")
    (root / "rules.jsonl").write_text(json.dumps({"reply": {"answers": ["x"]}}) + "\n", encoding="utf-8")
    (root / "empty.tsv").write_text("", encoding="utf-8")
    (root / "bad.tsv").write_text("only-one-field\nstill one\n", encoding="utf-8")
    (root / "good.tsv").write_text("m.a\tr.x\tm.b\n", encoding="utf-8")
    (root / "kg").mkdir()
    (root / "kg" / "something").write_text("an earlier import\n", encoding="utf-8")
    (root / "damaged-kg").mkdir()
    (root / "damaged-kg" / "kgqa-embedded.json").write_text("{not json", encoding="utf-8")
    return root


def _run(args: list[str], capsys: pytest.CaptureFixture[str], work: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    monkeypatch.chdir(work)
    code = main(args)
    err = capsys.readouterr().err
    return code, err


S = "scripted:rules.jsonl"
EVAL = ["eval", "--dataset", "demo", "--method", "io", "--llm", S, "--limit", "1", "--no-progress"]
KG_EVAL = ["eval", "--dataset", "demo", "--method", "ccor", "--llm", S, "--limit", "1", "--no-progress"]

# (id, arguments, text the one line must contain)
CASES: list[tuple[str, list[str], str]] = [
    # kgqa eval
    ("eval-out-under-a-file", [*EVAL, "--out", "afile/run"], "afile is a file, not a directory"),
    ("eval-out-is-a-file", [*EVAL, "--out", "afile"], "--out afile is a file"),
    ("eval-out-name-too-long", [*EVAL, "--out", "x" * 300 + "/run"], "--out"),
    ("eval-method-config-not-a-number", [*KG_EVAL, "--method-config", "top_k=abc", "--out", "r"], "top_k='abc'"),
    ("eval-method-config-negative", [*KG_EVAL, "--method-config", "max_depth=-1", "--out", "r"], "max_depth=-1"),
    ("eval-method-config-unknown", [*KG_EVAL, "--method-config", "nonsense=1", "--out", "r"], "nonsense"),
    ("eval-method-config-no-equals", [*KG_EVAL, "--method-config", "top_k", "--out", "r"], "top_k"),
    ("eval-empty-llm", ["eval", "--dataset", "demo", "--method", "io", "--llm", "", "--out", "r"], "model spec is empty"),
    ("eval-unknown-llm", ["eval", "--dataset", "demo", "--method", "io", "--llm", "nope:x", "--out", "r"], "nope:x"),
    ("eval-kg-newline", [*KG_EVAL, "--kg", "de\nmo", "--out", "r"], "control character"),
    ("eval-kg-tab-url", [*KG_EVAL, "--kg", "http://127.0.0.1:1/sp\tarql", "--out", "r"], "control character"),
    ("eval-kg-too-long", [*KG_EVAL, "--kg", LONG, "--out", "r"], "is neither 'demo'"),
    ("eval-unknown-dataset", ["eval", "--dataset", "nope", "--method", "io", "--llm", S, "--out", "r"], "nope"),
    ("eval-unknown-method", ["eval", "--dataset", "demo", "--method", "nope", "--llm", S, "--out", "r"], "nope"),
    ("eval-negative-limit", [*EVAL, "--limit", "-1", "--out", "r"], "--limit"),
    ("eval-zero-workers", [*EVAL, "--workers", "0", "--out", "r"], "--workers"),
    ("eval-zero-kg-timeout", [*KG_EVAL, "--kg-timeout", "0", "--out", "r"], "--kg-timeout"),
    ("eval-cache-flags-together", [*EVAL, "--no-cache", "--refresh-cache", "--out", "r"], "--no-cache"),
    ("eval-resume-without-out", [*EVAL, "--resume"], "--resume"),
    ("eval-not-utf8-out", [*EVAL, "--out", NOT_UTF8], "not valid UTF-8"),
    ("eval-unknown-flag", [*EVAL, "--bogus"], "--bogus"),
    ("eval-compare-missing-run", ["eval", "compare", "no-such-run"], "no-such-run"),
    ("eval-report-missing-run", ["eval", "report", "no-such-run"], "no-such-run"),
    ("eval-import-run-missing-file", ["eval", "import-run", "nofile.jsonl", "--format", "pog", "--dataset", "cwq",
                                      "--out", "imp"], "nofile.jsonl"),
    # kgqa kg import
    ("import-out-under-a-file", ["kg", "import", "good.tsv", "--format", "tsv", "--out", "afile/kg"], "afile is a file"),
    ("import-out-not-empty", ["kg", "import", "good.tsv", "--format", "tsv", "--out", "kg"], "--force"),
    ("import-empty-file", ["kg", "import", "empty.tsv", "--format", "tsv", "--out", "new-kg-1"], "no triple was imported"),
    ("import-every-line-bad", ["kg", "import", "bad.tsv", "--format", "tsv", "--skip-bad", "--out", "new-kg-2"],
     "no triple was imported"),
    ("import-missing-source", ["kg", "import", "missing.tsv", "--out", "new-kg-3"], "missing.tsv"),
    ("import-unknown-format", ["kg", "import", "good.tsv", "--format", "nope", "--out", "new-kg-4"], "nope"),
    # kgqa kg info / relations / chain / search
    ("info-kg-tab", ["kg", "info", "http://127.0.0.1:1/sp\tarql"], "control character"),
    ("info-kg-too-long", ["kg", "info", LONG], "is neither 'demo'"),
    ("info-kg-empty", ["kg", "info", ""], "empty"),
    ("info-damaged-store", ["kg", "info", "damaged-kg"], "is damaged"),
    ("relations-not-utf8", ["kg", "relations", "demo", NOT_UTF8], "not valid UTF-8"),
    ("relations-unknown-entity", ["kg", "relations", "demo", "No Such Entity Anywhere"], "No Such Entity Anywhere"),
    ("chain-not-utf8", ["kg", "chain", "demo", "--from", NOT_UTF8, "--path", "film.director.film"], "not valid UTF-8"),
    ("chain-negative-limit", ["kg", "chain", "demo", "--from", "Christopher Nolan", "--path", "film.director.film",
                              "--limit", "-5"], "--limit"),
    ("chain-unknown-relation", ["kg", "chain", "demo", "--from", "Christopher Nolan", "--path", "no.such.relation"],
     "no.such.relation"),
    ("search-not-utf8", ["kg", "search", "demo", NOT_UTF8], "not valid UTF-8"),
    ("search-negative-limit", ["kg", "search", "demo", "Nolan", "--limit", "-1"], "--limit"),
    ("search-zero-limit", ["kg", "search", "demo", "Nolan", "--limit", "0"], "--limit"),
    # kgqa ask
    ("ask-not-utf8", ["ask", NOT_UTF8, "--method", "io", "--llm", S], "not valid UTF-8"),
    ("ask-empty-llm", ["ask", "Who directed Inception?", "--method", "io", "--llm", ""], "model spec is empty"),
    ("ask-unknown-method", ["ask", "Who directed Inception?", "--method", "nope", "--llm", S], "nope"),
    ("ask-kg-tab", ["ask", "Who directed Inception?", "--method", "ccor", "--llm", S, "--kg", "de\tmo"],
     "control character"),
    # kgqa serve, kgqa kg endpoint, kgqa kg freebase-filter (nothing is started)
    ("serve-negative-port", ["serve", "--port", "-1"], "--port"),
    ("serve-no-auth-off-loopback", ["serve", "--host", "0.0.0.0", "--no-auth"], "--no-auth is allowed only on a loopback"),
    ("serve-runs-missing", ["serve", "--runs", "no-such-runs"], "no-such-runs"),
    ("endpoint-unknown-engine", ["kg", "endpoint", "start", "--engine", "nope", "--data", "demo", "--dir", "ep"],
     "--engine"),
    ("endpoint-start-missing-data", ["kg", "endpoint", "start", "--engine", "oxigraph", "--data", "missing.nt",
                                     "--dir", "ep"], "missing.nt"),
    ("endpoint-status-no-endpoint", ["kg", "endpoint", "status", "no-such-dir"], "no-such-dir"),
    ("endpoint-stop-no-endpoint", ["kg", "endpoint", "stop", "no-such-dir"], "no-such-dir"),
    ("freebase-filter-missing-dump", ["kg", "freebase-filter", "missing.gz", "--out", "x.nt"], "missing.gz"),
    # kgqa methods / train / artifacts
    ("methods-unknown", ["methods", "nope"], "nope"),
    ("train-srp-zero-size", ["train", "srp", "--dataset", "demo", "--size", "0", "--out", "refs"], "--size"),
    ("train-fog-negative-epochs", ["train", "fog", "--dataset", "demo", "--epochs", "-1", "--out", "sc"], "--epochs"),
    ("artifacts-show-unknown", ["artifacts", "show", "nope"], "nope"),
]


@pytest.mark.parametrize(("args", "expected"), [pytest.param(a, e, id=i) for i, a, e in CASES])
def test_bad_input_exits_2_with_one_line_naming_it(args: list[str], expected: str, work: Path,
                                                   capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    code, err = _run(args, capsys, work, monkeypatch)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert "Traceback" not in err
    assert len(lines) == 1, err
    assert lines[0].startswith("kgqa: error:"), err
    assert expected in lines[0], err


def test_a_refused_import_keeps_the_kg_already_there(work: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    code, _ = _run(["kg", "import", "good.tsv", "--format", "tsv", "--out", "kg"], capsys, work, monkeypatch)
    assert code == 2
    assert (work / "kg" / "something").read_text() == "an earlier import\n"
    assert not (work / "new-kg-1").exists() and not (work / "new-kg-2").exists()


def test_force_replaces_an_earlier_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kgqa.kg import open_kg

    (tmp_path / "a.tsv").write_text("m.a\tr.x\tm.b\n", encoding="utf-8")
    (tmp_path / "b.tsv").write_text("m.c\tr.y\tm.d\nm.d\tr.y\tm.e\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["kg", "import", "a.tsv", "--format", "tsv", "--out", "kg"]) == 0
    assert main(["kg", "import", "b.tsv", "--format", "tsv", "--out", "kg"]) == 2
    assert open_kg(str(tmp_path / "kg")).stats().triples == 1  # refused: the first import is intact
    assert main(["kg", "import", "b.tsv", "--format", "tsv", "--out", "kg", "--force"]) == 0
    assert open_kg(str(tmp_path / "kg")).stats().triples == 2


def test_a_fourth_tsv_column_is_reported_not_dropped_silently(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "four.tsv").write_text("m.a\tr.x\tm.b\textra\nm.b\tr.x\tm.c\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["kg", "import", "four.tsv", "--format", "tsv", "--out", "kg"]) == 0
    err = capsys.readouterr().err
    assert "1 lines had fields after the third, which were ignored (first: four.tsv:1)" in err
