"""Crash points: places where tests make a run fail or stop (``EVTIME_CRASH_AT``), to
show that whatever a run is doing there, a crash leaves nothing half made."""

from __future__ import annotations

import os


class InjectedCrash(BaseException):
    """Raised by :func:`crash_point` in tests (not an Exception: nothing handles it)."""


def crash_point(name: str) -> None:
    """Fail here when ``EVTIME_CRASH_AT`` names this point (crash tests only):
    ``raise`` (default) or, with ``EVTIME_CRASH_HARD=1``, kill the process at once; with
    ``EVTIME_CRASH_HARD=pause``, create the file ``EVTIME_CRASH_PAUSED`` and wait there
    for a signal (interrupt tests: a signal at a known point, no timing)."""
    if os.environ.get("EVTIME_CRASH_AT") == name:
        if os.environ.get("EVTIME_CRASH_HARD") == "1":
            os._exit(137)
        if os.environ.get("EVTIME_CRASH_HARD") == "pause":
            import signal

            with open(os.environ["EVTIME_CRASH_PAUSED"], "w") as fh:
                fh.write(name)
            while True:
                signal.pause()
        raise InjectedCrash(name)
