"""Which files make up an input, in arrival order, and how to open them.

Arrival order (SPEC §1): the inputs in the order given; a glob or directory expands sorted
by name; then row order inside each file.  ``-`` is standard input, spooled to a temporary
file so Spark tasks can read it like any other file.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
from dataclasses import dataclass

from evtime.errors import InputError, UsageError
from evtime.io.compressed import CODECS

FORMATS = ("csv", "parquet", "jsonl")
_EXTENSIONS = {
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
}


@dataclass(frozen=True)
class InputFile:
    """One file of the input; ``index`` is its place in arrival order."""

    index: int
    url: str  # what the reader opens (local path or fsspec URL)
    shown: str  # what users see (the path as given, or '-')
    fmt: str
    group: int = 0  # which command-line argument it came from (merge: the source)


def format_of(path: str, forced: str | None) -> str:
    if forced:
        return forced
    name = path.lower()
    for ext in CODECS:
        if name.endswith(ext):
            name = name[: -len(ext)]
    for ext, fmt in _EXTENSIONS.items():
        if name.endswith(ext):
            return fmt
    raise UsageError(
        f"cannot tell the format of {path!r} from its name: use --input-format csv|parquet|jsonl"
    )


def _spool_stdin() -> str:
    """Standard input copied to a file of its own staging directory, removed at exit (or,
    when this process is killed, by a later run: evtime.io.staging)."""
    from evtime.io.staging import removed, staging_dir

    folder = staging_dir()
    atexit.register(removed, folder)
    path = os.path.join(folder, "stdin")
    with open(path, "wb") as out:
        shutil.copyfileobj(sys.stdin.buffer, out, 1 << 20)
    return path


def sniffed_format(path: str) -> str:
    """The format of standard input, which has no name to tell it: Parquet by its magic
    bytes, JSON Lines when its first non-blank character is ``{``, else CSV."""
    with open(path, "rb") as fh:
        head = fh.read(4096)
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.lstrip().startswith(b"{"):
        return "jsonl"
    return "csv"


def _expand(arg: str) -> list[str]:
    """The files one argument names, sorted by name for globs and directories."""
    import fsspec

    fs, _, paths = fsspec.get_fs_token_paths(arg)
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]

    scheme = arg.split("://", 1)[0] if "://" in arg else None

    def url(p: str) -> str:
        if protocol in ("file", "local"):
            return p
        if scheme in ("s3a", "s3n") and "://" not in p:
            # Spark's spelling of S3: read it the same way (s3fs), shown as written
            return f"{scheme}://{p}"
        return fs.unstrip_protocol(p)

    if any(ch in arg for ch in "*?["):
        found = sorted(p for p in paths if fs.isfile(p))
        if not found:
            raise InputError(f"{arg}: no file matches")
        return [url(p) for p in found]
    (path,) = paths
    try:
        if fs.isdir(path):
            found = sorted(
                p for p in fs.find(path) if not os.path.basename(p).startswith((".", "_"))
            )
            if not found:
                raise InputError(f"{arg}: directory is empty")
            return [url(p) for p in found]
        if not fs.exists(path):
            raise InputError(f"{arg}: no such file")
    except (PermissionError, OSError) as err:
        raise InputError(f"{arg}: {err.__class__.__name__}: {err}") from None
    return [url(path)]


def expand_inputs(args: list[str], forced_format: str | None) -> list[InputFile]:
    """All files of all arguments, numbered in arrival order."""
    if not args:
        raise UsageError("no INPUT given (use - for standard input)")
    files: list[InputFile] = []
    for group, arg in enumerate(args):
        if arg == "-":
            spooled = _spool_stdin()
            fmt = forced_format or sniffed_format(spooled)
            files.append(InputFile(len(files), spooled, "-", fmt, group))
            continue
        for path in _expand(arg):
            # tasks open absolute paths/URLs; users see names the way they wrote them
            shown = path
            if "://" not in path and not os.path.isabs(arg):
                shown = os.path.relpath(path)
            files.append(InputFile(len(files), path, shown, format_of(path, forced_format), group))
    return files
