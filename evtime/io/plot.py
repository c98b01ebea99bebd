"""Pictures of a stream for ``explain --plot``: arrival on x, event time on y, one dot per
row coloured by decision, the operator's bound (and adjust's [ref - range, ref] band).

Big inputs are sampled in Spark (every k-th arrival, plus discarded rows up to a cap) so
that at most :data:`MAX_POINTS` rows reach the driver; the picture says so.
"""

from __future__ import annotations

import math

from evtime.errors import UsageError

MAX_POINTS = 20_000
COLOURS = {"released": "#1f77b4", "discarded": "#d62728", "adjusted": "#ff7f0e", "bound": "#7f7f7f"}
NS = 1_000_000_000


def check_path(path: str) -> None:
    if not path.lower().endswith((".svg", ".png", ".pdf")):
        raise UsageError(f"--plot {path}: the picture must be .svg, .png or .pdf")


def sample(frame, total: int):
    """At most MAX_POINTS rows of (arrival, time, evtime, bound, ref?, decision), in arrival
    order: every k-th arrival, plus discarded rows (capped).  Returns (rows, k)."""
    from pyspark.sql import functions as F

    k = max(1, math.ceil(total / MAX_POINTS))
    cols = [
        c for c in ("arrival", "time", "evtime", "bound", "ref", "decision") if c in frame.columns
    ]
    keep = (F.col("arrival") % k == 0) | (F.col("decision") == "discarded")
    # rows of --bad-rows discard have no arrival and no time: nothing to draw
    rows = frame.where(keep & F.col("arrival").isNotNull()).select(*cols).limit(2 * MAX_POINTS)
    return rows.collect(), k  # bounded by limit(): never grows with the input


def draw(rows, k: int, total: int, path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # SVG text stays text
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    rows = sorted(rows, key=lambda r: r["arrival"])
    t0 = min((r["evtime"] for r in rows if r["evtime"] is not None), default=0)

    def y(ns):
        return None if ns is None else (ns - t0) / NS

    fig, ax = plt.subplots(figsize=(10, 5.5), dpi=110)
    xs = [r["arrival"] for r in rows]
    if rows and "ref" in rows[0].asDict():
        ref = [y(r["ref"]) for r in rows]
        bound = [y(r["bound"]) for r in rows]
        ax.fill_between(
            xs,
            bound,
            ref,
            step="post",
            color="#2ca02c",
            alpha=0.15,
            label="held range [ref - range, ref]",
        )
        ax.step(xs, ref, where="post", color="#2ca02c", lw=1, label="reference time")
    if rows:
        ax.step(
            xs,
            [y(r["bound"]) for r in rows],
            where="post",
            color="black",
            lw=1.2,
            label="bound after arrival",
        )
    for decision, colour in COLOURS.items():
        pts = [
            (r["arrival"], y(r["evtime"] if r["evtime"] is not None else r["time"]))
            for r in rows
            if r["decision"] == decision
        ]
        if pts:
            ax.scatter(*zip(*pts, strict=True), s=14, color=colour, label=decision, zorder=3)
    note = f" — sampled: 1 in {k} of {total} arrivals, and every discard" if k > 1 else ""
    ax.set_title(f"{title}{note}", fontsize=10)
    ax.set_xlabel("arrival")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(f"event time, seconds after {_iso(t0)}")
    ax.legend(fontsize=8, loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _iso(ns: int) -> str:
    import pyarrow as pa

    from evtime.io.timeparse import format_ns

    return format_ns(pa.array([ns], pa.int64()))[0].as_py()


def plot(frame, total: int, path: str, title: str) -> None:
    rows, k = sample(frame, total)
    draw(rows, k, total, path, title)
