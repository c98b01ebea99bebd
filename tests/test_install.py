"""evtime as it is installed and run outside a developer's shell: the venv's script by its
absolute path with the venv not on PATH (cron, systemd, pipx), and the declared pyspark
range being the one that is installed and tested."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLES
from tests.seeds import TABLES

ADJUST = ["adjust", "--unit", "msec", "--range", "999"]


def _decoy_path(tmp_path: Path) -> str:
    """A PATH whose first ``python3``/``python`` is not this interpreter (it fails when
    started), as the system's Python without pyarrow or evtime is under cron."""
    decoy = tmp_path / "decoy-bin"
    decoy.mkdir()
    for name in ("python3", "python"):
        exe = decoy / name
        exe.write_text("#!/bin/sh\necho 'decoy python started' >&2\nexit 1\n")
        exe.chmod(0o755)
    java = Path(os.environ.get("JAVA_HOME", "/nonexistent")) / "bin"
    return os.pathsep.join([str(decoy), str(java), "/usr/bin", "/bin"])


@pytest.mark.cli
def test_script_by_absolute_path_with_its_venv_off_path_runs_python_workers(tmp_path, cli_env):
    script = Path(sys.executable).parent / "evtime"
    assert script.exists(), f"no evtime script beside {sys.executable}: is evtime installed?"
    env = dict(cli_env, PATH=_decoy_path(tmp_path), EVTIME_DRIVER_IO_MAX="0")
    env.pop("PYSPARK_PYTHON", None)
    out = tmp_path / "out.csv"
    p = subprocess.run(
        [str(script), *ADJUST, "-o", str(out), str(SAMPLES / "tuples.parquet")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    table = TABLES[("msec", 999)]
    expected = [n for _, n in sorted((pos, n) for n, (pos, _) in table.items() if pos)]
    assert [line.split(",")[0].strip('"') for line in out.read_text().splitlines()[1:]] == expected


def test_installed_pyspark_is_within_the_declared_range():
    """The range pyproject.toml declares is the one CI installs and tests: its lower bound
    is the minor release installed here (an upper bound keeps CI on it)."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    spec = next(d for d in deps if d.startswith("pyspark"))
    low = re.search(r">=\s*(\d+)\.(\d+)", spec)
    high = re.search(r"<\s*(\d+)\.(\d+)", spec)
    assert low and high, f"pyspark needs a lower and an upper bound: {spec}"
    installed = tuple(int(x) for x in version("pyspark").split(".")[:2])
    assert installed == (int(low[1]), int(low[2])), (spec, version("pyspark"))
    assert installed < (int(high[1]), int(high[2])), (spec, version("pyspark"))
