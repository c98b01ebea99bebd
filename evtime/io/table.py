"""A readable table on a terminal (explain without --format).

On a terminal the table fits its width (``COLUMNS``, else the terminal's size): the
``reason`` column gives way first, then the widest others, a cut cell ending in ``…``; a
table piped elsewhere (``--format table | less -S``) is written at full width, no cell
cut."""

from __future__ import annotations

import itertools
import shutil
from typing import TextIO

import pyarrow as pa
import pyarrow.csv as pcsv

SAMPLE = 500  # rows used to size the columns
MAX_WIDTH = 40
WIDE, WIDE_COLUMNS = 160, {"reason"}  # reasons are the point of explain: keep them whole


def _rows(parts: list[str], schema: pa.Schema):
    opts = pcsv.ReadOptions(column_names=schema.names)
    conv = pcsv.ConvertOptions(
        column_types={n: pa.string() for n in schema.names}, strings_can_be_null=False
    )
    for p in parts:
        for batch in pcsv.open_csv(p, read_options=opts, convert_options=conv):
            yield from zip(*(c.to_pylist() for c in batch.columns), strict=True)


GAP = 2  # spaces between columns
NARROWEST, NARROWEST_WIDE = 6, 12  # a column is cut no narrower (reason: 12)


def _cell(v: str, w: int, cut: bool = True) -> str:
    return (v if len(v) <= w or not cut else v[: w - 1] + "…").ljust(w)


def fitted(widths: list[int], names: list[str], room: int) -> list[int]:
    """``widths`` narrowed, widest first, till the columns and the gaps between them fit in
    ``room`` characters: the wide columns (reason) first, down to NARROWEST_WIDE, then the
    others, none below NARROWEST (a table too wide even then is left to wrap)."""
    widths = list(widths)
    total = sum(widths) + GAP * (len(widths) - 1)
    for wide in (True, False):
        floor = NARROWEST_WIDE if wide else NARROWEST
        while total > room:
            cands = [
                i for i, n in enumerate(names) if (n in WIDE_COLUMNS) == wide and widths[i] > floor
            ]
            if not cands:
                break
            i = max(cands, key=lambda j: widths[j])
            widths[i] -= 1
            total -= 1
    return widths


def _terminal_width(out: TextIO) -> int | None:
    """The width to fit on a terminal (COLUMNS first), None when ``out`` is not one."""
    try:
        if not out.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    return shutil.get_terminal_size().columns


def print_table(parts: list[str], schema: pa.Schema, out: TextIO) -> None:
    rows = _rows(parts, schema)
    head = list(itertools.islice(rows, SAMPLE))
    room = _terminal_width(out)
    natural = [max([len(n), *(len(r[i]) for r in head)]) for i, n in enumerate(schema.names)]
    if room is None:  # (piped: full width, every cell whole)
        widths, cut = natural, False
    else:
        widths = [
            min(WIDE if n in WIDE_COLUMNS else MAX_WIDTH, w)
            for n, w in zip(schema.names, natural, strict=True)
        ]
        widths, cut = fitted(widths, schema.names, room), True

    def line(values) -> str:
        cells = (_cell(v, w, cut) for v, w in zip(values, widths, strict=True))
        return "  ".join(cells).rstrip() + "\n"

    out.write(line(schema.names))
    out.write(line(["-" * w for w in widths]))
    for r in itertools.chain(head, rows):
        out.write(line(r))
    out.flush()
