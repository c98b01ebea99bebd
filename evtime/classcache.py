"""The class-data archive (AppCDS) that makes evtime's local driver JVM start fast.

Starting Spark's driver JVM is mostly loading and verifying about 10,000 classes from
Spark's jars.  Java can map them from a class-data archive instead
(``-XX:SharedArchiveFile``), which roughly halves the start of an empty session.  The
JVM writes the archive itself, at exit, with ``-XX:ArchiveClassesAtExit``;
evtime asks one run to do so and later runs use it.

* The archive is per user, in ``$EVTIME_CACHE_DIR`` or ``$XDG_CACHE_HOME/evtime`` (else
  ``~/.cache/evtime``), a directory of mode 0700 that this user owns; otherwise (or with
  ``EVTIME_CLASS_CACHE=0``) no archive is used or written.  ``EVTIME_CLASS_CACHE=read``
  uses one but never writes one (a long-lived JVM, such as a test session's, would hold
  the lock all its life).  It is about 150 MB; removing it is always safe.
* Its name says which Java, pyspark and jars it was made from (a hash): an upgrade makes a
  new one.  A JVM that cannot use an archive ignores it (``-Xshare:auto``).
* The writing run's JVM dumps it at its exit, into ``NAME.PID.part``, while evtime waits
  for it (≈ 10 s; the run says so once on stderr): no JVM outlives evtime.  The JVM writes
  the archive's header last, so a part whose header is there is complete, and it is
  renamed into place (atomic) by that run or the next.  A lock file lets
  one run at a time write; a lock or part older than ``STALE`` seconds is from a run that
  was killed, and is removed.
* The JVM's own CDS messages are turned off (``-Xlog:cds*=off``): its stdout is not
  evtime's output, but they say nothing to users either.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path

# the first four bytes of a complete dynamic archive (JDK: CDS_DYNAMIC_ARCHIVE_MAGIC)
_MAGIC = (0xF00BABA8).to_bytes(4, "little")
STALE = 15 * 60
QUIET = "-Xlog:cds*=off"
writing = False  # whether this process's JVM writes the archive when it exits (train() then)


def _mode() -> str:
    value = os.environ.get("EVTIME_CLASS_CACHE", "1").strip().lower()
    return "off" if value in ("0", "false", "no", "off") else "read" if value == "read" else "on"


def cache_dir() -> Path | None:
    """The per-user cache directory (made 0700 if missing), or None if unusable."""
    if _mode() == "off":
        return None
    given = os.environ.get("EVTIME_CACHE_DIR")
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = Path(given) if given else Path(base) / "evtime"
    if any(c.isspace() or c in "'\"\\" for c in str(path)):
        return None  # JVM options are split on spaces
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.stat()
    except OSError:
        return None
    # the JVM maps these files as code: only from a directory nobody else can write to
    if info.st_uid != os.geteuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return None
    return path


def archive_name(java_id: str) -> str:
    """``spark-<hash>``: the hash of what the archive's classes come from."""
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    jars = home / "jars"
    parts = [java_id, pyspark.__version__, str(home)]
    with contextlib.suppress(OSError):
        parts.append(str(jars.stat().st_mtime_ns))
    return "spark-" + hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _complete(part: Path) -> bool:
    try:
        with part.open("rb") as f:
            return f.read(4) == _MAGIC
    except OSError:
        return False


def _old(path: Path, now: float) -> bool:
    try:
        return now - path.stat().st_mtime > STALE
    except OSError:
        return False


def _adopt(folder: Path, name: str) -> None:
    """Rename a completely written part into place; remove what killed runs left."""
    now = time.time()
    for part in folder.glob(f"{name}.*.part"):
        if _complete(part):
            try:
                os.replace(part, folder / f"{name}.jsa")
                (folder / f"{name}.lock").unlink(missing_ok=True)
            except OSError:
                pass
        elif _old(part, now):
            part.unlink(missing_ok=True)
    lock = folder / f"{name}.lock"
    if _old(lock, now):
        lock.unlink(missing_ok=True)


