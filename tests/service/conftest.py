"""Fixtures of the service tests: real uvicorn servers on 127.0.0.1 (each in a thread, on a socket bound to a free port),
the demo KG, a scripted model, two real run directories written by the eval runner, and headless Chromium.

The scripted model answers the demo questions as an oracle would: for each question its gold chain, hop by hop, and
"complete" once the chain is whole. Questions it has no rule for make the model fail (no default rule), which is how the
tests get failed questions and a method error.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

IN_CI = os.environ.get("CI") == "true"
TOKEN = "test-token-0123456789abcdef"
XSS = "<img src=x onerror=alert(1)>"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "browser: needs Chromium and chromedriver (skipped only if missing and not in CI)")


# ---------------------------------------------------------------------------------------------------------------------
# The scripted model


def _hop(hop: str) -> str:
    return f"{hop[1:]} (incoming)" if hop.startswith("^") else hop


def _chain_text(topic: str, hops: Sequence[str]) -> str:
    return " -> ".join([f"[{topic}]", *(_hop(h) for h in hops)])


def oracle_rules(questions: Sequence[Any], *, extra: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """Rules that walk each question's gold chain (``metadata["chain"]``) and judge it complete when whole."""
    rules: list[dict[str, Any]] = []
    for q in questions:
        hops = [h for h in str(q.metadata["chain"]).split(",") if h]
        topic = q.topic_entities[0].name
        for k in range(len(hops)):
            rules.append({"match": re.escape(f"Question: {q.text}\nChain so far: {_chain_text(topic, hops[:k])}\n"),
                          "reply": {"relations": [_hop(hops[k])]}})
        rules.append({"match": re.escape(f"Question: {q.text}\nCurrent main chain: {_chain_text(topic, hops)}\n"),
                      "reply": {"chain_status": "complete", "answer_space_reached": None, "reason": "oracle"}})
    rules += extra  # after the oracle's own rules, so they only see the prompts the oracle does not answer
    rules.append({"match": "Current main chain", "reply": {"chain_status": "incomplete", "answer_space_reached": False,
                                                             "reason": "not there yet"}})
    return rules


