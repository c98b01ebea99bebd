"""Staging: where a run's Spark tasks and its own process leave files for each other (part
files, done files, counts, search results, zone rows), removed when the run ends.

Two kinds (:func:`shared_dir`):

* a local directory (under EVTIME_STAGING or ``--staging DIR`` if given, else the temp
  directory): the fast local code (renames, ``copy_file_range``, memory maps); when a run
  was killed, a later run on the same host removes it (:func:`remove_leftovers`);
* a URL that fsspec reaches (``s3://``, ``gs://``, ``abfss://``, ``hdfs://``; given by
  EVTIME_STAGING or ``--staging URL``, or, on a cluster, the prefix ``_evtime_temporary/``
  beside an object-store output): each run stages under a run directory of its own,
  ``evtime-<UTC start>-<host>-<pid>-<random>/``, removed at its end.  No lock exists on an
  object store: a later run that stages under the same prefix removes the run directories
  whose start is more than :data:`STALE_RUN_HOURS` hours old (a bucket lifecycle rule on
  the prefix does the same).  The driver also keeps a local scratch directory per run
  directory (:func:`scratch_of`), for the outputs it assembles before upload.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Iterator

from evtime.errors import OutputError, UsageError
from evtime.io import atomic

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
    base = _local_base()
    if base is not None and not os.path.isdir(base):
        raise UsageError(f"{_named_as(base)}: no such directory")
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
    staging = _scratch.get(staging, staging)
    _note_temp(staging, tmp)


def _note_temp(staging: str, tmp: str) -> None:
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
    """A fresh place that the Spark tasks and this process share (part files, files the
    tasks leave for each other), removed with everything in it at the end: a local
    directory (:func:`staging_dir`), or, with a staging URL (:func:`configure`), a run
    directory under it (its URL, without a trailing slash)."""
    if _remote is None:
        path = staging_dir()
        try:
            yield path
        finally:
            removed(path)
        return
    url = _run_dir(_remote)
    scratch = staging_dir()  # (this process's own: outputs assembled before upload)
    _scratch[url] = scratch
    try:
        yield url
    finally:
        _scratch.pop(url, None)
        removed(scratch)
        with contextlib.suppress(Exception):  # (what is left, a later run clears)
            fs, path = fs_of(url)
            if fs.exists(path):
                fs.rm(path, recursive=True)


# ---------------------------------------------------------------- staging on a URL

STALE_RUN_HOURS = 24  # a run directory under a staging URL older than this is a leftover
TEMPORARY = "_evtime_temporary"  # the default staging prefix beside an object-store output
OBJECT_STORES = ("s3", "s3a", "gs", "gcs", "abfs", "abfss", "az", "adl", "oss")
_remote: str | None = None  # the staging URL of this run (configure), None: local
_given: str | None = None  # how the user named the staging (for messages)
_scratch: dict[str, str] = {}  # run directory URL -> this process's local scratch
_STAMP = "%Y%m%dT%H%M%SZ"


def is_url(path: str | None) -> bool:
    """Whether ``path`` is a URL other than ``file://`` (staged with fsspec)."""
    return bool(path) and "://" in path and not path.startswith("file://")


def _local_base() -> str | None:
    """The local staging directory given (EVTIME_STAGING or --staging; ``file://`` URLs
    as their path), None when none is, or a URL is."""
    given = _given if _given is not None else os.environ.get("EVTIME_STAGING") or None
    if given is None or is_url(given):
        return None
    return given.removeprefix("file://") or None


def _named_as(base: str) -> str:
    return f"--staging {_given}" if _given is not None else f"EVTIME_STAGING={base}"


def fs_of(url: str):
    """The fsspec filesystem of ``url`` and the path in it."""
    from fsspec.core import url_to_fs

    return url_to_fs(url)


