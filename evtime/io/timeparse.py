"""Time-column parsing: anything accepted by SPEC §1 -> int64 ns since the Unix epoch, UTC.

Everything is vectorised (no per-row Python) and exact to the nanosecond: nothing goes through
float (except float epoch input, rounded to the nearest ns) or microseconds. ISO strings and
patterns are read by a small scanner that moves one cursor per row through a token grammar
with numpy byte gathers; epoch strings by an Arrow (RE2) regex split at the decimal point;
calendar dates by Howard Hinnant's days_from_civil.

Choices:
* Naive wall times (naive timestamps, dates, ISO/pattern strings without an offset) are UTC,
  or in the IANA zone ``tz`` when given. An explicit offset in the string wins over ``tz``.
  Ambiguous local times (DST fall-back) take the *earliest* instant; non-existent local times
  (inside a DST gap) become null.
* Unparseable strings, out-of-range fields (month 13, Feb 30, 24:00, second 60), more than 9
  fraction digits and values outside the int64-ns range (1677-09-21T00:12:43.145224192Z ..
  2262-04-11T23:47:16.854775807Z) become null. Leading/trailing whitespace is ignored.
* ISO: ``yyyy-M-d``, optionally ``T``/``t``/space ``H:mm[:ss[(.|,)f{1,9}]]``, optionally
  ``Z`` or ``±HH[[:]MM]``. Not accepted: week/ordinal dates, ``24:00``, leap second 60,
  a space before the offset, zone names like ``UTC``.
* Timestamp/date columns are converted whatever ``fmt`` says. With a pattern, integer columns
  are read as their decimal text (``yyyyMMdd`` on 20090301 works).
* Epoch strings: ``[+-]digits[.digits]``; digits finer than 1 ns are rounded half away from 0.
  No exponent notation. Float epoch columns are only as exact as float64 (~0.2 us today for
  epoch_s): read such columns as strings or decimals to keep every digit.
* Pattern letters: ``yyyy``/``uuuu``, ``M``/``MM``, ``d``/``dd``, ``H``/``HH``, ``m``/``mm``,
  ``s``/``ss``, ``S``..``SSSSSSSSS`` (up to that many fraction digits, right-padded), and
  ``X``/``XX``/``XXX``/``x..``/``Z..`` (each accepts ``Z``, ``±HH``, ``±HHMM``, ``±HH:MM``).
  Any other letter is an error; quote literal letters with ``'...'`` (``''`` is a quote).
  Fields missing from the pattern default to 1970-01-01 00:00:00. Digit fields are matched
  greedily without backtracking (fine for fixed widths such as ``yyyyMMddHHmmss``).
"""

from __future__ import annotations

import zoneinfo
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evtime.units import UNITS

__all__ = ["EPOCH_FORMATS", "NUMERIC_ERROR", "check_format", "format_ns", "to_ns"]

NS = 1_000_000_000
_I64_MAX = 2**63 - 1
EPOCH_FORMATS = {"epoch_s": 10**9, "epoch_ms": 10**6, "epoch_us": 10**3, "epoch_ns": 1}
_POW10 = 10 ** np.arange(19, dtype=np.int64)
_UNIT_NS = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
NUMERIC_ERROR = "numeric time column needs --time-format epoch_s|epoch_ms|epoch_us|epoch_ns"

# Grammar tokens for the vectorised _Scanner:
#   ("num", field, min_digits, max_digits) | ("lit", allowed_bytes) | ("off",) | ("opt", [tokens])
_Tok = tuple
_ISO: list[_Tok] = [
    ("num", "y", 4, 4), ("lit", b"-"), ("num", "M", 1, 2), ("lit", b"-"), ("num", "d", 1, 2),
    ("opt", [("lit", b"Tt "), ("num", "H", 1, 2), ("lit", b":"), ("num", "m", 2, 2),
             ("opt", [("lit", b":"), ("num", "s", 2, 2),
                      ("opt", [("lit", b".,"), ("num", "S", 1, 9)])])]),
    ("opt", [("off",)]),
]  # fmt: skip
_EPOCH = r"^\s*(?P<sign>[+-]?)0*(?P<i>\d{1,19})(?:\.(?P<f>\d*))?\s*$"
_FIELDS = dict(y="y", u="y", M="M", d="d", H="H", m="m", s="s", S="S", X="tz", x="tz", Z="tz")


