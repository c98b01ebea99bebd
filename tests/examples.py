"""How many random streams each Spark model test tries, and the settings they share.

The counts in the tests keep the suite within a few minutes on 2 cores.  For a deeper
search, multiply them all: ``EVTIME_EXAMPLES_SCALE=20 python -m pytest``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings


def examples(n: int) -> int:
    """``n`` times ``EVTIME_EXAMPLES_SCALE`` (default 1)."""
    raw = os.environ.get("EVTIME_EXAMPLES_SCALE", "1")
    try:
        scale = int(raw)
    except ValueError:
        raise ValueError(f"EVTIME_EXAMPLES_SCALE takes a whole number, not {raw!r}") from None
    return n * max(1, scale)


def spark_settings(n: int, **more) -> settings:
    """Hypothesis settings of a test that runs Spark (or the CLI) per example: ``n`` examples
    (:func:`examples`), no deadline, function-scoped fixtures allowed; ``more`` adds to or
    replaces these."""
    given = {
        "max_examples": examples(n),
        "deadline": None,
        "suppress_health_check": [HealthCheck.function_scoped_fixture],
    }
    return settings(**{**given, **more})
