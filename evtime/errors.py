"""The errors evtime reports to users: one line each, with an exit status.

Engine and I/O raise these; the CLI turns them into a single stderr line.  Errors raised
inside Spark tasks (Python workers) travel back inside a Spark exception; the message is
wrapped in markers so the CLI can find it again (:func:`from_spark`).
"""

from __future__ import annotations

import re
from enum import IntEnum


class ExitStatus(IntEnum):
    OK = 0
    ERROR = 1  # runtime or input error
    USAGE = 2  # bad command line
    TOO_MANY_DISCARDS = 3  # --max-discards exceeded (the run itself completed)


class EvtimeError(Exception):
    """Something the user can fix; ``str(err)`` is the one line shown."""

    exit_status = ExitStatus.ERROR


class InputError(EvtimeError):
    """Bad input data: names the file, row and column."""


class UsageError(EvtimeError):
    exit_status = ExitStatus.USAGE


class OutputError(EvtimeError):
    """The output cannot be written (exists without --overwrite, unwritable, ...)."""


class TooManyDiscards(EvtimeError):
    exit_status = ExitStatus.TOO_MANY_DISCARDS


class PipeClosed(Exception):
    """Standard output's reader went away (``| head``): stop quietly, status 0."""


class SetupError(EvtimeError):
    """The machine cannot run Spark (no Java, ...)."""


_MARK = "\u27e6evtime\u27e7"
_MARKED = re.compile(
    re.escape(_MARK) + r"(\w+)" + re.escape(_MARK) + r"(.*?)" + re.escape(_MARK), re.S
)


def in_task(err: EvtimeError) -> EvtimeError:
    """Wrap an error raised in a Spark task so :func:`from_spark` finds it on the driver."""
    return type(err)(f"{_MARK}{type(err).__name__}{_MARK}{err}{_MARK}")


def task_marks(cls: type[EvtimeError]) -> tuple[str, str]:
    """What :func:`in_task` puts before and after a message of ``cls``: for messages that
    Spark itself raises (``raise_error``), found again by :func:`from_spark`."""
    return f"{_MARK}{cls.__name__}{_MARK}", _MARK


def from_spark(exc: BaseException) -> EvtimeError | None:
    """The evtime error carried inside a Spark exception, if there is one."""
    m = _MARKED.search(str(exc))
    if not m:
        return None
    cls = {c.__name__: c for c in (EvtimeError, InputError, UsageError, OutputError)}.get(
        m.group(1), EvtimeError
    )
    return cls(m.group(2))


_MISSING = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")


def missing_on_workers(exc: BaseException) -> EvtimeError | None:
    """The one line for a Spark error whose Python worker could not import a module (the
    executors' Python lacks evtime or one of its dependencies), else None.  Only errors
    that come from Spark count: a module missing in this process is not the cluster's."""
    if not type(exc).__module__.startswith(("pyspark", "py4j")):
        return None
    m = _MISSING.search(str(exc))
    if not m:
        return None
    name = m.group(1).split(".")[0]
    return EvtimeError(
        f"Spark's Python workers cannot import {name}: the executors need the same Python "
        "with evtime and its dependencies; ship a packed environment (--conf "
        "spark.archives=ENV.tar.gz#env with PYSPARK_PYTHON=./env/bin/python) or use an "
        "image that has them (see evtime(1), SPARK)"
    )


_TOKEN_IN_TEXT = re.compile(r"(token\s*[=:]\s*[\"']?)[^;/\s'\",)]+", re.I)


def redact(text: str) -> str:
    """``text`` without Spark Connect tokens (the environment's, or ``token=...`` in a URL
    or setting): what evtime prints on errors and with ``-v`` goes through here."""
    import os

    secret = os.environ.get("SPARK_CONNECT_AUTHENTICATE_TOKEN")
    if secret and len(secret) >= 4:
        text = text.replace(secret, "***")
    return _TOKEN_IN_TEXT.sub(r"\1***", text)
