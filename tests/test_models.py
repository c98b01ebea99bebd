"""The plain-Python reference models (tests/model) against the seeds' worked examples.

Seeds: 000 (Hitachi SDP adjustment tables), 001 (Apama definitive time), 003 (StreamInsight
CTI settings), 004 (SQLstream UNION ALL, producers, strict bounds). SPEC §2-§4.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

try:
    from tests.model.adjust import HELD_TO_END, adjust, iso
    from tests.model.bound import Event, bound
    from tests.model.merge import Arrival, merge, merge_output
except ImportError:  # tests/ is not a package: pytest puts tests/ itself on sys.path
    from model.adjust import HELD_TO_END, adjust, iso
    from model.bound import Event, bound
    from model.merge import Arrival, merge, merge_output

NS = 1
US = 1_000
MS = 1_000_000
SEC = 1_000_000_000
MIN = 60 * SEC
HOUR = 60 * MIN


def ts(text: str) -> int:
    """'2009/03/01 12:15:22:345678901' or '2009-03-01 12:15:22.345' (UTC) -> ns since epoch."""
    text = text.replace("/", "-")
    date, clock = text.split(" ")
    parts = clock.replace(".", ":").split(":")
    hms, frac = parts[:3], (parts[3] if len(parts) > 3 else "")
    whole = datetime.fromisoformat(f"{date}T{':'.join(hms)}+00:00")
    return int(whole.timestamp()) * SEC + int(frac.ljust(9, "0"))


def hm(clock: str, day: str = "2006-10-10") -> int:
    """'10:04', '9:59' or '10:03:30' on a fixed day -> ns."""
    clock = clock if clock.count(":") == 2 else clock + ":00"
    return ts(f"{day} {clock.zfill(8)}")


def test_ts_helper():
    assert ts("1970/01/01 00:00:01:000000002") == SEC + 2
    assert iso(ts("2009/03/01 12:15:22:345678901")) == "2009-03-01T12:15:22.345678901Z"
    assert datetime.fromtimestamp(ts("2009/03/01 12:15:22:0") // SEC, UTC).hour == 12


# ---------------------------------------------------------------- adjust (seed 000, SPEC §2)

TUPLES = {  # seed 000: order sent from input adaptor A1..E5
    "A": "2009/03/01 12:15:22:345678901",
    "B": "2009/03/01 12:15:22:123456789",
    "C": "2009/03/01 12:15:23:123456789",
    "D": "2009/03/01 12:15:22:890123456",
    "E": "2009/03/01 12:15:24:123456789",
}

SEED000_TABLES = [
    # (unit, range, {tuple: (input order or None for Discarded, timestamp set or None)})
    (
        SEC,
        1,
        {
            "A": (1, "12:15:22:000000000"),
            "B": (2, "12:15:22:000000000"),
            "C": (4, "12:15:23:000000000"),
            "D": (3, "12:15:22:000000000"),
            "E": (5, "12:15:24:000000000"),
        },
    ),
    (
        MS,
        999,
        {
            "A": (2, "12:15:22:345000000"),
            "B": (1, "12:15:22:123000000"),
            "C": (4, "12:15:23:123000000"),
            "D": (3, "12:15:22:890000000"),
            "E": (5, "12:15:24:123000000"),
        },
    ),
    (
        US,
        999,
        {
            "A": (1, "12:15:22:345678000"),
            "B": (None, None),
            "C": (2, "12:15:23:123456000"),
            "D": (None, None),
            "E": (3, "12:15:24:123456000"),
        },
    ),
    # sec / 0 with SPEC §2's erratum: C is 12:15:23 and E 12:15:24 (the seed prints :22, :23)
    (
        SEC,
        0,
        {
            "A": (1, "12:15:22:000000000"),
            "B": (2, "12:15:22:000000000"),
            "C": (3, "12:15:23:000000000"),
            "D": (None, None),
            "E": (4, "12:15:24:000000000"),
        },
    ),
]


@pytest.mark.parametrize(
    "unit,range_n,table", SEED000_TABLES, ids=["sec-1", "msec-999", "usec-999", "sec-0-erratum"]
)
def test_adjust_seed000_tables(unit, range_n, table):
    rows = adjust([((), ts(TUPLES[n])) for n in "ABCDE"], unit, range_n)
    assert [r.arrival for r in rows] == [1, 2, 3, 4, 5]
    for name, row in zip("ABCDE", rows, strict=True):
        pos, stamp = table[name]
        assert row.output_pos == pos, name
        if pos is None:
            assert row.decision == "discarded" and row.released_by is None
            assert row.reason and "below bound" in row.reason
        else:
            assert row.decision == "released"
            # (released by no arrival: at the end of the input, and the reason says so)
            assert row.reason == (HELD_TO_END if row.released_by is None else None)
            assert row.evtime == ts("2009/03/01 " + stamp), name


def test_adjust_sec1_release_points_and_refs():
    rows = adjust([((), ts(TUPLES[n])) for n in "ABCDE"], SEC, 1)
    day = "2009/03/01 "
    assert [r.ref for r in rows] == [
        ts(day + c) for c in ("12:15:22", "12:15:22", "12:15:23", "12:15:23", "12:15:24")
    ]
    assert [r.bound for r in rows] == [r.ref - SEC for r in rows]
    # E (arrival 5) moves ref to :24, range [:23, :24]: A, B, D (:22) go; C and E at the end
    assert [r.released_by for r in rows] == [5, 5, None, 5, None]


def test_adjust_usec_discard_reasons():
    rows = adjust([((), ts(TUPLES[n])) for n in "ABCDE"], US, 999)
    b, d = rows[1], rows[3]
    assert b.bound == ts("2009/03/01 12:15:22:344679000")  # A's ref - 999us
    assert "12:15:22.123456000" in b.reason and "12:15:22.344679000" in b.reason
    assert d.ref == ts("2009/03/01 12:15:23:123456000")
    assert [r.released_by for r in rows] == [3, None, 5, None, None]


def test_adjust_seed000_figures_sec_range2():
    # Figures 10-27..10-30: sec, range 2
    day = "2009/03/01 "
    arr = [
        ((), ts(day + t))
        for t in ("09:00:01:015", "09:00:01:010", "08:59:59:800", "08:59:58:010", "09:00:02:056")
    ]
    rows = adjust(arr, SEC, 2)
    assert rows[0].ref == ts(day + "09:00:01") and rows[0].bound == ts(day + "08:59:59")
    assert rows[1].evtime == ts(day + "09:00:01") and rows[1].decision == "released"
    assert rows[2].evtime == ts(day + "08:59:59") and rows[2].decision == "released"
    assert rows[3].decision == "discarded"
    assert rows[4].ref == ts(day + "09:00:02") and rows[4].bound == ts(day + "09:00:00")
    assert [r.released_by for r in rows] == [None, None, 5, None, None]  # 08:59:59 goes
    assert [r.output_pos for r in rows] == [2, 3, 1, None, 4]


def test_adjust_keys_are_independent_and_output_is_global():
    rows = adjust([(("x",), 10), (("y",), 3), (("x",), 5), (("y",), 1), (("x",), 20)], 1, 4)
    assert [r.decision for r in rows] == [
        "released",
        "released",
        "discarded",
        "released",
        "released",
    ]
    assert rows[2].bound == 6 and rows[3].bound == -1  # y's own ref 3
    assert [r.released_by for r in rows] == [5, None, None, None, None]
    assert [r.output_pos for r in rows] == [3, 2, None, 1, 4]  # (evtime, arrival)


def test_adjust_negative_times_floor_down():
    rows = adjust([((), -1), ((), -1500)], 1000, 1)
    assert [r.evtime for r in rows] == [-1000, -2000]
    assert [r.output_pos for r in rows] == [2, 1]


# ---------------------------------------------------------------- merge (seeds 004, 001)


def _at(source, time, wall, is_bound=False):
    return Arrival(source, time, is_bound, wall)


def union_all_example(last_trades):
    """Seed 004 UNION ALL: Orders (source 0) and Trades (source 1), arrival order given."""
    orders = [_at(0, hm("10:01"), 1), _at(0, hm("10:04"), 3), _at(0, hm("10:06"), 5, True)]
    trades = [_at(1, hm("10:02"), 2), _at(1, hm("10:03"), 4), last_trades]
    return [orders, trades]


def test_merge_union_all_waits_for_a_trades_bound():
    rows = merge(union_all_example(_at(1, hm("10:05"), 6, True)))
    # ORCL 10:01, YHOO 10:02, MSFT 10:04, IBM 10:03, Orders.bound 10:06, Trades.bound 10:05
    assert [r.decision for r in rows] == ["released"] * 4 + ["bound"] * 2
    assert [r.bound for r in rows] == [
        None,
        hm("10:01"),
        hm("10:02"),
        hm("10:03"),
        hm("10:03"),
        hm("10:05"),
    ]
    # ORCL, YHOO, IBM produced before MSFT; MSFT cannot flow until the Trades bound
    assert [r.released_by for r in rows] == [2, 3, 6, 4, None, None]
    assert [r.output_pos for r in rows] == [1, 2, 4, 3, None, None]


def test_merge_union_all_later_trade_implies_the_bound():
    rows = merge(union_all_example(_at(1, hm("10:05:30"), 6)))
    assert rows[5].bound == hm("10:05:30")  # min(Orders 10:06, Trades 10:05:30)
    assert rows[2].released_by == 6 and rows[5].released_by == 6
    assert [r.output_pos for r in rows] == [1, 2, 4, 3, None, 5]


def test_merge_union_all_earlier_trade_goes_first():
    rows = merge(union_all_example(_at(1, hm("10:03:30"), 6)))  # GOOG 10:03:30
    assert rows[5].decision == "released" and rows[5].released_by == 6
    assert rows[2].released_by is None
    assert merge_output(union_all_example(_at(1, hm("10:03:30"), 6))) == [
        (0, 0, hm("10:01")),
        (1, 0, hm("10:02")),
        (1, 1, hm("10:03")),
        (1, 2, hm("10:03:30")),
        (0, 1, hm("10:04")),
    ]


def test_merge_producers_p1_p2_p3_join_leave():
    p1 = [_at(0, hm("10:00"), 1, True), _at(0, hm("10:00"), 2), _at(0, hm("10:00"), 6, True)]
    p2 = [
        _at(1, hm("10:05"), 3, True),
        _at(1, hm("10:05"), 4),
        _at(1, hm("9:59"), 5),
        _at(1, hm("10:06"), 7, True),
    ]
    p3 = [_at(2, hm("10:04"), 8), _at(2, hm("10:07"), 9)]
    rows = merge([p1, p2, p3], join_leave=True)
    assert [r.decision for r in rows] == [
        "bound",
        "released",
        "bound",
        "released",
        "discarded",
        "bound",
        "bound",
        "discarded",
        "released",
    ]
    assert [r.bound for r in rows] == [
        hm("10:00"),  # P1 asserts 10:00; the stream bound is still undefined
        hm("10:00"),  # P1's 10:00 row enters the stream; stream bound 10:00
        hm("10:00"),  # P2 joins asserting 10:05: min(10:00, 10:05)
        hm("10:00"),  # P2's 10:05 row has to wait for P1
        hm("10:00"),  # P2's 9:59 row is rejected as late
        hm("10:05"),  # P1's last arrival: it leaves, P2 alone, its 10:05 row flows
        None,  # P2's last arrival: it leaves too, nobody attached (+inf)
        None,  # P3 joins with a 10:04 row below the remembered stream bound 10:05:
        # discarded; P3 is attached with no bound yet (undefined)
        None,  # P3's 10:07 row, then P3 leaves (+inf)
    ]
    assert rows[1].released_by == 2
    assert rows[3].released_by == 6  # the departure of P1 let the stream advance
    assert "own bound" in rows[4].reason and "stream bound" in rows[4].reason
    assert "stream bound" in rows[7].reason and "own bound" not in rows[7].reason
    assert rows[8].released_by == 9
    assert [r.output_pos for r in rows] == [None, 1, None, 2, None, None, None, None, 3]


def test_merge_producers_p3_attached_holds_the_stream():
    # While P3 is attached with no bound yet, D is undefined (SPEC: min over attached sources)
    p1 = [_at(0, hm("10:00"), 1)]
    p3 = [_at(1, hm("9:00"), 2), _at(1, hm("10:30"), 4)]
    p2 = [_at(2, hm("10:10"), 3)]
    rows = merge([p1, p3, p2], join_leave=True)
    assert [r.decision for r in rows] == ["released", "discarded", "released", "released"]
    assert rows[0].released_by == 1  # P1 alone, then it leaves: D = +inf
    assert [r.bound for r in rows] == [None, None, None, None]
    assert rows[2].released_by == 4 and rows[3].released_by == 4


def apama_single():
    # seed 001: E() wait 2 hours; (wall time, source timestamp)
    walls = [
        ("10:00", "07:00"),
        ("10:05", "07:30"),
        ("10:10", "08:30"),
        ("10:24", "08:32"),
        ("10:26", "08:50"),
        ("10:30", "10:30"),
    ]
    return [[_at(0, hm(src), hm(wall)) for wall, src in walls]]


def test_merge_apama_single_input_wait_2h():
    rows = merge(apama_single(), wait=2 * HOUR)
    assert [r.bound for r in rows] == [
        hm(t) for t in ("08:00", "08:05", "08:30", "08:32", "08:50", "10:30")
    ]
    assert [r.decision for r in rows] == ["discarded"] * 2 + ["released"] * 4  # "too old"
    assert "wait" in rows[0].reason and "wait" in rows[1].reason
    assert [r.released_by for r in rows] == [None, None, 3, 4, 5, 6]


def test_merge_wait_is_inclusive():
    late = _at(0, hm("08:00") - 1, hm("10:00"))  # delayed 2 h + 1 ns
    exact = _at(0, hm("08:00"), hm("10:00"))  # delayed exactly 2 h
    rows = merge([[late, exact]], wait=2 * HOUR)
    assert rows[0].decision == "discarded" and "wait" in rows[0].reason
    assert "own bound" not in rows[0].reason and "stream bound" not in rows[0].reason
    assert rows[1].decision == "released" and rows[1].released_by == 2


APAMA_EX = [  # seed 001 MultipleInputs: (wall, E source time or None, X source time or None)
    ("09:20", "08:30", "08:25"),
    ("09:21", "08:32", None),
    ("09:22", "08:40", None),
    ("09:23", None, "08:50"),
    ("09:24", "08:55", None),
    ("09:25", "09:00", None),
    ("09:26", None, "08:57"),
    ("09:27", "09:10", None),
]
APAMA_EX_D = ["08:25", "08:25", "08:25", "08:40", "08:50", "08:50", "08:57", "08:57"]


def apama_two_inputs(extra_x=None):
    e = [_at(0, hm(t), hm(w)) for w, t, _ in APAMA_EX if t]
    x = [_at(1, hm(t), hm(w)) for w, _, t in APAMA_EX if t]
    if extra_x:
        x.append(extra_x)
    return [e, x]


def test_merge_apama_inputs_e_and_x_wait_1h():
    rows = merge(apama_two_inputs(), wait=HOUR)
    # processing order is (wall, source): 09:20 has two arrivals, E then X
    walls = sorted((hm(w), src) for w, e, x in APAMA_EX for src, t in ((0, e), (1, x)) if t)
    after_wall = {}  # definitive time after the last arrival at each wall time
    for (wall, src), r in zip(walls, rows, strict=True):
        assert r.source == src
        after_wall[wall] = r.bound
    assert list(after_wall.values()) == [hm(t) for t in APAMA_EX_D]
    assert rows[0].bound == hm("08:20")  # before X at 09:20: X's definitive time is 09:20-1h
    assert all(r.decision == "released" for r in rows)
    # 09:23: X 08:50 makes 08:30, 08:32, 08:40 (and X 08:25 earlier) definitive
    src = {(r.source, r.time): r for r in rows}
    assert [src[(0, hm(t))].released_by for t in ("08:30", "08:32", "08:40")] == [5, 5, 5]
    assert src[(1, hm("08:25"))].released_by == 2
    # 09:00 and 09:10 wait for the timer (10:10) -> in a file: the end-of-input flush
    assert src[(0, hm("09:00"))].released_by is None
    assert src[(0, hm("09:10"))].released_by is None


def test_merge_apama_timer_row_as_a_heartbeat_at_10_10():
    # "We waited for 1 hour for an X": any arrival at 10:10 (here a stale X heartbeat) gives 09:10
    rows = merge(apama_two_inputs(_at(1, hm("08:57"), hm("10:10"), True)), wait=HOUR)
    assert rows[-1].decision == "bound" and rows[-1].bound == hm("09:10")
    src = {(r.source, r.time): r for r in rows if r.decision != "bound"}
    assert src[(0, hm("09:00"))].released_by == len(rows)
    assert src[(0, hm("09:10"))].released_by == len(rows)


def test_merge_strict_bound_is_one_tick_later():
    srcs = [[Arrival(0, 100), Arrival(0, 105)], [Arrival(1, 100, True)]]
    non_strict = merge(srcs)
    assert non_strict[-1].bound == 100
    strict = merge(srcs, strict_bounds=True, tick=5)
    assert strict[-1].bound == 105 and strict[1].released_by == 3
    assert non_strict[1].released_by is None


def test_merge_own_bound_discard_and_lower_bound_changes_nothing():
    srcs = [
        [
            Arrival(0, 10),
            Arrival(0, 50, True),
            Arrival(0, 40, True),
            Arrival(0, 45),
            Arrival(0, 60),
        ],
        [Arrival(1, 5), Arrival(1, 70)],
    ]
    rows = merge(srcs)  # sources one after the other
    assert [r.decision for r in rows] == [
        "released",
        "bound",
        "bound",
        "discarded",
        "released",
        "released",
        "released",
    ]
    assert "own bound" in rows[3].reason
    assert [r.bound for r in rows] == [None] * 5 + [5, 60]
    assert merge_output(srcs) == [(1, 0, 5), (0, 0, 10), (0, 4, 60), (1, 1, 70)]


def test_merge_output_does_not_depend_on_interleaving():
    rnd = random.Random(7)
    for _ in range(200):
        srcs = []
        for s in range(3):
            t, rows = 0, []
            for _j in range(rnd.randint(0, 6)):
                t += rnd.randint(-3, 5)
                rows.append(Arrival(s, t, rnd.random() < 0.2))
            srcs.append(rows)
        expected = merge_output(srcs)
        # the remaining rows, ordered by (t, source, row)
        kept = [(r.evtime, r.source) for r in merge(srcs) if r.decision == "released"]
        assert [(ev, s) for s, _, ev in expected] == sorted(kept)
        for strict in (False, True):
            # a random interleaving that keeps each source's row order
            picks = [s for s, src in enumerate(srcs) for _ in src]
            rnd.shuffle(picks)
            walls: list[list[int]] = [[] for _ in srcs]
            for wall, s in enumerate(picks):
                walls[s].append(wall)
            timed = [
                [Arrival(a.source, a.time, a.is_bound, w) for a, w in zip(src, ws, strict=True)]
                for src, ws in zip(srcs, walls, strict=True)
            ]
            base = merge_output(srcs, strict_bounds=strict)
            got = merge_output(timed, strict_bounds=strict)
            # with --arrival equal times may tie in another order, nothing else changes
            assert sorted(got) == sorted(base)
            assert [ev for _, _, ev in got] == [ev for _, _, ev in base]


def test_merge_with_adjust_per_source():
    srcs = [
        [Arrival(0, 1500), Arrival(0, 1200), Arrival(0, 3700), Arrival(0, 1100)],
        [Arrival(1, 2100)],
    ]
    rows = merge(srcs, unit_ns=1000, range_n=1)
    assert [r.evtime for r in rows] == [1000, 1000, 3000, 1000, 2000]
    assert [r.decision for r in rows] == [
        "released",
        "released",
        "released",
        "discarded",
        "released",
    ]
    assert "own bound" in rows[3].reason  # adjust's rule: 1000 < ref 3000 - 1*1000
    assert merge_output(srcs, unit_ns=1000, range_n=1) == [
        (0, 0, 1000),
        (0, 1, 1000),
        (1, 0, 2000),
        (0, 2, 3000),
    ]
    # D = min(source 0: ref 3000 - 1000, source 1: ref 2000 - 1000); sources one after the other
    assert [r.bound for r in rows] == [None] * 4 + [1000]
    assert [r.released_by for r in rows] == [5, 5, None, None, None]


def test_merge_rejects_mixed_arrival_times_and_wait_without_them():
    with pytest.raises(ValueError):
        merge([[Arrival(0, 1, arrival_time=1), Arrival(0, 2)]])
    with pytest.raises(ValueError):
        merge([[Arrival(0, 1)]], wait=5)


# ---------------------------------------------------------------- bound (seeds 004, 003)


def _wins(windows):
    return [(w.key, w.start, w.end, w.values, w.closed_by) for w in windows]


def test_bound_strict_example_inclusive_windows_markers():
    h = HOUR
    ev = [
        Event((), 11 * h + 30 * MIN, value=1),
        Event((), 12 * h, value=2),
        Event((), 12 * h, True),
        Event((), 12 * h + 30 * MIN, value=3),
        Event((), 12 * h + 1, True),
    ]
    wins, ex = bound(ev, size=h, inclusive_end=True, bounds="markers")
    assert ex[1].windows == [(11 * h, 12 * h), (12 * h, 13 * h)]  # noon trade in both
    assert ex[2].decision == "bound" and ex[2].bound == 12 * h
    # a non-strict bound at 12:00 does not close 11-12: another trade at 12:00 could come
    assert _wins(wins) == [((), 11 * h, 12 * h, [1, 2], 5), ((), 12 * h, 13 * h, [2, 3], None)]
    assert wins[0].rows == 2


def test_bound_strict_marker_at_noon_closes_11_12():
    h = HOUR
    ev = [
        Event((), 11 * h + 30 * MIN, value=1),
        Event((), 12 * h, value=2),
        Event((), 12 * h, True),
    ]
    wins, ex = bound(ev, size=h, inclusive_end=True, bounds="markers", strict_bounds=True, tick=MS)
    assert ex[2].bound == 12 * h + MS  # strict at t == non-strict t + 1 ms (SQLstream)
    assert _wins(wins) == [((), 11 * h, 12 * h, [1, 2], 3), ((), 12 * h, 13 * h, [2], None)]


def test_bound_rows_inclusive_vs_exclusive():
    h = HOUR
    ev = [
        Event((), 11 * h + 30 * MIN, value=1),
        Event((), 12 * h, value=2),
        Event((), 12 * h, value=3),
        Event((), 12 * h + 1, value=4),
    ]
    wins, _ = bound(ev, size=h, inclusive_end=True)
    assert _wins(wins)[0] == ((), 11 * h, 12 * h, [1, 2, 3], 4)  # only a bound past 12:00
    wins, ex = bound(ev, size=h)
    assert _wins(wins)[0] == ((), 11 * h, 12 * h, [1], 2)  # exclusive: 12:00 itself closes
    assert ex[1].windows == [(12 * h, 13 * h)]
    assert _wins(wins)[1] == ((), 12 * h, 13 * h, [2, 3, 4], None)


def test_bound_cti_minus_one_tick_every_event_counts_at_once():
    ev = [
        Event((), 10, value="a"),
        Event((), 20, value="b"),
        Event((), 20, value="dup"),
        Event((), 30, value="c"),
    ]
    wins, ex = bound(ev, size=1, bounds="cti", cti_every=1, cti_delay=-1)
    assert [r.bound for r in ex] == [11, 21, 21, 31]
    assert ex[2].decision == "discarded"  # a duplicate start time is dropped ...
    assert _wins(wins) == [((), 10, 11, ["a"], 1), ((), 20, 21, ["b"], 2), ((), 30, 31, ["c"], 4)]
    wins, ex = bound(ev, size=1, bounds="cti", cti_every=1, cti_delay=-1, late="adjust")
    assert ex[2].decision == "adjusted" and ex[2].evtime == 21  # ... or adjusted (Adjust)
    assert ex[2].windows == [(21, 22)]
    # the bound stays 21 (20 - -1): the moved row counts once a later event (30) arrives
    assert _wins(wins)[2] == ((), 21, 22, ["dup"], 4)


def test_bound_cti_zero_delay_counts_once_a_later_start_arrives():
    ev = [Event((), 10, value="a"), Event((), 10, value="dup"), Event((), 20, value="b")]
    wins, ex = bound(ev, size=1, bounds="cti", cti_every=1, cti_delay=0)
    assert [r.decision for r in ex] == ["released"] * 3  # duplicates are kept
    assert [r.bound for r in ex] == [10, 10, 20]
    assert _wins(wins) == [((), 10, 11, ["a", "dup"], 3), ((), 20, 21, ["b"], None)]


def test_bound_cti_delay_with_drop():
    ev = [Event((), t, value=t) for t in (10, 12, 8, 6, 20)]
    wins, ex = bound(ev, size=10, bounds="cti", cti_every=1, cti_delay=5)
    assert [r.bound for r in ex] == [5, 7, 7, 7, 15]
    assert [r.decision for r in ex] == ["released", "released", "released", "discarded", "released"]
    assert "below the bound" in ex[3].reason
    assert _wins(wins) == [
        ((), 0, 10, [8], 5),
        ((), 10, 20, [10, 12], None),
        ((), 20, 30, [20], None),
    ]


def test_bound_cti_every_n_counts_late_rows():
    ev = [Event((), t, value=t) for t in (10, 30, 5, 40, 41, 50)]
    wins, ex = bound(ev, size=100, bounds="cti", cti_every=2)
    assert [r.bound for r in ex] == [None, 30, 30, 40, 40, 50]  # CTIs at rows 2, 4, 6
    assert ex[2].decision == "discarded"  # arrived after the CTI at 30, yet it is counted
    assert _wins(wins) == [((), 0, 100, [10, 30, 40, 41, 50], None)]


def test_bound_keys_hopping_and_release_order():
    ev = [
        Event(("a",), 7, value=1),
        Event(("b",), 3, value=2),
        Event(("a",), 16, value=3),
        Event(("b",), 2, value=4),
        Event(("b",), 30, value=5),
    ]
    wins, ex = bound(ev, size=10, slide=5)
    assert ex[0].windows == [(0, 10), (5, 15)]
    assert ex[3].decision == "discarded"  # b's own bound is 3; a's rows do not matter
    # a's 16 closes a's [0,10) and [5,15); b's 30 closes b's [-5,5) and [0,10)
    assert _wins(wins) == [
        (("a",), 0, 10, [1], 3),
        (("a",), 5, 15, [1], 3),
        (("b",), -5, 5, [2], 5),
        (("b",), 0, 10, [2], 5),
        (("a",), 10, 20, [3], None),
        (("a",), 15, 25, [3], None),
        (("b",), 25, 35, [5], None),
        (("b",), 30, 40, [5], None),
    ]


def test_bound_markers_apply_to_their_own_key():
    ev = [Event(("a",), 5, value=1), Event(("b",), 5, value=2), Event(("a",), 10, True)]
    wins, ex = bound(ev, size=10, bounds="markers")
    assert [r.bound for r in ex] == [None, None, 10]
    assert _wins(wins) == [(("a",), 0, 10, [1], 3), (("b",), 0, 10, [2], None)]


def test_bound_offset_and_unit_range():
    wins, ex = bound(
        [
            Event((), 1250, value=1),
            Event((), 3900, value=2),
            Event((), 1999, value=3),
            Event((), 900, value=4),
        ],
        size=2000,
        offset=500,
        unit_ns=1000,
        range_n=2,
    )
    assert [r.evtime for r in ex] == [1000, 3000, 1000, 0]
    assert [r.bound for r in ex] == [-1000, 1000, 1000, 1000]
    assert [r.decision for r in ex] == ["released"] * 3 + ["discarded"]
    assert _wins(wins) == [((), 500, 2500, [1, 3], None), ((), 2500, 4500, [2], None)]
