"""``--state DIR``: a run continued from the committed state of the earlier ones.
:func:`state_opener` locks and checks the state before Spark starts (raising
:class:`NothingToDo` for a rerun of the last committed run); :func:`commit_jobs` writes the
outputs and the new state and commits them together (evtime.io.state), or aborts."""

from __future__ import annotations

from dataclasses import dataclass

from evtime.errors import UsageError
from evtime.runner.context import RunContext
from evtime.runner.outputs import OutputArgs, with_dialect
from evtime.runner.publish import before_stdout, write_jobs


class NothingToDo(Exception):
    """The run has nothing to do (a rerun of the last run committed to --state)."""


@dataclass
class Stateful:
    """``--state DIR`` for one run: the locked directory and the committed state."""

    sd: object  # evtime.io.state.StateDir
    st: object  # evtime.io.state.State
    flush: bool
    earlier: object = None  # the input layout of the earlier runs (evtime.io.reader.Layout)
    lay: object = None  # this run's input layout

    @property
    def carried(self) -> int:
        return 0 if self.st.fresh else int(self.st.meta.get("held", 0))

    def read(self, spark, name: str):  # -> DataFrame | None
        """A Parquet file of the committed state (None for a fresh stream), its input
        columns in this run's types (which may be wider than the earlier runs', as one run
        over all the inputs has them: :func:`evtime.io.reader.continued`)."""
        from evtime.io.reader import recarried

        if self.st.fresh:
            return None
        df = self.st.read(spark, name)
        if self.earlier is None or self.lay is None:
            return df
        return recarried(df, self.earlier, self.lay, f"--state {self.sd.shown}: {name}")


def check_state_outputs(args: OutputArgs) -> None:
    """--flush needs --state; --state needs its outputs in files (committed with it)."""
    if args.flush and not args.state:
        raise UsageError("--flush needs --state DIR")
    if args.state:
        from evtime.io.directory import refuse_with_state

        outputs = [("-o", args.output), ("--discards", args.discards)]
        refuse_with_state(args.output_layout, outputs)
        for opt, path in outputs:
            if path == "-":
                raise UsageError(
                    f"--state needs {opt} PATH: standard output cannot be committed together "
                    "with the state"
                )


def state_opener(args: OutputArgs, command: str, options: dict, box: list):
    """A ``before_spark`` hook for :func:`evtime.runner.inputs.start`: lock and recover
    ``--state DIR``, check it was written by this version with these ``options`` and the
    same input columns, whose types are those of one run over all the stream's inputs (the
    earlier runs' types and this run's unified: :func:`evtime.io.reader.continued`);
    appends the :class:`Stateful` to ``box``.  Raises :class:`NothingToDo` for a rerun of
    the last committed run."""
    from evtime.io.state import StateDir, input_record

    def opener(files, lay):
        from evtime.errors import InputError
        from evtime.io.reader import continued

        sd = StateDir(args.state)
        try:
            st = sd.load()
            earlier = None if st.fresh or "layout" not in st.meta else _saved_layout(sd, st)
            conflict = None
            if lay is None:
                lay = earlier if earlier is not None else _saved_layout(sd, st)
            elif earlier is not None and earlier.time_col == lay.time_col:
                # one run over all the stream's inputs unifies their types: so do the runs
                try:
                    lay = continued(earlier, lay, files, f"the earlier runs of --state {sd.shown}")
                except InputError as err:
                    conflict = err  # (after the checks of version, command and options)
            cols = ",".join(lay.schema.names)
            opts = {**options, "input columns": cols, "time column": lay.time_col}
            inputs = input_record(files)
            if sd.check(st, command, opts, inputs):
                raise NothingToDo(
                    f"evtime {command}: the inputs were already read by the last run committed "
                    f"to --state {args.state}: nothing to do"
                )
            if conflict is not None:
                raise conflict
        except BaseException:
            sd.close()
            raise
        st.run = {"options": opts, "inputs": inputs, "layout": _layout_record(lay)}
        box.append(Stateful(sd, st, args.flush, earlier, lay))
        return lay

    return opener


