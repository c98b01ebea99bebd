"""CSV outputs quote a value only where it needs quotes, byte for byte as Python's csv module
(QUOTE_MINIMAL) writes the same rows, so that awk, cut and friends read them."""

from __future__ import annotations

import csv
import io

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from evtime.io import csvtext

AWKWARD = st.text(alphabet=st.sampled_from(list("ab ,;\"\t\r\n'é")), max_size=6)
DELIMITERS = st.sampled_from([",", "\t", ";", "|"])


def _python_csv(names, rows, delimiter: str) -> bytes:
    """Python's csv module, default dialect (QUOTE_MINIMAL; a CR or LF in a value is
    quoted), with each line ending in LF instead of CRLF."""
    lines = []
    for row in [names, *rows]:
        out = io.StringIO()
        csv.writer(out, delimiter=delimiter).writerow(["" if v is None else v for v in row])
        assert out.getvalue().endswith("\r\n")
        lines.append(out.getvalue()[:-2] + "\n")
    return "".join(lines).encode()


@settings(deadline=None, max_examples=300)  # (pure Python: cheap)
@given(
    names=st.lists(AWKWARD.filter(bool), min_size=1, max_size=3, unique=True),
    data=st.data(),
    delimiter=DELIMITERS,
)
def test_text_columns_are_written_as_pythons_csv_writes_them(names, data, delimiter):
    rows = data.draw(
        st.lists(st.tuples(*[st.one_of(st.none(), AWKWARD) for _ in names]), max_size=8)
    )
    table = pa.table({n: pa.array([r[i] for r in rows], pa.string()) for i, n in enumerate(names)})
    got = csvtext.encode(table, delimiter, include_header=True)
    assert got == _python_csv(names, rows, delimiter)


@settings(deadline=None, max_examples=200)
@given(
    values=st.lists(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)), max_size=8),
    offset=st.integers(0, 3),
)
def test_numbers_are_bare_and_slices_are_their_own_rows(values, offset):
    table = pa.table({"n": pa.array(values, pa.int64()), "s": pa.array(["x,y"] * len(values))})
    part = table.slice(min(offset, len(values)))
    rows = [(v, "x,y") for v in values[min(offset, len(values)) :]]
    assert csvtext.encode(part) == b"".join(_python_csv(["n", "s"], rows, ",").splitlines(True)[1:])
