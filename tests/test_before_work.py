"""Errors found before any work: one line on stderr naming what the user gave, the exit
status of its kind (2: the command line; 1: the machine or the data), nothing written."""

from __future__ import annotations

import fcntl
import os
import tempfile

import pytest

from tests.conftest import SAMPLES

ADJ = ["adjust", "--unit", "msec", "--range", "999"]
EXPLAIN = ["explain", *ADJ]
IN = str(SAMPLES / "tuples.parquet")


def _one_line(r, *words: str, status: int) -> str:
    assert r.exit_code == status, (r.exit_code, r.stdout, r.stderr)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    for w in words:
        assert w in lines[0], lines[0]
    assert r.stdout == ""
    return lines[0]


# -- two outputs of one run naming one file --------------------------------------------


@pytest.mark.parametrize("spelling", ["same.csv", "./same.csv", "ABS", "sub/../same.csv"])
def test_output_and_discards_same_file(run_cli, workdir, spelling):
    (workdir / "sub").mkdir()
    other = str(workdir / "same.csv") if spelling == "ABS" else spelling
    r = run_cli(*ADJ, IN, "-o", "same.csv", "--discards", other)
    _one_line(r, "-o same.csv", f"--discards {other}", "same file", status=2)
    assert sorted(p.name for p in workdir.iterdir()) == ["sub"]


def test_output_and_discards_same_file_existing(run_cli, workdir):
    """Also with --overwrite over an existing file (a hard link is the same file)."""
    (workdir / "a.csv").write_text("old\n")
    os.link(workdir / "a.csv", workdir / "b.csv")
    r = run_cli(*ADJ, IN, "-o", "a.csv", "--discards", "b.csv", "--overwrite")
    _one_line(r, "-o a.csv", "--discards b.csv", "same file", status=2)
    assert (workdir / "a.csv").read_text() == "old\n"


def test_plot_and_output_same_file(run_cli, workdir):
    r = run_cli(*EXPLAIN, IN, "--plot", "x.svg", "-o", "x.svg", "--format", "csv")
    _one_line(r, "x.svg", "same file", status=2)
    assert list(workdir.iterdir()) == []


# -- outputs that cannot be created ----------------------------------------------------


def _unwritable_dir() -> str:
    """A directory this process cannot create files in (even as root: sysfs)."""
    for d in ("/sys", "/proc"):
        try:
            tempfile.NamedTemporaryFile(dir=d).close()
        except OSError:
            return d
    pytest.skip("no unwritable directory here")


@pytest.mark.parametrize("opt", ["-o", "--discards", "--plot"])
def test_unwritable_output_named_before_work(run_cli, workdir, opt):
    target = os.path.join(_unwritable_dir(), f"evtime-out{'.svg' if opt == '--plot' else '.csv'}")
    args = [*(EXPLAIN if opt == "--plot" else ADJ), IN, opt, target]
    if opt == "--discards":
        args += ["-o", "out.csv"]
    line = _one_line(run_cli(*args), f"{opt} {target}", "cannot write", status=1)
    assert ".evtime-" not in line  # (never a temporary file's name)
    assert list(workdir.iterdir()) == []


def test_output_is_a_directory(run_cli, workdir):
    (workdir / "d.csv").mkdir()
    _one_line(run_cli(*ADJ, IN, "-o", "d.csv", "--overwrite"), "d.csv", "directory", status=1)


def test_state_dir_cannot_be_made(run_cli, workdir):
    st = os.path.join(_unwritable_dir(), "evtime-state")
    _one_line(run_cli(*ADJ, IN, "--state", st, "-o", "out.csv"), f"--state {st}", status=1)
    assert list(workdir.iterdir()) == []


# -- the master URL ---------------------------------------------------------------------

GOOD_MASTERS = [
    "local",
    "local[4]",
    "local[*]",
    "local[2,3]",
    "local[*,2]",
    "local-cluster[2,1,1024]",
    "spark://host:7077",
    "spark://h1:7077,h2:7077",
    "yarn",
    "k8s://https://10.0.0.1:6443",
]
BAD_MASTERS = ["bogus", "local[x]", "local[0]", "local[", "spark://host", "yarn-client", ""]


def test_master_forms():
    from evtime.errors import UsageError
    from evtime.session import check_master

    for m in GOOD_MASTERS:
        check_master(m)
    for m in [*BAD_MASTERS, "mesos://h:5050"]:
        with pytest.raises(UsageError, match="--master"):
            check_master(m)


def test_bad_master_one_line(run_cli, workdir):
    _one_line(run_cli(*ADJ, "--master", "bogus", IN), "--master 'bogus'", status=2)


def test_bad_master_from_environment(run_cli, workdir, monkeypatch):
    monkeypatch.setenv("EVTIME_MASTER", "local[x]")
    _one_line(run_cli(*ADJ, IN, "-o", "o.csv"), "EVTIME_MASTER 'local[x]'", status=2)
    assert list(workdir.iterdir()) == []


# -- issue 47's error paths -------------------------------------------------------------


def test_conf_without_equals(run_cli):
    _one_line(run_cli(*ADJ, "--conf", "spark.x", IN), "--conf", "'spark.x'", status=2)


@pytest.mark.parametrize("port", ["abc", "99999", "0"])
def test_bad_remote_port(run_cli, port):
    _one_line(run_cli(*ADJ, "--remote", f"sc://localhost:{port}", IN), "bad port", status=2)


def test_unknown_extension(run_cli, workdir):
    (workdir / "in.xyz").write_text((SAMPLES / "tuples.csv").read_text())
    _one_line(
        run_cli(*ADJ, "in.xyz"), "in.xyz", "cannot tell the format", "--input-format", status=2
    )


def test_empty_directory(run_cli, workdir):
    (workdir / "empty").mkdir()
    _one_line(run_cli(*ADJ, "empty"), "empty", "directory is empty", status=1)


def test_corrupt_parquet(run_cli, workdir):
    (workdir / "bad.parquet").write_bytes(b"PAR1 not really a parquet file")
    _one_line(
        run_cli(*ADJ, "bad.parquet", "-o", "o.csv"),
        "bad.parquet",
        "cannot read as parquet",
        status=1,
    )
    assert sorted(p.name for p in workdir.iterdir()) == ["bad.parquet"]


def test_flush_without_state(run_cli):
    _one_line(run_cli(*ADJ, "--flush", IN), "--flush needs --state", status=2)


def test_state_not_a_directory(run_cli, workdir):
    (workdir / "st").write_text("x")
    _one_line(
        run_cli(*ADJ, IN, "--state", "st", "-o", "o.csv"), "--state st", "not a directory", status=2
    )


def test_state_locked(run_cli, workdir):
    (workdir / "st").mkdir()
    with open(workdir / "st" / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        r = run_cli(*ADJ, IN, "--state", "st", "-o", "o.csv")
    _one_line(r, "--state st", "another evtime run", status=1)
    assert not (workdir / "o.csv").exists()


def test_state_json_missing(run_cli, workdir):
    (workdir / "st" / "g1").mkdir(parents=True)
    (workdir / "st" / "CURRENT").write_text('{"generation": "g1"}')
    r = run_cli(*ADJ, IN, "--state", "st", "-o", "o.csv")
    _one_line(r, "--state st", "g1/state.json is missing", status=1)


def test_state_unreadable(run_cli, workdir):
    (workdir / "st").mkdir()
    (workdir / "st" / "CURRENT").write_text("{not json")
    r = run_cli(*ADJ, IN, "--state", "st", "-o", "o.csv")
    _one_line(r, "CURRENT", "unreadable state file", status=1)
