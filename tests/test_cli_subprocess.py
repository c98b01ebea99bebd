"""The installed `evtime` script, run as users run it (separate processes, real pipes)."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import SAMPLES

NO_SPARK = (
    "import sys\n"
    "from evtime.cli import main\n"
    "try:\n    main(sys.argv[1:])\n"
    "except SystemExit as e:\n    code = e.code\n"
    "print('PYSPARK-LOADED' if 'pyspark' in sys.modules else 'NO-PYSPARK', code, "
    "file=sys.stderr)\n"
)


@pytest.mark.parametrize(
    "args,status",
    [
        (["--help"], 0),
        (["--version"], 0),
        (["adjust", "--help"], 0),
        (["explain", "adjust", "--help"], 0),
        (["adjust", "x.csv"], 2),
        (["adjust", "--unit", "msec", "--range", "-3", "x.csv"], 2),
        (["nosuch"], 2),
        (["merge", "--help"], 0),
        (["explain", "bound", "--help"], 0),
        (["explain", "merge", "--plot", "x.gif", str(SAMPLES / "merge" / "orders.csv")], 2),
    ],
)
def test_help_version_and_usage_errors_do_not_start_spark(args, status):
    p = subprocess.run(
        [sys.executable, "-c", NO_SPARK, *args], capture_output=True, text=True, timeout=60
    )
    assert f"NO-PYSPARK {status}" in p.stderr, p.stderr


def test_version(script_runner):
    r = script_runner.run(["evtime", "--version"])
    assert r.success and r.stdout.startswith("evtime, version ")


def test_missing_java_is_one_clear_line(script_runner, tmp_path, cli_env):
    env = dict(cli_env, JAVA_HOME=str(tmp_path / "no-java"))
    r = script_runner.run(
        ["evtime", "adjust", "--unit", "msec", "--range", "999", str(SAMPLES / "tuples.parquet")],
        env=env,
    )
    assert r.returncode == 1
    assert r.stderr.strip().count("\n") == 0
    assert "needs Java" in r.stderr and "Java 17" in r.stderr


@pytest.mark.cli
def test_pipe_into_head_ends_quietly_and_stdout_is_data_only(tmp_path, cli_env):
    # big enough that `head -2` closes the pipe while evtime is still writing
    n = 300_000
    pq.write_table(
        pa.table({"time": pa.array(range(n), pa.timestamp("ns")), "v": range(n)}),
        tmp_path / "big.parquet",
    )
    sh = (
        "evtime adjust --unit nsec --range 0 big.parquet | head -2; "
        'echo "STATUS ${PIPESTATUS[0]}" >&2'
    )
    p = subprocess.run(
        ["bash", "-c", sh], cwd=tmp_path, capture_output=True, text=True, env=cli_env, timeout=300
    )
    assert p.stdout.splitlines() == [
        "time,v,evtime",
        "1970-01-01T00:00:00.000000000Z,0,1970-01-01T00:00:00.000000000Z",
    ]
    assert "Traceback" not in p.stderr and "Error" not in p.stderr, p.stderr
    assert "STATUS 0" in p.stderr


@pytest.mark.cli
def test_stdin_to_stdout_through_the_script(script_runner, cli_env):
    data = (SAMPLES / "tuples.csv").read_text()
    r = script_runner.run(
        [
            "evtime",
            "adjust",
            "--unit",
            "msec",
            "--range",
            "999",
            "--time-format",
            "yyyy/MM/dd HH:mm:ss:SSSSSSSSS",
            "-",
        ],
        stdin=__import__("io").StringIO(data),
        env=cli_env,
    )
    assert r.success, r.stderr
    assert [line.split(",")[0].strip('"') for line in r.stdout.splitlines()[1:]] == list("BADCE")
    # stderr: the summary line only, no JVM or log4j noise
    assert r.stderr.strip().splitlines() == [r.stderr.strip()]
    assert r.stderr.startswith("evtime adjust: read 5, released 5, discarded 0")


def test_shell_completion_completes_commands_and_options(tmp_path):
    env = {"PATH": __import__("os").environ["PATH"], "_EVTIME_COMPLETE": "bash_complete"}
    words = {"evtime ad": "adjust", "evtime adjust --un": "--unit", "evtime explain ": "adjust"}
    for line, expected in words.items():
        env.update(
            COMP_WORDS=line, COMP_CWORD=str(len(line.split()) - (0 if line.endswith(" ") else 1))
        )
        p = subprocess.run(["evtime"], env=env, capture_output=True, text=True, timeout=60)
        assert f"plain,{expected}" in p.stdout.splitlines(), (line, p.stdout)
    src = subprocess.run(
        ["evtime"],
        env={**env, "_EVTIME_COMPLETE": "bash_source"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "_evtime_completion()" in src.stdout


def test_python_dash_m():
    p = subprocess.run(
        [sys.executable, "-m", "evtime", "--version"], capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 0 and p.stdout.startswith("evtime, version")


@pytest.mark.parametrize(
    "shell,marker",
    [
        ("bash", "_evtime_completion()"),
        ("zsh", "#compdef evtime"),
        ("fish", "function _evtime_completion"),
    ],
)
def test_completion_scripts_are_produced_without_spark(shell, marker):
    env = {**__import__("os").environ, "_EVTIME_COMPLETE": f"{shell}_source"}
    p = subprocess.run(
        [sys.executable, "-c", NO_SPARK], env=env, capture_output=True, text=True, timeout=60
    )
    assert marker in p.stdout, p.stdout
    assert "NO-PYSPARK 0" in p.stderr, p.stderr  # no pyspark imported, so no JVM


def test_completing_options_and_choices_of_subcommands_starts_no_spark():
    cases = {
        "evtime merge --bound-m": "--bound-marker",
        "evtime explain bound --window-end ": "inclusive",
        "evtime explain merge --pl": "--plot",
    }
    for line, expected in cases.items():
        words = len(line.split()) - (0 if line.endswith(" ") else 1)
        env = {
            **__import__("os").environ,
            "_EVTIME_COMPLETE": "bash_complete",
            "COMP_WORDS": line,
            "COMP_CWORD": str(words),
        }
        p = subprocess.run(
            [sys.executable, "-c", NO_SPARK], env=env, capture_output=True, text=True, timeout=60
        )
        assert f"plain,{expected}" in p.stdout.splitlines(), (line, p.stdout)
        assert "NO-PYSPARK 0" in p.stderr, p.stderr


def test_python_dash_m_runs_the_same_cli():
    p = subprocess.run(
        [sys.executable, "-m", "evtime", "explain", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0 and "Usage: evtime explain" in p.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "evtime", "adjust", "x.csv"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "Missing option '--unit'" in bad.stderr


def test_the_script_ends_with_its_status_and_everything_written(script_runner, tmp_path, cli_env):
    """The program ends its process at once when done (no interpreter teardown): stdout,
    the discards file and the exit status (3: --max-discards exceeded) are all there."""
    late = tmp_path / "late.csv"
    args = ["adjust", "--unit", "msec", "--range", "0", "--max-discards", "0", "--discards"]
    r = script_runner.run(
        ["evtime", *args, str(late), str(SAMPLES / "tuples.parquet")], env=cli_env
    )
    assert r.returncode == 3, r.stderr
    assert [line.split(",")[0].strip('"') for line in r.stdout.splitlines()[1:]] == list("ACE")
    assert [line.split(",")[0].strip('"') for line in late.read_text().splitlines()[1:]] == [
        "B",
        "D",
    ]
    assert "read 5, released 3, discarded 2" in r.stderr
