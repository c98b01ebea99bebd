"""What the ``--state`` tests of adjust, merge and bound share: reading outputs, cutting a
stream into files, and the crash-then-retry sequence at each commit step."""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from evtime.io.state import InjectedCrash

CRASH_POINTS = ["state-written", "staged", "ready", "published-1", "published", "committed"]


def rows(path: Path) -> list[dict]:
    with open(path) as fh:
        return list(csv.DictReader(fh))


def split(
    tmp: Path, data: list, cuts: list[int], write: Callable[[Path, list, int], None]
) -> list[Path]:
    """``data`` cut at ``cuts`` into files in0.csv, in1.csv, ... (``write(path, part,
    first)``); no empty file (an empty file is bad input)."""
    ends = [0, *sorted(c % (len(data) + 1) for c in cuts), len(data)]
    files = []
    for j, (a, b) in enumerate(zip(ends, ends[1:], strict=False)):
        if a == b:
            continue
        files.append(tmp / f"in{j}.csv")
        write(files[-1], data[a:b], a)
    return files


def crash_then_resume(
    run_cli,
    monkeypatch,
    tmp: Path,
    point: str,
    first: list,
    run0: Sequence,
    run1: Sequence,
) -> tuple[list[dict], list[dict]]:
    """Run ``first + run0`` crashing at commit step ``point``; check the output appears
    complete or not at all; retry it as cron would (it completes, or finds it complete,
    exactly once) and leaves one generation; then end the stream with ``run1`` and
    ``--flush``.  Returns both runs' outputs and discards, concatenated."""
    o0, d0 = tmp / "out0.csv", tmp / "dis0.csv"
    monkeypatch.setenv("EVTIME_CRASH_AT", point)
    with pytest.raises(InjectedCrash):
        run_cli(*first, "-o", o0, "--discards", d0, *run0)
    monkeypatch.delenv("EVTIME_CRASH_AT")
    published = point in ("published-1", "published", "committed")
    assert o0.exists() == published  # the output appears complete or not at all
    r = run_cli(*first, "-o", o0, "--discards", d0, *run0)
    assert r.exit_code == 0, r.stderr
    if published:
        assert "nothing to do" in r.stderr
    gens = [p.name for p in (tmp / "st").iterdir() if p.name.startswith("gen-")]
    assert len(gens) == 1  # no interrupted generation left behind
    o1, d1 = tmp / "out1.csv", tmp / "dis1.csv"
    r = run_cli(*first, "--flush", "-o", o1, "--discards", d1, *run1)
    assert r.exit_code == 0, r.stderr
    assert not list(tmp.glob(".*.evtime-*"))  # no temporary file left
    return [*rows(o0), *rows(o1)], [*rows(d0), *rows(d1)]


def killed_then_resumed(
    run_cli, tmp: Path, cli_env: dict, first: list, files: Sequence
) -> tuple[list[dict], list[dict]]:
    """``first`` over ``files[0]`` as a process killed at once (no clean-up at all) after
    publishing its output but before the discards and the state; then, in this process,
    the run over ``files[1]`` with --flush, which must complete the interrupted one.  The
    output rows and the discards of both runs."""
    import subprocess

    o0, d0 = tmp / "out0.csv", tmp / "dis0.csv"
    env = {**cli_env, "EVTIME_CRASH_AT": "published-1", "EVTIME_CRASH_HARD": "1"}
    args = [str(a) for a in (*first, "-o", o0, "--discards", d0, files[0])]
    p = subprocess.run(["evtime", *args], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 137, p.stderr
    assert o0.exists() and not d0.exists()  # killed between the two publications
    o1, d1 = tmp / "out1.csv", tmp / "dis1.csv"
    r = run_cli(*first, "--flush", "-o", o1, "--discards", d1, files[1])
    assert r.exit_code == 0, r.stderr
    assert "completed the interrupted run" in r.stderr
    return [*rows(o0), *rows(o1)], [*rows(d0), *rows(d1)]


def one_run(run_cli, tmp: Path, args: list, inputs: Sequence) -> tuple[list[dict], list[dict]]:
    """``args`` over all ``inputs`` in one run without state: its output and discards."""
    out, dis = tmp / "all.csv", tmp / "all-discards.csv"
    r = run_cli(*args, "-o", out, "--discards", dis, *inputs)
    assert r.exit_code == 0, r.stderr
    return rows(out), rows(dis)


_ONE_RUNS: dict[tuple, tuple[list[dict], list[dict]]] = {}


def one_run_shared(
    run_cli, tmp: Path, args: list, inputs: Sequence
) -> tuple[list[dict], list[dict]]:
    """:func:`one_run`, made once per test process for the same arguments over inputs of
    the same contents (several tests compare their runs with the same one run: the crash
    points, ...); a copy of its rows.  ``inputs``: paths, or ``NAME=PATH`` sources."""
    import os

    def content(x) -> tuple[str, bytes]:
        name, _, path = str(x).rpartition("=")
        return name, Path(path).read_bytes()

    where = os.environ.get("EVTIME_DRIVER_IO_MAX")
    key = (tuple(map(str, args)), tuple(map(content, inputs)), where)
    if key not in _ONE_RUNS:
        _ONE_RUNS[key] = one_run(run_cli, tmp, args, inputs)
    out, dis = _ONE_RUNS[key]
    return [dict(r) for r in out], [dict(r) for r in dis]


def run_each(run_cli, tmp: Path, args: list, files: Sequence) -> list[tuple[str, list, list]]:
    """``args`` over one file per run with ``--state tmp/st``, the last run with
    ``--flush``: each run's stderr, output and discards."""
    runs = []
    for j, f in enumerate(files):
        flush = ["--flush"] if j == len(files) - 1 else []
        o, d = tmp / f"out{j}.csv", tmp / f"dis{j}.csv"
        r = run_cli(*args, "--state", tmp / "st", *flush, "-o", o, "--discards", d, f)
        assert r.exit_code == 0, r.stderr
        runs.append((r.stderr, rows(o), rows(d)))
    return runs
