"""The class-data archive for benchmark runs (see evtime/classcache.py).

The run that writes the archive is slower (its JVM records classes for the dump), and its
JVM finishes writing only after it exits: a benchmark that timed that run, or the runs
before the archive is in place, would time start-up that users pay once.  ``ensure`` makes
the archive before any timed run, and gives the JVM options with which a plain PySpark
job (the floor, the naive job) maps the same archive, so that every Spark job of a
benchmark starts alike.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "tuples.parquet"
JOB = ["adjust", "-q", "--unit", "msec", "--range", "999", str(SAMPLE)]


@contextlib.contextmanager
def _environ(env: dict[str, str]) -> Iterator[None]:
    """This process's environment with ``env`` on top (evtime.classcache reads it)."""
    saved = os.environ.copy()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _archives(env: dict[str, str]) -> list[str]:
    from evtime import classcache

    with _environ(env):
        folder = classcache.cache_dir()
    return [] if folder is None else [str(p) for p in folder.glob("*.jsa")]


def _run(env: dict[str, str]) -> float:
    t = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "evtime", *JOB],
        env=env,
        cwd=tempfile.gettempdir(),  # not the source tree: `python -m` would import from it
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.monotonic() - t


def ensure(env: dict[str, str], timeout: float = 900) -> str:
    """Make sure the archive for ``env`` exists (one evtime run writes it, later runs adopt
    it); returns the JVM options that map it ('' when evtime's archive is off)."""
    if env.get("EVTIME_CLASS_CACHE", "1").lower() in ("0", "false", "no", "off"):
        return ""
    if not _archives(env):
        took = _run(env)
        start = time.monotonic()
        while not _archives(env):
            if time.monotonic() - start > timeout:
                raise SystemExit(f"no class archive after {timeout:.0f} s")
            time.sleep(2)
            _run({**env, "EVTIME_CLASS_CACHE": "read"})  # adopts a finished part
        print(f"# class archive written (that run took {took:.1f} s)", file=sys.stderr)
    from evtime import classcache
    from evtime.session import check_java

    with _environ({**env, "EVTIME_CLASS_CACHE": "read"}):
        return classcache.java_options(check_java())
