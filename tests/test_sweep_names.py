"""``evtime sweep`` over inputs whose columns are named like the columns the sweep computes
or writes (issue 47): the user's columns are read as they are (a key named ``arrival`` is
still the user's key, not the arrival number), so the table is the one the same input gives
with the column named otherwise."""

from __future__ import annotations

import pytest

NAMES = ["arrival", "released", "discarded", "held_at_end", "max_hold_rows", "range", "window"]
ROWS = [("a", 10), ("b", 3), ("a", 12), ("b", 1), ("a", 5), ("b", 9), ("a", 20), ("b", 2)]


def _write(path, name: str) -> None:
    lines = [f"{name},time,n"]
    lines += [f"{k},{t},{i}" for i, (k, t) in enumerate(ROWS)]
    path.write_text("\n".join(lines) + "\n")


def _table(run_cli, path, name: str, command: list[str]) -> list[dict]:
    r = run_cli("sweep", *command, "--key", name, "--time-format", "epoch_s",
                "--format", "csv", path)  # fmt: skip
    assert r.exit_code == 0, (name, r.stderr)
    return r.csv()


@pytest.mark.parametrize(
    "command",
    [
        ["adjust", "--unit", "sec", "--range", "0,3"],
        ["bound", "--window", "5s,10s"],
        ["bound", "--window", "5s", "--bounds", "cti", "--cti-every", "1", "--cti-delay", "0s,4s"],
    ],  # fmt: skip
    ids=["adjust", "bound-window", "bound-cti"],
)
def test_sweep_key_named_like_a_sweep_column(run_cli, tmp_path, command):
    plain = tmp_path / "plain.csv"
    _write(plain, "k")
    want = _table(run_cli, plain, "k", command)
    for name in NAMES:
        path = tmp_path / f"{name}.csv"
        _write(path, name)
        assert _table(run_cli, path, name, command) == want, name
