"""Benchmark of ``kgqa eval --workers``: io questions against a loopback OpenAI-compatible endpoint that answers every
request after a fixed delay (200 ms), at 1, 8, 32 and 64 workers (issue 16, finding 9).

With a fixed reply delay the ideal rate is ``workers / delay`` questions per second (io asks once per question); the
report puts the measured rate beside it. Target: at 64 workers at least 150 questions/s.

The endpoint is a small threaded HTTP server inside this script (``/v1/chat/completions`` only): it sleeps ``--delay``
seconds, then answers a well-formed chat completion whose content is ``{"answers": [...]}``, and counts how many
requests it held at once (``server max in flight``: the concurrency the client really reached). Each worker count runs
``kgqa eval`` as a fresh subprocess (``--method io --no-report``) on MetaQA 1-hop dev (``--limit N``), with the LLM
cache off (``KGQA_LLM_CACHE=0``, a temporary ``KGQA_CACHE_DIR``), an empty config file and no other ``KGQA_*``
variable: in particular ``KGQA_LLM_CONCURRENCY`` is *not* set, so the run measures the client's default cap on requests
in flight (the subject of finding 9), not one tuned for the benchmark.

Rates: ``questions/s`` is the run's own figure (summary.json ``run.questions_per_s``: questions answered over the
question loop, interpreter start and dataset loading excluded); ``end to end`` divides by the subprocess's wall time.

    python benchmarks/workers_bench.py [--questions 1000] [--questions-1w 100] [--workers 1,8,32,64] [--delay 0.2]
                                       [--data-dir DIR] [--out benchmarks/results]

At 1 worker a question takes the whole delay, so 1,000 questions take 200 s: ``--questions-1w`` (default 100) runs
fewer there and the table says so. A quick smoke run: ``--questions 50 --questions-1w 10 --out /tmp/wb``.
Writes RESULTS/workers_bench.json and RESULTS/workers_bench.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parents[1]
DATA_DIR_ENV = "KGQA_DATA_DIR"
TARGET_WORKERS = 64
TARGET_QPS = 150.0
_QUESTION_RE = re.compile(r"^Question: (.*)$", re.MULTILINE)


# -- the loopback endpoint -----------------------------------------------------------------------------------------------


class _Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The headers and the body go out in two writes: with Nagle on, the body waits for the client's delayed ACK
    # (~40 ms on Linux), which would be measured as the client's overhead.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _send(self, status: int, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        if not self.path.endswith("/chat/completions"):
            self._send(404, b'{"error": {"message": "not found"}}')
            return
        stats = self.server.stats
        with stats.lock:
            stats.requests += 1
            stats.in_flight += 1
            stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        try:
            time.sleep(self.server.delay_s)
            first = next((m.get("content", "") for m in body.get("messages", []) if m.get("role") == "user"), "")
            asked = _QUESTION_RE.findall(first)
            # A deterministic reply that depends on the question (its length), never on timing.
            answer = f"Answer {len(asked[-1]) % 7}" if asked else "Answer"
            text = json.dumps({"answers": [answer]})
            payload = {"id": "chatcmpl-bench", "object": "chat.completion", "created": int(time.time()),
                       "model": body.get("model", "bench"),
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": text}}],
                       "usage": {"prompt_tokens": 100, "completion_tokens": 8, "total_tokens": 108}}
            self._send(200, json.dumps(payload).encode())
        finally:
            with stats.lock:
                stats.in_flight -= 1


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 512  # 64 clients connecting at once must not overflow the listen backlog

    def __init__(self, delay_s: float) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.delay_s = delay_s
        self.stats = _Stats()


class Endpoint:
    """A running loopback endpoint; ``url`` is its OpenAI base URL."""

    def __init__(self, delay_s: float) -> None:
        self.server = _Server(delay_s)
        self.thread = threading.Thread(target=self.server.serve_forever, name="bench-endpoint", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> Endpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


# -- one run -------------------------------------------------------------------------------------------------------------


def _data_dir(arg: str | None) -> Path:
    path = Path(arg or os.environ.get(DATA_DIR_ENV) or REPO / ".." / "shared" / "data").resolve()
    if not (path / "metaqa" / "1-hop" / "qa_dev.txt").is_file():
        raise SystemExit(f"MetaQA 1-hop dev not found under {path}; pass --data-dir or set {DATA_DIR_ENV}")
    return path


def _env(work: Path, data_dir: Path) -> dict[str, str]:
    config = work / "empty-config.toml"
    config.write_text("", encoding="utf-8")
    # No KGQA_* from the caller (KGQA_LLM_CONCURRENCY above all: the default behaviour is what is measured).
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KGQA_", "OPENAI_"))}
    env.update({DATA_DIR_ENV: str(data_dir), "KGQA_CACHE_DIR": str(work / "cache"), "KGQA_CONFIG": str(config),
                "KGQA_LLM_CACHE": "0", "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
    return env


def run_one(workers: int, questions: int, delay_s: float, data_dir: Path, work: Path) -> dict[str, Any]:
    out = work / f"run-w{workers}"
    env = _env(work, data_dir)
    with Endpoint(delay_s) as endpoint:
        args = [sys.executable, "-m", "kgqa", "eval", "--dataset", "metaqa-1hop", "--split", "dev", "--method", "io",
                "--llm", f"openai:bench@{endpoint.url}", "--limit", str(questions), "--workers", str(workers),
                "--out", str(out), "--no-progress", "--no-report"]
        cpu0 = os.times()
        t0 = time.perf_counter()
        done = subprocess.run(args, cwd=work, env=env, capture_output=True, text=True, timeout=3600)
        wall = time.perf_counter() - t0
        cpu1 = os.times()
        stats = endpoint.server.stats
    if done.returncode != 0:
        raise SystemExit(f"kgqa eval --workers {workers} exited {done.returncode}:\n{done.stderr[-3000:]}")
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    run = summary.get("run", {})
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines() if line]
    latencies = sorted(float(r.get("latency_s", 0.0)) for r in rows)
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    qps = run.get("questions_per_s") or (len(rows) / run["loop_s"] if run.get("loop_s") else None)
    ideal = workers / delay_s
    child_cpu = (cpu1.children_user - cpu0.children_user) + (cpu1.children_system - cpu0.children_system)
    return {
        "workers": workers, "questions": len(rows), "failed": int(run.get("failed", 0)),
        "ideal_qps": round(ideal, 1),
        "qps": round(float(qps), 1) if qps else None,
        "efficiency": round(float(qps) / ideal, 3) if qps else None,
        "qps_end_to_end": round(len(rows) / wall, 1),
        "loop_s": run.get("loop_s"), "wall_s": round(wall, 3),
        "kgqa_cpu_s": round(child_cpu, 2),
        "question_latency_p50_s": round(statistics.median(latencies), 3) if latencies else None,
        "question_latency_p95_s": round(latencies[int(0.95 * (len(latencies) - 1))], 3) if latencies else None,
        "server_requests": stats.requests,
        "server_max_in_flight": stats.max_in_flight,
        "llm_retries": sum(int(r.get("retries", 0)) for r in rows),
        "llm_structured_mode": config.get("llm_structured_mode"),
    }


# -- report --------------------------------------------------------------------------------------------------------------


def write_report(result: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "workers_bench.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    machine = result["machine"]
    rows = result["runs"]
    lines = ["# `kgqa eval --workers`: io questions against a loopback endpoint with a fixed reply delay", ""]
    if result.get("note"):
        lines += [result["note"], ""]
    lines += [
        f"MetaQA 1-hop dev, method `io` (one LLM call per question), endpoint on 127.0.0.1 answering every request after "
        f"{1000 * result['delay_s']:.0f} ms, LLM cache off, `KGQA_LLM_CONCURRENCY` not set (the client's default cap). "
        f"Machine: {machine['cpus']} CPUs, Python {machine['python']}, load average {machine['loadavg_start']} at start, "
        f"{machine['loadavg_end']} at end. kgqa {result.get('kgqa_commit') or ''}".rstrip(),
        "",
        "| workers | questions | ideal q/s (workers / delay) | questions/s | of ideal | end to end q/s | question p50 / p95 s "
        "| server max in flight | failed |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    fewer = [r for r in rows if r["questions"] < result["questions"]]
    for r in rows:
        mark = " *" if r in fewer else ""
        eff = f"{100 * r['efficiency']:.0f}%" if r["efficiency"] is not None else "n/a"
        lines.append(f"| {r['workers']} | {r['questions']:,}{mark} | {r['ideal_qps']:g} | {r['qps']} | {eff} | "
                     f"{r['qps_end_to_end']} | {r['question_latency_p50_s']} / {r['question_latency_p95_s']} | "
                     f"{r['server_max_in_flight']} | {r['failed']} |")
    lines.append("")
    if fewer:
        full_s = result["questions"] * result["delay_s"]
        lines += [f"\\* fewer questions than the {result['questions']:,} of the other rows (at 1 worker each question "
                  f"waits the whole delay: {result['questions']:,} would take {full_s:.0f} s).", ""]
    target = next((r for r in rows if r["workers"] == TARGET_WORKERS), None)
    lines += ["## Target", "", "| target | measured | verdict |", "|---|---|---|"]
    if target is None:
        lines.append(f"| >= {TARGET_QPS:g} questions/s at {TARGET_WORKERS} workers | not run | n/a |")
    else:
        ok = target["qps"] is not None and target["qps"] >= TARGET_QPS
        lines.append(f"| >= {TARGET_QPS:g} questions/s at {TARGET_WORKERS} workers | {target['qps']} questions/s | "
                     f"{'met' if ok else 'NOT met'} |")
    lines += [
        "",
        "`questions/s` is the run's own rate (summary.json `run.questions_per_s`: answered questions over the question "
        "loop); `end to end` divides by the wall time of the `kgqa eval` subprocess (interpreter start, dataset loading "
        "and the summary included). `server max in flight` is the most requests the endpoint held at once: below the "
        "worker count it shows a cap in the client, not in the endpoint. Numbers depend on the machine and on what else "
        "runs on it (see the load average); the endpoint runs in the benchmark's own process on the same cores.",
        "",
        "    " + result["command"],
    ]
    (out / "workers_bench.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _commit() -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"], capture_output=True, text=True,
                              timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=1000, help="questions per run (MetaQA 1-hop dev, --limit)")
    parser.add_argument("--questions-1w", type=int, default=100,
                        help="questions of the 1-worker run (0: --questions); each waits the whole delay")
    parser.add_argument("--workers", default="1,8,32,64", help="comma-separated worker counts")
    parser.add_argument("--delay", type=float, default=0.2, help="the endpoint's reply delay in seconds")
    parser.add_argument("--data-dir", default=None, help=f"benchmark data directory (default: ${DATA_DIR_ENV})")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--note", default="", help="printed at the top of the report")
    args = parser.parse_args()

    data_dir = _data_dir(args.data_dir)
    workers = [int(w) for w in args.workers.split(",") if w.strip()]
    load_start = os.getloadavg()[0]
    runs = []
    with tempfile.TemporaryDirectory(prefix="kgqa-workers-bench-") as tmp:
        for w in workers:
            n = args.questions_1w if w == 1 and args.questions_1w else args.questions
            row = run_one(w, n, args.delay, data_dir, Path(tmp))
            runs.append(row)
            print(f"workers {w:>3}: {row['questions']:>5} questions, {row['qps']} q/s (ideal {row['ideal_qps']:g}), "
                  f"end to end {row['qps_end_to_end']} q/s, server max in flight {row['server_max_in_flight']}",
                  flush=True)
    result = {
        "benchmark": "workers_bench",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                    "loadavg_start": round(load_start, 2), "loadavg_end": round(os.getloadavg()[0], 2)},
        "kgqa_commit": _commit(),
        "command": "python benchmarks/workers_bench.py " + " ".join(sys.argv[1:]),
        "note": args.note,
        "dataset": "metaqa-1hop/dev", "method": "io", "delay_s": args.delay, "questions": args.questions,
        "target": {"workers": TARGET_WORKERS, "min_qps": TARGET_QPS},
        "runs": runs,
    }
    write_report(result, args.out)
    print(f"wrote {args.out / 'workers_bench.json'} and {args.out / 'workers_bench.md'}")


if __name__ == "__main__":
    main()
