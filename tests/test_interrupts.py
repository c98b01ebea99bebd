"""Ctrl-C and SIGTERM through the installed script: one line, the shell's exit status
(130, 143), no output left, and no process evtime started outlives it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

pytestmark = pytest.mark.cli


@pytest.fixture(scope="module")
def big_csv(tmp_path_factory) -> Path:
    """A CSV big enough that its job runs for several seconds."""
    n = 1_500_000
    start = 1_235_909_722_000_000_000
    times = pa.array([start + (i * 7919 % 1000) * 1_000_000 + i * 1000 for i in range(n)])
    table = pa.table({"id": pa.array(range(n)), "time": times.cast(pa.timestamp("ns", "UTC"))})
    path = tmp_path_factory.mktemp("interrupts") / "big.csv"
    pacsv.write_csv(table, path)
    return path


ADJUST = ["adjust", "--unit", "msec", "--range", "999"]


def _started(args: list[str], cwd: Path, env: dict) -> subprocess.Popen:
    """The installed script running ``evtime ARGS`` in a session (a process group) of its
    own, as a shell's foreground job is."""
    script = Path(sys.executable).parent / "evtime"
    return subprocess.Popen(
        [str(script), *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip


def _marked(mark: str) -> list[int]:
    """The processes whose environment holds ``mark`` (every process evtime started)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                env = fh.read()
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        zombie = stat[stat.rindex(b")") + 2 :].split()[0] == b"Z"
        if mark.encode() in env and not zombie:
            found.append(int(entry))
    return found


def _cmdlines(pids: list[int]) -> list[str]:
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                out.append(fh.read().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            pass
    return out


def _is_jvm(cmdline: str) -> bool:
    return os.path.basename(cmdline.split(" ")[0]) == "java"


def _is_python_worker(cmdline: str) -> bool:
    """Spark's Python daemon or worker (``python -m evtime.daemon``, ``pyspark.worker``)."""
    program = os.path.basename(cmdline.split(" ")[0])
    return program.startswith("python") and ("daemon" in cmdline or "worker" in cmdline)


def _wait_for(mark: str, kind, proc: subprocess.Popen, timeout: float = 120) -> None:
    """Wait until a process evtime started is of ``kind`` (a test of its command line)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"evtime ended before a {kind.__name__} process: {proc.stderr.read()}")
        if any(kind(c) for c in _cmdlines([p for p in _marked(mark) if p != proc.pid])):
            return
        time.sleep(0.05)
    pytest.fail(f"no {kind.__name__} process within {timeout} s")


@pytest.mark.parametrize(
    "moment,sig",
    [
        ("start-up", signal.SIGINT),  # the JVM is starting: no session yet
        ("mid-job", signal.SIGINT),  # Python workers are running the job's tasks
        ("mid-job", signal.SIGTERM),  # as cron and systemd stop a job
    ],
)
def test_a_signal_ends_evtime_and_everything_it_started(big_csv, tmp_path, cli_env, moment, sig):
    mark = f"evtime-test-{uuid.uuid4().hex}"
    env = dict(cli_env, EVTIME_TEST_MARK=mark, EVTIME_DRIVER_IO_MAX="0")
    out = tmp_path / "out"
    out.mkdir()
    proc = _started([*ADJUST, "-o", "sorted.parquet", str(big_csv)], out, env)
    try:
        _wait_for(mark, _is_jvm if moment == "start-up" else _is_python_worker, proc)
        if sig == signal.SIGINT:
            os.killpg(proc.pid, sig)  # as a terminal's Ctrl-C: the whole foreground group
        else:
            os.kill(proc.pid, sig)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    name = "interrupted (SIGINT)" if sig == signal.SIGINT else "terminated (SIGTERM)"
    assert proc.returncode == 128 + sig, stderr
    assert stderr.splitlines() == [f"evtime: {name}"]
    assert sorted(os.listdir(out)) == []  # no output, not even a temporary one
    deadline = time.monotonic() + 5
    while _marked(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _marked(mark)
    assert not left, _cmdlines(left)


def test_ctrl_c_while_publishing_leaves_nothing(tmp_path, cli_env):
    """SIGINT when the output is complete under its temporary name and not yet renamed
    (the run paused there by EVTIME_CRASH_AT=publishing): exit 130, one line, neither the
    output nor the temporary file left, no process evtime started alive."""
    mark = f"evtime-test-{uuid.uuid4().hex}"
    paused = tmp_path / "paused"
    src = tmp_path / "in.csv"
    start = 1_235_909_722_000_000_000
    times = pa.array([start + (i * 7919 % 1000) * 1_000_000 for i in range(2000)])
    pacsv.write_csv(pa.table({"time": times.cast(pa.timestamp("ns", "UTC"))}), src)
    env = dict(
        cli_env,
        EVTIME_TEST_MARK=mark,
        EVTIME_DRIVER_IO_MAX="0",  # (Spark's Python workers write the parts)
        EVTIME_CRASH_AT="publishing",
        EVTIME_CRASH_HARD="pause",
        EVTIME_CRASH_PAUSED=str(paused),
    )
    out = tmp_path / "out"
    out.mkdir()
    proc = _started([*ADJUST, "-o", "sorted.csv", str(src)], out, env)
    try:
        deadline = time.monotonic() + 240
        while not paused.exists():  # (the run reached the point: no guess at a time)
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"evtime did not reach the publishing point: {proc.stderr.read()}")
            time.sleep(0.05)
        temps = [n for n in os.listdir(out) if n.startswith(".sorted.csv.evtime-")]
        assert temps and "sorted.csv" not in os.listdir(out)  # (complete, not renamed)
        assert any(_is_jvm(c) for c in _cmdlines(_marked(mark)))  # (Spark still up)
        os.killpg(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, stderr
    assert stderr.splitlines() == ["evtime: interrupted (SIGINT)"]
    assert sorted(os.listdir(out)) == []  # no output, not even the temporary one
    deadline = time.monotonic() + 5
    while _marked(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _marked(mark)
    assert not left, _cmdlines(left)
