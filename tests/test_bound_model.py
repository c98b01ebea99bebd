"""`evtime bound` engine against the plain-Python reference model (tests/model/bound.py):
hypothesis draws streams (keys, marker rows, late rows) and settings (tumbling / hopping /
gapped, inclusive / exclusive, rows / markers / cti, strict, tick, late drop / adjust,
unit+range); windows, aggregates, closing arrivals, release order and every row's
explanation must agree.

Engine-level (one prepared pipeline feeds both the windows and the explanation), so each
example costs one set of Spark jobs."""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tests.examples import spark_settings

try:
    from tests.model.adjust import HELD_TO_END, iso
    from tests.model.bound import Event, bound
except ImportError:  # pragma: no cover
    from model.adjust import HELD_TO_END, iso
    from model.bound import Event, bound

VALUES = "array_join(transform(sort_array(collect_list(v)), x -> cast(x as string)), ' ')"


@st.composite
def scenarios(draw):
    keyed = draw(st.booleans())
    keys = ["a", "b", "c"] if keyed else [None]
    mode = draw(st.sampled_from(["rows", "markers", "cti"]))
    n = draw(st.integers(1, 18))
    events = []
    for _ in range(n):
        key = draw(st.sampled_from(keys))
        t = draw(st.integers(-20, 80))
        marker = mode == "markers" and draw(st.integers(0, 3)) == 0
        events.append((key, t, marker))
    size = draw(st.integers(1, 12))
    slide = draw(st.one_of(st.none(), st.integers(1, 14)))
    cfg = dict(
        size=size,
        slide=slide,
        offset=draw(st.integers(-6, 6)),
        inclusive_end=draw(st.booleans()),
        bounds=mode,
        late=draw(st.sampled_from(["drop", "adjust"])),
        tick=draw(st.integers(1, 3)),
    )
    if mode == "markers":
        cfg["strict_bounds"] = draw(st.booleans())
    if mode == "cti":
        cfg["cti_every"] = draw(st.integers(1, 3))
        cfg["cti_delay"] = draw(st.integers(-3, 6))
    if mode == "rows" and draw(st.booleans()):
        cfg["unit_ns"], cfg["range_n"] = 1, draw(st.integers(0, 5))
    return keyed, events, cfg, draw(st.booleans())


def _spec(keyed, cfg):
    from evtime.engine.bound import BoundSpec

    return BoundSpec(
        size=cfg["size"],
        slide=cfg["slide"],
        offset=cfg["offset"],
        inclusive=cfg["inclusive_end"],
        bounds=cfg["bounds"],
        marker=("kind", "bound") if cfg["bounds"] == "markers" else None,
        strict=cfg.get("strict_bounds", False),
        tick=cfg["tick"],
        cti_every=cfg.get("cti_every"),
        cti_delay=cfg.get("cti_delay", 0),
        late=cfg["late"],
        unit="nsec" if "unit_ns" in cfg else None,
        range=cfg.get("range_n"),
        keys=("k",) if keyed else (),
    )


def _engine(spark, keyed, events, cfg, explain=True):
    from evtime.engine import bound as engine
    from evtime.io import inputs, reader
    from evtime.io.sources import expand_inputs

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "in.csv"
        lines = ["t,k,kind,v"]
        for i, (key, t, marker) in enumerate(events, start=1):
            lines.append(f"{t},{key or ''},{'bound' if marker else 'data'},{'' if marker else i}")
        path.write_text("\n".join(lines) + "\n")
        files = expand_inputs([str(path)], None)
        # (as `evtime bound` reads: every CSV column in the type its text reads as, but
        # the --bound-marker column)
        opts = reader.ReadOptions(time="t", time_format="epoch_ns", all_typed=True, text=("kind",))
        df, _, _ = inputs.read(spark, files, opts)
        spec = _spec(keyed, cfg)
        spec.check()
        aggs = [VALUES + " AS vs", "count(v) AS n"]
        if not explain:  # the one pass of runs that write only the windows
            from evtime.engine import bound_tally

            cl = engine.classify(df, spec)
            # the tally's route number, from the decision's conditions, is the decision's
            both = cl.select(engine.route_number(spec), engine.route(numbered=True)).collect()
            assert [a for a, b in both if a != b] == []
            t, names = bound_tally.tally(cl, spec, aggs)
            t = t.localCheckpoint()
            # (with the search's value range from the counts, as the CLI runs it)
            routes, _, limits, _ = bound_tally.counts(t, spec)
            # (the same counts from the tally fetched here)
            assert bound_tally.counts_here(t.toArrow(), spec) == bound_tally.counts(t, spec)
            w = bound_tally.windows(t, spec, names, limits)
            out = _in_order(engine.output(w, spec, names))
            # the same search over the tally held in this process (a few windows)
            made = _in_order(bound_tally.output_here(t, spec, names, len(events)))
            assert _without_part(made) == _without_part(out)
            return out, routes
        cl = engine.prepare(df, spec)
        w, names = engine.windows(cl, spec, aggs)
        w = w.localCheckpoint()  # shared by the output and the explanation
        out = _in_order(engine.output(w, spec, names))
        ex = _explained(engine.explain(cl, engine.positions(w, spec), spec, ["in.csv"]))
        # the windows' positions found here from the tally (runs that read here) are the same
        from evtime.engine import bound_tally

        rows = bound_tally.tally(cl, spec, [])[0].toArrow()
        pos, arrivals = bound_tally.positions_here(cl, spec, rows)
        assert arrivals == len(events)
        assert _explained(engine.explain(cl, pos, spec, ["in.csv"])) == ex
        return out, ex


