"""`kgqa kg endpoint start|stop|status` as a user runs them (real subprocesses, real Oxigraph and Virtuoso servers on
127.0.0.1): start on a generated N-Triples file and on the demo KG, status, query, stop, restart from DIR; resume
after a failed and after a killed load; `kgqa eval --method ccor` with a scripted model gives the same answers on the
embedded demo store and on both endpoints; the Virtuoso settings derived from --memory.

The 1M-triple loads (one per engine) are marked slow; they print their load time.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kgqa.datasets import load_dataset
from kgqa.kg.base import parse_chain
from kgqa.kg.endpoint import endpoint_status, load_state, server_alive, stop_endpoint
from kgqa.kg.servers import find_executable, virtuoso_settings
from kgqa.kg.sparql import SparqlKG
from kgqa.steps.relations import describe_chain, describe_hop

REPO = Path(__file__).resolve().parents[2]
FB = "http://rdf.freebase.com/ns/"
ENGINES = ["oxigraph", pytest.param("virtuoso", marks=pytest.mark.virtuoso)]
DEMO_TRIPLES = 4_691  # the demo KG exported as N-Triples (facts, names and aliases)


# ---------------------------------------------------------------------------------------------------------------------
# Helpers


def _env(base: Path) -> dict[str, str]:
    config = base / "kgqa-test-config.toml"
    config.write_text("", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KGQA_")}
    env.update({"KGQA_CACHE_DIR": str(base / "cache"), "KGQA_CONFIG": str(config),
                "PYTHONPATH": str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")})
    return env


def kgqa(env: dict[str, str], *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "kgqa", *args], capture_output=True, text=True, env=env,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    if check and proc.returncode != 0:
        raise AssertionError(f"kgqa {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def status_json(env: dict[str, str], directory: Path) -> dict[str, Any]:
    return json.loads(kgqa(env, "kg", "endpoint", "status", str(directory), "--json").stdout)


def write_generated_nt(path: Path, n: int, *, seed: int = 1, prefix: str = "g") -> int:
    """``n`` distinct Freebase-style lines: entity edges, CVT mediators, typed and tagged literals and names (one line
    each, all distinct by construction); gzipped when ``path`` ends in .gz. Returns ``n``."""
    import random

    rng = random.Random(seed)
    relations = [f"test.film.rel_{i}" for i in range(40)]
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as fh:  # type: ignore[operator]
        for i in range(n):
            head = f"<{FB}m.{prefix}{i // 5:x}>"
            kind = i % 5
            if kind == 0:
                fh.write(f'{head} <{FB}type.object.name> "Entity {i // 5}"@en .\n')
            elif kind == 1:
                fh.write(f'{head} <{FB}test.film.release_year> "{1900 + i % 120}"^^<http://www.w3.org/2001/XMLSchema#gYear> .\n')
            elif kind == 2:
                fh.write(f"{head} <{FB}test.film.starring> <{FB}m.cvt{i // 5:x}> .\n")
            else:
                fh.write(f"{head} <{FB}{relations[rng.randrange(40)]}> <{FB}m.g{rng.randrange(max(1, n // 5)):x}_{kind}> .\n")
    return n


def _cleanup(directory: Path) -> None:
    """Stop a test endpoint whatever happened (a server must never outlive the test run)."""
    if not (directory / "endpoint.json").is_file():
        return
    try:
        stop_endpoint(directory)
    except Exception:
        state = load_state(directory)
        if state.pid and server_alive(state):
            os.killpg(state.pid, signal.SIGKILL)


@pytest.fixture
def endpoint_dirs(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    made: list[Path] = []

    def make(name: str) -> Path:
        path = tmp_path / name
        made.append(path)
        return path

    yield make
    for path in made:
        _cleanup(path)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return _env(tmp_path_factory.mktemp("endpoint-env"))


# ---------------------------------------------------------------------------------------------------------------------
# The whole life of an endpoint, per engine


@pytest.mark.parametrize("engine", ENGINES)
def test_start_status_query_stop_restart(engine: str, env: dict[str, str], tmp_path: Path,
                                         endpoint_dirs: Callable[[str], Path], request: pytest.FixtureRequest) -> None:
    if engine == "virtuoso":
        request.getfixturevalue("need_virtuoso")
    data = tmp_path / "generated.nt.gz"
    write_generated_nt(data, 20_000)
    directory = endpoint_dirs(f"ep-{engine}")
    started = kgqa(env, "kg", "endpoint", "start", "--engine", engine, "--data", str(data), "--data", "demo",
                   "--dir", str(directory), "--memory", "1")
    assert "[1/2] loading generated.nt.gz" in started.stdout and "[2/2] loading demo.nt" in started.stdout
    assert re.search(r"\[1/2\] done: 20,000 triples in [\d.]+ s \([\d,]+ triples/s\)", started.stdout), started.stdout
    url = re.search(r"SPARQL endpoint: (\S+)", started.stdout).group(1)  # type: ignore[union-attr]
    assert url.startswith("http://127.0.0.1:")

    # The server outlived the command and is found again from DIR.
    status = status_json(env, directory)
    assert status["running"] and status["answering"] and status["url"] == url
    assert status["triples"] == 20_000 + DEMO_TRIPLES and status["triples_counted"]
    assert status["schema"] == "freebase"  # the demo KG's schema
    assert status["disk_bytes"] > 0 and status["memory_bytes"] > 0
    assert [f["status"] for f in status["files"]] == ["done", "done"]
    if engine == "virtuoso":
        ini = (directory / "virtuoso.ini").read_text()
        assert f"NumberOfBuffers          = {virtuoso_settings(1).number_of_buffers}" in ini
        assert status["config"] == str(directory / "virtuoso.ini")
    text = kgqa(env, "kg", "endpoint", "status", str(directory)).stdout
    assert "running" in text and f"{20_000 + DEMO_TRIPLES:,}" in text

    # Query: through the printed URL and through the endpoint:DIR spec.
    chain = json.loads(kgqa(env, "kg", "chain", url, "--schema", "freebase", "--from", "Christopher Nolan",
                            "--path", "film.director.film", "--json").stdout)
    assert {"Inception", "Memento", "Oppenheimer"} <= {e["name"] for e in chain["entities"]}
    same = json.loads(kgqa(env, "kg", "chain", f"endpoint:{directory}", "--from", "m.g0",
                           "--path", "test.film.release_year", "--json").stdout)
    assert [e["id"] for e in same["entities"]] == ['"1901"^^<http://www.w3.org/2001/XMLSchema#gYear>']

    # Stop: the process is gone and the port is free; status says stopped.
    pid = status["pid"]
    kgqa(env, "kg", "endpoint", "stop", str(directory))
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[-1][:3]
    stopped = status_json(env, directory)
    assert not stopped["running"] and stopped["triples"] == 20_000 + DEMO_TRIPLES
    assert "not running" in kgqa(env, "kg", "endpoint", "stop", str(directory)).stdout

    # Restart from DIR alone: nothing is loaded again, same data, same URL (the port was free).
    restarted = kgqa(env, "kg", "endpoint", "start", "--dir", str(directory))
    assert "2 input(s) already loaded, skipped" in restarted.stdout and "loading" not in restarted.stdout
    assert f"SPARQL endpoint: {url}" in restarted.stdout
    again = status_json(env, directory)
    assert again["running"] and again["triples"] == 20_000 + DEMO_TRIPLES
    # A second start on a running endpoint changes nothing.
    assert "already running" in kgqa(env, "kg", "endpoint", "start", "--dir", str(directory)).stdout
    kgqa(env, "kg", "endpoint", "stop", str(directory))


def test_failed_load_resumes_without_reloading_finished_files(env: dict[str, str], tmp_path: Path,
                                                              endpoint_dirs: Callable[[str], Path]) -> None:
    good, bad = tmp_path / "good.nt", tmp_path / "bad.ttl"
    write_generated_nt(good, 1_000)
    bad.write_text(f"<{FB}m.x> <{FB}test.film.rel_0> <{FB}m.y .\n", encoding="utf-8")  # an unclosed IRI
    directory = endpoint_dirs("ep-resume")
    failed = kgqa(env, "kg", "endpoint", "start", "--engine", "oxigraph", "--data", str(good), "--data", str(bad),
                  "--dir", str(directory), check=False)
    assert failed.returncode == 2 and "Traceback" not in failed.stderr
    assert "bad.ttl" in failed.stderr and failed.stderr.startswith("kgqa: error:")
    assert [f.status for f in load_state(directory).files] == ["done", "loading"]

    bad.write_text(f"<{FB}m.x> <{FB}test.film.rel_0> <{FB}m.y> .\n", encoding="utf-8")
    resumed = kgqa(env, "kg", "endpoint", "start", "--data", str(good), "--data", str(bad), "--dir", str(directory))
    assert "1 input(s) already loaded, skipped: good.nt" in resumed.stdout
    assert "its last load was interrupted; loading it again" in resumed.stdout
    assert "loading good.nt" not in resumed.stdout
    assert status_json(env, directory)["triples"] == 1_001

    # A file that changed after it was loaded is refused: its old triples could not be taken out again.
    write_generated_nt(good, 1_200)
    changed = kgqa(env, "kg", "endpoint", "start", "--data", str(good), "--dir", str(directory), check=False)
    assert changed.returncode == 2 and "changed since it was loaded" in changed.stderr


@pytest.mark.parametrize("args, message", [
    (["status", "{dir}/nothing"], "holds no kgqa endpoint"),
    (["stop", "{dir}/nothing"], "holds no kgqa endpoint"),
    (["start", "--data", "demo", "--dir", "{dir}/new"], "say which engine"),
    (["start", "--engine", "oxigraph", "--dir", "{dir}/new"], "give the data to load"),
    (["start", "--engine", "oxigraph", "--data", "{dir}/missing.nt", "--dir", "{dir}/new"], "neither an RDF file"),
    (["start", "--engine", "oxigraph", "--data", "{dir}/notes.txt", "--dir", "{dir}/new"], "only N-Triples or Turtle"),
    (["start", "--engine", "oxigraph", "--data", "http://example.org/sparql", "--dir", "{dir}/new"],
     "cannot be exported"),
    (["start", "--engine", "oxigraph", "--data", "demo", "--dir", "{dir}/busy"], "not an endpoint directory"),
    (["start", "--engine", "oxigraph", "--data", "demo", "--dir", "{dir}/new", "--memory", "0"], "positive"),
])
def test_user_errors_are_one_line(args: list[str], message: str, env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "mine.txt").write_text("do not clobber\n")
    proc = kgqa(env, "kg", "endpoint", *[a.format(dir=tmp_path) for a in args], check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert (tmp_path / "busy" / "mine.txt").read_text() == "do not clobber\n"


def test_port_in_use_and_wrong_engine(env: dict[str, str], tmp_path: Path,
                                      endpoint_dirs: Callable[[str], Path]) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = kgqa(env, "kg", "endpoint", "start", "--engine", "oxigraph", "--data", "demo",
                    "--dir", str(endpoint_dirs("ep-port")), "--port", str(port), check=False)
    assert busy.returncode == 2 and f"port {port}" in busy.stderr and "already in use" in busy.stderr
    directory = endpoint_dirs("ep-engine")
    kgqa(env, "kg", "endpoint", "start", "--engine", "oxigraph", "--data", "demo", "--dir", str(directory))
    other = kgqa(env, "kg", "endpoint", "start", "--engine", "virtuoso", "--dir", str(directory), check=False)
    assert other.returncode == 2 and "holds a oxigraph endpoint, not virtuoso" in other.stderr


# ---------------------------------------------------------------------------------------------------------------------
# The same answers from ccor on the embedded demo store, Virtuoso and Oxigraph


def demo_rules() -> list[dict[str, Any]]:
    """A scripted model that follows each demo question's gold chains: it names the gold relations when pruning, judges
    the gold main chain complete (or, with a constraint, in the answer space), its prefixes incomplete and anything
    else inconsistent; restates the constraint and picks the gold target by its name, whatever its position among
    the values (so the choice does not depend on the order a backend returns them in)."""
    from kgqa.kg.demo import open_demo_kg

    kg = open_demo_kg()
    rules: list[dict[str, Any]] = []
    for q in load_dataset("demo"):
        chain = parse_chain(q.metadata["chain"])
        names = [t.name for t in q.topic_entities[:1]]
        constraint = q.metadata.get("constraint")
        text = re.escape(q.text)

        def judged(ch: Any, text: str = text, names: list[str] = names) -> str:
            return f"Question: {text}\nCurrent main chain: {re.escape(describe_chain(names, ch))}\n"

        final = {"chain_status": "incomplete", "answer_space_reached": True, "reason": "a constraint is left"} \
            if constraint else {"chain_status": "complete", "reason": "the gold chain"}
        rules.append({"match": judged(chain), "reply": final})
        rules += [{"match": judged(chain[:d]), "reply": {"chain_status": "incomplete", "answer_space_reached": False,
                                                        "reason": "a prefix"}} for d in range(1, len(chain))]
        rules.append({"match": f"Question: {text}\nCurrent main chain: ",
                      "reply": {"chain_status": "inconsistent", "reason": "off the gold chain"}})
        if constraint:
            query = f"Constraint of {q.id}: {q.text}"
            cchain = parse_chain(constraint["chain"])
            label = [f"entities at position {constraint['source']} of the main chain"]
            target = constraint["target"]
            target_name = kg.names([target]).get(target) or re.sub(r'^"([^"]*)".*$', r"\1", target)
            rules.append({"match": f"Question: {text}\nMain chain: ",
                          "reply": {"constraint_query": query, "source_position": constraint["source"]}})
            head = f"Constraint sub-question: {re.escape(query)}\nConstraint chain: "
            full = head + re.escape(describe_chain(label, cchain)) + "\n"
            rules += [{"match": full + rf"[\s\S]*\n{n}\. {re.escape(target_name)}\n",
                       "reply": {"chain_correct": True, "target": n, "reason": "the gold target"}} for n in range(1, 31)]
            rules += [{"match": head + re.escape(describe_chain(label, cchain[:d])) + "\n",
                       "reply": {"chain_correct": True, "target": None, "reason": "a prefix"}}
                      for d in range(1, len(cchain) + 1)]
            rules.append({"match": head, "reply": {"chain_correct": False, "reason": "off the gold chain"}})
            rules.append({"match": f"Question: {re.escape(query)}\n",
                          "reply": {"relations": [describe_hop(h) for h in cchain]}})
        rules.append({"match": f"Question: {text}\nChain so far: ",
                      "reply": {"relations": [describe_hop(h) for h in chain]}})
    rules.append({"reply": {"reasoning": "scripted", "answers": []}})
    return rules


def run_ccor(env: dict[str, str], kg_spec: str, rules: Path, out: Path, *extra: str,
             dataset: str = "demo") -> dict[str, dict[str, Any]]:
    kgqa(env, "eval", "--dataset", dataset, "--method", "ccor", "--llm", f"scripted:{rules}", "--kg", kg_spec,
         "--out", str(out), "--no-progress", "--no-report", *extra)
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    return {r["id"]: r for r in rows}


def comparable(row: dict[str, Any]) -> dict[str, Any]:
    """What must agree across backends. SPARQL results have no order, so answers are compared as sets (ranking ties
    are broken by the backend's order, which also moves Hits@1 on multi-answer questions)."""
    return {"answers": sorted(row["answers"]), "answer_ids": sorted(map(str, row["answer_ids"])), "grounding": row["grounding"],
            "f1": row["f1"], "hit": row["hit"], "error": row["error"], "llm_calls": row["llm_calls"]}


@pytest.fixture(scope="module")
def demo_endpoints(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    import shutil

    base = tmp_path_factory.mktemp("demo-endpoints")
    dirs: dict[str, Path] = {}
    try:
        for engine in ("oxigraph", "virtuoso"):
            if engine == "virtuoso" and shutil.which("virtuoso-t") is None:
                continue  # the test itself skips (or fails in CI through need_virtuoso)
            dirs[engine] = base / engine
            kgqa(env, "kg", "endpoint", "start", "--engine", engine, "--data", "demo", "--dir", str(dirs[engine]))
        yield dirs
    finally:
        for directory in dirs.values():
            _cleanup(directory)


@pytest.mark.parametrize("engine", ENGINES)
def test_ccor_answers_alike_on_embedded_and_endpoint(engine: str, env: dict[str, str], tmp_path: Path,
                                                     request: pytest.FixtureRequest) -> None:
    if engine == "virtuoso":
        request.getfixturevalue("need_virtuoso")
    demo_endpoints: dict[str, Path] = request.getfixturevalue("demo_endpoints")
    rules = tmp_path / "rules.jsonl"
    rules.write_text("\n".join(json.dumps(r) for r in demo_rules()) + "\n", encoding="utf-8")
    embedded = run_ccor(env, "demo", rules, tmp_path / "embedded")
    served = run_ccor(env, f"endpoint:{demo_endpoints[engine]}", rules, tmp_path / engine)
    assert set(served) == set(embedded) and len(embedded) == 61
    differ = {qid: (comparable(row), comparable(served[qid])) for qid, row in embedded.items()
              if comparable(row) != comparable(served[qid])}
    assert not differ, differ
    # The script follows the gold chains, so the KG (not a fallback) answers nearly everything.
    structured = [r for r in embedded.values() if r["grounding"] == "structured"]
    assert len(structured) >= 55
    assert sum(r["hit"] for r in embedded.values()) >= 55
    # The printed URL (with --schema on the command line) is the same endpoint.
    url = load_state(demo_endpoints[engine]).url
    by_url = json.loads(kgqa(env, "kg", "chain", url, "--schema", "freebase", "--from", "m.0demo_inception",
                             "--path", "film.film.directed_by", "--json").stdout)
    assert [e["name"] for e in by_url["entities"]] == ["Christopher Nolan"]


# ---------------------------------------------------------------------------------------------------------------------
# Settings and executables


def test_virtuoso_settings_follow_the_tuning_guide() -> None:
    two = virtuoso_settings(2, cpus=2)
    # Virtuoso's table: 2 GB -> 170,000 buffers, 130,000 dirty; its formula: memory * 0.66 / 8000.
    assert 160_000 <= two.number_of_buffers <= 180_000
    assert two.max_dirty_buffers == two.number_of_buffers * 3 // 4
    sixteen = virtuoso_settings(16, cpus=8)
    assert 1_300_000 <= sixteen.number_of_buffers <= 1_450_000
    assert sixteen.threads_per_query == 8 and sixteen.max_query_mem_mb == 2048
    assert virtuoso_settings(2, db_bytes=8192 * 4_000_000).max_checkpoint_remap == 1_000_000
    assert two.max_query_execution_time_s == 0  # Virtuoso's timeout returns partial results with HTTP 200


def test_a_starting_server_with_no_command_line_yet_is_alive(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Right after posix_spawn the kernel can show a new program's command line empty (its arguments not yet mapped);
    that read is injected here, on a real child that names the directory: it is the server, still starting.
    A live process that does not name the directory (a recycled pid) and an exited one are not."""
    import kgqa.kg.servers.process as process
    from kgqa.kg.endpoint import EndpointState

    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", str(tmp_path)])
    try:
        real = process._command_line
        empty_reads = iter(["", ""])
        monkeypatch.setattr(process, "_command_line", lambda pid: next(empty_reads, real(pid)))
        assert server_alive(EndpointState(engine="oxigraph", dir=str(tmp_path), pid=server.pid))
        assert next(empty_reads, "done") == "done"  # both empty reads were consumed before the real one
        assert not server_alive(EndpointState(engine="oxigraph", dir=str(tmp_path / "other"), pid=server.pid))
    finally:
        server.kill()
        server.wait()
    assert not server_alive(EndpointState(engine="oxigraph", dir=str(tmp_path), pid=server.pid))


def test_oxigraph_is_found_beside_python_when_not_on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    beside = Path(sys.executable).parent / "oxigraph"
    if not beside.is_file():
        pytest.skip("the oxigraph binary is not installed beside this Python")
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on PATH
    assert find_executable("oxigraph", "pip install oxigraph") == str(beside)
    from kgqa.errors import ConfigError

    with pytest.raises(ConfigError, match="executable was not found on PATH nor beside"):
        find_executable("kgqa-no-such-binary", "hint")


def test_endpoint_spec_needs_a_running_server(tmp_path: Path, env: dict[str, str],
                                              endpoint_dirs: Callable[[str], Path]) -> None:
    directory = endpoint_dirs("ep-spec")
    kgqa(env, "kg", "endpoint", "start", "--engine", "oxigraph", "--data", "demo", "--dir", str(directory))
    from kgqa.kg import open_kg

    with open_kg(f"endpoint:{directory}") as kg:
        assert isinstance(kg, SparqlKG) and kg.schema.name == "freebase"
        assert kg.has_entity("m.0demo_inception")
    stop_endpoint(directory)
    proc = kgqa(env, "kg", "info", f"endpoint:{directory}", check=False)
    assert proc.returncode == 2 and "is not running" in proc.stderr


# ---------------------------------------------------------------------------------------------------------------------
# 1M triples per engine (slow)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
def test_one_million_triples(engine: str, env: dict[str, str], tmp_path: Path,
                             endpoint_dirs: Callable[[str], Path], request: pytest.FixtureRequest) -> None:
    if engine == "virtuoso":
        request.getfixturevalue("need_virtuoso")
    data = tmp_path / "million.nt"
    write_generated_nt(data, 1_000_000)
    directory = endpoint_dirs(f"ep-1m-{engine}")
    started = time.perf_counter()
    out = kgqa(env, "kg", "endpoint", "start", "--engine", engine, "--data", str(data), "--dir", str(directory),
               "--memory", "2")
    seconds = time.perf_counter() - started
    print(f"\n{engine}: 1,000,000 triples loaded and served in {seconds:.1f} s")
    assert "done: 1,000,000 triples" in out.stdout
    status = endpoint_status(directory)
    assert status["triples"] == 1_000_000 and status["answering"]
    got = json.loads(kgqa(env, "kg", "chain", f"endpoint:{directory}", "--from", "m.g1869f",
                          "--path", "test.film.starring", "--json").stdout)
    assert [e["id"] for e in got["entities"]] == ["m.cvt1869f"]
    kgqa(env, "kg", "endpoint", "stop", str(directory))


@pytest.mark.slow
def test_killed_start_resumes(env: dict[str, str], tmp_path: Path, endpoint_dirs: Callable[[str], Path]) -> None:
    """SIGKILL `start` while oxigraph loads the second file: the next start ends the orphaned loader, skips the first
    file and loads the second again (Oxigraph commits a file only when it is complete)."""
    small, big = tmp_path / "small.nt", tmp_path / "big.nt"
    write_generated_nt(small, 1_000, prefix="s")  # other heads than the big file's: no line in common
    write_generated_nt(big, 1_000_000, seed=2)
    directory = endpoint_dirs("ep-killed")
    proc = subprocess.Popen([sys.executable, "-m", "kgqa", "kg", "endpoint", "start", "--engine", "oxigraph",
                             "--data", str(small), "--data", str(big), "--dir", str(directory)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state_file = directory / "endpoint.json"
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            if state_file.is_file():
                try:
                    state = json.loads(state_file.read_text())
                except ValueError:
                    state = {}
                if state.get("loader_pid") and [f["status"] for f in state["files"]] == ["done", "loading"]:
                    break
            time.sleep(0.05)
        time.sleep(1.0)
        assert proc.poll() is None, "the load ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    resumed = kgqa(env, "kg", "endpoint", "start", "--data", str(small), "--data", str(big), "--dir", str(directory))
    assert "ending the loader" in resumed.stdout
    assert "1 input(s) already loaded, skipped: small.nt" in resumed.stdout
    assert "[2/2] done: 1,000,000 triples" in resumed.stdout
    assert endpoint_status(directory)["triples"] == 1_001_000