def java_options(java_id: str, write: bool = True) -> str:
    """The JVM options for this run: use the archive, or write it (unless ``write`` is
    False: a JVM that outlives this run, such as the reused server), or neither."""
    folder = cache_dir()
    if folder is None:
        return ""
    name = archive_name(java_id)
    _adopt(folder, name)
    archive = folder / f"{name}.jsa"
    if archive.is_file():
        return f"-XX:SharedArchiveFile={archive} -Xshare:auto {QUIET}"
    if _mode() == "read" or not write:
        return ""
    try:
        fd = os.open(folder / f"{name}.lock", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except OSError:
        return ""  # another run is writing it
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    global writing
    writing = True
    return f"-XX:ArchiveClassesAtExit={folder / f'{name}.{os.getpid()}.part'} {QUIET}"


def finish_writing(timeout: float = 300) -> bool:
    """End this run's driver JVM and wait while it writes the archive (at its exit), then
    put the archive in place: no JVM of evtime's is left running after evtime.  PySpark's
    gateway JVM ends when its standard input closes.  False when it did not end in time
    (it is then left to finish, as a later run would find it)."""
    import subprocess

    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)
    if proc is None or proc.poll() is not None:
        return True
    sc = SparkContext._active_spark_context
    with contextlib.suppress(Exception):  # (its accumulator server first: no EOF trace)
        if sc is not None:
            sc.stop()
    with contextlib.suppress(OSError, ValueError):
        proc.stdin.close()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return False
    folder = cache_dir()
    if folder is not None:
        for part in folder.glob(f"*.{os.getpid()}.part"):
            _adopt(folder, part.name.split(".", 1)[0])
    return True


# What the writing run also runs, once its own work is done, so that the archive holds the
# classes of every command's big runs (Spark's Parquet reader, code generation, shuffles,
# the Python workers' Arrow exchange), not only those of whatever that first run did (an
# archive made by a small adjust read in the driver left 2,700 classes of a 10M-row bound
# to be loaded from jars: 0.5 s of its 9.6 s, bench/RESULTS.md session 29).
TRAINING = (
    "adjust --unit msec --range 2 -o {d}/adjust.parquet {a}",
    "explain adjust --unit msec --range 2 -o {d}/explain.csv {a}",
    "merge -o {d}/merge.parquet {a} {b}",
    "bound --window 1s --agg count(*) --agg avg(value) -o {d}/bound.csv {a}",
)
TRAINING_ROWS = 40_000


def train(run: Callable[[list[str]], object]) -> list[str]:
    """Run :data:`TRAINING` quietly in this process's Spark session (the JVM that writes
    the archive), over small generated Parquet files read in Spark tasks, each job by
    ``run`` (the command line's entry: ``evtime.cli.main``, which ends with SystemExit);
    the jobs that failed are returned, and otherwise left alone (the archive only misses
    their classes)."""
    import io
    import tempfile
    from unittest import mock

    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is None or not spark.conf.get("spark.master", "").startswith("local"):
        # (the run's own session is gone; a cluster's executors cannot read local files)
        return list(TRAINING)
    failed = []
    # (read and written in Spark tasks: the classes of big runs)
    with (
        mock.patch.dict(os.environ, {"EVTIME_DRIVER_IO_MAX": "0"}),
        tempfile.TemporaryDirectory(prefix="evtime-train-") as d,
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
    ):
        files = {"a": _events(f"{d}/in-a.parquet", 0), "b": _events(f"{d}/in-b.parquet", 1)}
        for job in TRAINING:
            try:
                run([*(a.format(d=d, **files) for a in job.split()), "-q"])
            except SystemExit as done:
                if done.code:
                    failed.append(job)
            except Exception:
                failed.append(job)
    return failed


def _events(path: str, seed: int) -> str:
    """A small out-of-order event file (ns times ~1 ms apart with jitter, a key, a value),
    in two row groups."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    n = TRAINING_ROWS
    t = 1_700_000_000_000_000_000 + np.arange(n) * 1_000_000 + rng.integers(0, 5_000_000, n)
    table = pa.table(
        {
            "time": pa.array(t, pa.timestamp("ns")),
            "key": pa.array([f"k{i}" for i in rng.integers(0, 10, n)]),
            "value": pa.array(rng.random(n)),
        }
    )
    pq.write_table(table, path, row_group_size=n // 2)
    return path