def _explained(ex) -> list[dict]:
    """The explain columns the model gives, by arrival."""
    ex = ex.select(
        "_x_arrival",
        "_x_evtime",
        "_x_decision",
        "_x_bound",
        "_x_released_by",
        "_x_output_pos",
        "_x_windows",
        "_x_reason",
    )
    return sorted((r.asDict() for r in ex.collect()), key=lambda e: e["_x_arrival"])


def _without_part(rows: list[dict]) -> list[dict]:
    from evtime.columns import PART

    return [{c: v for c, v in r.items() if c != PART} for r in rows]


def _in_order(frame) -> list[dict]:
    """The rows of an output frame in output order, as the writer puts them together: part
    after part (each part is whole, and sorted, in one Spark partition)."""
    from evtime.columns import PART

    return sorted((r.asDict() for r in frame.collect()), key=lambda r: r[PART])


def _model(keyed, events, cfg):
    evs = [
        Event((key,) if keyed else (), t, marker, None if marker else i)
        for i, (key, t, marker) in enumerate(events, start=1)
    ]
    return bound(evs, **cfg)


@spark_settings(10, database=None)
@given(scenarios())
def test_engine_matches_model(spark, case):
    # about half the examples explain every row; the others run the one pass of bound
    # without --discards (bound_tally) and check its route counts
    keyed, events, cfg, explain = case
    out, ex = _engine(spark, keyed, events, cfg, explain)
    wins, rows = _model(keyed, events, cfg)
    closing = "]" if cfg["inclusive_end"] else ")"

    want = [
        (
            w.key[0] if keyed else None,
            w.start,
            w.end,
            " ".join(str(v) for v in sorted(w.values)),
            w.rows,
            w.closed_by,  # (None: flushed at the end, a null)
        )
        for w in wins
    ]
    got = [
        (o.get("k"), o["window_start"], o["window_end"], o["vs"], o["rows"], o["closed_by"])
        for o in out
    ]
    assert got == want
    assert [o["n"] for o in out] == [w.rows for w in wins]

    if not explain:  # the one pass: route counts instead of an explanation
        routes = {"released": "released", "adjusted": "adjusted", "discarded": "discard"}
        want_counts = Counter(routes.get(r.decision, r.decision) for r in rows)
        assert ex == dict(want_counts)
        return
    place = {(w.key, w.start): (w.closed_by, i) for i, w in enumerate(wins, start=1)}
    assert len(ex) == len(rows)
    for e, r in zip(ex, rows, strict=True):
        assert e["_x_arrival"] == r.arrival
        assert e["_x_decision"] == r.decision
        assert e["_x_bound"] == r.bound
        if r.decision in ("released", "adjusted"):
            assert e["_x_evtime"] == r.evtime
            text = " ".join(f"[{iso(s)},{iso(t)}{closing}" for s, t in r.windows)
            assert (e["_x_windows"] or "") == text
            by, pos = place[(r.key, r.windows[-1][0])] if r.windows else (None, None)
            assert e["_x_released_by"] == by and e["_x_output_pos"] == pos
        else:
            assert e["_x_windows"] is None and e["_x_released_by"] is None
        assert (e["_x_reason"] is None) == (r.reason is None)
        held = (e["_x_reason"] or "").endswith(HELD_TO_END)
        assert held == (r.reason or "").endswith(HELD_TO_END), (e, r)
