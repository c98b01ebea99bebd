"""Ctrl-C and SIGTERM: evtime ends, and so does every process it started.

On the first SIGINT or SIGTERM the handler stops the processes below evtime (the driver
JVM, which PySpark starts ignoring SIGINT, and Spark's Python workers), silences the
tracebacks that Py4J and half-finished calls would print, and raises :class:`Interrupted`
so that every ``finally`` removes what the run had begun to write.  The CLI prints one
line and exits with the shell's status for the signal (130, 143).  A second signal ends
the process at once."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socketserver
import sys
import threading
import time

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_received: int | None = None


class Interrupted(BaseException):
    """Raised in the main thread by the first SIGINT or SIGTERM.  Not a KeyboardInterrupt:
    click would turn that into its Abort (and print an empty line), PySpark into a call to
    the JVM from inside the signal handler."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_installed = False


def install() -> None:
    """Handle SIGINT and SIGTERM in this (main) thread from now on (the program's entry
    point calls it; in-process callers such as tests keep their own handlers)."""
    global _installed
    _installed = True
    reinstall()


def reinstall() -> None:
    """Take SIGINT back after PySpark's SparkContext set its own handler (which calls the
    JVM from inside the handler, the source of Py4J's ``reentrant call`` tracebacks);
    nothing unless :func:`install` was called, or outside the main thread."""
    if _installed and threading.current_thread() is threading.main_thread():
        for sig in SIGNALS:
            signal.signal(sig, _handle)


def message(signum: int) -> str:
    """The one line evtime prints when a signal ends it."""
    return "interrupted (SIGINT)" if signum == signal.SIGINT else "terminated (SIGTERM)"


def received() -> int | None:
    """The signal that interrupted this run, or None."""
    return _received


def exit_status(signum: int | None = None) -> int:
    """The shell's exit status for a process ended by ``signum`` (128 + its number)."""
    return 128 + (signum or _received or signal.SIGINT)


def _handle(signum: int, frame) -> None:
    global _received
    if _received is not None:  # a second signal: no more unwinding
        stop_children(signal.SIGKILL)
        os._exit(exit_status(_received))
    _received = signum
    _quiet()
    stop_children(signal.SIGTERM)
    raise Interrupted(signum)


def _quiet() -> None:
    """Nothing more on stderr from what the interrupt breaks: Py4J's logged socket errors,
    exceptions in ``__del__`` (``reentrant call``) or in PySpark's threads, and the
    report PySpark's accumulator server (a :mod:`socketserver`) prints when the JVM it
    serves is gone."""
    logging.getLogger("py4j").setLevel(logging.CRITICAL + 1)
    socketserver.BaseServer.handle_error = lambda _server, _request, _address: None
    sys.unraisablehook = lambda _unraisable: None
    threading.excepthook = lambda _args: None


def descendants(pid: int | None = None) -> list[int]:
    """The processes below ``pid`` (default: this one), parents before children; empty
    where /proc cannot be read (not Linux)."""
    pid = os.getpid() if pid is None else pid
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def stop_children(sig: int = signal.SIGTERM) -> list[int]:
    """Send ``sig`` to every process below this one; returns their pids."""
    pids = descendants()
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, sig)
    return pids


def reap(timeout: float = 3.0) -> None:
    """Wait up to ``timeout`` seconds for the processes below this one to end after
    :func:`stop_children`, then kill what is left."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [pid for pid in descendants() if not _zombie(pid)]
        if not alive:
            return
        time.sleep(0.05)
    stop_children(signal.SIGKILL)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return True
    return stat[stat.rindex(b")") + 2 :].split()[0] == b"Z"
