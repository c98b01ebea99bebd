"""The JVM class-data archive (evtime.classcache): which runs write it, which use it, and
that a real run's archive is adopted and mapped by the next run's JVM."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import pytest

from evtime import classcache
from tests.conftest import SAMPLES

JAVA = "/usr/bin/java\0openjdk version 17"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("EVTIME_CACHE_DIR", str(folder))
    monkeypatch.setenv("EVTIME_CLASS_CACHE", "1")
    return folder


def _part_of(options: str) -> str:
    (flag,) = [o for o in options.split() if o.startswith("-XX:ArchiveClassesAtExit=")]
    return flag.split("=", 1)[1]


def test_first_run_writes_then_others_wait_then_the_archive_is_used(cache):
    first = classcache.java_options(JAVA)
    part = _part_of(first)
    assert os.path.dirname(part) == str(cache) and part.endswith(".part")
    assert "-Xlog:cds*=off" in first
    assert (cache.stat().st_mode & 0o777) == 0o700
    # while the first run's JVM has not written it, nobody else starts another dump
    assert classcache.java_options(JAVA) == ""
    # a JVM killed while dumping leaves a part without its header: not taken
    with open(part, "wb") as f:
        f.write(b"\0" * 64)
    assert classcache.java_options(JAVA) == ""
    # the header comes last: once it is there the next run renames the part into place
    with open(part, "wb") as f:
        f.write(classcache._MAGIC + b"\1" * 60)
    used = classcache.java_options(JAVA)
    name = classcache.archive_name(JAVA)
    assert used.split() == [
        f"-XX:SharedArchiveFile={cache / (name + '.jsa')}",
        "-Xshare:auto",
        "-Xlog:cds*=off",
    ]
    assert sorted(p.name for p in cache.iterdir()) == [f"{name}.jsa"]


def test_what_killed_runs_left_is_removed_after_a_while(cache):
    part = _part_of(classcache.java_options(JAVA))
    with open(part, "wb") as f:
        f.write(b"\0" * 64)
    old = time.time() - classcache.STALE - 60
    name = classcache.archive_name(JAVA)
    for path in (part, cache / f"{name}.lock"):
        os.utime(path, (old, old))
    again = classcache.java_options(JAVA)  # the stale lock and part are gone: write anew
    assert _part_of(again) == part
    assert sorted(p.name for p in cache.iterdir()) == [f"{name}.lock"]


def test_another_java_or_spark_is_another_archive():
    assert classcache.archive_name(JAVA) != classcache.archive_name(JAVA + "u2")


def test_another_pyspark_is_another_archive(monkeypatch):
    import pyspark

    before = classcache.archive_name(JAVA)
    monkeypatch.setattr(pyspark, "__version__", pyspark.__version__ + ".post1")
    assert classcache.archive_name(JAVA) != before


def test_the_tests_never_use_the_users_cache():
    """tests/conftest.py: this session's processes (and the JVMs and scripts they start,
    which inherit the environment) keep evtime's cache in a directory of their own."""
    from pathlib import Path

    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    assert classcache.cache_dir() != Path(base) / "evtime"
    assert classcache.cache_dir() == Path(os.environ.get("EVTIME_TEST_CACHE_DIR", "-"))


@pytest.mark.parametrize("mode,expected", [("0", None), ("off", None), ("read", "")])
def test_off_and_read_only(cache, monkeypatch, mode, expected):
    monkeypatch.setenv("EVTIME_CLASS_CACHE", mode)
    if expected is None:
        assert classcache.cache_dir() is None and classcache.java_options(JAVA) == ""
        assert not cache.exists()
    else:  # read: never writes, uses one that is there
        assert classcache.java_options(JAVA) == ""
        assert list(cache.iterdir()) == []
        (cache / f"{classcache.archive_name(JAVA)}.jsa").write_bytes(classcache._MAGIC)
        assert "-XX:SharedArchiveFile=" in classcache.java_options(JAVA)


def test_a_directory_others_can_write_is_not_used(cache):
    cache.mkdir(mode=0o700)
    cache.chmod(0o777)
    assert classcache.cache_dir() is None and classcache.java_options(JAVA) == ""


def test_a_path_the_jvm_options_would_split_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv("EVTIME_CACHE_DIR", str(tmp_path / "my cache"))
    monkeypatch.delenv("EVTIME_CLASS_CACHE", raising=False)
    assert classcache.cache_dir() is None


