"""Pictures of a stream for ``explain --plot``: arrival on x, event time on y, one dot per
row coloured by decision, the operator's bound after every arrival, and per operator:

* adjust: the reference time and the held ``[ref - range, ref]`` band;
* merge: the definitive time and each source's own bound (step lines);
* bound: every window as a box over its time span ``[start, end)``, from the arrival of its
  first row to the arrival that closed it, with the closing point marked.

Big inputs are sampled in Spark (every k-th arrival, plus discarded rows up to a cap; every
k-th window by a hash) so that at most a fixed number of rows reaches the driver
(:data:`MAX_POINTS`, :data:`MAX_WINDOWS`); the picture says so.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from evtime.errors import OutputError, UsageError

MAX_POINTS = 20_000
MAX_WINDOWS = 2_000
COLOURS = {
    "released": "#1f77b4",
    "adjusted": "#ff7f0e",
    "discarded": "#d62728",
    "bound": "#7f7f7f",
}
LABELS = {"bound": "bound row"}
SOURCE_COLOURS = ["#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#2ca02c"]
NS = 1_000_000_000
# y axis unit by the time span shown: (largest span, unit name, ns per unit)
Y_UNITS = [
    (2 * 60 * NS, "seconds", NS),
    (3 * 3600 * NS, "minutes", 60 * NS),
    (3 * 86400 * NS, "hours", 3600 * NS),
    (None, "days", 86400 * NS),
]
_NEVER = (-(2**63), 2**63 - 1)  # engine sentinels for -inf / +inf (never drawn)


def check_path(path: str, overwrite: bool = False) -> None:
    """Refuse before any work: a name that is no picture, an existing picture without
    --overwrite (as -o refuses an existing output)."""
    if not path.lower().endswith((".svg", ".png", ".pdf")):
        raise UsageError(f"--plot {path}: the picture must be .svg, .png or .pdf")
    if os.path.exists(path) and not overwrite:
        raise OutputError(f"{path} exists: use --overwrite to replace it")


@dataclass
class Picture:
    """What reaches the driver: sampled rows (and windows) as dicts, and how they were
    sampled."""

    title: str
    rows: list[dict]
    k: int  # 1 in k arrivals kept (every discard too)
    total: int  # arrivals in the input
    bound_label: str = "bound after arrival"
    windows: list[dict] = field(default_factory=list)
    wk: int = 1  # 1 in wk windows kept
    wtotal: int = 0  # windows in all


def sample(
    frame, total: int, extra: tuple[str, ...] = (), keys: tuple[str, ...] = ()
) -> tuple[list[dict], int]:
    """At most ~MAX_POINTS rows of (arrival, time, evtime, bound, decision, ref?, source?,
    key?, *extra), in arrival order: every k-th arrival plus discarded rows, capped by
    ``limit``.  ``keys`` (columns of ``frame``) become one text column ``key``.
    Returns (rows, k)."""
    from pyspark.sql import functions as F

    k = max(1, math.ceil(total / MAX_POINTS))
    base = ("arrival", "time", "evtime", "bound", "ref", "decision", "source")
    cols = [F.col(c) for c in (*base, *extra) if c in frame.columns]
    if keys:
        cols.append(_key(keys).alias("key"))
    keep = (F.col("arrival") % k == 0) | (F.col("decision") == "discarded")
    # rows of --bad-rows discard have no arrival and no time: nothing to draw
    rows = frame.where(keep & F.col("arrival").isNotNull()).select(*cols).limit(2 * MAX_POINTS)
    return [r.asDict() for r in rows.collect()], k  # bounded by limit()


def _key(keys):
    from pyspark.sql import functions as F

    return F.concat_ws(", ", *[F.concat(F.lit(f"{k}="), F.col(k).cast("string")) for k in keys])


def sample_windows(spans, keys: tuple[str, ...] = ()) -> tuple[list[dict], int, int]:
    """At most ~MAX_WINDOWS windows (start, end, opened, closed, key?) as dicts: every wk-th
    by a hash of (keys, start), capped by ``limit``.  Returns (windows, wk, count)."""
    from pyspark.sql import functions as F

    n = spans.count()
    wk = max(1, math.ceil(n / MAX_WINDOWS))
    if wk > 1:
        h = F.xxhash64(*[F.col(c) for c in (*keys, "start")])
        spans = spans.where(F.pmod(h, F.lit(wk)) == 0)
    cols = [F.col(c) for c in ("start", "end", "opened", "closed")]
    if keys:
        cols.append(_key(keys).alias("key"))
    picked = spans.select(*cols).limit(2 * MAX_WINDOWS)
    return [r.asDict() for r in picked.collect()], wk, n


def _y_unit(span: int) -> tuple[str, int]:
    for limit, name, ns in Y_UNITS:
        if limit is None or span <= limit:
            return name, ns
    raise AssertionError("unreachable")


def _t(v):
    return None if v is None or v in _NEVER else v


def _step(ax, xs, ys, last, **style) -> None:
    """A step line through (xs, ys), held to ``last``; gaps where ys is None."""
    if xs:
        ys = [math.nan if v is None else v for v in ys]
        ax.step([*xs, last], [*ys, ys[-1]], where="post", **style)


def draw(pic: Picture, path: str, per_source_until_last: bool = False) -> None:
    """Draw ``pic`` to ``path`` (format from its extension).  ``per_source_until_last``:
    a source's bound line ends at its last arrival (sources that leave)."""
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # SVG text stays text
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    from matplotlib.ticker import MaxNLocator

    rows = sorted(pic.rows, key=lambda r: r["arrival"])
    times = [
        t
        for r in rows
        for t in (_t(r.get("evtime")), _t(r.get("time")), _t(r.get("bound")))
        if t is not None
    ]
    times += [t for w in pic.windows for t in (w["start"], w["end"])]
    t0 = min(times, default=0)
    unit, per = _y_unit(max(times, default=0) - t0)
    t0 -= t0 % per  # a round origin: whole seconds, minutes, ...

    def y(ns):
        ns = _t(ns)
        return None if ns is None else (ns - t0) / per

    fig, ax = plt.subplots(figsize=(10, 5.5), dpi=110)
    last = max((r["arrival"] for r in rows), default=0) + 1  # the end of input
    keys = list(dict.fromkeys([r.get("key") for r in rows] + [w.get("key") for w in pic.windows]))
    few = len(keys) <= len(SOURCE_COLOURS)
    many = "per key" if len(keys) > 1 else ""

    def colour(key, default: str) -> str:
        if len(keys) <= 1 or not few:
            return default
        return SOURCE_COLOURS[keys.index(key) % len(SOURCE_COLOURS)]

    def label(what: str, key, first: bool) -> str | None:
        if len(keys) <= 1:
            return what if first else None
        if few:
            return f"{what}, {key}" if first else None
        return f"{what}, {many}" if first else None

    labelled: set[str] = set()
    for w in pic.windows:
        closed = w["closed"] if w["closed"] is not None else last
        x0 = w["opened"] - 0.4
        c = colour(w.get("key"), "#2ca02c")
        what = "window: its time span, from first row to closing arrival"
        tag = f"{what}/{w.get('key') if few else ''}"
        ax.add_patch(
            Rectangle(
                (x0, y(w["start"])),
                closed + 0.4 - x0,
                y(w["end"]) - y(w["start"]),
                facecolor=c,
                edgecolor=c,
                alpha=0.12,
                lw=0.8,
                label=label(what, w.get("key"), tag not in labelled),
            )
        )
        labelled.add(tag)
    ends = [(w["closed"], y(w["end"])) for w in pic.windows if w["closed"] is not None]
    if ends:
        ax.scatter(
            *zip(*ends, strict=True),
            marker="_",
            s=160,
            linewidths=2,
            color="#2ca02c",
            zorder=4,
            label="window closed: the bound reached its end",
        )
    flushed = [(last, y(w["end"])) for w in pic.windows if w["closed"] is None]
    if flushed:
        ax.scatter(
            *zip(*flushed, strict=True),
            marker=">",
            s=30,
            color="#2ca02c",
            zorder=4,
            label="window flushed at the end of input",
        )
    sources = "source_bound" in (rows[0] if rows else {})
    for key in keys:
        mine = [r for r in rows if r.get("key") == key]
        xs = [r["arrival"] for r in mine]
        if mine and "ref" in mine[0]:
            ax.fill_between(
                [*xs, last],
                [math.nan if y(r["bound"]) is None else y(r["bound"]) for r in [*mine, mine[-1]]],
                [math.nan if y(r["ref"]) is None else y(r["ref"]) for r in [*mine, mine[-1]]],
                step="post",
                color=colour(key, "#2ca02c"),
                alpha=0.15,
                label=label("held range [ref - range, ref]", key, True),
            )
            _step(
                ax,
                xs,
                [y(r["ref"]) for r in mine],
                last,
                color=colour(key, "#2ca02c"),
                lw=1,
                label=label("reference time", key, True),
            )
        style = (
            {"color": "black", "lw": 4, "alpha": 0.25}  # under the sources' own bounds
            if sources
            else {"color": colour(key, "black"), "lw": 1.4 if few else 0.6}
        )
        _step(
            ax,
            xs,
            [y(r["bound"]) for r in mine],
            last,
            label=label(pic.bound_label, key, True),
            **style,
        )
    if sources:
        names = list(dict.fromkeys(r["source"] for r in rows))
        for i, s in enumerate(names):
            pts = [(r["arrival"], y(r["source_bound"])) for r in rows if r["source"] == s]
            pts = [(x, v) for x, v in pts if v is not None]
            if pts:
                px, py = zip(*pts, strict=True)
                # a source's bound moves only at its own arrivals
                end = px[-1] + 1 if per_source_until_last else last
                _step(
                    ax,
                    list(px),
                    list(py),
                    end,
                    color=SOURCE_COLOURS[i % len(SOURCE_COLOURS)],
                    lw=1.3,
                    ls="--",
                    label=f"bound of {_short(s)}",
                )
    for decision, c in COLOURS.items():
        pts = [
            (r["arrival"], y(r["evtime"] if r["evtime"] is not None else r["time"]))
            for r in rows
            if r["decision"] == decision
        ]
        if pts:
            ax.scatter(
                *zip(*pts, strict=True),
                s=18,
                color=c,
                marker="x" if decision == "discarded" else "o",
                label=LABELS.get(decision, decision),
                zorder=5,
                gid=f"rows-{decision}",  # (SVG: <g id="rows-released">, one mark a row)
            )
    notes = []
    if pic.k > 1:
        notes.append(f"sampled: 1 in {pic.k} of {pic.total} arrivals, and every discard")
    if pic.wk > 1:
        notes.append(f"1 in {pic.wk} of {pic.wtotal} windows")
    ax.set_title(pic.title + ("\n" + "; ".join(notes) if notes else ""), fontsize=10)
    ax.set_xlabel("arrival")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(f"event time, {unit} after {_iso(t0)}")
    ax.legend(fontsize=8, loc="best")
    ax.grid(alpha=0.3)
    ax.autoscale_view()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _short(name: str) -> str:
    import os

    return os.path.basename(name.rstrip("/")) or name


def _iso(ns: int) -> str:
    import pyarrow as pa

    from evtime.io.timeparse import format_ns

    return format_ns(pa.array([ns], pa.int64()))[0].as_py()


def plot(
    frame,
    total: int,
    path: str,
    title: str,
    extra: tuple[str, ...] = (),
    keys: tuple[str, ...] = (),
    sources_leave: bool = False,
    **kw,
) -> None:
    """Sample ``frame`` (an explain frame) and draw it to ``path``; ``keys``: its columns
    that split the stream (one bound line per key)."""
    rows, k = sample(frame, total, extra, keys)
    draw(Picture(title, rows, k, total, **kw), path, sources_leave)
