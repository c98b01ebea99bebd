"""JSON Lines text of an Arrow table, a column at a time (no Python per row).

One object per row, keys in column order, written as Python's ``json.dumps`` writes them
(``", "`` and ``": "`` separators, strings escaped as it escapes them, non-ASCII kept). Numbers
are Arrow's text of them, as in the CSV outputs: the shortest that reads back to the same
value, an exponent from 1e-7 down and from 1e+21 up (``1e-9``, ``0.000001``), a float
with no fraction keeps one (``100.0``); NaN and the infinities are ``NaN``, ``Infinity`` and
``-Infinity``, as Python writes them. Columns of other types (decimals, binary, lists, ...)
send the whole table through ``json.dumps`` with ``default=str``, row by row: a list is a
JSON array, a struct and a map JSON objects (a map's keys as text; of duplicate keys, the
last).  :func:`json_text` makes the same text of a nested column for the CSV outputs.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# json.dumps's escapes; every other control character is \u00XX
_ESCAPES = {
    "\\": "\\\\",
    '"': '\\"',
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\b": "\\b",
    "\f": "\\f",
}


def encode(table: pa.Table) -> pa.Buffer | bytes:
    """The rows of ``table`` as JSON Lines, every line ending in a newline."""
    if table.num_rows == 0:
        return b""
    pieces: list = ["{"]
    for i, (name, col) in enumerate(zip(table.column_names, table.columns, strict=True)):
        value = _values(col.combine_chunks())
        if value is None:
            return _row_by_row(table)
        quote, text = value
        key = ("" if i == 0 else ", ") + json.dumps(name, ensure_ascii=False) + ": " + quote
        pieces[-1] += key
        pieces += [text, quote]
    pieces[-1] += "}\n"
    lines = pc.binary_join_element_wise(*pieces, "")
    if isinstance(lines, pa.Scalar):  # every column null
        return lines.as_py().encode() * table.num_rows
    data, lo, hi = _span(lines)
    return data[lo:hi]  # the lines one after the other, as Arrow holds them (no copy)


def _span(arr: pa.Array) -> tuple[pa.Buffer | None, int, int]:
    """A string array's data buffer and where its values lie in it."""
    offsets = np.frombuffer(arr.buffers()[1], np.int32, len(arr) + 1, arr.offset * 4)
    return arr.buffers()[2], int(offsets[0]), int(offsets[-1])


def _row_by_row(table: pa.Table) -> bytes:
    rows = table.to_pylist(maps_as_pydicts="lossy")
    lines = (json.dumps(r, default=str, ensure_ascii=False) for r in rows)
    return "".join(line + "\n" for line in lines).encode()


def json_text(arr: pa.Array) -> pa.Array:
    """Each value of a nested (list, struct, map) array as its JSON text, as a JSON Lines
    output writes it (null for null): how the CSV outputs write a value that has no text
    of its own (``collect_list(w)``: ``["a", "b"]``).  Python per value: such columns are
    aggregates, a value per window."""
    values = arr.to_pylist(maps_as_pydicts="lossy")
    dumps = json.dumps
    return pa.array(
        [None if v is None else dumps(v, default=str, ensure_ascii=False) for v in values],
        pa.string(),
    )


def _null() -> pa.Scalar:
    """JSON's null (made when needed: pyarrow's first scalar imports pandas, 0.14 s)."""
    return pa.scalar("null")


def _values(arr: pa.Array) -> tuple[str, pa.Array | pa.Scalar] | None:
    """Each value's JSON text, and the quote to put around it: ``"`` for strings without
    nulls, else ``''`` with the quotes in the text and ``null`` for a null. None for a type
    not done here."""
    t = arr.type
    if pa.types.is_dictionary(t):
        return _values(arr.dictionary_decode())
    if arr.null_count == len(arr):
        return "", _null()
    if pa.types.is_boolean(t):
        return "", pc.fill_null(pc.if_else(arr, "true", "false"), _null())
    if pa.types.is_integer(t):
        return "", pc.fill_null(arr.cast(pa.string()), _null())
    if pa.types.is_floating(t):
        return "", pc.fill_null(_floats(arr), _null())
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        text = _escaped(arr.cast(pa.string()))  # (a batch: 32-bit offsets, as the pieces')
    elif pa.types.is_date(t):
        text = arr.cast(pa.string())  # 2009-03-01, as Python's str of a date
    else:
        return None
    if arr.null_count == 0:
        return '"', text
    return "", pc.fill_null(pc.binary_join_element_wise('"', text, '"', ""), _null())


def _floats(arr: pa.Array) -> pa.Array:
    text = arr.cast(pa.string())
    v = arr.to_numpy(zero_copy_only=False)  # (a null is NaN here, and stays null below)
    finite = np.isfinite(v)
    if (v[finite] == np.trunc(v[finite])).any():
        # '100' and '-0' are 100.0 and -0.0 in Python: keep them floats for a reader
        whole = pc.invert(pc.match_substring_regex(text, "[.e]"))
        text = pc.if_else(whole, pc.binary_join_element_wise(text, ".0", ""), text)
    if not finite.all():
        special = pc.if_else(
            pc.is_nan(arr), "NaN", pc.if_else(pc.greater(arr, 0), "Infinity", "-Infinity")
        )
        text = pc.if_else(pa.array(finite), text, special)
    return text


def _escaped(arr: pa.Array) -> pa.Array:
    """Strings escaped as json.dumps escapes them (without their quotes)."""
    buf, lo, hi = _span(arr)
    data = np.frombuffer(buf or b"", np.uint8)[lo:hi]
    if not ((data < 0x20) | (data == ord('"')) | (data == ord("\\"))).any():
        return arr
    text = arr
    for i in (ord("\\"), *range(0x20), ord('"')):  # the backslash first
        c = chr(i)
        if (data == i).any():
            text = pc.replace_substring(text, c, _ESCAPES.get(c, f"\\u{i:04x}"))
    return text
