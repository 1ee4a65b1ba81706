"""The SQLite request cache: keys, defaults, persistence, accounting of hits, several writer processes."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from llm_fault_server import FaultServer

from kgqa.errors import ConfigError
from kgqa.llm import CachedModel, Recorder, SQLiteCache, load
from kgqa.llm.cache import CACHE_FILE, request_key
from kgqa.llm.scripted import ScriptedModel


def counting_model() -> tuple[ScriptedModel, list[int]]:
    seen: list[int] = []

    def reply(msgs: list[dict[str, str]]) -> str:
        seen.append(1)
        return f"reply {len(seen)} to {msgs[-1]['content']}"

    return ScriptedModel(reply, name="counter"), seen


def ask(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_temperature_zero_is_cached_and_replayed(tmp_path: Path) -> None:
    inner, seen = counting_model()
    model = CachedModel(inner, SQLiteCache(tmp_path))
    first = model.chat(ask("a"), step="x")
    again = model.chat(ask("a"), temperature=0, step="other step")  # step is not part of the key
    assert (first.cached, again.cached) == (False, True)
    assert again.text == first.text and again.usage == first.usage
    assert len(seen) == 1
    model.chat(ask("b"))
    model.chat(ask("a"), max_tokens=10)
    assert len(seen) == 3


def test_sampling_is_not_cached_unless_forced_and_can_be_bypassed(tmp_path: Path) -> None:
    inner, seen = counting_model()
    model = CachedModel(inner, SQLiteCache(tmp_path))
    model.chat(ask("a"), temperature=0.7)
    model.chat(ask("a"), temperature=0.7)
    assert len(seen) == 2
    model.chat(ask("a"), temperature=0.7, cache=True)
    assert model.chat(ask("a"), temperature=0.7, cache=True).cached
    model.chat(ask("z"))
    assert not model.chat(ask("z"), cache=False).cached
    assert len(seen) == 5


def test_persists_across_instances_and_keys_include_model_identity(tmp_path: Path) -> None:
    # (the counting model's replies are prose: asked against a schema they would not be stored; schemas in the key:
    # test_salvage_and_schema_cache.py)
    inner, _ = counting_model()
    CachedModel(inner, SQLiteCache(tmp_path)).chat(ask("a"), stop=["\n"])
    other, seen = counting_model()
    reopened = CachedModel(other, SQLiteCache(tmp_path / CACHE_FILE))
    assert reopened.chat(ask("a"), stop=["\n"]).cached
    assert len(seen) == 0
    renamed = CachedModel(ScriptedModel(lambda m: "x", name="another"), SQLiteCache(tmp_path))
    assert not renamed.chat(ask("a"), stop=["\n"]).cached
    params = {"temperature": 0.0, "max_tokens": 5}
    assert request_key("m", ask("a"), params) == request_key("m", ask("a"), {**params, "step": "s"})
    assert request_key("m", ask("a"), params) != request_key("n", ask("a"), params)


def test_cache_hits_are_accounted(tmp_path: Path) -> None:
    script = tmp_path / "s.jsonl"
    script.write_text('{"reply": "the answer"}\n')
    rec = Recorder()
    model = load(f"scripted:{script}", recorder=rec, cache=tmp_path / "c")
    with rec.scope("q"):
        model.chat(ask("same"))
        model.chat(ask("same"))
    totals = rec.totals("q")
    assert totals.calls == 2 and totals.cache_hits == 1
    assert (tmp_path / "c" / CACHE_FILE).is_file()  # a path without an extension is a folder
    first, second = rec.calls("q")
    assert (first.prompt_tokens, first.completion_tokens) == (second.prompt_tokens, second.completion_tokens)


def test_async_path_uses_the_cache(server: FaultServer, tmp_path: Path) -> None:
    model = load(f"openai:m@{server.url}", cache=tmp_path)
    assert not asyncio.run(model.achat(ask("hello"))).cached
    assert asyncio.run(model.achat(ask("hello"))).cached
    assert model.chat(ask("hello")).cached
    assert server.state.ok_replies == 1


def test_default_location_and_switch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "s.jsonl"
    script.write_text('{"reply": "r"}\n')
    model = load(f"scripted:{script}", cache=True)
    model.chat(ask("q"))
    assert (tmp_path / "cache" / CACHE_FILE).is_file()  # KGQA_CACHE_DIR (set by the conftest)
    monkeypatch.setenv("KGQA_LLM_CACHE", "0")
    with FaultServer() as srv:
        assert not isinstance(load(f"openai:m@{srv.url}"), CachedModel)
    monkeypatch.setenv("KGQA_LLM_CACHE", "maybe")
    with pytest.raises(ConfigError, match="on, off or refresh"):
        load(f"openai:m@{srv.url}")


def test_unusable_cache_file_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlite3"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(ConfigError, match="cannot be opened as SQLite"):
        SQLiteCache(bad)


def test_a_file_locked_while_another_process_opens_it_is_opened_again(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Processes opening a new cache together race to switch it to WAL, and SQLite answers the loser "database is
    locked" at once (CI saw it with 4 writer processes on a loaded machine). The fault is injected: the first two
    connections refuse the switch."""
    import sqlite3

    import kgqa.localdb as localdb

    real_connect = sqlite3.connect
    refused: list[str] = []

    class Refusing:
        def __init__(self, conn: sqlite3.Connection) -> None:
            self.conn = conn

        def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
            if sql.startswith("PRAGMA journal_mode"):
                refused.append(sql)
                raise sqlite3.OperationalError("database is locked")
            return self.conn.execute(sql, *args)

        def close(self) -> None:
            self.conn.close()

    def connect(*args: object, **kwargs: object) -> object:
        conn = real_connect(*args, **kwargs)  # type: ignore[call-overload]
        return Refusing(conn) if len(refused) < 2 else conn

    monkeypatch.setattr(localdb.sqlite3, "connect", connect)
    cache = SQLiteCache(tmp_path / "c.sqlite3")
    assert len(refused) == 2 and len(cache) == 0
    # A lock that does not clear within the patience is still a clear error, not a hang.
    refused.clear()
    monkeypatch.setattr(localdb, "OPEN_PATIENCE_S", 0.1)
    monkeypatch.setattr(localdb.sqlite3, "connect", lambda *a, **k: Refusing(real_connect(*a, **k)))
    with pytest.raises(ConfigError, match="cannot be opened as SQLite: database is locked"):
        SQLiteCache(tmp_path / "d.sqlite3")
    assert len(refused) >= 2


WRITER = textwrap.dedent("""
    import sys
    from kgqa.llm.cache import CachedModel, SQLiteCache
    from kgqa.llm.scripted import ScriptedModel

    worker, path = int(sys.argv[1]), sys.argv[2]
    model = CachedModel(ScriptedModel(lambda m: "r:" + m[-1]["content"], name="shared"), SQLiteCache(path))
    for i in range(150):
        model.chat([{"role": "user", "content": f"own-{worker}-{i}"}])
        model.chat([{"role": "user", "content": f"shared-{i % 40}"}])
    print("done", worker)
""")


def test_several_writer_processes(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(w), str(path)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in range(4)]
    outputs = [p.communicate(timeout=120) for p in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert out.startswith("done")
    cache = SQLiteCache(path)
    assert len(cache) == 4 * 150 + 40
    model = CachedModel(ScriptedModel(lambda m: "fresh", name="shared"), cache)
    reply = model.chat([{"role": "user", "content": "own-3-149"}])
    assert reply.cached and reply.text == "r:own-3-149"