def _lits(text: str) -> list[_Tok]:
    return [("lit", bytes([b])) for b in text.encode()]


@lru_cache(maxsize=64)
def _compile(fmt: str) -> tuple[_Tok, ...]:
    """Java/Spark datetime pattern -> scanner tokens (ValueError if unusable)."""
    out: list[_Tok] = []
    seen: set[str] = set()
    i, n = 0, len(fmt)
    while i < n:
        c = fmt[i]
        if c == "'":
            j, lit = i + 1, []
            while True:
                if j >= n:
                    raise ValueError(f"--time-format {fmt!r}: unterminated quote")
                if fmt[j] == "'":
                    if j + 1 < n and fmt[j + 1] == "'":
                        lit.append("'")
                        j += 2
                        continue
                    break
                lit.append(fmt[j])
                j += 1
            out += _lits("".join(lit) if lit or j > i + 1 else "'")
            i = j + 1
            continue
        if not (c.isascii() and c.isalpha()):
            out += _lits(c)
            i += 1
            continue
        j = i
        while j < n and fmt[j] == c:
            j += 1
        cnt, field = j - i, _FIELDS.get(c)
        bad = f"--time-format {fmt!r}: "
        if field is None:
            raise ValueError(
                f"{bad}unsupported pattern letter {c!r} (supported: yyyy MM dd HH mm ss"
                " S..S X/XXX/Z; quote literal letters as '...')"
            )
        if field in seen:
            raise ValueError(f"{bad}field {c!r} appears twice")
        seen.add(field)
        if field == "y" and cnt != 4:
            raise ValueError(f"{bad}year must be written {c * 4!r}")
        if field == "S" and cnt > 9:
            raise ValueError(f"{bad}at most 9 fraction digits (S)")
        if field not in ("y", "S", "tz") and cnt > 2:
            raise ValueError(f"{bad}{c * cnt!r} is not supported (use {c * 2!r})")
        if field == "tz":
            out.append(("off",))
        else:
            lo, hi = {"y": (4, 4), "S": (1, cnt)}.get(field, (cnt, 2))
            out.append(("num", field, lo, hi))
        i = j
    if not seen:
        raise ValueError(f"--time-format {fmt!r}: no date/time fields in pattern")
    return tuple(out)


def check_format(fmt: str | None) -> None:
    """Raise ValueError with a clear one-line message for an unusable --time-format."""
    if fmt is None or fmt == "iso" or fmt in EPOCH_FORMATS:
        return
    if not fmt.strip():
        raise ValueError(
            "--time-format must not be empty (use iso, epoch_s|epoch_ms|epoch_us|epoch_ns "
            "or a pattern like yyyy/MM/dd HH:mm:ss:SSSSSSSSS)"
        )
    _compile(fmt)


def _check_tz(tz: str) -> None:
    try:
        zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"--tz {tz!r}: unknown IANA time zone") from exc


def _np(arr: pa.Array) -> np.ndarray:
    return np.asarray(arr.to_numpy(zero_copy_only=False))


