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


@dataclass(frozen=True)
class _Scale:
    """The y axis: event times as ``unit``s (``per`` ns each) after the round ``t0``."""

    t0: int
    unit: str
    per: int

    @classmethod
    def of(cls, pic: Picture, rows: list[dict]) -> _Scale:
        """The scale that holds every time of ``rows`` and of ``pic``'s windows."""
        times = [
            t
            for r in rows
            for t in (_t(r.get("evtime")), _t(r.get("time")), _t(r.get("bound")))
            if t is not None
        ]
        times += [t for w in pic.windows for t in (w["start"], w["end"])]
        t0 = min(times, default=0)
        unit, per = _y_unit(max(times, default=0) - t0)
        return cls(t0 - t0 % per, unit, per)  # a round origin: whole seconds, minutes, ...

    def y(self, ns):
        """``ns`` on the axis (None for no time)."""
        ns = _t(ns)
        return None if ns is None else (ns - self.t0) / self.per


@dataclass(frozen=True)
class _Keys:
    """The keys that split the stream, in order of appearance: a colour each when they are
    few, and legend labels that name them (or say "per key")."""

    keys: list

    @property
    def few(self) -> bool:
        return len(self.keys) <= len(SOURCE_COLOURS)

    def colour(self, key, default: str) -> str:
        if len(self.keys) <= 1 or not self.few:
            return default
        return SOURCE_COLOURS[self.keys.index(key) % len(SOURCE_COLOURS)]

    def label(self, what: str, key, first: bool) -> str | None:
        if not first:
            return None
        if len(self.keys) <= 1:
            return what
        return f"{what}, {key}" if self.few else f"{what}, per key"


def _draw_windows(ax, pic: Picture, sc: _Scale, ks: _Keys, last: int) -> None:
    """Each window a rectangle (its time span, from first row to closing arrival), a mark
    where it closed, or where it was flushed at the end of input (``last``)."""
    from matplotlib.patches import Rectangle

    labelled: set[str] = set()
    for w in pic.windows:
        closed = w["closed"] if w["closed"] is not None else last
        x0 = w["opened"] - 0.4
        c = ks.colour(w.get("key"), "#2ca02c")
        what = "window: its time span, from first row to closing arrival"
        tag = f"{what}/{w.get('key') if ks.few else ''}"
        ax.add_patch(
            Rectangle(
                (x0, sc.y(w["start"])),
                closed + 0.4 - x0,
                sc.y(w["end"]) - sc.y(w["start"]),
                facecolor=c,
                edgecolor=c,
                alpha=0.12,
                lw=0.8,
                label=ks.label(what, w.get("key"), tag not in labelled),
            )
        )
        labelled.add(tag)
    ends = [(w["closed"], sc.y(w["end"])) for w in pic.windows if w["closed"] is not None]
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
    flushed = [(last, sc.y(w["end"])) for w in pic.windows if w["closed"] is None]
    if flushed:
        ax.scatter(
            *zip(*flushed, strict=True),
            marker=">",
            s=30,
            color="#2ca02c",
            zorder=4,
            label="window flushed at the end of input",
        )


def _draw_bounds(
    ax, pic: Picture, rows: list[dict], sc: _Scale, ks: _Keys, last: int, sources: bool
) -> None:
    """Per key: the held range and reference time (when the rows carry ``ref``), and the
    bound as a step line (faint and wide under the sources' own bounds, with ``sources``)."""
    for key in ks.keys:
        mine = [r for r in rows if r.get("key") == key]
        xs = [r["arrival"] for r in mine]
        if mine and "ref" in mine[0]:
            ax.fill_between(
                [*xs, last],
                [
                    math.nan if sc.y(r["bound"]) is None else sc.y(r["bound"])
                    for r in [*mine, mine[-1]]
                ],
                [math.nan if sc.y(r["ref"]) is None else sc.y(r["ref"]) for r in [*mine, mine[-1]]],
                step="post",
                color=ks.colour(key, "#2ca02c"),
                alpha=0.15,
                label=ks.label("held range [ref - range, ref]", key, True),
            )
            _step(
                ax,
                xs,
                [sc.y(r["ref"]) for r in mine],
                last,
                color=ks.colour(key, "#2ca02c"),
                lw=1,
                label=ks.label("reference time", key, True),
            )
        style = (
            {"color": "black", "lw": 4, "alpha": 0.25}  # under the sources' own bounds
            if sources
            else {"color": ks.colour(key, "black"), "lw": 1.4 if ks.few else 0.6}
        )
        _step(
            ax,
            xs,
            [sc.y(r["bound"]) for r in mine],
            last,
            label=ks.label(pic.bound_label, key, True),
            **style,
        )


def _draw_sources(ax, rows: list[dict], sc: _Scale, last: int, until_last: bool) -> None:
    """Each source's own bound, dashed, moving only at its own arrivals; it ends at its
    last arrival with ``until_last``, else at the end of input (``last``)."""
    names = list(dict.fromkeys(r["source"] for r in rows))
    for i, s in enumerate(names):
        pts = [(r["arrival"], sc.y(r["source_bound"])) for r in rows if r["source"] == s]
        pts = [(x, v) for x, v in pts if v is not None]
        if pts:
            px, py = zip(*pts, strict=True)
            end = px[-1] + 1 if until_last else last
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


def _draw_rows(ax, rows: list[dict], sc: _Scale) -> None:
    """A mark per row at (arrival, its event time or else its time), by decision (SVG: a
    group ``rows-<decision>`` each)."""
    for decision, c in COLOURS.items():
        pts = [
            (r["arrival"], sc.y(r["evtime"] if r["evtime"] is not None else r["time"]))
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


def _finish(ax, pic: Picture, sc: _Scale) -> None:
    """Title (with what was sampled), axes, legend and grid."""
    from matplotlib.ticker import MaxNLocator

    notes = []
    if pic.k > 1:
        notes.append(f"sampled: 1 in {pic.k} of {pic.total} arrivals, and every discard")
    if pic.wk > 1:
        notes.append(f"1 in {pic.wk} of {pic.wtotal} windows")
    ax.set_title(pic.title + ("\n" + "; ".join(notes) if notes else ""), fontsize=10)
    ax.set_xlabel("arrival")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(f"event time, {sc.unit} after {_iso(sc.t0)}")
    ax.legend(fontsize=8, loc="best")
    ax.grid(alpha=0.3)
    ax.autoscale_view()


def draw(pic: Picture, path: str, per_source_until_last: bool = False) -> None:
    """Draw ``pic`` to ``path`` (format from its extension).  ``per_source_until_last``:
    a source's bound line ends at its last arrival (sources that leave)."""
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # SVG text stays text
    import matplotlib.pyplot as plt

    rows = sorted(pic.rows, key=lambda r: r["arrival"])
    sc = _Scale.of(pic, rows)
    fig, ax = plt.subplots(figsize=(10, 5.5), dpi=110)
    last = max((r["arrival"] for r in rows), default=0) + 1  # the end of input
    ks = _Keys(
        list(dict.fromkeys([r.get("key") for r in rows] + [w.get("key") for w in pic.windows]))
    )
    _draw_windows(ax, pic, sc, ks, last)
    sources = "source_bound" in (rows[0] if rows else {})
    _draw_bounds(ax, pic, rows, sc, ks, last, sources)
    if sources:
        _draw_sources(ax, rows, sc, last, per_source_until_last)
    _draw_rows(ax, rows, sc)
    _finish(ax, pic, sc)
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
