"""CSV text as shell tools write it: a value is quoted only when it holds the delimiter, a
quote or a line break (RFC 4180; Python's ``csv.QUOTE_MINIMAL``, xsv, csvkit, pandas).

Arrow's own CSV writer quotes every text value, the header too (its "needed" style), and
its "none" style refuses values that need quotes; so the text is made here, column by
column, with Arrow's compute functions (no Python per row): each column cast to text as
Arrow's writer casts it, the values that need it quoted, the columns joined.  A nested
value (list, struct, map), which has no CSV text, is written as its JSON text (as a JSON
Lines output writes it), quoted as any text."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

LINE_END = "\n"


def _needs_quotes(delimiter: str) -> str:
    return "[" + re.escape(delimiter + '"\r\n') + "]"


def quoted(text: pa.Array, delimiter: str = ",") -> pa.Array:
    """``text`` (a string array) with every value that needs it quoted, quotes doubled."""
    needs = pc.match_substring_regex(text, _needs_quotes(delimiter))
    if not pc.any(needs).as_py():
        return text
    doubled = pc.replace_substring(text, '"', '""')
    wrapped = pc.binary_join_element_wise('"', doubled, '"', "")
    return pc.if_else(needs, wrapped, text)


def _text(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if pa.types.is_large_string(column.type):
        return column.cast(pa.string())
    if pa.types.is_nested(column.type):  # (lists, structs, maps: their JSON text)
        from evtime.io.jsonlines import json_text

        return json_text(column)
    if not pa.types.is_string(column.type):
        return pc.cast(column, pa.string())  # (as Arrow's CSV writer casts)
    return column


def header(names: list[str], delimiter: str = ",") -> bytes:
    """The header line for columns ``names``."""
    text = quoted(pa.array(names, pa.string()), delimiter).to_pylist()
    if len(text) == 1 and text[0] == "":
        text = ['""']
    return (delimiter.join(text) + LINE_END).encode()


def write(
    table: pa.Table,
    out,
    delimiter: str = ",",
    include_header: bool = False,
    clean: frozenset[str] | set[str] = frozenset(),
) -> None:
    """Write ``table`` as CSV text (a line per row, ``\\n`` line ends, nulls empty) to the
    binary file ``out``.  ``clean``: columns known to hold no value that needs quotes (not
    looked at).  When no value needs quotes, Arrow's writer writes the text unquoted (the
    common case, and the fast one); else it is made here."""
    if include_header:
        out.write(header(table.column_names, delimiter))
    if table.num_rows == 0 or table.num_columns == 0:
        return
    lone = table.num_columns == 1  # (Python's csv writes a lone empty value as "")
    if not (lone and _has_empty(table.column(0))) and not any(
        _may_need_quotes(c, delimiter)
        for n, c in zip(table.column_names, table.columns, strict=True)
        if n not in clean
    ):
        opts = pcsv.WriteOptions(
            include_header=False, delimiter=delimiter, quoting_style="none", batch_size=BATCH
        )
        pcsv.write_csv(table, out, opts)
        return
    cols = [quoted(_text(c), delimiter) for c in table.columns]
    if lone:
        cols = [pc.if_else(pc.equal(pc.fill_null(cols[0], ""), ""), '""', cols[0])]
    out.write(_lines(cols, delimiter))


def _has_empty(column) -> bool:
    text = _text(column)
    return bool(text.null_count) or pc.any(pc.equal(text, "")).as_py() is True


def _may_need_quotes(column, delimiter: str) -> bool:
    """Whether a value of ``column`` may need quotes: a text value holding the delimiter, a
    quote, CR or LF; values of other types never do (binary and nested ones are made
    here)."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    for arr in chunks:
        if pa.types.is_dictionary(arr.type):
            arr = arr.dictionary
        if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
            if pa.types.is_binary(arr.type) or pa.types.is_nested(arr.type):
                return True
            continue
        if len(arr) == arr.null_count:
            continue
        offsets, data = arr.buffers()[1:3]
        if data is None:
            continue
        width = 8 if pa.types.is_large_string(arr.type) else 4
        ends = np.frombuffer(offsets, f"<i{width}", len(arr) + 1, arr.offset * width)
        text = data[int(ends[0]) : int(ends[-1])].to_pybytes()  # (memchr: a copy is faster
        # than any search that reads the buffer in place)
        if any(text.find(c) != -1 for c in (delimiter.encode(), b'"', b"\r", b"\n")):
            return True
    return False


BATCH = 1 << 16  # rows Arrow's writer formats at a time (its default, 1024, is slower)


def encode(table: pa.Table, delimiter: str = ",", include_header: bool = False) -> bytes:
    """:func:`write` into bytes."""
    out = pa.BufferOutputStream()
    write(table, out, delimiter, include_header)
    return out.getvalue().to_pybytes()


def _lines(cols: list[pa.Array], delimiter: str) -> pa.Buffer:
    """The lines of the already quoted text columns ``cols``, as one buffer (no copy)."""
    if len(cols) == 1:
        joined = pc.fill_null(cols[0], "")
    else:
        joined = pc.binary_join_element_wise(
            *cols, delimiter, null_handling="replace", null_replacement=""
        )
    lines = pc.binary_join_element_wise(joined, "", LINE_END)
    offsets, data = lines.buffers()[1:3]
    ends = np.frombuffer(offsets, np.int32, len(lines) + 1, lines.offset * 4)
    return data[int(ends[0]) : int(ends[-1])]
