"""Every ``console`` block of the README, run as written, in order, in a copy of
``samples/`` (sqlite-utils' habit: the docs are tested): what it prints must be what the
README shows, so the tour cannot break again.

A block is ``$ command`` lines (continued by ``> `` lines or a trailing backslash), each
followed by what the command prints: standard output, then standard error.  Run times in
summaries (``(9.8s)``) are not compared.  ``EVTIME_README_UPDATE=1`` rewrites the README
with what the commands print (then read the diff before committing it)."""

from __future__ import annotations

import os
import re
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


def _normal(text: str) -> str:
    return SECONDS.sub("(…s)", text.rstrip("\n"))


def test_every_console_block_prints_what_the_readme_shows(tmp_path, cli_env):
    text = README.read_text()
    blocks = BLOCK.findall(text)
    assert len(blocks) >= 8, "the README's console blocks were not found"
    shutil.copytree(ROOT / "samples", tmp_path / "samples")
    env = dict(cli_env, PATH=os.pathsep.join([str(Path(sys.executable).parent), cli_env["PATH"]]))
    env.pop("COLUMNS", None)
    update = os.environ.get("EVTIME_README_UPDATE") == "1"
    made, wrong = [], []
    for block in blocks:
        shown = []
        for step in steps(block):
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
