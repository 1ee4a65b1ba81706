"""The test-split ledger: every evaluation on a test split, so the number of looks at test data is never forgotten.

Choices are made on dev splits; a test split read too often becomes a dev split. Every ``kgqa eval`` on split ``test``
appends one line to ``CACHE_DIR/test-ledger.jsonl`` (the config's ``cache_dir``; ``KGQA_CACHE_DIR``): when, dataset,
method, a digest of what decides the answers (method and its resolved config, model, KG, seed, the questions'
selection), the kgqa commit, the headline scores, the questions scored and the run directory. A resumed run appends
again (it looked again). The run's summary.json (``run.test_ledger``) and report.md say how many times this method has
been evaluated on this dataset's test split, counting this one; ``kgqa eval ledger`` lists the ledger.

``method`` is the registered name (config.json's ``method``), and the counts are per registered method: FoG's graph
mode (reported as ``fog[graph]``, kept in the entry's ``label``) and its LLM mode share the trained scorer and every
expansion setting, so a look at the test split with one informs the choices of the other, and ``--method fog`` finds
both. The digest tells their configs apart.

The ledger is a record, not a lock: nothing is refused because of it. It lives in the cache so that every run of the
machine's user counts, whatever ``--out`` they chose; writes are appends of one line each, so concurrent runs do not
lose each other's entries.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kgqa.config import cache_dir

LEDGER_FILE = "test-ledger.jsonl"
TEST_SPLIT = "test"
#: What decides a run's answers, read from its config.json for the digest.
_DECIDING = ("dataset", "split", "method", "method_config_resolved", "llm", "kg", "embedder", "seed", "shuffle", "limit")
#: The scores a ledger line keeps (summary.json keys).
HEADLINE = ("hit", "hits@1", "f1", "kgr", "faithful_f1")


def ledger_path(cache: str | os.PathLike[str] | None = None) -> Path:
    """Where the ledger lives: ``cache`` (default: the configured cache directory) / test-ledger.jsonl."""
    return (Path(cache).expanduser() if cache is not None else cache_dir()) / LEDGER_FILE


def config_digest(run_config: Mapping[str, Any]) -> str:
    """A short digest of what decides the answers of a run (method config, model, KG, seed, selection)."""
    deciding = {key: run_config.get(key) for key in _DECIDING}
    text = json.dumps(deciding, sort_keys=True, default=str, ensure_ascii=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def read_ledger(path: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """Every entry, oldest first (a line that is not a JSON object, such as one cut by a crash, is skipped)."""
    file = Path(path) if path is not None else ledger_path()
    if not file.is_file():
        return []
    entries = []
    for line in file.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def evaluations(dataset: str, method: str, path: str | os.PathLike[str] | None = None) -> int:
    """How many ledger entries evaluate ``method`` on ``dataset``'s test split."""
    return sum(1 for e in read_ledger(path) if e.get("dataset") == dataset and e.get("method") == method)


def test_looks(run_config: Mapping[str, Any], *, path: str | os.PathLike[str] | None = None) -> dict[str, Any] | None:
    """What a run on a test split records in its summary before it is appended: ``{"evaluations": N, "ledger": PATH,
    "digest": ...}``, N counting this run; None for any other split."""
    if run_config.get("split") != TEST_SPLIT:
        return None
    file = Path(path) if path is not None else ledger_path()
    dataset, method = str(run_config.get("dataset")), str(run_config.get("method"))
    return {"evaluations": evaluations(dataset, method, file) + 1, "ledger": str(file),
            "digest": config_digest(run_config)}


def record_test_run(run_config: Mapping[str, Any], summary: Mapping[str, Any], run_dir: str | os.PathLike[str], *,
                    path: str | os.PathLike[str] | None = None) -> dict[str, Any] | None:
    """Append the run to the ledger when it evaluated a test split; returns the entry, or None for any other split."""
    if run_config.get("split") != TEST_SPLIT:
        return None
    file = Path(path) if path is not None else ledger_path()
    dataset, method = str(run_config.get("dataset")), str(run_config.get("method"))
    entry = {"when": datetime.now(UTC).isoformat(timespec="seconds"), "dataset": dataset, "method": method,
             "label": str(run_config.get("method_label") or method),
             "digest": config_digest(run_config), "commit": run_config.get("kgqa_commit"),
             "scores": {key: summary.get(key) for key in HEADLINE if summary.get(key) is not None},
             "questions": summary.get("n"), "run_dir": str(Path(run_dir).resolve())}
    file.parent.mkdir(parents=True, exist_ok=True)
    with file.open("a", encoding="utf-8") as out:  # one write per line: concurrent runs interleave whole lines
        out.write(json.dumps(entry, ensure_ascii=False) + "\n")
    return entry


def render_ledger(entries: Sequence[Mapping[str, Any]], *, markdown: bool = False) -> str:
    """The ledger as a table (newest last; each run under its label) with a count per dataset and registered
    method."""
    from kgqa.eval.report import format_table

    if not entries:
        return "The test-split ledger is empty: no kgqa eval has run on a test split with this cache directory.\n"
    rows = [[str(e.get("when", "")), str(e.get("dataset", "")), str(e.get("label") or e.get("method", "")),
             str(e.get("digest", "")), str(e.get("commit") or "?"), str(e.get("questions", "")),
             " ".join(f"{k} {100 * float(v):.1f}" for k, v in (e.get("scores") or {}).items()),
             str(e.get("run_dir", ""))] for e in entries]
    counts = Counter((str(e.get("dataset")), str(e.get("method"))) for e in entries)
    table = format_table(["when", "dataset", "method", "config", "commit", "n", "scores", "run"], rows,
                         markdown=markdown)
    per = format_table(["dataset", "method", "test evaluations"],
                       [[d, m, str(n)] for (d, m), n in sorted(counts.items())], markdown=markdown)
    return f"{table.rstrip()}\n\n{per.rstrip()}\n"
