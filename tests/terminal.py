"""Running the installed ``evtime`` script with its standard output on a terminal (a pty),
as a user at a shell does: what it shows there."""

from __future__ import annotations

import os
import pty
import subprocess
import sys


def on_a_terminal(args: list[str], env: dict, cwd, stderr_too: bool = False) -> str:
    """What ``evtime ARGS`` shows on a terminal (its standard output, and its standard
    error when ``stderr_too``), with line ends as written to a file; the run must succeed."""
    script = os.path.join(os.path.dirname(sys.executable), "evtime")
    main, sub = pty.openpty()
    proc = subprocess.Popen(
        [script, *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=sub,
        stderr=sub if stderr_too else subprocess.PIPE,
    )  # fmt: skip
    os.close(sub)
    chunks = []
    while True:
        try:
            data = os.read(main, 1 << 16)
        except OSError:  # (EIO: the other end is closed)
            break
        if not data:
            break
        chunks.append(data)
    os.close(main)
    err = "" if stderr_too else proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 0, err
    return b"".join(chunks).decode()
