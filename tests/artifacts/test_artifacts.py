"""The artifact store: build once, load from the cache, digests, atomic builds, manifests, plugins, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kgqa import __version__
from kgqa.artifacts import (
    ARTIFACTS,
    MANIFEST,
    ArtifactError,
    ArtifactInputs,
    ArtifactKind,
    ArtifactStore,
    artifact_digest,
    get_kind,
    register_artifact,
)
from kgqa.artifacts.relation_embeddings import RelationEmbeddings
from kgqa.cli import main
from kgqa.errors import ConfigError, KGError
from kgqa.kg import open_kg
from kgqa.kg.embedded import EmbeddedKGBuilder
from kgqa.kg.schema import relation_words
from kgqa.text import load_embedder

RE = "relation-embeddings"


# ---------------------------------------------------------------------------------------------------------------------
# A throwaway kind: writes the word "x" ``size`` times, counts its builds, and can be told to fail half way.


class Counter:
    def __init__(self) -> None:
        self.builds = 0
        self.fail: str | None = None


def counting_kind(counter: Counter, *, name: str = "test-words", version: str = "1") -> ArtifactKind:
    def resolve(params: dict[str, Any]) -> ArtifactInputs:
        try:
            size = int(params.get("size", 3))
        except ValueError:
            raise ConfigError(f"parameter size={params['size']!r} is not an integer") from None
        return ArtifactInputs(params={"size": size}, identity={"size": size}, describe=lambda: {"source": "none"})

    def build(inputs: ArtifactInputs, out: Path, progress: Any) -> dict[str, Any]:
        counter.builds += 1
        progress("writing words")
        (out / "words.txt").write_text("x " * inputs.params["size"], encoding="utf-8")
        if counter.fail == "raise":
            raise RuntimeError("the scorer diverged")
        if counter.fail == "no-files":
            (out / "words.txt").unlink()
        if counter.fail == "bad-metrics":
            return {"loss": object()}
        return {"words": inputs.params["size"]}

    def load(path: Path) -> list[str]:
        return (path / "words.txt").read_text(encoding="utf-8").split()

    return ArtifactKind(name=name, summary="x repeated", version=version, params={"size": "how many words"},
                        resolve=resolve, build=build, load=load)


@pytest.fixture
def counter() -> Any:
    with ARTIFACTS.restored():
        count = Counter()
        register_artifact(counting_kind(count))
        yield count


def visible_dirs(store: ArtifactStore, name: str) -> list[str]:
    """What a reader of the store could take for an artifact: the non-dot directories under ``<root>/<name>``."""
    kind_dir = store.root / name
    return sorted(p.name for p in kind_dir.iterdir() if not p.name.startswith(".")) if kind_dir.is_dir() else []


# ---------------------------------------------------------------------------------------------------------------------
# Build once, load from the cache


def test_get_builds_once_then_loads_from_the_cache(counter: Counter, _private_cache: Path) -> None:
    store = ArtifactStore()
    assert store.root == _private_cache / "artifacts"
    assert store.find("test-words", {"size": "4"}) is None
    assert store.get("test-words", size="4") == ["x"] * 4
    assert counter.builds == 1
    first = store.manifest("test-words", size=4)
    assert store.get("test-words", size=4) == ["x"] * 4  # "4" and 4 are the same input: same digest, no build
    # a new store (a new process, a later run) finds it on disk
    later = ArtifactStore()
    assert later.get("test-words", size=4) == ["x"] * 4
    assert later.manifest("test-words", size=4)["created"] == first["created"]
    assert counter.builds == 1
    assert visible_dirs(store, "test-words") == [first["digest"]]
    assert [(r.name, r.digest) for r in store.used()] == [("test-words", first["digest"])]


def test_relation_embeddings_are_built_once_and_shared_by_spec_and_object(_private_cache: Path) -> None:
    store = ArtifactStore()
    emb = store.get(RE, kg="demo", embedder="hash")
    assert isinstance(emb, RelationEmbeddings)
    ref = store.find(RE, {"kg": "demo", "embedder": "hash"})
    assert ref is not None
    created, mtime = ref.manifest["created"], (ref.path / "vectors.npy").stat().st_mtime_ns
    # the same KG and embedder given as objects, to a fresh store: same digest, read from disk, not rebuilt
    kg = open_kg("demo")
    again = ArtifactStore().get(RE, kg=kg, embedder=load_embedder("hash:256"))
    assert again.relations == emb.relations
    assert np.array_equal(np.asarray(again.matrix), np.asarray(emb.matrix))
    assert ArtifactStore().digest(RE, {"kg": kg, "embedder": "hash"}) == ref.digest
    assert store.find(RE, {"kg": kg, "embedder": "hash"}).manifest["created"] == created
    assert (ref.path / "vectors.npy").stat().st_mtime_ns == mtime
    assert len(store.list()) == 1


# ---------------------------------------------------------------------------------------------------------------------
# Digests


def test_digest_changes_with_params_and_with_the_kind_version(counter: Counter, tmp_path: Path) -> None:
    store = ArtifactStore()
    d3, d4 = store.digest("test-words", {"size": 3}), store.digest("test-words", {"size": 4})
    assert d3 != d4 and len(d3) == 16
    assert store.digest("test-words", {}) == d3  # the kind's default is an input like any other
    store.get("test-words", size=3)
    register_artifact(counting_kind(counter, version="2"), replace=True)
    d3v2 = store.digest("test-words", {"size": 3})
    assert d3v2 != d3
    assert store.find("test-words", {"size": 3}) is None  # the old build is not found by the new recipe
    assert store.get("test-words", size=3) == ["x"] * 3
    assert counter.builds == 2
    assert sorted(visible_dirs(store, "test-words")) == sorted([d3, d3v2])
    assert store.manifest("test-words", size=3)["kind_version"] == "2"
    # the digest is a function of name, version and identity only
    kind = get_kind("test-words")
    assert artifact_digest(kind, {"size": 3}) == d3v2


def test_relation_embedding_digest_follows_the_kg_vocabulary_and_the_embedder(tmp_path: Path) -> None:
    store = ArtifactStore()
    demo_hash = store.digest(RE, {"kg": "demo", "embedder": "hash"})
    assert store.digest(RE, {"kg": "demo", "embedder": "hash:256"}) == demo_hash
    assert store.digest(RE, {"kg": "demo", "embedder": "hash:64"}) != demo_hash
    builder = EmbeddedKGBuilder(schema="freebase")
    builder.add_triple("m.01", "film.film.directed_by", "m.02")
    builder.add_triple("m.02", "people.person.place_of_birth", "m.03")
    builder.build(tmp_path / "tiny")
    tiny = store.digest(RE, {"kg": str(tmp_path / "tiny"), "embedder": "hash"})
    assert tiny != demo_hash
    # the same content in another directory is the same input
    builder = EmbeddedKGBuilder(schema="freebase")
    builder.add_triple("m.09", "people.person.place_of_birth", "m.08")
    builder.add_triple("m.07", "film.film.directed_by", "m.09")
    builder.build(tmp_path / "tiny-copy")
    assert store.digest(RE, {"kg": str(tmp_path / "tiny-copy"), "embedder": "hash"}) == tiny
    emb = store.get(RE, kg=str(tmp_path / "tiny"), embedder="hash")
    assert emb.relations == ["film.film.directed_by", "people.person.place_of_birth"]


# ---------------------------------------------------------------------------------------------------------------------
# Atomic builds


@pytest.mark.parametrize("failure, message", [
    ("raise", "RuntimeError: the scorer diverged"),
    ("no-files", "the build wrote no files"),
    ("bad-metrics", "not JSON"),
])
def test_a_failed_build_leaves_nothing_and_the_next_get_rebuilds(counter: Counter, failure: str, message: str) -> None:
    store = ArtifactStore()
    counter.fail = failure
    with pytest.raises(ArtifactError) as info:
        store.get("test-words", size=5)
    text = str(info.value)
    assert "building artifact test-words" in text and message in text and "nothing was kept" in text
    assert visible_dirs(store, "test-words") == []
    assert not list((store.root / "test-words").glob(".build-*"))
    assert store.find("test-words", {"size": 5}) is None
    assert store.list() == []
    counter.fail = None
    assert store.get("test-words", size=5) == ["x"] * 5
    assert counter.builds == 2


def test_a_crashed_build_is_never_taken_for_an_artifact(counter: Counter) -> None:
    store = ArtifactStore()
    digest = store.digest("test-words", {"size": 2})
    # what a build killed half way leaves: its temporary directory, files and even a manifest in it
    leftover = store.root / "test-words" / f".build-{digest}-dead"
    leftover.mkdir(parents=True)
    (leftover / "words.txt").write_text("x", encoding="utf-8")
    (leftover / MANIFEST).write_text('{"name": "test-words", "dig', encoding="utf-8")
    assert store.find("test-words", {"size": 2}) is None
    assert store.list() == []
    assert store.get("test-words", size=2) == ["x", "x"]
    assert counter.builds == 1
    assert not leftover.exists()  # swept by the next build of that digest


def test_a_failed_rebuild_keeps_the_artifact_it_was_to_replace(counter: Counter) -> None:
    store = ArtifactStore()
    before = store.build("test-words", {"size": 2})
    counter.fail = "raise"
    with pytest.raises(ArtifactError, match="the scorer diverged"):
        store.build("test-words", {"size": 2}, rebuild=True)
    assert store.find("test-words", {"size": 2}) == before
    counter.fail = None
    after = store.build("test-words", {"size": 2}, rebuild=True)
    assert after.digest == before.digest and counter.builds == 3
    assert visible_dirs(store, "test-words") == [before.digest]


def test_threads_asking_at_once_build_once(counter: Counter) -> None:
    store = ArtifactStore()
    results: list[Any] = []

    def ask() -> None:
        results.append(ArtifactStore().get("test-words", size=6))

    threads = [threading.Thread(target=ask) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [["x"] * 6] * 6
    assert counter.builds == 1
    assert len(visible_dirs(store, "test-words")) == 1


PLUGIN_SCRIPT = """
import sys, time
from pathlib import Path
from kgqa.artifacts import ArtifactInputs, ArtifactKind, ArtifactStore, register_artifact

