"""User aggregates (`--udaf`, SPEC §4, seed 002): with `remove` and hopping windows the
evaluation is incremental - each row is added once and removed at most once, never
recomputed per window - and gives the same results as recomputation and as Spark's own
`sum`.  The sweep itself is also checked in plain Python against brute force."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from evtime.engine import udaf

COUNTING = '''
LOG = {log!r}


def _log(what, v):
    with open(LOG, "a") as fh:
        fh.write(f"{{what}} {{v}}\\n")


class IncSum:
    """add / remove / result: evaluated incrementally."""

    result_type = "long"

    def __init__(self):
        _log("new", 0)
        self.total = 0

    def add(self, v):
        _log("add", v)
        self.total += v

    def remove(self, v):
        _log("remove", v)
        self.total -= v

    def result(self):
        return self.total


class RecSum:
    """No remove: every window is recomputed from its rows."""

    result_type = "long"

    def __init__(self):
        self.total = 0

    def add(self, v):
        _log("radd", v)
        self.total += v

    def result(self):
        return self.total
'''


def test_udaf_incremental_adds_each_row_once(run_cli, workdir):
    log = workdir / "calls.log"
    (workdir / "counting.py").write_text(COUNTING.format(log=str(log)))
    rng = random.Random(2)
    lines, clock = ["time,device,v"], {"a": 0, "b": 0, "c": 0}
    for i in range(1, 121):
        dev = rng.choice("abc")
        clock[dev] += rng.randint(0, 3)
        t = clock[dev] - (rng.randint(5, 9) if rng.random() < 0.1 else 0)  # some late
        lines.append(f"{t * 1000},{dev},{i}")
    (workdir / "in.csv").write_text("\n".join(lines) + "\n")
    r = run_cli(
        "bound",
        "--window", "10us",
        "--slide", "2us",
        "--key", "device",
        "--time-format", "epoch_ns",
        "--udaf", "isum=counting.py:IncSum",
        "--udaf", "rsum=counting.py:RecSum",
        "--agg", "isum(v) AS inc",
        "--agg", "rsum(v)",
        "--agg", "sum(v) AS spark",
        "--discards", "late.csv",
        "--output-format", "jsonl",
        "in.csv",
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    out = r.jsonl()
    assert out and all(o["inc"] == o["rsum(v)"] == o["spark"] for o in out)
    late = {int(x.split(",")[2]) for x in (workdir / "late.csv").read_text().splitlines()[1:]}
    kept = set(range(1, 121)) - late
    assert late and f"discarded {len(late)}" in r.stderr

    calls = Counter(tuple(x.split()) for x in log.read_text().splitlines())
    adds = Counter(int(v) for (what, v), n in calls.items() if what == "add" for _ in range(n))
    removes = Counter(
        int(v) for (what, v), n in calls.items() if what == "remove" for _ in range(n)
    )
    assert set(adds) == kept and set(adds.values()) == {1}  # each row added once
    assert set(removes) <= kept and set(removes.values()) == {1}  # removed at most once
    # each window holds up to 5 hops of rows: recomputation adds a row once per window
    radds = sum(n for (what, _), n in calls.items() if what == "radd")
    assert radds == sum(o["rows"] for o in out) > 2 * len(kept)
    # instances live while their count is > 0 (patent): far fewer than windows
    assert calls[("new", "0")] < len(out)


def _brute(times, values, size, slide, offset, inclusive):
    starts = set()
    for t in times:
        s = t - (t - offset) % slide
        while s + size > t or (inclusive and s + size == t):
            starts.add(s)
            s -= slide
    out = []
    for s in sorted(starts):
        inside = [
            v
            for t, v in zip(times, values, strict=True)
            if s <= t < s + size or (inclusive and t == s + size)
        ]
        if inside:
            out.append((s, sum(inside), len(inside)))
    return out


class _Sum:
    def __init__(self):
        self.t = 0

    def add(self, v):
        self.t += v

    def remove(self, v):
        self.t -= v

    def result(self):
        return self.t


class _Count:
    def __init__(self):
        self.n = 0

    def add(self, v):
        self.n += 1

    def result(self):
        return self.n


@pytest.mark.parametrize("seed", range(40))
def test_sweep_matches_brute_force(seed):
    rng = random.Random(seed)
    times = sorted(rng.randint(-30, 60) for _ in range(rng.randint(1, 25)))
    values = [rng.randint(1, 9) for _ in times]
    size, slide = rng.randint(1, 12), rng.randint(1, 14)  # slide > size: gaps
    offset, inclusive = rng.randint(-5, 5), rng.random() < 0.5
    calls = [udaf.Call("s", _Sum, "v", "s"), udaf.Call("c", _Count, "v", "c")]
    got = [
        (s, a, b)
        for s, (a, b) in udaf.sweep(times, [values, values], calls, size, slide, offset, inclusive)
    ]
    assert got == _brute(times, values, size, slide, offset, inclusive)


def test_split_aggs():
    calls = udaf.split_aggs(["count(*)", "med(x + 1) AS m", "MED(y)"], {"med": _Sum})
    assert calls[0] == "count(*)"
    assert (calls[1].arg, calls[1].alias) == ("x + 1", "m")
    assert (calls[2].arg, calls[2].alias) == ("y", "MED(y)")
    from evtime.errors import UsageError

    for bad in ("med(x) * 2", "med(x) + max(y)"):
        with pytest.raises(UsageError, match="used alone"):
            udaf.split_aggs([bad], {"med": _Sum})


PRODUCT = """
class Prod:
    result_type = "bigint"

    def __init__(self):
        self.p = 1

    def add(self, v):
        self.p *= int(v)

    def result(self):
        return self.p
"""


def test_udaf_result_past_its_type_is_one_line(run_cli, workdir):
    """A user aggregate whose result does not fit its result_type (issue 49: a product
    past a long): one line naming the aggregate and the value, not a Python worker's
    exception."""
    (workdir / "prod.py").write_text(PRODUCT)
    (workdir / "in.csv").write_text("time,v\n1,4294967296\n2,4294967296\n3,5\n")
    r = run_cli(
        "bound", "--window", "10ns", "--time-format", "epoch_ns",
        "--udaf", "prod=prod.py:Prod", "--agg", "prod(v) AS p", "in.csv",
    )  # fmt: skip
    assert r.exit_code != 0 and r.exception is None
    big = 4294967296 * 4294967296 * 5  # the window [0, 10) of the three rows
    assert r.stderr.strip().splitlines()[-1] == (
        f"evtime: user aggregate prod: result() {big} does not fit a bigint "
        "(set result_type on the class, e.g. 'double')"
    )
    assert "PythonException" not in r.stderr
