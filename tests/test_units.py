"""Units and ranges of times (no Spark)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from evtime.units import UNITS, truncated_range

TIMES = st.lists(st.integers(-(2**62), 2**62), min_size=1, max_size=30)


@settings(max_examples=500, deadline=None)  # (pure Python: cheap)
@given(TIMES, st.sampled_from([None, 0, *UNITS.values()]))
def test_truncated_range_is_the_range_of_the_truncated_times(times, unit):
    """Truncation is monotone: the range of the truncated times comes from the range of the
    times alone (what the footers give, without a pass over the rows)."""
    truncated = [t - t % unit if unit else t for t in times]
    assert truncated_range((min(times), max(times)), unit) == (min(truncated), max(truncated))


def test_no_range_when_the_times_are_unknown_or_none():
    assert truncated_range(None, 1000) is None
    assert truncated_range((None, None), 1000) is None