def _ints(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(values as int64 numpy with nulls zeroed, validity mask)."""
    ok = _np(arr.is_valid())
    return _np(arr.fill_null(0)), ok


def _scale(raw: np.ndarray, factor: int, ok: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """raw * factor exactly, ok cleared where it would leave int64."""
    ok = ok & (raw >= -(2**63 // factor)) & (raw <= _I64_MAX // factor)
    return np.where(ok, raw, 0).astype(np.int64) * np.int64(factor), ok


def _localize(raw: np.ndarray, unit: str, ok: np.ndarray, tz: str) -> tuple[np.ndarray, np.ndarray]:
    """Naive wall-clock values in `tz` (timestamp unit `unit`) -> UTC values in the same unit."""
    naive = pa.array(np.where(ok, raw, 0), pa.timestamp(unit), mask=~ok)
    aware = pc.assume_timezone(naive, timezone=tz, ambiguous="earliest", nonexistent="earliest")
    back = pc.local_timestamp(aware).cast(pa.int64())  # differs from input only inside a DST gap
    same = _np(pc.fill_null(pc.equal(back, naive.cast(pa.int64())), False))
    out, _ = _ints(aware.cast(pa.int64()))
    return out, ok & same


def _from_timestamp(arr: pa.Array, tz: str | None) -> pa.Array:
    if pa.types.is_date32(arr.type):
        days, ok = _ints(arr.cast(pa.int32()))
        raw, unit, tz_aware = days.astype(np.int64) * 86400, "s", False
    elif pa.types.is_date64(arr.type):
        (raw, ok), unit, tz_aware = _ints(arr.cast(pa.int64())), "ms", False
    else:
        (raw, ok), unit, tz_aware = (
            _ints(arr.cast(pa.int64())),
            arr.type.unit,
            arr.type.tz is not None,
        )
    if tz and not tz_aware:
        raw, ok = _localize(raw, unit, ok, tz)
    ns, ok = _scale(raw, _UNIT_NS[unit], ok)
    return pa.array(ns, pa.int64(), mask=~ok)


def _from_numbers(arr: pa.Array, factor: int) -> pa.Array:
    if pa.types.is_floating(arr.type):
        x, ok = _ints(arr.cast(pa.float64()))
        with np.errstate(invalid="ignore", over="ignore"):
            x = x * float(factor)
            ok = ok & np.isfinite(x) & (np.abs(x) < 2.0**63)
        return pa.array(np.rint(np.where(ok, x, 0.0)).astype(np.int64), pa.int64(), mask=~ok)
    raw, ok = _ints(arr)
    if raw.dtype == np.uint64:
        ok = ok & (raw <= np.uint64(_I64_MAX))
        raw = np.where(ok, raw, 0).astype(np.int64)
    ns, ok = _scale(raw.astype(np.int64), factor, ok)
    return pa.array(ns, pa.int64(), mask=~ok)


def _from_epoch_strings(arr: pa.Array, factor: int) -> pa.Array:
    st = pc.extract_regex(arr, _EPOCH)
    ok = _np(st.is_valid())
    neg = _np(pc.fill_null(pc.equal(pc.struct_field(st, "sign"), "-"), False))
    ipart = _np(pc.utf8_lpad(pc.fill_null(pc.struct_field(st, "i"), ""), 1, "0").cast(pa.uint64()))
    p = len(str(factor)) - 1  # fraction digits that are >= 1 ns
    f = pc.utf8_rpad(pc.fill_null(pc.struct_field(st, "f"), ""), p + 1, "0")
    fp = pc.utf8_lpad(pc.utf8_slice_codeunits(f, 0, p), 1, "0").cast(pa.uint64()).to_numpy()
    rnd = pc.utf8_slice_codeunits(f, p, p + 1).cast(pa.uint64()).to_numpy() >= 5
    frac = np.asarray(fp, np.uint64) + rnd.astype(np.uint64)
    qlo, rlo = divmod(2**63, factor)  # magnitude limit for negatives
    qhi, rhi = divmod(_I64_MAX, factor)
    q, r = (
        np.where(neg, np.uint64(qlo), np.uint64(qhi)),
        np.where(neg, np.uint64(rlo), np.uint64(rhi)),
    )
    ok = ok & ((ipart < q) | ((ipart == q) & (frac <= r)))
    mag = np.where(ok, ipart, np.uint64(0)) * np.uint64(factor) + np.where(ok, frac, np.uint64(0))
    ns = np.where(neg, np.uint64(0) - mag, mag).view(np.int64)
    return pa.array(ns, pa.int64(), mask=~ok)


def _days_from_civil(y: np.ndarray, m: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Howard Hinnant's days_from_civil, vectorised (proleptic Gregorian)."""
    y = y - (m <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * np.where(m > 2, m - 3, m + 9) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


class _Scanner:
    """Match all rows of a string array against a token grammar at once (greedy, no backtracking).

    One cursor per row; each token is a handful of numpy operations over all rows.
    """

    def __init__(self, arr: pa.Array) -> None:
        # Trim, then end every string with NUL: no token matches NUL, so a cursor never passes
        # it, and digit runs stop there (reads up to 9 bytes past it hit padding or later rows).
        arr = pc.utf8_trim_whitespace(arr.cast(pa.large_string()))
        nul = pa.scalar("\0", pa.large_string())
        arr = pc.binary_join_element_wise(arr, nul, pa.scalar("", pa.large_string()))
        n, (_, offs, data) = len(arr), arr.buffers()
        offsets = np.frombuffer(offs, np.int64)[arr.offset : arr.offset + n + 1]
        raw = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
        self.data = np.concatenate([raw, np.zeros(16, np.uint8)])
        self.cur, self.end = offsets[:-1].copy(), offsets[1:] - 1  # end: the NUL
        self.ok = _np(arr.is_valid()).copy()
        self.fields: dict[str, np.ndarray] = {}

    def char(self, k: int = 0) -> np.ndarray:
        return self.data[self.cur + k]

    def starts(self, tok: _Tok) -> np.ndarray:
        allowed = tok[1] if tok[0] == "lit" else b"Zz+-" if tok[0] == "off" else b"0123456789"
        table = np.zeros(256, bool)
        table[np.frombuffer(allowed, np.uint8)] = True
        return table[self.char()]

    def num(self, name: str, lo: int, hi: int, act: np.ndarray) -> None:
        """Greedy run of lo..hi digits at the cursor (rows in `act`) -> field `name`."""
        val, cnt, run = np.zeros(len(act), np.int64), np.zeros(len(act), np.int64), act.copy()
        for k in range(hi):
            d = self.char(k) - np.uint8(48)  # uint8: non-digits wrap to > 9
            run &= d <= 9
            val *= 10
            val += d * run
            cnt += run
        val //= _POW10[hi - cnt]  # drop the zeros standing in for absent digits
        if name == "S":  # fraction of a second: right-pad to 9 digits
            val *= _POW10[9 - cnt]
        self.ok &= ~act | (cnt >= lo)
        self.cur += cnt
        self.fields[name] = np.where(act, val, self.fields.get(name, 0))

    def run(self, toks: list[_Tok] | tuple[_Tok, ...], act: np.ndarray) -> None:
        for tok in toks:
            act = act & self.ok
            if tok[0] == "opt":
                self.run(tok[1], act & self.starts(tok[1][0]))
            elif tok[0] == "lit":
                self.ok &= ~act | self.starts(tok)
                self.cur += act
            elif tok[0] == "num":
                self.num(tok[1], tok[2], tok[3], act)
            else:  # offset: Z | [+-]HH | [+-]HHMM | [+-]HH:MM
                c = self.char()
                z, sg = (
                    act & ((c == 90) | (c == 122)),
                    act & ((c == 43) | (c == 45)),
                )
                self.ok &= ~act | z | sg
                self.fields["tz"] = act & (z | sg)
                self.fields["sign"] = np.where(sg & (c == 45), -1, 1)
                self.cur += z | sg
                self.num("oh", 2, 2, sg)
                colon = sg & (self.char() == 58)
                self.cur += colon
                self.num("om", 2, 2, colon | (sg & self.starts(("num",))))

    def fields_or(self, name: str, default: int) -> np.ndarray:
        return self.fields.get(name, np.full(len(self.ok), default, np.int64))


def _from_fields(arr: pa.Array, toks: list[_Tok] | tuple[_Tok, ...], tz: str | None) -> pa.Array:
    sc = _Scanner(arr)
    sc.run(toks, sc.ok.copy())
    ok = sc.ok & (sc.cur == sc.end)
    y, mo, d = sc.fields_or("y", 1970), sc.fields_or("M", 1), sc.fields_or("d", 1)
    hh, mi, ss, frac = (sc.fields_or(k, 0) for k in ("H", "m", "s", "S"))
    leap = (y % 4 == 0) & ((y % 100 != 0) | (y % 400 == 0))
    dim = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])[np.clip(mo, 0, 12)]
    dim = dim + ((mo == 2) & leap)
    ok &= (mo >= 1) & (mo <= 12) & (d >= 1) & (d <= dim) & (hh <= 23) & (mi <= 59) & (ss <= 59)
    secs = _days_from_civil(y, mo, d) * 86400 + hh * 3600 + mi * 60 + ss
    has_off = sc.fields.get("tz", np.zeros(len(ok), bool))
    if "tz" in sc.fields:
        oh, om = sc.fields_or("oh", 0), sc.fields_or("om", 0)
        ok &= (oh <= 18) & (om <= 59)
        secs = secs - sc.fields["sign"] * (oh * 3600 + om * 60)  # 'Z' gives oh = om = 0
    if tz and not has_off.all():
        local, lok = _localize(secs, "s", ok & ~has_off, tz)
        secs = np.where(has_off, secs, local)
        ok = np.where(has_off, ok, lok)
    return _combine(secs, frac, ok)


