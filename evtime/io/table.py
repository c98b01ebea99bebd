"""A readable table on a terminal (explain without --format)."""

from __future__ import annotations

import itertools
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


def _cell(v: str, w: int) -> str:
    return (v if len(v) <= w else v[: w - 1] + "…").ljust(w)


def print_table(parts: list[str], schema: pa.Schema, out: TextIO) -> None:
    rows = _rows(parts, schema)
    head = list(itertools.islice(rows, SAMPLE))
    widths = [
        min(WIDE if n in WIDE_COLUMNS else MAX_WIDTH, max([len(n), *(len(r[i]) for r in head)]))
        for i, n in enumerate(schema.names)
    ]

    def line(values) -> str:
        return "  ".join(_cell(v, w) for v, w in zip(values, widths, strict=True)).rstrip() + "\n"

    out.write(line(schema.names))
    out.write(line(["-" * w for w in widths]))
    for r in itertools.chain(head, rows):
        out.write(line(r))
    out.flush()
