"""Staging directories: where a run's Spark tasks and its own process leave files for each
other (part files, counts, standard input's copy), removed when the run ends, and, when a
run was killed, by a later run on the same host (:func:`remove_leftovers`)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator

from evtime.errors import UsageError

try:
    import fcntl
except ImportError:  # (not a POSIX system: nothing is locked, nothing removed as a leftover)
    fcntl = None

OWNER = ".owner"  # in a staging directory: its run's host, locked while the run lives
STALE = 60.0  # seconds untouched before a staging directory can be a leftover
_owned: dict[str, int] = {}  # this process's staging directories -> locked owner file
_looked: set[str] = set()  # where this process looked for leftovers already (once is enough)


def staging_dir() -> str:
    """A fresh directory for the part files: under EVTIME_STAGING if set (on a cluster, a
    directory every executor and this machine share), else under the temp directory.
    What killed runs of this machine left there goes first, once per process
    (:func:`remove_leftovers`)."""
    base = os.environ.get("EVTIME_STAGING") or None
    if base is not None and not os.path.isdir(base):
        raise UsageError(f"EVTIME_STAGING={base}: no such directory")
    where = base or tempfile.gettempdir()
    if where not in _looked:
        _looked.add(where)
        remove_leftovers(where)
    path = tempfile.mkdtemp(prefix="evtime-", dir=base)
    _claim(path)
    return path


def _claim(path: str) -> None:
    """Lock the owner file of the staging directory ``path`` for as long as this process
    lives (the kernel lets go of the lock however the process ends, SIGKILL too)."""
    if fcntl is None:
        return
    owner = os.path.join(path, OWNER)
    fd = os.open(owner, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, f"host {socket.gethostname()}\n".encode())
    except OSError:  # (a filesystem without locks: never removed as a leftover)
        os.close(fd)
        os.unlink(owner)
        return
    _owned[path] = fd


def note_temp(staging: str, tmp: str) -> None:
    """Write down in the owner file of ``staging`` an output being assembled outside it
    (next to its destination), for :func:`remove_leftovers` after this process was killed.
    Only the writer's ``publish`` and ``Early`` note theirs: ``--state`` stages its outputs by
    its own protocol, and a later run may still publish them (evtime.io.state)."""
    fd = _owned.get(staging)
    if fd is not None and os.path.dirname(tmp) != staging:
        os.write(fd, f"temp {tmp}\n".encode())


def _release(path: str) -> None:
    fd = _owned.pop(path, None)
    if fd is not None:
        os.close(fd)


def remove_leftovers(base: str) -> list[str]:
    """Remove what runs killed on this machine (SIGKILL, out of memory, power cut) left
    under ``base``: each ``evtime-*`` staging directory untouched for :data:`STALE`
    seconds whose owner file is nobody's (its lock is free) and names this host, with the
    outputs its run was assembling next to their destinations.  Directories of other
    hosts, of other users, of live runs, or without an owner file stay.  Returns the
    directories removed."""
    if fcntl is None:
        return []
    host, now, gone = f"host {socket.gethostname()}", time.time(), []
    try:
        entries = list(os.scandir(base))
    except OSError:
        return []
    for e in entries:
        try:
            if not e.name.startswith("evtime-") or not e.is_dir(follow_symlinks=False):
                continue
            if now - e.stat(follow_symlinks=False).st_mtime < STALE:
                continue
            fd = os.open(os.path.join(e.path, OWNER), os.O_RDONLY)
        except OSError:  # (gone meanwhile, not ours to read, no owner file)
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # (held: its run lives)
            with open(fd, closefd=False) as f:
                lines = f.read().splitlines()
            if not lines or lines[0] != host:
                continue
            for line in lines[1:]:
                path = line.removeprefix("temp ")
                name = os.path.basename(path)
                if path != line and name.startswith(".") and ".evtime-" in name:
                    with contextlib.suppress(OSError):
                        os.unlink(path)
            shutil.rmtree(e.path, ignore_errors=True)
            gone.append(e.path)
        except OSError:
            continue
        finally:
            os.close(fd)
    return gone


def removed(path: str) -> None:
    """Remove the staging directory ``path`` with everything in it, then let go of it."""
    shutil.rmtree(path, ignore_errors=True)
    _release(path)


@contextlib.contextmanager
def shared_dir() -> Iterator[str]:
    """A fresh directory (:func:`staging_dir`) that the Spark tasks and this process share
    (part files, files the tasks leave for each other), removed with everything in it at
    the end."""
    path = staging_dir()
    try:
        yield path
    finally:
        removed(path)