def configure(given: str | None, far: str | None, outputs: list[str | None]) -> str | None:
    """Before Spark starts: where this run stages.  ``given``: --staging (else
    EVTIME_STAGING); ``far``: the option that puts Spark's tasks on other machines (None:
    they run here); ``outputs``: the run's output paths.  A staging URL is checked (a small
    object written there and removed: one line and no job when that fails); without one,
    on a cluster, the prefix :data:`TEMPORARY` beside the first object-store output;
    without that either, one line that says what to set.  Returns the staging URL, or
    None for a local directory."""
    global _remote, _given
    _remote, _given = None, given
    given = given or os.environ.get("EVTIME_STAGING") or None
    name = _named_as(given)
    url = given if is_url(given) else None
    if url is None and given is None and far is not None:
        url = _beside(outputs)
        name = f"staging {url} (beside the output)" if url else name
        if url is None:
            raise UsageError(
                f"{far}: Spark's tasks run on other machines, which cannot see this machine's "
                "disk: set --staging (or EVTIME_STAGING) to a URL that this machine and every "
                "executor reach (s3://BUCKET/tmp, hdfs://..., or a shared directory), or "
                "write -o to an object store"
            )
    if url is None:
        return None
    _probe(url.rstrip("/"), name)
    _remote = url.rstrip("/")
    return _remote


def _beside(outputs: list[str | None]) -> str | None:
    """The default staging URL: :data:`TEMPORARY` in the directory of the first output on
    an object store (Spark's own ``_temporary`` convention)."""
    for out in outputs:
        if out and is_url(out) and out.split("://", 1)[0] in OBJECT_STORES:
            parent = out.rstrip("/").rsplit("/", 1)[0]
            return f"{parent}/{TEMPORARY}"
    return None


def _probe(url: str, name: str) -> None:
    """One small object written under ``url`` and removed: staging that cannot be reached
    stops the run before any job, in one line."""
    try:
        fs, path = fs_of(url)
        probe = f"{path}/.evtime-probe-{uuid.uuid4().hex}"
        fs.pipe_file(probe, b"")
        fs.rm_file(probe)
    except ValueError as err:  # (an unknown protocol, a malformed URL)
        raise UsageError(f"{name}: not a staging URL: {err}") from None
    except ImportError as err:  # (the protocol's package is not installed)
        raise UsageError(f"{name}: {err}") from None
    except Exception as err:  # (no such bucket, access denied, no route)
        raise OutputError(
            f"{name}: cannot write there: {type(err).__name__}: {str(err).splitlines()[0]}"
        ) from None


def run_id() -> str:
    """A run directory's name: ``evtime-<UTC start>-<host>-<pid>-<random>``."""
    host = "".join(c if c.isalnum() or c in "-." else "_" for c in socket.gethostname())
    stamp = time.strftime(_STAMP, time.gmtime())
    return f"evtime-{stamp}-{host}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def started(name: str) -> float | None:
    """The start (seconds since the epoch) in a run directory's name, None if it is not
    one."""
    import calendar

    parts = name.rstrip("/").rsplit("/", 1)[-1].split("-")
    if len(parts) < 5 or parts[0] != "evtime":
        return None
    try:
        return float(calendar.timegm(time.strptime(parts[1], _STAMP)))
    except ValueError:
        return None


def remove_stale_runs(url: str, now: float | None = None) -> list[str]:
    """Remove the run directories under the staging URL ``url`` that started more than
    :data:`STALE_RUN_HOURS` hours ago (runs killed there left them); what it removed."""
    now = time.time() if now is None else now
    gone = []
    try:
        fs, path = fs_of(url)
        fs.invalidate_cache(path)
        names = fs.ls(path, detail=False) if fs.exists(path) else []
    except Exception:
        return gone
    for name in names:
        t = started(name)
        if t is not None and now - t > STALE_RUN_HOURS * 3600:
            with contextlib.suppress(Exception):
                fs.rm(name, recursive=True)
                gone.append(name)
    return gone


def _run_dir(base: str) -> str:
    if base not in _looked:
        _looked.add(base)
        remove_stale_runs(base)
    return f"{base}/{run_id()}"


def scratch_of(staging: str) -> str:
    """A local directory of this process for ``staging``: itself when local, else the
    scratch directory of its run (the temp directory if it has none)."""
    if not is_url(staging):
        return staging
    return _scratch.get(staging) or tempfile.gettempdir()


# small files between tasks and this process: the same calls for both kinds of staging