def write_rules(path: Path, rules: Sequence[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rules), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def demo_questions() -> list[Any]:
    from kgqa.datasets import load_dataset

    return load_dataset("demo")


@pytest.fixture(scope="session")
def rules_file(tmp_path_factory: pytest.TempPathFactory, demo_questions: list[Any]) -> Path:
    """The oracle over every demo question but demo-004 (which therefore fails), plus direct answers for
    "Who directed Inception?" (the LLM-only methods) and none for anything else (a method error)."""
    chosen = [q for q in demo_questions if q.id != "demo-004"]
    extra = [{"match": r"Question: Who directed Inception\?\s*$", "reply": {"answers": ["Christopher Nolan"]}},
             {"match": r"Question: Who directed Inception\?\n\nLet's think",
              "reply": {"reasoning": "Inception (2010) was directed by Christopher Nolan.", "answers": ["Christopher Nolan"]}}]
    return write_rules(tmp_path_factory.mktemp("rules") / "oracle.jsonl", oracle_rules(chosen, extra=extra))


# ---------------------------------------------------------------------------------------------------------------------
# Servers


@dataclass
class LiveServer:
    """A uvicorn server in a thread, on a socket already bound to a free port of 127.0.0.1."""

    app: Any
    url: str = ""

    def start(self) -> LiveServer:
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self._sock = sock
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning", lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self._sock.close()

    def client(self, token: str | None = TOKEN, **kwargs: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, **kwargs)


def serve(**settings: Any) -> LiveServer:
    from kgqa.service import ServiceSettings, create_app

    kg = settings.pop("kg_object", None)
    llm = settings.pop("llm_object", None)
    return LiveServer(create_app(ServiceSettings(**settings), kg=kg, llm=llm)).start()


@pytest.fixture(scope="session")
def token() -> str:
    return TOKEN


@pytest.fixture(scope="session")
def xss_label() -> str:
    return XSS


@pytest.fixture(scope="session")
def start_server() -> Any:
    """``start_server(**ServiceSettings)`` (plus ``kg_object`` / ``llm_object``): a started :class:`LiveServer`; the
    caller stops it."""
    return serve


@pytest.fixture(scope="session")
def runs_root(tmp_path_factory: pytest.TempPathFactory, rules_file: Path) -> Path:
    """Two real runs over the first 12 demo questions: CCoR with the oracle (one failed question) and CoT (run with
    ``record_calls``, so its questions keep every call's prompt and reply)."""
    from kgqa.eval.runner import run_eval

    root = tmp_path_factory.mktemp("runs")
    run_eval("demo", out=root / "ccor-demo", method="ccor", llm=f"scripted:{rules_file}", limit=12, progress=False,
             report=False, embedder=None)
    cot_rules = write_rules(rules_file.parent / "cot.jsonl",
                            [{"reply": {"reasoning": "A guess.", "answers": ["Christopher Nolan"]}}])
    run_eval("demo", out=root / "cot-demo", method="cot", llm=f"scripted:{cot_rules}", limit=12, progress=False,
             report=False, embedder=None, record_calls=True)
    (root / "not-a-run").mkdir()
    (root / ".hidden").mkdir()
    return root


@pytest.fixture(scope="session")
def server(runs_root: Path, rules_file: Path) -> Iterator[LiveServer]:
    """The main server: demo KG, the oracle model, the runs, a token, generous limits."""
    live = serve(kg="demo", llm=f"scripted:{rules_file}", runs=runs_root, token=TOKEN, rate_limit=0)
    yield live
    live.stop()


@pytest.fixture(scope="session")
def xss_kg(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A tiny KG whose director's name is markup: it must show as text."""
    from kgqa.kg.embedded import EmbeddedKGBuilder

    builder = EmbeddedKGBuilder(schema="freebase")
    builder.add_triple("m.0evil_film", "film.film.directed_by", "m.0evil_director")
    builder.add_triple("m.0evil_film", "film.film.starring", "m.0evil_cvt")
    builder.add_triple("m.0evil_cvt", "film.performance.actor", "m.0evil_director")
    builder.add_names(["m.0evil_film", "m.0evil_director"], ["Evil Film", XSS])
    return builder.build(tmp_path_factory.mktemp("xss") / "kg")


@pytest.fixture(scope="session")
def xss_server(xss_kg: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    rules = [{"match": "Candidate relations that can extend the chain", "reply": {"relations": ["film.film.directed_by"]}},
             {"match": "Current main chain", "reply": {"chain_status": "complete", "answer_space_reached": None,
                                                        "reason": f"the model says {XSS}"}}]
    path = write_rules(tmp_path_factory.mktemp("xss-rules") / "rules.jsonl", rules)
    live = serve(kg="demo", kg_object=xss_kg, llm=f"scripted:{path}", token=TOKEN, rate_limit=0)
    yield live
    live.stop()


# ---------------------------------------------------------------------------------------------------------------------
# The browser


def require_chromium() -> tuple[str, str]:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        if IN_CI:
            pytest.fail("chromium / chromedriver not found and CI=true: run .ci/setup.sh (apt-get install chromium "
                        "chromium-driver)")
        pytest.skip("chromium and chromedriver are not installed (apt-get install chromium chromium-driver)")
    try:
        import selenium  # noqa: F401
    except ImportError:
        if IN_CI:
            raise
        pytest.skip("selenium is not installed (pip install -e '.[test]')")
    return browser, driver


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless Chromium driven by the system chromedriver (Selenium never downloads a browser or a driver here)."""
    binary, driver_path = require_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000",
                "--disable-extensions", "--no-first-run", "--disable-background-networking"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


# ---------------------------------------------------------------------------------------------------------------------
# A trained foresight scorer and the movie KG of the kit (what an ask may name as an artifact)

KIT_ENCODER = "hash:64"


def train_tiny_scorer(out: Path) -> Path:
    """A foresight scorer trained by ``train_scorer`` on three questions of the kit's movie KG (hashing encoder, hidden
    16), saved as ``kgqa train fog`` saves one: a real scorer directory in seconds."""
    import torch

    from kgqa.kg.base import parse_chain
    from kgqa.methods.fog.training import TrainingQuestion, TrainSettings, train_scorer
    from kgqa.steps.foresight.model import NetSpec
    from kgqa.steps.foresight.scorer import LabelVectors
    from kgqa.testing import offline_embedder, shared_movie_kg

    kg = shared_movie_kg()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    questions = [
        TrainingQuestion("Which films did Christopher Nolan direct?", ("m.nolan",), parse_chain("film.director.film"),
                         frozenset({"m.inception", "m.interstellar", "m.memento"})),
        TrainingQuestion("Who directed Shutter Island?", ("m.shutter",), parse_chain("film.film.directed_by"),
                         frozenset({"m.scorsese"})),
        TrainingQuestion("Which country is Martin Scorsese from?", ("m.scorsese",),
                         parse_chain("people.person.nationality"), frozenset({"m.us"})),
    ]
    settings = TrainSettings(lr=1e-2, epochs=2, batch_size=32, validation_share=0.0, propagation_epochs=1,
                             propagation_lr=1e-2, propagation_questions=3, seed=0)
    spec = NetSpec(input_dim=64, hidden=16, heads=2, self_blocks=1, propagation_layers=1)
    try:
        result = train_scorer(kg, questions, LabelVectors(kg, offline_embedder(64)), settings=settings, net_spec=spec,
                              encoder=KIT_ENCODER)
    finally:
        torch.set_num_threads(threads)
    result.scorer.save(out, {"trained_on": "three kit questions"})
    return out


@pytest.fixture(scope="session")
def kit_kg() -> Any:
    from kgqa.testing import shared_movie_kg

    return shared_movie_kg()


@pytest.fixture(scope="session")
def scorer_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One trained scorer directory, copied by the tests that need their own."""
    return train_tiny_scorer(tmp_path_factory.mktemp("scorer") / "scorer")


@pytest.fixture()
def served_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kit_kg: Any) -> Path:
    """A cache directory of this test's own (so the server's artifact store is empty but for what the test builds),
    holding the kit KG's label embeddings as an operator would build them (`kgqa artifacts build label-embeddings`)."""
    from kgqa.artifacts import ArtifactStore
    from kgqa.text import load_embedder

    cache = tmp_path / "cache"
    monkeypatch.setenv("KGQA_CACHE_DIR", str(cache))
    ArtifactStore(cache / "artifacts").build("label-embeddings", {"kg": kit_kg, "embedder": load_embedder(KIT_ENCODER)})
    return cache / "artifacts"
