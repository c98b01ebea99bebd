"""Docs stay true: every option of every command is in its man page, generated pages are
fresh, man renders them, and the README's set-up commands are the ones CI runs."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess

import click
import pytest

from evtime.cli import cli
from tests.conftest import ROOT

MAN = ROOT / "man"
PAGES = {  # command path -> man pages that document its options
    ("adjust",): ["evtime-adjust.1"],
    ("merge",): ["evtime-merge.1"],
    ("bound",): ["evtime-bound.1"],
    ("server",): ["evtime-server.1"],
    ("server", "start"): ["evtime-server.1"],
    ("explain", "adjust"): ["evtime-explain.1", "evtime-adjust.1"],
    ("explain", "merge"): ["evtime-explain.1", "evtime-merge.1"],
    ("explain", "bound"): ["evtime-explain.1", "evtime-bound.1"],
    ("sweep", "adjust"): ["evtime-sweep.1"],
    ("sweep", "merge"): ["evtime-sweep.1"],
    ("sweep", "bound"): ["evtime-sweep.1"],
}


def _command(path: tuple[str, ...]) -> click.Command | None:
    cmd: click.Command | None = cli
    for name in path:
        cmd = cmd.get_command(click.Context(cmd), name) if cmd else None
    return cmd


def _spelled(opt: str) -> str:
    return opt.replace("-", r"\-")


@pytest.mark.parametrize("path", sorted(PAGES), ids=" ".join)
def test_every_option_is_in_the_man_page(path):
    cmd = _command(path)
    assert cmd is not None, f"no command evtime {' '.join(path)}: renamed? (update PAGES)"
    text = "".join((MAN / p).read_text() for p in PAGES[path] if (MAN / p).exists())
    assert text, f"no man page for evtime {' '.join(path)}"
    missing = [
        o
        for p in cmd.params
        if isinstance(p, click.Option)
        for o in p.opts
        if _spelled(o) not in text
    ]
    assert not missing, f"not in {PAGES[path]}: {missing}"
    assert cmd.help and cmd.epilog and "Examples" in cmd.epilog


def test_generated_man_pages_are_fresh():
    spec = importlib.util.spec_from_file_location("man_build", MAN / "build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for page in sorted({*mod.PAGES, *mod.SHARED}):
        assert (MAN / f"{page}.1").read_text() == mod.build(page), "run python man/build.py"


@pytest.mark.skipif(shutil.which("man") is None, reason="man is not installed")
def test_man_renders_without_warnings():
    for page in sorted(MAN.glob("*.1")):
        p = subprocess.run(
            ["man", "--warnings", "-l", str(page)],
            capture_output=True,
            text=True,
            env={"MANWIDTH": "80", "PATH": "/usr/bin:/bin"},
        )
        assert p.returncode == 0 and p.stderr == "", (page.name, p.stderr)
        assert "EXIT STATUS" in p.stdout and "EXAMPLES" in p.stdout


def _sh_blocks(text: str) -> list[str]:
    import re

    return re.findall(r"^```sh\n(.*?)^```\n", text, re.S | re.M)


def test_readme_test_command_is_what_ci_runs():
    """The README's way to run the tests is .ci/run's last command (its ``-q`` aside)."""
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    commands = [
        line for b in _sh_blocks((ROOT / "README.md").read_text()) for line in b.splitlines()
    ]
    assert ci.replace(" -q ", " ") in commands, (ci, commands)


def test_readme_quick_start_prints_what_it_says(run_cli):
    """The README's first command runs (after its ``pip install . &&``) and prints the rows
    it says it prints, in that order."""
    import re

    readme = (ROOT / "README.md").read_text()
    first = _sh_blocks(readme)[0].strip()
    install, command = first.split(" && ")
    assert install == "pip install ." and command.startswith("evtime ")
    said = re.search(r"\(the seed's tuples A.E; prints ([A-Z, ]+)\)", readme)
    assert said, "the README no longer says what its first command prints"
    args = [str(ROOT / a) if (ROOT / a).exists() else a for a in command.split()[1:]]
    r = run_cli(*args)
    assert r.exit_code == 0, r.stderr
    assert [row["tuple"] for row in r.csv()] == said.group(1).split(", ")


def test_readme_pictures_exist_and_come_from_the_readme_commands():
    import re
    import xml.etree.ElementTree as ET

    readme = (ROOT / "README.md").read_text()
    pictures = re.findall(r"!\[[^\]]*\]\((docs/[^)]+)\)", readme)
    assert len(pictures) >= 3
    for pic in pictures:
        svg = (ROOT / pic).read_text()
        assert ET.fromstring(svg).tag.endswith("svg"), pic
        # the README command that draws it: its title is that command, outputs left out
        name = re.escape(pic.rsplit("/", 1)[-1])  # (the tour plots into the current directory)
        command = re.search(r"(evtime explain [^\n]*(?:\\\n[^\n]*)*--plot " + name + ")", readme)
        assert command, f"no README command writes {pic}"
        words = command.group(1).replace("\\\n", " ").split()
        title, skip = [], False
        for w in words:
            if skip:
                skip = False
            elif w in ("--plot", "-o", "--format"):
                skip = True
            else:
                title.append(w.rsplit("/", 1)[-1] if "/" in w else w)
        assert " ".join(title) in svg, (pic, " ".join(title))


def test_every_environment_variable_the_code_reads_is_documented():
    """The names of EVTIME_*, SPARK_*, PYSPARK_* and AWS_* variables in evtime's code (as
    string literals: what os.environ is asked) all appear in the man pages' ENVIRONMENT."""
    import re

    names = set()
    for path in (ROOT / "evtime").rglob("*.py"):
        names |= set(re.findall(r"[\"']((?:EVTIME|SPARK|PYSPARK)_[A-Z_]+)[\"']", path.read_text()))
    assert names, "no variable names found: the pattern no longer matches the code"
    page = (ROOT / "man" / "src" / "environment.roff").read_text().replace("\\-", "-")
    missing = sorted(n for n in names if n not in page)
    assert not missing, f"read by the code, not in ENVIRONMENT: {missing}"


