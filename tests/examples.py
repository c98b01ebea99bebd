"""How many random streams each Spark model test tries.

The counts in the tests keep the suite within a few minutes on 2 cores.  For a deeper
search, multiply them all: ``EVTIME_EXAMPLES_SCALE=20 python -m pytest tests/test_*model*.py``.
"""

from __future__ import annotations

import os


def examples(n: int) -> int:
    """``n`` times ``EVTIME_EXAMPLES_SCALE`` (default 1)."""
    raw = os.environ.get("EVTIME_EXAMPLES_SCALE", "1")
    try:
        scale = int(raw)
    except ValueError:
        raise ValueError(f"EVTIME_EXAMPLES_SCALE takes a whole number, not {raw!r}") from None
    return n * max(1, scale)