def _layout_record(lay) -> dict:
    import base64

    def b64(schema) -> str:
        return base64.b64encode(schema.serialize().to_pybytes()).decode()

    return {
        "schema": b64(lay.schema),
        "raw": b64(lay.raw if lay.raw is not None else lay.schema),
        "text": lay.text,
        "csv": lay.csv,
        "time": lay.time_col,
        "csv columns": sorted(lay.csv_names),
    }


def _saved_layout(sd, st):
    """The input layout saved in a state (a `--state DIR --flush` run without input)."""
    import base64

    import pyarrow as pa

    from evtime.io.reader import Layout

    if "layout" not in st.meta:
        raise UsageError(f"--state {sd.shown} holds no stream to flush: give the INPUT to read")
    saved = st.meta["layout"]

    def schema(key: str):
        return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(saved[key])))

    # (a state of this version written before the layout kept its union: the types as
    # they were, each a type of its own)
    raw = schema("raw") if "raw" in saved else schema("schema")
    text, csv = saved.get("text", False), saved.get("csv", False)
    kept = schema("schema")
    if "csv columns" in saved:
        csv_names = frozenset(saved["csv columns"])
    else:  # (written before it was kept: the text columns of a CSV stream)
        csv_names = frozenset(f.name for f in kept if csv and pa.types.is_string(f.type))
    return Layout(kept, saved["time"], raw, text, csv, csv_names=csv_names)


def write_and_commit(
    run: RunContext, df, sinks, lay, stf: Stateful, state_sinks, meta: dict
) -> dict[str, int]:
    """:func:`evtime.runner.publish.write_and_publish` with ``--state``: the outputs and
    the new state are committed together (evtime.io.state).  ``state_sinks(gen_dir)`` are
    the sinks of the state's own files; ``meta`` goes to its state.json."""

    def jobs(gen: str) -> list:
        return [(df, [*sinks, *([] if stf.flush else state_sinks(gen))], lay)]

    return commit_jobs(run, sinks, jobs, stf, meta)


def commit_jobs(run: RunContext, sinks, jobs, stf: Stateful, meta: dict) -> dict[str, int]:
    """:func:`write_and_commit` for outputs written from several frames: ``jobs(gen_dir)``
    gives ``(frame, sinks, layout)`` triples, each written by one Spark job; their sinks are
    the outputs ``sinks`` (committed with the state) and the state's own files (in
    ``gen_dir``).  Counts are summed over the jobs; routes ``held`` and ``held:...`` are
    the rows the state holds."""
    from evtime.io import writer
    from evtime.io.crash import crash_point
    from evtime.io.staging import shared_dir

    with_dialect(sinks, run.dialect)
    for s in sinks:
        writer.check_sink(s)
    with shared_dir() as staging:
        try:
            gen = stf.sd.begin(stf.st, sinks, staging)
            placed: dict[str, tuple] = {}
            written = list(jobs(gen))
            counts = write_jobs(run, written, staging)
            before_stdout(run, written)
            for frame, job_sinks, lay in written:
                for s in job_sinks:
                    if any(s is o for o in sinks):
                        placed[s.name] = (lay, frame.schema)
                    else:
                        writer.publish(s, staging, lay, frame.schema)
            crash_point("state-written")
            held = sum(n for r, n in counts.items() if r == "held" or r.startswith("held:"))
            meta = {
                **meta,
                **stf.st.run,
                "command": meta["command"],
                "held": held,
                "ended": stf.flush,
            }
            layouts = [placed[s.name] for s in sinks]
            stf.sd.commit(stf.st, sinks, staging, None, None, meta, layouts)
        except Exception:
            stf.sd.abort()
            raise
        finally:
            stf.sd.close()
        return counts
