"""One clean progress line on stderr while Spark works (stage, tasks done, elapsed), in place
of Spark's console bar; only when stderr is a terminal, never with -q."""

from __future__ import annotations

import sys
import threading
import time


class Progress:
    def __init__(self, spark, label: str, interval: float = 0.5):
        self.label, self.interval, self.started = label, interval, time.monotonic()
        self._stop = threading.Event()
        self._tracker = spark.sparkContext.statusTracker()
        self._thread = threading.Thread(target=self._run, name="evtime-progress", daemon=True)
        self._shown = False

    def _line(self) -> str | None:
        stages = [self._tracker.getStageInfo(i) for i in self._tracker.getActiveStageIds()]
        stages = [s for s in stages if s is not None]
        if not stages:
            return None
        done = sum(s.numCompletedTasks for s in stages)
        total = sum(s.numTasks for s in stages)
        ids = ",".join(str(s.stageId) for s in stages)
        return (
            f"{self.label}: stage {ids}: {done}/{total} tasks, "
            f"{time.monotonic() - self.started:.0f}s"
        )

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                line = self._line()
            except Exception:  # the session is going away: stop showing anything
                return
            if line:
                sys.stderr.write("\r\x1b[K" + line)
                sys.stderr.flush()
                self._shown = True

    def start(self) -> Progress:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        if self._shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def maybe_start(spark, label: str, quiet: bool, remote: bool) -> Progress | None:
    """A running Progress when it makes sense: stderr is a terminal, not -q, classic Spark."""
    if quiet or remote or not sys.stderr.isatty():
        return None
    try:
        return Progress(spark, label).start()
    except Exception:
        return None