def _names_in(path) -> set[str]:
    """The functions, classes, methods and assignments of a module's source."""
    import ast

    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_architecture_names_only_code_that_exists():
    """docs/ARCHITECTURE.md's code references resolve: `runner/inputs.py: start`,
    `io/inputs.py`, `engine/bound.py: windows`, `engine/adjust_in_place.ordered_in_place`,
    `driver.driver_io`, `writer.Sink`, `MergeSpec.simple` (a module of evtime/cli, runner,
    engine or io, or a name defined in one)."""
    import re

    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    pkg = ROOT / "evtime"
    files = [p for p in pkg.glob("*/*.py") if p.stem != "__init__"]
    modules = {p.stem: p for p in files}  # (a name in two packages: checked by its path)
    nested = [p for p in pkg.glob("*/*/*.py") if p.stem != "__init__"]  # (by their path)
    defined = {n for p in [*files, *nested] for n in _names_in(p)}
    checked, wrong = 0, []
    for ref in re.findall(r"`([^`\s]+(?:: \w+)?)`", text):
        ref = ref.removeprefix("evtime/")
        path = re.fullmatch(r"(cli|runner|engine|io)/([\w/]+)\.py(?:(?::\s*|:)(\w+))?", ref)
        dotted = re.fullmatch(r"(?:(cli|runner|engine|io)/)?(\w+)\.(\w+)", ref)
        if path:
            file = pkg / path[1] / f"{path[2]}.py"
            ok = file.exists() and (path[3] is None or path[3] in _names_in(file))
        elif dotted and dotted[2] in modules and not ref.endswith(".py"):
            file = modules[dotted[2]] if dotted[1] is None else pkg / dotted[1] / f"{dotted[2]}.py"
            ok = file.exists() and dotted[3] in _names_in(file)
        elif dotted and dotted[2][:1].isupper():  # (a class and its attribute)
            ok = dotted[2] in defined and dotted[3] in defined
        else:
            continue
        checked += 1
        if not ok:
            wrong.append(ref)
    assert checked > 20  # (the references are still found)
    assert wrong == []
