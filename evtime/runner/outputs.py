"""A run's outputs before anything is written: -o, --discards and --plot checked before
Spark starts (:func:`check_outputs`), the staging place (:func:`check_staging`), the CSV
dialect (:func:`dialect`, :func:`with_dialect`) and the --discards sink with the columns it
adds (:func:`keep_own`, :func:`discards_sink`).  Usage errors raise
:class:`~evtime.errors.UsageError`; writing is :mod:`evtime.runner.publish`'s."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from evtime.errors import UsageError
from evtime.runner.summary import note_renamed

# the options that name a file a run writes (checked together before Spark starts)
OUTPUT_OPTIONS = (("-o", "output"), ("--discards", "discards"), ("--plot", "plot"))


@dataclass(frozen=True, kw_only=True)
class OutputArgs:
    """The options of a command that writes rows (named as the click commands name them):
    ``-o``, its format and layout, ``--overwrite``, ``--discards``, ``--max-discards``,
    ``--state DIR [--flush]``.  A command's own options extend it."""

    output: str = "-"
    output_format: str | None = None
    overwrite: bool = False
    output_layout: str = "file"
    max_discards: int | None = None
    discards: str | None = None
    state: str | None = None
    flush: bool = False


@dataclass(frozen=True, kw_only=True)
class ExplainArgs:
    """The options of an ``explain`` command's table and picture: ``--format``, ``-o``,
    ``--overwrite``, ``--plot PATH`` and the picture's title (the command as typed)."""

    fmt: str | None = None
    output: str = "-"
    overwrite: bool = False
    plot: str | None = None
    title: str = ""


@dataclass(frozen=True)
class Dialect:
    """The text of the run's CSV outputs (--delimiter / --tsv / --no-header)."""

    delimiter: str = ","
    header: bool = True


def dialect_given(params: Mapping) -> bool:
    """Whether the command was given --delimiter, --tsv or --no-header."""
    p = params
    return bool(p.get("delimiter") is not None or p.get("tsv") or p.get("no_header"))


def output_formats(params: Mapping) -> list[tuple[str, str, str]]:
    """(option, path, format) of the run's -o and --discards (explain's table on a
    terminal: CSV when a CSV option is given, as explain adjust and explain bound choose it)."""
    from evtime.io.writer import output_format

    out = params.get("output")
    forced = params.get("fmt") or params.get("output_format")
    if "fmt" in params and not forced and out in (None, "-"):
        forced = "csv"  # (explain, sweep: a table on a terminal, but for these options)
    found = []
    if out:
        found.append(("-o", out, output_format(out, forced)))
    if params.get("discards"):
        found.append(("--discards", params["discards"], output_format(params["discards"], None)))
    return found


def dialect(params: Mapping) -> Dialect:
    """The run's CSV dialect from its options, checked (a usage error, exit 2): one ASCII
    character (``\\t``: a tab) that is not a quote or a line break; not both --tsv and
    --delimiter; only where an output of the run is CSV (not with an explicit --format
    table)."""
    p = params
    if not dialect_given(p):
        return Dialect()
    given = [o for o, k in (("--delimiter", "delimiter"), ("--tsv", "tsv")) if p.get(k)]
    if p.get("delimiter") is not None and p.get("tsv"):
        raise UsageError("--tsv is --delimiter '\\t': give one of them")
    delim = "\t" if p.get("tsv") else p.get("delimiter")
    if delim is None:
        delim = ","
    if delim == "\\t":
        delim = "\t"
    if len(delim) != 1 or not delim.isascii() or delim in '"\r\n':
        raise UsageError(
            f"--delimiter {delim!r}: give one ASCII character other than a quote or a line "
            "break, e.g. ';' or '|' (\\t, or --tsv, for a tab)"
        )
    opts = " / ".join([*given, *(["--no-header"] if p.get("no_header") else [])])
    formats = output_formats(p)
    if any(f == "table" for _, _, f in formats):
        raise UsageError(f"{opts}: for CSV outputs; --format table is a table for reading")
    if formats and not any(f == "csv" for _, _, f in formats):
        names = {"parquet": "Parquet", "jsonl": "JSON Lines"}
        shown = ", ".join(f"{o} {path} is {names.get(f, f)}" for o, path, f in formats)
        raise UsageError(f"{opts}: for CSV outputs, and this run writes none ({shown})")
    return Dialect(delim, not p.get("no_header"))