def join(base: str, *names: str) -> str:
    if is_url(base):
        return "/".join((base.rstrip("/"), *names))
    return os.path.join(base, *names)


def put(path: str, data: bytes) -> None:
    """``data`` at ``path`` whole (a reader never sees it half written): locally under
    another name then renamed, on an object store in one PUT."""
    if not is_url(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with atomic.written(path) as f:
            f.write(data)
        return
    fs, p = fs_of(path)
    if on_object_store(path):
        fs.pipe_file(p, data)
    else:  # (HDFS and others: written under another name, then renamed)
        tmp = f"{p}.{uuid.uuid4().hex}"
        fs.pipe_file(tmp, data)
        fs.mv(tmp, p)


def get(path: str) -> bytes:
    """The bytes at ``path`` (FileNotFoundError when there are none)."""
    if not is_url(path):
        with open(path, "rb") as f:
            return f.read()
    fs, p = fs_of(path)
    return fs.cat_file(p)


def get_all(paths: list[str]) -> list[bytes]:
    """The bytes at each of ``paths`` (FileNotFoundError when one has none).  On a staging
    URL the requests go out together (fsspec's concurrent ``cat``), not one after another:
    a task that reads the small files of every part (up to 1024) waited for each request
    in turn, ~1,800 of them in an explain of 48 rows on a cluster."""
    urls = [p for p in paths if is_url(p)]
    if not urls:
        return [get(p) for p in paths]
    fs, _ = fs_of(urls[0])
    if len(urls) < len(paths) or any(fs_of(u)[0] is not fs for u in urls):
        return [get(p) for p in paths]  # (mixed places: one by one)
    return read_all(fs, [fs_of(u)[1] for u in urls])


def read_all(fs, names: list[str]) -> list[bytes]:
    """The bytes of the files ``names`` of ``fs`` (paths as ``fs_of`` gives them, no glob
    characters), in order, their requests sent together (fsspec's concurrent ``cat``, in
    batches of the file system's ``batch_size``); FileNotFoundError when one has none."""
    found = fs.cat(names, on_error="return")
    out = []
    for name in names:
        data = found.get(name)
        if isinstance(data, BaseException):
            raise data
        if data is None:
            raise FileNotFoundError(name)
        out.append(data)
    return out


def exists(path: str) -> bool:
    """Whether ``path`` exists, as of now (no listing cached by fsspec)."""
    if not is_url(path):
        return os.path.exists(path)
    fs, p = fs_of(path)
    fs.invalidate_cache(p)
    return fs.exists(p)


def names(folder: str) -> list[str]:
    """The sorted names in ``folder`` (none when it does not exist), as of now."""
    if not is_url(folder):
        return sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    fs, p = fs_of(folder)
    fs.invalidate_cache(p)
    try:
        found = fs.ls(p, detail=False)
    except FileNotFoundError:
        return []
    return sorted(n.rstrip("/").rsplit("/", 1)[-1] for n in found)


def remove(path: str) -> None:
    if not is_url(path):
        os.unlink(path)
        return
    fs, p = fs_of(path)
    fs.rm_file(p)


def on_object_store(path: str) -> bool:
    return is_url(path) and path.split("://", 1)[0] in OBJECT_STORES


class RemoteFile:
    """A part file written on a staging URL by a task: on an object store straight at its
    name (the object appears when complete), elsewhere (HDFS) under a hidden name,
    renamed when complete."""

    def __init__(self, path: str):
        self.fs, self.path = fs_of(path)
        self.tmp = self.path
        if not on_object_store(path):
            head, name = self.path.rsplit("/", 1)
            self.tmp = f"{head}/.{name}"
        self.file = self.fs.open(self.tmp, "wb")

    def close(self) -> None:
        self.file.close()
        if self.tmp != self.path:
            self.fs.mv(self.tmp, self.path)


def fetched(url: str) -> str:
    """The file at ``url`` copied to a local file of its run's scratch directory, and
    removed there; the local file's path (the caller removes it)."""
    fs, p = fs_of(url)
    base = url.rsplit("/", 1)[0]
    local = os.path.join(scratch_of(base), f"fetched-{uuid.uuid4().hex}")
    fs.get_file(p, local)
    fs.rm_file(p)
    return local