work = Path(sys.argv[1])

def build(inputs, out, progress):
    with open(work / "builds.txt", "a") as f:
        f.write("build\\n")
    (work / "started").touch()
    deadline = time.time() + 60
    while not (work / "release").exists() and time.time() < deadline:
        time.sleep(0.05)
    (out / "value.txt").write_text("slow value")
    return {}

def progress(message):
    with open(work / ("progress-" + sys.argv[2]), "a") as f:
        f.write(message + "\\n")

register_artifact(ArtifactKind("test-slow", "slow", "1", {}, lambda p: ArtifactInputs({}, {}), build,
                               lambda path: (path / "value.txt").read_text()))
print(ArtifactStore(progress=progress).get("test-slow"))
"""


def _wait_for(check: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.time() + timeout
    while not check():
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_two_processes_build_once(tmp_path: Path, _private_cache: Path) -> None:
    script = tmp_path / "slow_kind.py"
    script.write_text(textwrap.dedent(PLUGIN_SCRIPT), encoding="utf-8")
    env_cmd = [sys.executable, str(script), str(tmp_path)]
    first = subprocess.Popen([*env_cmd, "a"], stdout=subprocess.PIPE, text=True)
    second = None
    try:
        _wait_for(lambda: (tmp_path / "started").exists(), "the first build to start")
        second = subprocess.Popen([*env_cmd, "b"], stdout=subprocess.PIPE, text=True)
        progress_b = tmp_path / "progress-b"
        _wait_for(lambda: progress_b.exists() and "waiting for another process" in progress_b.read_text(),
                  "the second process to wait for the first")
        (tmp_path / "release").touch()
        out_a, _ = first.communicate(timeout=60)
        out_b, _ = second.communicate(timeout=60)
    finally:
        (tmp_path / "release").touch()
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
    assert first.returncode == 0 and second.returncode == 0
    assert out_a.strip() == out_b.strip() == "slow value"
    assert (tmp_path / "builds.txt").read_text().splitlines() == ["build"]


# ---------------------------------------------------------------------------------------------------------------------
# Manifests


def test_the_manifest_says_how_the_artifact_was_made(_private_cache: Path) -> None:
    store = ArtifactStore(command=["kgqa", "artifacts", "build", RE, "--param", "kg=demo", "--param", "embedder=hash"])
    started = datetime.now().astimezone()
    ref = store.build(RE, {"kg": "demo", "embedder": "hash"})
    m = json.loads((ref.path / MANIFEST).read_text(encoding="utf-8"))
    assert m == ref.manifest
    assert ref.path == _private_cache / "artifacts" / RE / ref.digest
    assert m["name"] == RE and m["digest"] == ref.digest and m["kind_version"] == get_kind(RE).version
    assert m["params"] == {"kg": "demo", "embedder": "hash"}
    kg = open_kg("demo")
    stats = kg.stats()
    assert m["inputs"]["kg"]["spec"] == "demo"
    assert m["inputs"]["kg"]["schema"] == "freebase"
    assert (m["inputs"]["kg"]["triples"], m["inputs"]["kg"]["relations"]) == (stats.triples, stats.relations)
    assert m["inputs"]["embedder"] == {"name": "hash256", "dim": 256}
    assert m["identity"]["kg"]["relations"] == len(kg.vocabulary())
    assert m["command"] == ["kgqa", "artifacts", "build", RE, "--param", "kg=demo", "--param", "embedder=hash"]
    assert m["kgqa_version"] == __version__
    created = datetime.fromisoformat(m["created"].replace("Z", "+00:00"))
    assert created.utcoffset().total_seconds() == 0
    assert abs((created - started).total_seconds()) < 120
    assert isinstance(m["build_seconds"], float) and m["build_seconds"] >= 0
    assert m["metrics"] == {"relations": len(kg.vocabulary()), "dim": 256}
    assert m["files"] == {name: (ref.path / name).stat().st_size for name in ("relations.json", "vectors.npy")}
    assert m["size_bytes"] == sum(m["files"].values())
    # without an explicit command, the process's own command line is recorded
    other = ArtifactStore().build(RE, {"kg": "demo", "embedder": "hash:32"})
    assert other.manifest["command"] == list(sys.argv)


# ---------------------------------------------------------------------------------------------------------------------
# The relation-embeddings artifact itself


def test_relation_embeddings_give_vectors_and_cosine_scores() -> None:
    kg = open_kg("demo")
    embedder = load_embedder("hash")
    emb = ArtifactStore().get(RE, kg=kg, embedder=embedder)
    assert emb.relations == sorted(kg.vocabulary()) and len(emb) == len(emb.relations)
    assert emb.dim == 256 and emb.embedder == "hash256"
    rel = "people.person.place_of_birth"
    assert rel in emb and "no.such.relation" not in emb
    assert np.allclose(emb.vector(rel), embedder.embed([relation_words(rel)])[0])
    query = embedder.embed(["where was this person born"])[0]
    candidates = ["film.film.directed_by", rel, "location.location.people_born_here"]
    expected = np.array([float(emb.vector(r) @ query) for r in candidates])
    assert np.allclose(emb.scores(query, candidates), expected, atol=1e-6)
    assert np.allclose(emb.scores(query * 3.0, candidates), expected, atol=1e-6)  # cosine: the length does not matter
    assert emb.scores(query).shape == (len(emb),)
    top = emb.top(query, candidates, k=2)
    assert [r for r, _ in top] == [candidates[i] for i in np.argsort(-expected, kind="stable")[:2]]
    assert top[0][1] >= top[1][1]
    with pytest.raises(KGError, match=r"no\.such\.relation"):
        emb.vector("no.such.relation")
    with pytest.raises(KGError, match=r"no\.such\.relation"):
        emb.scores(query, [rel, "no.such.relation"])
    assert emb.scores(query, [rel, "no.such.relation"], missing=-1.0)[1] == -1.0
    assert [r for r, _ in emb.top(query, [rel, "no.such.relation"])] == [rel]
    with pytest.raises(ConfigError, match="64 dimensions"):
        emb.scores(np.ones(64), candidates)
    emb.check_embedder(embedder)
    with pytest.raises(ConfigError, match="hash64"):
        emb.check_embedder(load_embedder("hash:64"))


# ---------------------------------------------------------------------------------------------------------------------
# User errors and plugins


def test_user_errors_name_the_input(counter: Counter) -> None:
    store = ArtifactStore()
    with pytest.raises(ConfigError, match=r"unknown artifact 'nope'.*relation-embeddings.*test-words"):
        store.get("nope")
    with pytest.raises(ConfigError, match=r"takes no parameter 'colour'; its parameters: size"):
        store.get("test-words", colour="red")
    with pytest.raises(ConfigError, match=r"size='many' is not an integer"):
        store.get("test-words", size="many")
    with pytest.raises(ConfigError, match=r"kg='/no/such/kg'"):
        store.get(RE, kg="/no/such/kg", embedder="hash")
    with pytest.raises(ConfigError, match=r"embedder='word2vec'"):
        store.get(RE, kg="demo", embedder="word2vec")
    with pytest.raises(ConfigError, match="not a valid artifact name"):
        register_artifact(counting_kind(counter, name="Bad Name"))
    assert store.list() == []


def test_third_party_kinds_register_by_call_and_by_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "site"
    (package / "kgqa_plugin_words").mkdir(parents=True)
    (package / "kgqa_plugin_words" / "__init__.py").write_text(textwrap.dedent("""
        from kgqa.artifacts import ArtifactInputs, ArtifactKind

        def _build(inputs, out, progress):
            (out / "greeting.txt").write_text("hello from a plugin")
            return {"lines": 1}

        KIND = ArtifactKind("plugin-greeting", "a greeting", "1", {}, lambda params: ArtifactInputs({}, {"v": 1}),
                            _build, lambda path: (path / "greeting.txt").read_text())
        """), encoding="utf-8")
    dist = package / "kgqa_plugin_words-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: kgqa-plugin-words\nVersion: 0.1\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text("[kgqa.artifacts]\nplugin-greeting = kgqa_plugin_words:KIND\n",
                                           encoding="utf-8")
    monkeypatch.syspath_prepend(str(package))
    with ARTIFACTS.restored():
        ARTIFACTS.discover(force=True)
        assert "plugin-greeting" in ARTIFACTS.names()
        assert ArtifactStore().get("plugin-greeting") == "hello from a plugin"
        with ARTIFACTS.restored():
            register_artifact(counting_kind(Counter(), name="test-inline"))
            assert "test-inline" in ARTIFACTS
        assert "test-inline" not in ARTIFACTS
    assert "plugin-greeting" not in ARTIFACTS
    assert RE in ARTIFACTS


# ---------------------------------------------------------------------------------------------------------------------
# The CLI


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_build_list_show_and_path(capsys: pytest.CaptureFixture[str], _private_cache: Path) -> None:
    code, out, _ = run_cli(capsys, "artifacts", "list")
    assert code == 0
    assert f"{RE} (version {get_kind(RE).version})" in out and "--param kg=" in out and "(none)" in out

    params = ["--param", "kg=demo", "--param", "embedder=hash"]
    code, out, err = run_cli(capsys, "artifacts", "show", RE, *params)
    assert code == 2 and out == ""
    assert "is not built yet; build it with: kgqa artifacts build relation-embeddings --param kg=demo" in err

    code, out, err = run_cli(capsys, "artifacts", "build", RE, *params)
    assert code == 0
    ref = ArtifactStore().find(RE, {"kg": "demo", "embedder": "hash"})
    assert ref is not None
    assert f"building {RE} {ref.digest}" in err and "embedding" in err  # progress on stderr
    assert out.splitlines() == [f"{RE} {ref.digest}: built in {ref.manifest['build_seconds']} s (relations="
                                f"{ref.manifest['metrics']['relations']} dim=256)", str(ref.path)]
    assert ref.manifest["command"] == ["kgqa", "artifacts", "build", RE, *params]

    code, out, err = run_cli(capsys, "artifacts", "build", RE, *params)
    assert code == 0 and "already built" in out and err == ""

    code, out, _ = run_cli(capsys, "artifacts", "list")
    assert code == 0 and "(none)" not in out
    row = next(line for line in out.splitlines() if ref.digest in line)
    assert row.split()[:2] == [RE, ref.digest] and ref.created in row and "kg=demo embedder=hash" in row

    code, out, _ = run_cli(capsys, "artifacts", "list", "--json")
    listed = json.loads(out)
    assert [(b["name"], b["digest"], b["size_bytes"]) for b in listed["built"]] == [(RE, ref.digest, ref.size_bytes)]

    code, out, _ = run_cli(capsys, "artifacts", "show", RE, *params)
    assert code == 0
    assert out.splitlines()[0] == f"{RE} {ref.digest}"
    assert f"path:      {ref.path}" in out and "metrics:   relations=" in out and "vectors.npy" in out
    assert "command:   kgqa artifacts build relation-embeddings --param kg=demo --param embedder=hash" in out

    code, out, _ = run_cli(capsys, "artifacts", "show", ref.digest[:8], "--json")
    assert code == 0 and json.loads(out) == {"path": str(ref.path), **ref.manifest}

    code, out, _ = run_cli(capsys, "artifacts", "path", RE, *params)
    assert code == 0 and out.strip() == str(ref.path)

    code, out, err = run_cli(capsys, "artifacts", "path", RE, "-p", "kg=demo", "-p", "embedder=hash:32")
    assert code == 2 and "not built yet" in err
    code, out, err = run_cli(capsys, "artifacts", "path", RE, "-p", "kg=demo", "-p", "embedder=hash:32", "--build")
    assert code == 0 and Path(out.strip()).is_dir() and (Path(out.strip()) / MANIFEST).is_file()
    assert len(ArtifactStore().list()) == 2


@pytest.mark.parametrize("args, message", [
    # (the list goes on with the kinds other modules registered, e.g. FoG's demo scorer once FoG has run)
    (["show", "nope"], "kgqa: error: unknown artifact 'nope'; known artifacts: "),
    (["build", "nope", "--param", "kg=demo"], "kgqa: error: unknown artifact 'nope'"),
    (["path", "nope"], "kgqa: error: unknown artifact 'nope'"),
    (["show", "abcd1234"], "kgqa: error: no artifact in"),
    (["build", RE, "--param", "kg"], "kgqa: error: --param 'kg' is not KEY=VALUE"),
    (["build", RE, "--param", "kg=demo", "--param", "kg=demo"], "kgqa: error: --param kg is given twice"),
    (["build", RE, "--param", "size=3"], "kgqa: error: artifact 'relation-embeddings' takes no parameter 'size'"),
    (["build", RE, "--param", "kg=/no/such/kg", "--param", "embedder=hash"], "kgqa: error: parameter kg='/no/such/kg'"),
])
def test_cli_user_mistakes_are_one_line_with_exit_code_2(capsys: pytest.CaptureFixture[str], args: list[str],
                                                         message: str) -> None:
    code, out, err = run_cli(capsys, "artifacts", *args)
    assert code == 2
    assert out == ""
    assert err.startswith(message) and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    if message.endswith("known artifacts: "):
        assert {"label-embeddings", "relation-embeddings"} <= set(err.strip()[len(message):].split(", "))
    assert ArtifactStore().list() == []
