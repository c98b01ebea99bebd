"""Values with no text of their own (lists, maps, structs from --agg) in every output
format, and rows whose --order-by value is null (they arrive after every other row)."""

from __future__ import annotations

import csv
import json

import pyarrow.parquet as pq
import pytest

try:
    from tests.model.adjust import adjust, iso
    from tests.model.merge import Arrival, merge
except ImportError:  # pragma: no cover
    from model.adjust import adjust, iso
    from model.merge import Arrival, merge

S = 1_000_000_000
BASE = 1_600_000_000 * S
# (time offset in s, w): windows of 10 s
EVENTS = [(1, "a"), (2, 'b,"x"'), (3, "a"), (12, "c"), (25, "d")]
AGG = [
    "--agg",
    "collect_list(w) AS lw",
    "--agg",
    "map_from_arrays(array('n'), array(count(*))) AS m",
    "--agg",
    "named_struct('first', min(w), 'n', count(*)) AS st",
]


def _input(workdir) -> None:
    with open(workdir / "in.csv", "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["time", "w"])
        for s, w in EVENTS:
            out.writerow([iso(BASE + s * S), w])


def _expected() -> dict[str, tuple[list, dict, dict]]:
    """Per window start: (sorted collect_list, the map, the struct), from the events."""
    wins: dict[str, list[str]] = {}
    for s, w in EVENTS:
        wins.setdefault(iso(BASE + (s // 10) * 10 * S), []).append(w)
    return {
        k: (sorted(ws), {"n": len(ws)}, {"first": min(ws), "n": len(ws)}) for k, ws in wins.items()
    }


@pytest.mark.parametrize("ext", ["csv", "jsonl", "parquet"])
def test_nested_aggregates_written(run_cli, workdir, ext):
    """A list/map/struct aggregate: JSON text in CSV (quoted as CSV quotes text), a JSON
    array/object in JSON Lines, a list/map/struct column in Parquet."""
    _input(workdir)
    r = run_cli("bound", "--window", "10s", *AGG, "in.csv", "-o", f"out.{ext}")
    assert r.exit_code == 0, r.stderr
    want = _expected()
    if ext == "csv":
        with open(workdir / "out.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        got = {
            x["window_start"]: (
                sorted(json.loads(x["lw"])),
                json.loads(x["m"]),
                json.loads(x["st"]),
            )
            for x in rows
        }
    elif ext == "jsonl":
        lines = (workdir / "out.jsonl").read_text().splitlines()
        rows = [json.loads(line) for line in lines]
        got = {x["window_start"]: (sorted(x["lw"]), x["m"], x["st"]) for x in rows}
    else:
        t = pq.read_table(workdir / "out.parquet")
        assert str(t.schema.field("lw").type).startswith("list<")
        got = {
            iso(x["window_start"].value): (sorted(x["lw"]), dict(x["m"]), x["st"])
            for x in t.to_pylist()
        }
    assert got == want


def _adjust_input(workdir, rows) -> None:
    body = "".join(f"{'' if q is None else q},{name},{iso(BASE + s * S)}\n" for q, name, s in rows)
    (workdir / "in.csv").write_text("seq,name,time\n" + body)


def _nulls_last(rows):
    """The arrival order evtime promises: by seq, rows without one after all the others,
    ties (and the rows without seq) in input order."""
    big = max(q for q, *_ in rows if q is not None) + 1
    return sorted(rows, key=lambda r: big if r[0] is None else r[0])


def test_adjust_null_order_by_arrives_last(run_cli, workdir):
    rows = [(2, "b", 20), (None, "late", 5), (1, "a", 10), (None, "n2", 30), (3, "c", 25)]
    _adjust_input(workdir, rows)
    order = _nulls_last(rows)
    model = adjust([((), BASE + s * S) for _, _, s in order], S, 2)
    want_out = sorted(order[m.arrival - 1][1] for m in model if m.decision == "released")
    want_dis = sorted(order[m.arrival - 1][1] for m in model if m.decision == "discarded")
    assert want_dis  # (the null-seq row at 5 s is late only when it arrives last)
    r = run_cli(
        "adjust", "--unit", "sec", "--range", "2", "--order-by", "seq", "--discards",
        "dis.csv", "in.csv", "-o", "out.csv",
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    with open(workdir / "out.csv") as f:
        assert sorted(x["name"] for x in csv.DictReader(f)) == want_out
    with open(workdir / "dis.csv") as f:
        assert sorted(x["name"] for x in csv.DictReader(f)) == want_dis


def test_merge_null_order_by_arrives_last(run_cli, workdir):
    # (seq, name, time s, bound row?) per source
    a = [(1, "a1", 10, False), (None, "a-null", 5, False), (3, "a-b", 20, True)]
    b = [(2, "b-b", 30, True), (4, "b1", 40, False)]
    for fname, rows in (("a.csv", a), ("b.csv", b)):
        body = "".join(
            f"{'' if q is None else q},{n},{iso(BASE + s * S)},{'bound' if k else 'row'}\n"
            for q, n, s, k in rows
        )
        (workdir / fname).write_text("seq,name,time,kind\n" + body)
    late = 10**6  # (the model's arrival time of a row without seq: after every other)
    src = [
        [Arrival(i, BASE + s * S, k, late if q is None else q) for q, _, s, k in rows]
        for i, rows in enumerate((a, b))
    ]
    model = merge(src)
    names = {(i, BASE + s * S): n for i, rows in enumerate((a, b)) for _, n, s, _ in rows}
    want_dis = sorted(names[(m.source, m.time)] for m in model if m.decision == "discarded")
    want_out = sorted(names[(m.source, m.time)] for m in model if m.decision == "released")
    assert want_dis == ["a-null"]  # (released when it arrives first)
    r = run_cli(
        "merge", "--order-by", "seq", "--bound-marker", "kind=bound", "--discards",
        "dis.csv", "a.csv", "b.csv", "-o", "out.csv",
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    with open(workdir / "out.csv") as f:
        got = sorted(x["name"] for x in csv.DictReader(f) if x["kind"] == "row")
    assert got == want_out
    with open(workdir / "dis.csv") as f:
        assert sorted(x["name"] for x in csv.DictReader(f)) == want_dis
