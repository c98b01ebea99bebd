"""The hypothesis seed of CI runs (tests/conftest.py): reproducible, and another commit (or
EVTIME_HYPOTHESIS_SEED) tries other streams."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT, SEED_VAR

DRAW = """
from hypothesis import given, settings, strategies as st

@settings(max_examples=5)
@given(st.integers())
def test_draw(n):
    print("DRAWN", n)
"""


def _drawn(tmp_path, **env) -> tuple[list[str], str]:
    test = tmp_path / "test_draw.py"
    test.write_text(DRAW)
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-s", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), str(test)],
        cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    return [line for line in p.stdout.splitlines() if line.startswith("DRAWN")], p.stdout


def test_ci_runs_are_reproducible_and_a_new_seed_tries_other_streams(tmp_path):
    env = {"CI": "true", SEED_VAR: ""}
    first, out = _drawn(tmp_path, **env)
    assert "hypothesis seed " in out and f"replay with {SEED_VAR}=" in out
    seed = out.split(f"replay with {SEED_VAR}=")[1].split()[0]
    assert _drawn(tmp_path, **{**env, SEED_VAR: seed})[0] == first  # replayed
    assert _drawn(tmp_path, **{**env, SEED_VAR: str(int(seed) + 1)})[0] != first
