"""The tests of methods that need no torch (IO, CoT, CCoR, ToG, PoG, SRP, VoG, the platform) pass in a process where
torch cannot be imported: a user who installs kgqa without the text extras can run and test them.

FoG and chains read a trained torch scorer; their tests (tests/methods/fog, tests/methods/chains) are left out.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: A pytest plugin (``-p block_torch``) that makes every import of torch fail, as if it were not installed.
BLOCKER = '''
import sys


class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is not installed (blocked for this test run)")
        return None


sys.meta_path.insert(0, _NoTorch())
'''


@pytest.mark.slow
def test_the_method_tests_that_need_no_torch_pass_with_torch_blocked(tmp_path: Path) -> None:
    (tmp_path / "block_torch.py").write_text(BLOCKER, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)}
    blocked = subprocess.run([sys.executable, "-c", "import block_torch, torch"], env=env, capture_output=True,
                             text=True, timeout=60)
    assert blocked.returncode != 0 and "torch is not installed" in blocked.stderr  # the blocker works
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "block_torch",
                          "tests/methods", "--ignore=tests/methods/fog", "--ignore=tests/methods/chains",
                          f"--ignore={Path(__file__).relative_to(REPO)}"],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    summary = run.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary and "error" not in summary, summary
