"""Load test of ``kgqa serve`` on loopback: a bounded number of asks, a fixed number in flight, the scripted model and
the demo KG.

Run (see benchmarks/README.md)::

    python benchmarks/serve_bench.py --asks 2000 --concurrency 32

What it does:

1. Writes a scripted model that answers every demo question the way an oracle would (its gold relation chain hop by
   hop, then "complete"), so each ask runs CCoR's real pipeline: entity linking, relation search, pruning, judging,
   chain execution on the embedded store, the evidence graph, accounting and the per-call prompt capture.
2. Starts ``kgqa serve`` as its own process on a free port of 127.0.0.1 with a bearer token (from the config
   variable, so it is not printed), the default limits except ``--rate-limit 0`` (one client sends everything; the
   limiter is per client) and ``--max-queued`` large enough for the concurrency.
3. Sends ``--warmup`` untimed asks, then ``--asks`` asks (the 61 demo questions in turn) from ``--concurrency``
   concurrent connections of one asyncio client, and records each ask's status and wall latency.
4. Writes benchmarks/results/serve_bench.json and .md: errors (any non-200 status or transport error), throughput,
   latency p50 / p95 / p99 / max, Hits@1 of the answers against the demo gold (a check that the asks did the work),
   the server's CPU seconds and RSS before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
TOKEN = "serve-bench-token-0123456789"


def _hop(hop: str) -> str:
    return f"{hop[1:]} (incoming)" if hop.startswith("^") else hop


def _chain_text(topic: str, hops: list[str]) -> str:
    return " -> ".join([f"[{topic}]", *(_hop(h) for h in hops)])


def oracle_rules(questions: list[Any]) -> list[dict[str, Any]]:
    """Per question: the next gold relation for each prefix of its chain, "complete" for the whole chain."""
    rules: list[dict[str, Any]] = []
    for q in questions:
        hops = [h for h in str(q.metadata["chain"]).split(",") if h]
        topic = q.topic_entities[0].name
        for k in range(len(hops)):
            rules.append({"match": re.escape(f"Question: {q.text}\nChain so far: {_chain_text(topic, hops[:k])}\n"),
                          "reply": {"relations": [_hop(hops[k])]}})
        rules.append({"match": re.escape(f"Question: {q.text}\nCurrent main chain: {_chain_text(topic, hops)}\n"),
                      "reply": {"chain_status": "complete", "answer_space_reached": None, "reason": "oracle"}})
    rules.append({"match": "Current main chain", "reply": {"chain_status": "incomplete", "answer_space_reached": False,
                                                             "reason": "not there yet"}})
    rules.append({"reply": {"reasoning": "no idea", "answers": []}})  # anything else: an empty answer, not an error
    return rules


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def proc_facts(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) and RSS in MB of a process, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        cpu = (int(fields[11]) + int(fields[12])) / ticks
        rss = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                   if line.startswith("VmRSS:")) / 1024
        return {"cpu_s": round(cpu, 2), "rss_mb": round(rss, 1)}
    except (OSError, StopIteration, IndexError, ValueError):
        return {}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


async def load(url: str, questions: list[Any], n: int, concurrency: int, method: str) -> dict[str, Any]:
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    hits = 0
    problems: list[str] = []
    counter = iter(range(n))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120,
                                 limits=limits) as client:

        async def worker() -> None:
            nonlocal hits
            for i in counter:
                q = questions[i % len(questions)]
                t0 = time.perf_counter()
                try:
                    response = await client.post("/v1/ask", json={"question": q.text, "method": method})
                    key = str(response.status_code)
                except httpx.HTTPError as exc:
                    key, response = type(exc).__name__, None
                    if len(problems) < 10:
                        problems.append(f"ask {i}: {type(exc).__name__}: {exc!r}")
                latencies.append(time.perf_counter() - t0)
                statuses[key] = statuses.get(key, 0) + 1
                if response is not None and response.status_code != 200 and len(problems) < 10:
                    problems.append(f"ask {i}: HTTP {response.status_code}: {response.text[:300]}")
                if response is not None and response.status_code == 200:
                    answers = response.json()["answers"]
                    gold = {g.id for g in q.answers}
                    hits += bool(answers and answers[0]["id"] in gold)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - started
    ok = statuses.get("200", 0)
    return {"asks": n, "concurrency": concurrency, "wall_s": round(wall, 3), "statuses": statuses,
            "errors": n - ok, "throughput_per_s": round(n / wall, 1),
            "latency_ms": {"p50": round(1000 * pct(latencies, 0.50), 1), "p95": round(1000 * pct(latencies, 0.95), 1),
                           "p99": round(1000 * pct(latencies, 0.99), 1), "max": round(1000 * max(latencies), 1),
                           "mean": round(1000 * statistics.fmean(latencies), 1)},
            "hits@1": round(hits / max(ok, 1), 4), "problems": problems}


def render(result: dict[str, Any]) -> str:
    m = result["machine"]
    r = result["run"]
    s = result["server"]
    lat = r["latency_ms"]
    lines = [
        "# kgqa serve load test",
        "",
        f"{result['date']}: `python benchmarks/serve_bench.py --asks {r['asks']} --concurrency {r['concurrency']}` "
        f"(method {result['method']}, scripted oracle model, demo KG, `kgqa serve --max-asks {s['max_asks']}`).",
        f"Machine: {m['cpus']} CPUs, Python {m['python']}, kgqa {m['kgqa']}, fastapi {m['fastapi']}, uvicorn "
        f"{m['uvicorn']}; load average {m['load_start']} at start, {m['load_end']} at end. Client and server share "
        "the machine (one asyncio client process, one server process).",
        "",
        "| measure | value |",
        "|---|---|",
        f"| asks (after {result['warmup']} untimed) | {r['asks']:,} |",
        f"| in flight | {r['concurrency']} |",
        f"| errors (non-200 or transport) | {r['errors']} |",
        f"| statuses | {', '.join(f'{k}: {v}' for k, v in sorted(r['statuses'].items()))} |",
        f"| wall time | {r['wall_s']} s |",
        f"| throughput | {r['throughput_per_s']} asks/s |",
        f"| latency p50 / p95 / p99 / max | {lat['p50']} / {lat['p95']} / {lat['p99']} / {lat['max']} ms |",
        f"| Hits@1 of the answers (demo gold) | {100 * r['hits@1']:.1f} % |",
        f"| server CPU during the run | {s.get('cpu_s_run', '-')} s |",
        f"| server RSS before / after | {s['before'].get('rss_mb', '-')} / {s['after'].get('rss_mb', '-')} MB |",
        "",
        "Latency is wall time per ask seen by the client, including the wait for one of the server's "
        f"{s['max_asks']} ask slots (with {r['concurrency']} in flight most of it is queueing: p50 is about "
        f"{r['concurrency']} / throughput). The answers are checked, not only counted: Hits@1 is against the demo "
        "questions' gold answers (questions with a constraint the oracle does not script come out wrong).",
        "",
        "Target (issue 15): 0 errors. " + ("Met." if r["errors"] == 0 else f"NOT met: {r['errors']} errors."),
        "",
    ]
    if r.get("problems"):
        lines += ["Errors (the first ten):", "", *(f"* {p}" for p in r["problems"]), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--asks", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--max-asks", type=int, default=4, help="the server's --max-asks")
    parser.add_argument("--method", default="ccor")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    from kgqa import __version__
    from kgqa.datasets import load_dataset

    questions = load_dataset("demo")
    with tempfile.TemporaryDirectory(prefix="serve-bench-") as tmp:
        rules = Path(tmp) / "oracle.jsonl"
        rules.write_text("".join(json.dumps(r) + "\n" for r in oracle_rules(questions)), encoding="utf-8")
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = {**os.environ, "KGQA_SERVE_TOKEN": TOKEN, "PYTHONUNBUFFERED": "1"}
        cmd = [sys.executable, "-m", "kgqa", "serve", "--kg", "demo", "--llm", f"scripted:{rules}", "--port", str(port),
               "--rate-limit", "0", "--max-asks", str(args.max_asks), "--max-queued", str(max(32, 2 * args.concurrency)),
               "--log-level", "warning"]
        log_path = Path(tmp) / "server.log"
        log = open(log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed below, after the server
        server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"{url}/v1/health", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"kgqa serve did not start: {log_path.read_text()}")
                time.sleep(0.1)
            load_start = round(os.getloadavg()[0], 2)
            asyncio.run(load(url, questions, args.warmup, min(args.concurrency, args.warmup or 1), args.method))
            before = proc_facts(server.pid)
            run = asyncio.run(load(url, questions, args.asks, args.concurrency, args.method))
            after = proc_facts(server.pid)
            load_end = round(os.getloadavg()[0], 2)
        finally:
            server.terminate()
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
            log.close()
            server_log = log_path.read_text(encoding="utf-8", errors="replace")
    if run["errors"]:
        print("server log (tail):\n" + server_log[-4000:], file=sys.stderr)
    result = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "method": args.method,
        "warmup": args.warmup,
        "run": run,
        "server": {"max_asks": args.max_asks, "before": before, "after": after,
                   "cpu_s_run": round(after["cpu_s"] - before["cpu_s"], 2) if before and after else None},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                    "kgqa": __version__, "fastapi": metadata.version("fastapi"), "uvicorn": metadata.version("uvicorn"),
                    "load_start": load_start, "load_end": load_end},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "serve_bench.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (args.out / "serve_bench.md").write_text(render(result), encoding="utf-8")
    print(render(result))
    return 0 if run["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