def with_dialect(sinks, d: Dialect | None) -> None:
    """The run's CSV dialect ``d`` (None: the default) given to its CSV outputs (evtime's
    own state files are Parquet): the one place the CSV options reach the sinks."""
    if d is None:
        return
    for s in sinks:
        if s.fmt == "csv" and not s.raw:
            s.delimiter, s.header = d.delimiter, d.header


def check_outputs(params: Mapping) -> Dialect | None:
    """The command's -o, --discards and --plot refused before Spark starts when two name
    the same file (a usage error), when one cannot be created (its directory missing or
    not writable), or (-o, --discards) when they exist (without --overwrite); the writer
    checks them again before it writes.  With --state, existing ones are checked once the
    state is read: a rerun of its last committed run writes nothing, whatever is there.
    Returns the CSV dialect the options give (None: none given)."""
    from evtime.io.writer import check_creatable, check_distinct, check_path

    named = [(opt, params.get(key)) for opt, key in OUTPUT_OPTIONS if params.get(key)]
    from evtime.io import directory

    directory.declare(params)  # (--output-layout parts: -o is a directory)
    given = dialect(params) if dialect_given(params) else None  # (a usage error: exit 2)
    check_distinct(named)  # (a usage error: exit 2)
    for opt, path in named:  # every output can be created: before the first Spark job
        check_creatable(path, opt)
    if not params.get("state"):
        for key in ("output", "discards"):
            check_path(params.get(key), bool(params.get("overwrite")))
    return given


def check_staging(sopts, given: str | None, params: Mapping) -> None:
    """Before Spark starts: where the tasks and this process leave each other files
    (evtime.io.staging.configure): ``given`` (--staging) or EVTIME_STAGING, else, with
    tasks on other machines, a prefix beside an object-store output; a staging URL is
    tried once.  Without any, on a cluster, one line that says what to set."""
    from evtime.io.staging import configure

    outputs = [params.get(key) for key in ("output", "discards")]
    configure(given, sopts.elsewhere(), outputs)


def added_name(opt: str, name: str) -> None:
    """Refuse an empty name for a column evtime adds (``--as ''``)."""
    if not name.strip():
        raise UsageError(f"{opt} needs a column name, not {name!r}")


# the columns --discards adds after the row's own
DISCARD_COLUMNS = ("arrival", "reason", "bound")


def keep_own(df, own: list[str]):
    """``df`` with a copy of each of the row's own columns that ``--discards`` adds a
    column of the same name for (made before the operator adds its own), and {column:
    copy} (see :func:`discards_sink`)."""
    copies = {c: f"_evt_own_{c}" for c in DISCARD_COLUMNS if c in own}
    if copies:
        from pyspark.sql import functions as F

        df = df.withColumns({k: F.col(c) for c, k in copies.items()})
    return df, copies


def discards_sink(
    path: str,
    overwrite: bool,
    own: list[str],
    extra: tuple[str, ...] = (),
    ns: tuple[str, ...] = (),
    routes: tuple[str, ...] = ("discard",),
    copies: dict[str, str] | None = None,
    command: str = "",
    texts: tuple[str, ...] = (),
):
    """The ``--discards`` sink: the row's own columns (plus ``extra``), then its arrival
    number, the reason and the bound it missed.  A row's own column named like one of these
    is written as ``row_<name>`` (as explain does), from its copy in ``copies`` (see
    :func:`keep_own`).  The columns in ``texts`` are written from their text as read
    (:attr:`evtime.io.reader.Layout.texts`), the others restored to their input type."""
    from evtime.columns import TEXT
    from evtime.engine.present import renamed
    from evtime.io.writer import Derived, Sink, output_format

    copies = copies or {}
    for name in extra:
        if name in DISCARD_COLUMNS:
            raise UsageError(
                f"--discards adds a column {name!r} after the row's own: name the added "
                f"column {name!r} otherwise (--as / --source-as NAME)"
            )
    clash = [c for c in DISCARD_COLUMNS if c in own and c not in copies and c not in texts]
    if clash:  # (no copy: the operator's own column replaced the row's)
        raise UsageError(f"--discards adds columns {', '.join(clash)} that the input has")
    shown = renamed(list(own), {*DISCARD_COLUMNS, *extra})
    note_renamed(f"{command} --discards".strip(), shown)
    return Sink(
        "discards",
        routes,
        path,
        output_format(path, None),
        [*(s for _, s in shown), *extra, *DISCARD_COLUMNS],
        [*ns, "bound"],
        overwrite,
        derived={
            **{s: Derived(copies[c]) for c, s in shown if c != s and c not in texts},
            **{s: Derived(TEXT + c) for c, s in shown if c in texts},
        },
        own={s: c for c, s in shown if c not in texts},
    )
