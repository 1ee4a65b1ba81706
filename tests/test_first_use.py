"""First use on a fresh cache (issue 51 item 4, issue 52 item 14): the docs' FoG example is answered right by the demo
KG's own scorer, which is built with a line saying what it builds and how long it takes before it starts; a build that
is interrupted (Ctrl-C, or the process killed) leaves nothing that looks built, and the next ask builds it again; the
default `kgqa ask` links an alias and applies a year constraint on the graph side."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kgqa import config
from kgqa.artifacts import ArtifactStore
from kgqa.cli import main
from kgqa.steps.foresight.loading import DEMO_SCORER

DOCS_FOG = Path(__file__).resolve().parents[1] / "docs" / "fog.md"


def docs_example() -> list[str]:
    """The `kgqa ask "..." --method fog` example of docs/fog.md (the demo KG's scorer, built on first use)."""
    match = re.search(r'kgqa ask "([^"]+)" --method fog', DOCS_FOG.read_text(encoding="utf-8"))
    assert match, "docs/fog.md has no `kgqa ask \"...\" --method fog` example"
    return ["ask", match.group(1), "--method", "fog"]


@pytest.fixture(scope="module")
def fresh_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A cache of this module's own, empty at the start: the first ask builds the demo KG and the demo scorer."""
    cache = tmp_path_factory.mktemp("first-use-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KGQA_CACHE_DIR", str(cache))
        patch.delenv("KGQA_METHOD", raising=False)
        patch.delenv("KGQA_LLM", raising=False)
        patch.delenv("KGQA_KG", raising=False)
        config._file_values.cache_clear()
        yield cache
    config._file_values.cache_clear()


def _leftovers(cache: Path) -> tuple[list[Path], list[Path]]:
    """(built artifact directories, staging directories) of the demo scorer in ``cache``."""
    kind = cache / "artifacts" / DEMO_SCORER
    if not kind.is_dir():
        return [], []
    built = [p for p in kind.iterdir() if p.is_dir() and not p.name.startswith(".")]
    staging = [p for p in kind.iterdir() if p.is_dir() and p.name.startswith(".build-")]
    return built, staging


def test_a_ctrl_c_during_the_build_leaves_nothing(fresh_cache: Path) -> None:
    store = ArtifactStore(fresh_cache / "artifacts")

    def interrupt(line: str) -> None:
        if line.startswith("scorer epoch 1"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        store.build(DEMO_SCORER, {"embedder": "hash"}, progress=interrupt)
    assert _leftovers(fresh_cache) == ([], [])
    assert store.find(DEMO_SCORER, {"embedder": "hash"}) is None  # the next ask builds it again


def test_a_killed_first_ask_leaves_nothing_built_and_the_next_builds_and_answers_the_docs_example(
        fresh_cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = {**os.environ, "KGQA_CACHE_DIR": str(fresh_cache), "KGQA_LLM_THREADS": os.environ.get("KGQA_LLM_THREADS",
                                                                                                  "1")}
    proc = subprocess.Popen([sys.executable, "-m", "kgqa", *docs_example()], stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True, env=env)
    said: list[str] = []
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 600
        for line in proc.stderr:  # the build says what it is doing before it trains
            said.append(line)
            if "scorer epoch 1:" in line or time.monotonic() > deadline:
                break
        proc.send_signal(signal.SIGKILL)  # no handler runs: what is left is what a power cut leaves
    finally:
        proc.wait(timeout=60)
    text = "".join(said)
    assert "building fog-demo-scorer" in text
    assert re.search(r"training the demo KG's foresight scorer on \d+ questions, once: about \d+ s", text)
    assert text.index("training the demo KG's foresight scorer") < text.index("scorer epoch 1:")
    built, staging = _leftovers(fresh_cache)
    assert built == [] and len(staging) == 1  # a dot-directory that nothing reads, never the artifact's own

    capsys.readouterr()
    assert main([*docs_example(), "--json"]) == 0
    out, err = capsys.readouterr()
    assert [a["name"] for a in json.loads(out)["answers"]] == ["Christopher Nolan"]
    assert "training the demo KG's foresight scorer" in err and "built fog-demo-scorer" in err
    built, staging = _leftovers(fresh_cache)
    assert len(built) == 1 and staging == []  # the killed build's leftovers were swept by the next one

    assert main([*docs_example(), "--json"]) == 0  # built once: the next ask trains nothing
    out, err = capsys.readouterr()
    assert [a["name"] for a in json.loads(out)["answers"]] == ["Christopher Nolan"]
    assert "training" not in err and "building fog-demo-scorer" not in err


def test_the_default_ask_links_the_oscar_and_applies_a_year_on_the_graph(fresh_cache: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("llama_cpp")  # the default model is the local one (bash .ci/setup.sh installs it)
    assert main(["ask", "Who got the Oscar for Best Director in 2020?", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["method"] == config.DEFAULTS["method"] and payload["error"] is None
    assert [t["id"] for t in payload["topics"]] == ["m.0demo_academy_award_for_best_director"]
    assert payload["linking"]["linked"][0]["mention"] == "Oscar for Best Director"
    # the example that got all ten films: the year the question names is checked on the graph
    assert main(["ask", "Which Quentin Tarantino movie came out in 2009?", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert [a["name"] for a in payload["answers"]] == ["Inglourious Basterds"]
    assert payload["grounding"] == "structured" and payload["usage"]["calls"] == 0


def test_the_default_ask_reads_a_year_on_the_award_honour_not_the_films_release(
        fresh_cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Birdman won Best Picture at the 2015 ceremony; Spotlight came out in 2015 and won in 2016. The year a question
    names qualifies the n-ary fact (the honour) on the chain when it can, so only Birdman is kept."""
    pytest.importorskip("llama_cpp")
    assert main(["ask", "Which film won Best Picture in 2015?", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert [a["name"] for a in payload["answers"]] == ["Birdman"]
    assert payload["grounding"] == "structured" and payload["usage"]["calls"] == 0


def test_the_default_ask_weighs_the_answer_pattern_by_the_demo_scorers_answer_types(
        fresh_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The demo scorer carries an answer-type prior: "Where was the director of Titanic born?" reads as a place, so
    the chain goes on past the director (without the prior it stops at James Cameron)."""
    pytest.importorskip("llama_cpp")
    built, _ = _leftovers(fresh_cache)
    assert (built[0] / "answer_types" / "answer_types.json").is_file()
    question = "Where was the director of Titanic born?"
    trace = tmp_path / "trace.json"
    assert main(["ask", question, "--json", "--trace", str(trace)]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert [a["name"] for a in payload["answers"]] == ["Kapuskasing"]
    # (James Cameron both directed and wrote Titanic: either relation reaches his birthplace)
    assert payload["main_chain"].endswith(",people.person.place_of_birth")
    (typing,) = [e for e in json.loads(trace.read_text())["trace"] if e.get("step") == "chains.answer_types"]
    assert 0 < typing["p"] <= 1 and typing["best"]
    assert main(["ask", question, "--json", "--method-config", "answer_type_weight=0"]) == 0
    assert [a["name"] for a in json.loads(capsys.readouterr().out)["answers"]] == ["James Cameron"]


def test_a_pattern_ending_on_an_unlikely_type_is_read_again_with_the_likely_types_kept(
        fresh_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The scorer's reading of "What films did Cillian Murphy act in?" ends on his characters, a type the question
    almost surely does not ask for: the typed retry keeps the performance and replaces the last hop by the film."""
    pytest.importorskip("llama_cpp")
    question = "What films did Cillian Murphy act in?"
    trace = tmp_path / "trace.json"
    assert main(["ask", question, "--json", "--trace", str(trace)]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert sorted(a["name"] for a in payload["answers"]) == ["Inception", "Oppenheimer"]
    assert payload["main_chain"] == "film.actor.film,film.performance.film"
    (retry,) = [e for e in json.loads(trace.read_text())["trace"] if e.get("step") == "chains.typed_retry"]
    assert retry["used"] and retry["before"] == "film.actor.film,film.performance.character"
    assert retry["after"] == "film.actor.film,film.performance.film" and retry["p_before"] < 0.05
    assert main(["ask", question, "--json", "--method-config", "typed_retry=false"]) == 0
    assert "J. Robert Oppenheimer" in [a["name"] for a in json.loads(capsys.readouterr().out)["answers"]]


def test_the_typed_retry_walks_through_the_films_the_scorer_cut_to_their_directors(
        fresh_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """"Who directed the films Harrison Ford starred in?" asks for people two hops past the films; the scorer's
    reading stops at the films or his characters. The retry keeps the films (a bridge: films lead on to directors)
    below tau_e and goes one hop further to the directors; without the bridges it cannot."""
    pytest.importorskip("llama_cpp")
    question = "Who directed the films Harrison Ford starred in?"
    trace = tmp_path / "trace.json"
    assert main(["ask", question, "--json", "--trace", str(trace)]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["main_chain"] == "film.actor.film,film.performance.film,film.film.directed_by"
    assert {"Steven Spielberg", "George Lucas", "Ridley Scott"} <= {a["name"] for a in payload["answers"]}
    (retry,) = [e for e in json.loads(trace.read_text())["trace"] if e.get("step") == "chains.typed_retry"]
    assert retry["used"] and retry["after"] == payload["main_chain"]
    assert main(["ask", question, "--json", "--method-config", "typed_retry_bridges=false"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert not payload["main_chain"].endswith("film.film.directed_by")
    assert "Steven Spielberg" not in {a["name"] for a in payload["answers"]}


def test_a_hop_kept_by_the_seed_floor_is_not_refused_by_the_scorer_that_cut_it(
        fresh_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """From the award, every triple into its honours (CVTs) scores below tau_e; the seed floor keeps the best group
    as the only way on. Verifying that hop by the same scorer (threshold tau_e) would refuse it and leave no answer."""
    pytest.importorskip("llama_cpp")
    question = "Who won the Oscar for Best Supporting Actor in 2010?"
    trace = tmp_path / "trace.json"
    assert main(["ask", question, "--json", "--trace", str(trace)]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert [a["name"] for a in payload["answers"]] == ["Christoph Waltz"]
    hops = [e for e in json.loads(trace.read_text())["trace"] if e.get("step") == "chains.hop"]
    assert hops and "verified" not in hops[0]  # the floored first hop is taken, not re-verified


def test_ask_reports_fogs_graph_mode_under_its_own_label_as_eval_does(fresh_cache: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("llama_cpp")  # with the local model FoG runs in graph mode (mode=auto)
    assert main(["ask", "Who directed Inception?", "--method", "fog", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert (payload["method"], payload["method_name"]) == ("fog[graph]", "fog")
    assert [a["name"] for a in payload["answers"]] == ["Christopher Nolan"]
    assert main(["ask", "Who directed Inception?", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["method"] == payload["method_name"] == config.DEFAULTS["method"]