def _combine(secs: np.ndarray, frac: np.ndarray, ok: np.ndarray) -> pa.Array:
    """secs * 1e9 + frac (frac in [0, 1e9)) exactly; null where outside int64."""
    (lo_s, lo_f), (hi_s, hi_f) = divmod(-(2**63), NS), divmod(_I64_MAX, NS)
    ok = ok & ((secs > lo_s) | ((secs == lo_s) & (frac >= lo_f)))
    ok &= (secs < hi_s) | ((secs == hi_s) & (frac <= hi_f))
    secs, frac = np.where(ok, secs, 0), np.where(ok, frac, 0)
    ns = np.where(
        secs < 0, (secs + 1) * NS + (frac - NS), secs * NS + frac
    )  # no intermediate overflow
    return pa.array(ns, pa.int64(), mask=~ok)


def to_ns(
    values: pa.Array | pa.ChunkedArray, fmt: str | None = None, tz: str | None = None
) -> pa.Array:
    """int64 ns since epoch UTC; null where the input is null or cannot be parsed.

    (The caller reports the first bad row.) Raises ValueError for an unusable `fmt`, an
    unknown `tz`, numeric input without an epoch format, or an unsupported column type.
    """
    check_format(fmt)
    if tz:
        _check_tz(tz)
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    t = arr.type
    if pa.types.is_null(t):
        return pa.nulls(len(arr), pa.int64())
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        return _from_timestamp(arr, tz)
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        if fmt in EPOCH_FORMATS:
            if pa.types.is_decimal(t):  # exact decimal text, e.g. 1236000000.345678901
                return _from_epoch_strings(arr.cast(pa.string()), EPOCH_FORMATS[fmt])
            return _from_numbers(arr, EPOCH_FORMATS[fmt])
        if fmt not in (None, "iso") and pa.types.is_integer(t):
            return _from_fields(arr.cast(pa.string()), _compile(fmt), tz)
        raise ValueError(NUMERIC_ERROR)
    if pa.types.is_string_view(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        arr = arr.cast(pa.string())
    elif not (pa.types.is_string(t) or pa.types.is_large_string(t)):
        raise ValueError(f"time column of type {t} cannot be read as a time")
    if fmt in EPOCH_FORMATS:
        return _from_epoch_strings(arr, EPOCH_FORMATS[fmt])
    if fmt in (None, "iso"):
        fast = _iso_by_arrow(arr, tz)
        if fast is not None:
            return fast
    return _from_fields(arr, _ISO if fmt in (None, "iso") else _compile(fmt), tz)


def _iso_by_arrow(arr: pa.Array, tz: str | None) -> pa.Array | None:
    """ISO strings read by Arrow's own cast (50 times faster than the scanner) when it reads
    every one of them: all without an offset (and no ``tz``), or all with one; else None.
    Where Arrow reads a string it reads it as the scanner does (tests/test_timeparse.py),
    except a time with an hour and no minutes, which the grammar does not accept."""
    first = arr.drop_null()[:1]
    for typ in [pa.timestamp("ns")] * (tz is None) + [pa.timestamp("ns", "UTC")]:
        try:  # the first value says which cast to try (a failed cast reads on to the end)
            first.cast(typ)
            ns = arr.cast(typ)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue  # (spaces, bad values, ...: the scanner says which)
        hour = len("2009-03-01T12")  # no ':' after it: no minutes
        cut = pc.utf8_slice_codeunits(arr, hour, hour + 1)
        no_minutes = pc.and_(pc.greater_equal(pc.binary_length(arr), hour), pc.not_equal(cut, ":"))
        return None if pc.any(no_minutes).as_py() else ns.cast(pa.int64())
    return None


ISO_WIDTH = len("2009-03-01T12:15:22.345678901Z")


def format_ns(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """int64 ns (or timestamp) -> ISO-8601 UTC strings, exactly 9 fraction digits and 'Z'.

    E.g. '2009-03-01T12:15:22.345678901Z'; null stays null. Naive timestamps are UTC.
    """
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if not pa.types.is_integer(arr.type):
        arr = to_ns(arr)  # timestamps / dates (naive = UTC)
    arr = arr.cast(pa.int64())
    n = len(arr)
    if n * ISO_WIDTH >= 1 << 31:  # (beyond 32-bit string offsets: never a Spark batch)
        return _arrow_text(arr)
    text = iso_bytes(pc.fill_null(arr, 0).to_numpy(zero_copy_only=False))
    valid = arr.is_valid().buffers()[1] if arr.null_count else None
    offsets = np.arange(0, (n + 1) * ISO_WIDTH, ISO_WIDTH, dtype=np.int32)
    return pa.Array.from_buffers(
        pa.string(), n, [valid, pa.py_buffer(offsets), pa.py_buffer(text)], arr.null_count
    )


def _arrow_text(arr: pa.Array) -> pa.Array:
    """:func:`format_ns` of int64 ``arr`` by Arrow's own text of a ns timestamp."""
    text = pc.fill_null(arr, 0).cast(pa.timestamp("ns")).cast(pa.string())
    iso = pc.binary_join_element_wise(pc.utf8_replace_slice(text, 10, 11, "T"), "Z", "")
    return pc.if_else(arr.is_valid(), iso, pa.scalar(None, pa.string()))


def iso_bytes(v: np.ndarray) -> np.ndarray:
    """The text :func:`format_ns` gives for the int64 ns ``v``, :data:`ISO_WIDTH` bytes a
    value one after the other, made with numpy from tables: the date of each day between
    the least and the greatest (Arrow's text of a date: four-digit years for every int64
    ns), ``THH:MM:SS.`` of each second of a day, four digits of each number below 10,000.
    The text is put together as 8-byte words (little-endian), ``_STEP`` values at a time:
    about a third of the time of Arrow's timestamp-to-text cast, which every text output's
    times paid."""
    out = np.empty(len(v) * ISO_WIDTH, np.uint8)
    if not len(v):
        return out
    first, last = int(v.min()) // UNITS["day"], int(v.max()) // UNITS["day"]
    dates = _dates(first, last)
    for start in range(0, len(v), _STEP):
        _iso_step(v[start : start + _STEP], out, start * ISO_WIDTH, dates, first)
    return out


_STEP = 1 << 16  # values made at a time (their temporaries stay in the cache)
_WORD = np.dtype("<u8")
_DAY_S = UNITS["day"] // NS  # seconds of a day


def _iso_step(v: np.ndarray, out: np.ndarray, at: int, dates: np.ndarray, first: int) -> None:
    """The text of ``v`` into ``out`` from byte ``at`` (see :func:`iso_bytes`)."""
    n = len(v)
    secs = v // NS  # (floored; int64 wraps in the products, not in the results)
    frac = (v - secs * NS).astype(np.int32)
    days = secs // _DAY_S
    clock = secs - days * _DAY_S
    day = days - first
    high = frac // 100_000  # the fraction's digits 1-4
    low = frac - high * 100_000
    mid = low // 10  # digits 5-8
    ninth = low - mid * 10
    tables = _tables()

    def word(offset: int) -> np.ndarray:  # bytes offset..offset+7 of every value's text
        return np.ndarray((n,), _WORD, out, at + offset, (ISO_WIDTH,))

    # 'yyyy-MM-' 'ddTHH:MM' ':SS.ffff' 'fffffZ': bytes 0, 8, 16 and 22 (whose first two,
    # fraction digits 3-4, the word at 16 writes again)
    word(22)[:] = tables.four_at_2[mid] | tables.ninth[ninth]
    word(0)[:] = dates[:, 0][day]
    word(8)[:] = dates[:, 1][day] | tables.hours_minutes[clock]
    word(16)[:] = tables.seconds[clock] | tables.four_at_4[high]


@lru_cache(maxsize=4)
def _dates(first: int, last: int) -> np.ndarray:
    """Two words a day from ``first`` to ``last`` (days since 1970-01-01): ``yyyy-MM-`` and
    ``dd`` (the rest zero); at most the 213,503 days of the int64 ns timeline (3.4 MB)."""
    k = last - first + 1
    text = pa.array(np.arange(first, last + 1, dtype=np.int32), pa.date32()).cast(pa.string())
    rows = np.zeros((k, 16), np.uint8)
    rows[:, :10] = np.frombuffer(text.buffers()[2], np.uint8, k * 10).reshape(k, 10)
    return rows.view(_WORD)


@dataclass(frozen=True)
class _Tables:
    hours_minutes: np.ndarray  # per second of a day: 'THH:MM' at bytes 2-7
    seconds: np.ndarray  # per second of a day: ':SS.' at bytes 0-3
    four_at_4: np.ndarray  # per number below 10,000: its four digits at bytes 4-7
    four_at_2: np.ndarray  # ... at bytes 2-5
    ninth: np.ndarray  # per digit: it at byte 6, 'Z' at byte 7


@lru_cache(maxsize=1)
def _tables() -> _Tables:
    def words(chars: dict[int, np.ndarray | str], n: int) -> np.ndarray:
        rows = np.zeros((n, 8), np.uint8)
        for place, c in chars.items():
            rows[:, place] = ord(c) if isinstance(c, str) else c
        return rows.view(_WORD).ravel()

    s = np.arange(_DAY_S)
    h, m, sec = s // 3600, s // 60 % 60, s % 60
    d = [h // 10, h % 10, m // 10, m % 10, sec // 10, sec % 10]
    hm = {2: "T", 3: d[0] + 48, 4: d[1] + 48, 5: ":", 6: d[2] + 48, 7: d[3] + 48}
    q = np.arange(10_000)
    four = [q // 1000 + 48, q // 100 % 10 + 48, q // 10 % 10 + 48, q % 10 + 48]
    return _Tables(
        hours_minutes=words(hm, _DAY_S),
        seconds=words({0: ":", 1: d[4] + 48, 2: d[5] + 48, 3: "."}, _DAY_S),
        four_at_4=words(dict(zip(range(4, 8), four, strict=True)), 10_000),
        four_at_2=words(dict(zip(range(2, 6), four, strict=True)), 10_000),
        ninth=words({6: np.arange(10) + 48, 7: "Z"}, 10),
    )


# per unit (ns): the places of format_ns's text that truncating a time to it sets to 0
_ZEROED = {
    1_000: [*range(26, 29)],
    1_000_000: [*range(23, 29)],
    1_000_000_000: [*range(20, 29)],
    60_000_000_000: [17, 18, *range(20, 29)],
    3_600_000_000_000: [14, 15, 17, 18, *range(20, 29)],
    86_400_000_000_000: [11, 12, 14, 15, 17, 18, *range(20, 29)],
}


def truncated_text(iso: pa.Array, unit: int) -> pa.Array | None:
    """The text :func:`format_ns` gives for times truncated to ``unit`` ns (floored: ``t -
    t mod unit``, every unit of evtime.units.UNITS), from its text of the times ``iso``: the
    digits below the unit set to 0 (UTC fields are floors of the time too).  None when
    ``iso`` is not that text of fixed width (years beyond four digits), or the unit is
    another."""
    if unit == 1:
        return iso
    zeroed = _ZEROED.get(unit)
    valid, offsets, data = iso.buffers()
    n = len(iso)
    if zeroed is None or iso.offset or n * ISO_WIDTH >= 1 << 31:
        return None
    if np.frombuffer(offsets, np.int32, n + 1)[-1] != n * ISO_WIDTH:
        return None
    rows = np.frombuffer(data, np.uint8, n * ISO_WIDTH).reshape(n, ISO_WIDTH).copy()
    rows[:, zeroed] = ord("0")
    return pa.Array.from_buffers(
        pa.string(),
        n,
        [valid if iso.null_count else None, offsets, pa.py_buffer(rows)],
        iso.null_count,
    )
