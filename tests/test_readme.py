"""Every ``console`` block of the README, run as written, in order, in a copy of
``samples/`` (sqlite-utils' habit: the docs are tested): what it prints must be what the
README shows, so the tour cannot break again.

A step that is one plain ``evtime …`` command (no pipe, loop, expansion or glob) runs in this
process on the test session's Spark (``tests.where.invoke``: the CLI as click runs it, with
the same arguments), the rest through ``bash``; the first step always runs the installed
script in a subprocess, as a user's first command does.  (Each subprocess starts a JVM:
with every step one, this test took four minutes.)

A block is ``$ command`` lines (continued by ``> `` lines or a trailing backslash), each
followed by what the command prints: standard output, then standard error.  Run times in
summaries (``(9.8s)``) are not compared.  ``EVTIME_README_UPDATE=1`` rewrites the README
with what the commands print (then read the diff before committing it)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.cli

README = ROOT / "README.md"
BLOCK = re.compile(r"^```console\n(.*?)^```\n", re.S | re.M)
SECONDS = re.compile(r"\(\d+(\.\d+)?s\)")


@dataclass
class Step:
    command: str  # as given to bash
    lines: list[str]  # the command as the README shows it
    printed: str  # what the README shows it prints


def steps(block: str) -> list[Step]:
    out: list[Step] = []
    lines = block.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        assert line.startswith("$ "), f"README console block: expected '$ ', got {line!r}"
        shown, cmd = [line], [line[2:]]
        i += 1
        while cmd[-1].endswith("\\") or (i < len(lines) and lines[i].startswith("> ")):
            shown.append(lines[i])
            cmd.append(lines[i][2:] if lines[i].startswith("> ") else lines[i])
            i += 1
        printed = []
        while i < len(lines) and not lines[i].startswith("$ "):
            printed.append(lines[i])
            i += 1
        out.append(Step("\n".join(cmd), shown, "\n".join(printed)))
    return out


SHELL = re.compile(r"[|;&<>$`*?~(){}\[\]]")


def in_process(command: str) -> list[str] | None:
    """The arguments of a step that is one plain ``evtime`` command, else None."""
    flat = command.replace("\\\n", " ")
    if "\n" in flat or SHELL.search(re.sub(r"'[^']*'", "", flat)):
        return None
    words = shlex.split(flat)
    return words[1:] if words[:1] == ["evtime"] else None


def _normal(text: str) -> str:
    return SECONDS.sub("(…s)", text.rstrip("\n"))


def test_every_console_block_prints_what_the_readme_shows(tmp_path, cli_env, spark, monkeypatch):
    from tests.where import invoke

    text = README.read_text()
    blocks = BLOCK.findall(text)
    assert len(blocks) >= 8, "the README's console blocks were not found"
    shutil.copytree(ROOT / "samples", tmp_path / "samples")
    env = dict(cli_env, PATH=os.pathsep.join([str(Path(sys.executable).parent), cli_env["PATH"]]))
    env.pop("COLUMNS", None)
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.chdir(tmp_path)
    update = os.environ.get("EVTIME_README_UPDATE") == "1"
    made, wrong, here = [], [], 0
    for block in blocks:
        shown = []
        for step in steps(block):
            args = in_process(step.command) if made or shown else None
            if args is not None:
                _, out, err, exc = invoke(args, None)
                assert exc is None, f"$ {step.command}\n{exc!r}"
                got, here = out + err, here + 1
            else:
                p = subprocess.run(
                    ["bash", "-c", step.command],
                    cwd=tmp_path,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
                got = p.stdout + p.stderr
            if _normal(got) != _normal(step.printed):
                wrong.append(f"$ {step.command}\n--- README\n{step.printed}\n--- printed\n{got}")
            shown += [*step.lines, *got.rstrip("\n").splitlines()]
        made.append("\n".join(shown) + "\n")
    if update:
        it = iter(made)
        README.write_text(BLOCK.sub(lambda m: f"```console\n{next(it)}```\n", text))
    assert not wrong, "\n\n".join(wrong)
    assert here >= 10, "the README's plain commands were not recognised"


@pytest.mark.parametrize(
    "command, args",
    [
        ("evtime adjust --unit sec a.csv", ["adjust", "--unit", "sec", "a.csv"]),
        (
            "evtime bound --agg 'count(*) AS n' \\\n  x.csv",
            ["bound", "--agg", "count(*) AS n", "x.csv"],
        ),
        ("evtime adjust a.csv | head", None),
        ("evtime adjust samples/*.csv", None),
        ('echo "$(evtime adjust a.csv)"', None),
        ("cat a.csv", None),
        ("evtime adjust a.csv > out.csv", None),
    ],
)
def test_only_plain_evtime_commands_run_in_process(command, args):
    assert in_process(command) == args