@pytest.mark.cli
def test_a_real_run_writes_the_archive_and_the_next_run_maps_it(tmp_path, cli_env):
    """Through the CLI: the first run's JVM dumps its classes when the run is done (its
    stdout is not evtime's) and has ended when evtime ends, the archive in place; the
    second run's JVM maps it."""
    cache = tmp_path / "cache"
    mark = f"evtime-test-{uuid.uuid4().hex}"
    env = dict(cli_env, EVTIME_CACHE_DIR=str(cache), EVTIME_CLASS_CACHE="1", EVTIME_MARK=mark)
    args = [sys.executable, "-m", "evtime", "adjust", "-q", "--unit", "msec", "--range", "999"]
    # (stderr to a file: a pipe nobody reads while stdout is read could fill and stall it)
    with open(tmp_path / "first.err", "w+b") as errors:
        proc = subprocess.Popen(
            [*args, str(SAMPLES / "tuples.parquet")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=errors,
        )
        out = proc.stdout.read()  # (to the end: the run closes it before its training jobs)
        assert proc.poll() is None  # (the training comes after a reader saw the output end)
        status = proc.wait(timeout=600)
        errors.seek(0)
        err = errors.read()
    assert status == 0, err
    assert err == b""  # (-q: not even the line that says the archive is being written)
    first = subprocess.CompletedProcess(args, 0, out, err)
    archives = list(cache.glob("*.jsa"))
    assert len(archives) == 1 and not list(cache.glob("*.part")), sorted(cache.iterdir())
    assert classcache._complete(archives[0])
    name = archives[0].name.split(".")[0]
    assert not _processes_with(mark), "a process of the first run outlived it"
    log = tmp_path / "cds.log"
    second = subprocess.run(
        [
            *args,
            "--conf",
            f"spark.driver.extraJavaOptions=-Xlog:cds=info:file={log}",
            str(SAMPLES / "tuples.parquet"),
        ],
        env=env,
        capture_output=True,
        timeout=600,
    )
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout and first.stdout.count(b"\n") == 6
    assert (cache / f"{name}.jsa").is_file() and not list(cache.glob("*.part"))
    text = log.read_text()
    assert f"Opened archive {cache / name}.jsa" in text and "Mapped dynamic region" in text
    # the first run also trained its JVM: the archive has the classes of a command it did
    # not run, in Spark tasks (the first one read its five rows in the driver)
    loaded = tmp_path / "classes.log"
    third = subprocess.run(
        [
            sys.executable,
            "-m",
            "evtime",
            "bound",
            "-q",
            "--window",
            "1s",
            "--agg",
            "count(*)",
            "--conf",
            f"spark.driver.extraJavaOptions=-Xlog:class+load=info:file={loaded}",
            str(SAMPLES / "tuples.parquet"),
        ],
        env={**env, "EVTIME_DRIVER_IO_MAX": "0"},
        capture_output=True,
        timeout=600,
    )
    assert third.returncode == 0, third.stderr
    lines = loaded.read_text().splitlines()
    python_udf = [x for x in lines if "python.ArrowEvalPythonExec " in x]
    assert python_udf and "shared objects file" in python_udf[0], python_udf


def _processes_with(mark: str) -> list[int]:
    """Live processes whose environment holds ``mark``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                env = fh.read()
            with open(f"/proc/{pid}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if mark.encode() in env and state != b"Z":
            found.append(int(pid))
    return found


def test_training_runs_every_command_quietly(spark, capfd, monkeypatch):
    """The writing run's training (classcache.train): every job succeeds in this process's
    session, prints nothing, and leaves the environment as it was."""
    monkeypatch.setenv("EVTIME_DRIVER_IO_MAX", "123")
    from evtime.cli import main

    assert classcache.train(main) == []
    assert capfd.readouterr() == ("", "")
    assert os.environ["EVTIME_DRIVER_IO_MAX"] == "123"
    commands = {job.split()[0] for job in classcache.TRAINING}
    assert commands == {"adjust", "explain", "merge", "bound"}


def test_a_jvm_that_outlives_the_run_only_maps_the_archive(cache):
    """The reused server (write=False) never takes the lock; it maps an archive there is."""
    assert classcache.java_options(JAVA, write=False) == ""
    assert not any(p.name.endswith(".lock") for p in cache.iterdir())
    (cache / f"{classcache.archive_name(JAVA)}.jsa").write_bytes(classcache._MAGIC)
    assert "-XX:SharedArchiveFile=" in classcache.java_options(JAVA, write=False)


def _fake_java(home, version: str, log) -> None:
    """A ``java`` in ``home``/bin that prints ``version`` as Java does and logs each run."""
    (home / "bin").mkdir(parents=True, exist_ok=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho run >> {log}\necho 'openjdk version \"{version}\"' >&2\n")
    java.chmod(0o755)


def test_the_java_version_is_asked_once_per_java(cache, tmp_path, monkeypatch):
    from evtime.errors import SetupError
    from evtime.session import check_java

    home, log = tmp_path / "jdk", tmp_path / "runs.log"
    monkeypatch.setenv("JAVA_HOME", str(home))
    _fake_java(home, "17.0.15", log)
    first = check_java()
    assert check_java() == first  # the second run reads what the first one kept
    assert log.read_text().count("run") == 1
    assert 'version "17.0.15"' in first and first.startswith(str(home / "bin" / "java"))
    # another Java at the same path (an upgrade: a new binary) is asked again
    time.sleep(0.01)
    _fake_java(home, "11.0.2", log)
    os.utime(home / "bin" / "java", ns=(1, 1))
    with pytest.raises(SetupError, match="Java 11"):
        check_java()
    assert log.read_text().count("run") == 2


def test_without_the_cache_java_is_asked_every_time(cache, tmp_path, monkeypatch):
    from evtime.session import check_java

    monkeypatch.setenv("EVTIME_CLASS_CACHE", "0")
    home, log = tmp_path / "jdk", tmp_path / "runs.log"
    monkeypatch.setenv("JAVA_HOME", str(home))
    _fake_java(home, "17.0.15", log)
    check_java()
    check_java()
    assert log.read_text().count("run") == 2
    assert not cache.exists() or not list(cache.iterdir())
