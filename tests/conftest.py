"""One SparkSession for the whole test session (local[2], few shuffle partitions, UTC).

In-process CLI runs (``run_cli``) reuse it through getOrCreate, so most tests pay no JVM
start-up; tests marked ``cli`` run the installed script in a subprocess, as users do.
"""

from __future__ import annotations

import atexit
import contextlib
import csv
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _reserved_port() -> socket.socket:
    """A socket bound to a free loopback port (not listening): while it is open, no other
    socket gets that port, not even as the local end of a connection."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    return s


# S3 tests talk to a moto server on loopback. Spark's Python workers inherit the environment
# of the JVM, which starts once per test session: so the endpoint and (fake) credentials are
# fixed here, before any session exists.  The port stays reserved until the server takes it.
# A Python worker imports this module again when a task's function comes from a test module
# (which imports SAMPLES from here): it keeps the port it inherited.  (It used to pick a port
# of its own: every later S3 request of that worker failed to connect.)
# Under pytest-xdist each worker runs a moto server of its own: a worker does not keep the
# port its controller chose (the variable below names the process that chose it).
S3_PORT_VAR = "EVTIME_TEST_S3_PORT"
_S3_OWNER_VAR, _ME = "EVTIME_TEST_S3_OWNER", os.environ.get("PYTEST_XDIST_WORKER", "")
if os.environ.get(_S3_OWNER_VAR) != _ME:
    os.environ.pop(S3_PORT_VAR, None)
os.environ[_S3_OWNER_VAR] = _ME
_S3_RESERVED = None if S3_PORT_VAR in os.environ else _reserved_port()
S3_PORT = int(os.environ.get(S3_PORT_VAR) or _S3_RESERVED.getsockname()[1])
os.environ[S3_PORT_VAR] = str(S3_PORT)
os.environ.update(
    AWS_ENDPOINT_URL=f"http://127.0.0.1:{S3_PORT}",
    AWS_ACCESS_KEY_ID="evtime-test",
    AWS_SECRET_ACCESS_KEY="evtime-test-secret",
    AWS_DEFAULT_REGION="us-east-1",
)
for _var in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
    os.environ.pop(_var, None)
SAMPLES = ROOT / "samples"

# evtime's cache (the class archive, ~150 MB, and `java -version`'s text) is a directory of
# this test session, never the user's ~/.cache/evtime: every JVM and Python process the tests
# start inherits it (a process importing this module again keeps its parent's: the variable
# is set).  The user's archive, if there is one, is linked in (read, never written: writing
# one takes minutes on a busy machine); else the first subprocess run writes one here.
# EVTIME_TEST_CACHE_DIR names a directory to use instead (kept).
CACHE_VAR = "EVTIME_TEST_CACHE_DIR"


def _session_cache() -> str:
    made = tempfile.mkdtemp(prefix="evtime-test-cache-")  # (mode 0700)
    owner = os.getpid()
    atexit.register(lambda: os.getpid() == owner and shutil.rmtree(made, ignore_errors=True))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    user = Path(os.environ.get("EVTIME_CACHE_DIR") or Path(base) / "evtime")
    try:
        kept = [p for p in user.iterdir() if p.suffix in (".jsa", ".txt")]
    except OSError:
        kept = []
    for path in kept:
        with contextlib.suppress(OSError):  # (another file system: no archive, then)
            os.link(path, os.path.join(made, path.name))
    return made


if not os.environ.get(CACHE_VAR):
    os.environ[CACHE_VAR] = _session_cache()
os.environ["EVTIME_CACHE_DIR"] = os.environ[CACHE_VAR]
SEED_PATTERN = "yyyy/MM/dd HH:mm:ss:SSSSSSSSS"


# The shared session's JVM keeps Java's full JIT: it runs for the whole suite, and a C1-only
# JVM (-XX:TieredStopAtLevel=1, as evtime's own small runs start) ran the same 151 tests in
# 947 s against 713 s side by side, with more CPU (bench/RESULTS.md, session 50).  Spark
# keeps the classes it generates for 100 queries' code (keyed by the code's text); the
# tests run the same few plans again and again, so it keeps 5000: 126 tests compiled 1560
# classes instead of 3748 (25 s of Janino instead of 49).  A cache: no result changes.
TEST_SESSION_CONF = {
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.codegen.cache.maxEntries": "5000",
}


@pytest.fixture(scope="session")
def spark():
    from evtime.session import SessionOptions, build_session

    # this JVM lives as long as the tests: it may use the class archive, but must not be
    # the one that writes it (the subprocess runs would wait for it until the end)
    saved = os.environ.get("EVTIME_CLASS_CACHE")
    os.environ["EVTIME_CLASS_CACHE"] = "read" if saved in (None, "1") else saved
    try:
        return build_session(SessionOptions(master="local[2]", conf=dict(TEST_SESSION_CONF)))
    finally:
        if saved is None:
            os.environ.pop("EVTIME_CLASS_CACHE")
        else:
            os.environ["EVTIME_CLASS_CACHE"] = saved


class Result:
    def __init__(self, exit_code: int, stdout: str, stderr: str, exception):
        self.exit_code, self.stdout, self.stderr, self.exception = (
            exit_code,
            stdout,
            stderr,
            exception,
        )

    def csv(self) -> list[dict]:
        return list(csv.DictReader(io.StringIO(self.stdout)))

    def jsonl(self) -> list[dict]:
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]


EVERYWHERE = [
    "local",
    "distributed",  # local, but inputs read and outputs written in Spark tasks
    pytest.param("local-cluster", marks=pytest.mark.slow),
    pytest.param("connect", marks=pytest.mark.slow),
]


def pytest_generate_tests(metafunc):
    """Tests in modules marked ``everywhere`` (the acceptance tests) run their CLI calls
    locally (small inputs read and written in the driver, and in Spark tasks), on a
    local-cluster and through Spark Connect (see tests/where.py)."""
    if "run_cli" in metafunc.fixturenames and metafunc.definition.get_closest_marker("everywhere"):
        metafunc.parametrize("where", EVERYWHERE, indirect=True)


SAMPLED = ("local-cluster", "connect")


@pytest.hookimpl(tryfirst=True)  # (before pytest-xdist reads the groups)
def pytest_collection_modifyitems(config, items):
    """On local-cluster and through Spark Connect (each CLI call several seconds), a test
    with a matrix of parameters runs a covering set of its combinations: every value of
    every parameter at least once (greedily, the combination that brings the most values
    not yet covered first); locally, it runs them all.  The others are reported as
    deselected."""
    groups: dict[tuple[str, str], list] = {}
    for item in items:
        spec = getattr(item, "callspec", None)
        if spec is not None and spec.params.get("where") in SAMPLED:
            key = (item.nodeid.split("[")[0], spec.params["where"])
            groups.setdefault(key, []).append(item)
    dropped = []
    for group in groups.values():
        values = {
            id(i): {(k, repr(v)) for k, v in i.callspec.params.items() if k != "where"}
            for i in group
        }
        left, covered = list(group), set()
        while left:
            best = max(left, key=lambda i: len(values[id(i)] - covered))
            if not values[id(best)] - covered:
                break
            covered |= values[id(best)]
            left.remove(best)
        dropped += left
    if dropped:
        gone = set(map(id, dropped))
        items[:] = [i for i in items if id(i) not in gone]
        config.hook.pytest_deselected(items=dropped)
    if config.pluginmanager.hasplugin("xdist"):
        for item in items:
            if _on_servers(item):
                item.add_marker(pytest.mark.xdist_group("servers"))


# Tests that start Spark Connect servers or standalone clusters run on one pytest-xdist
# worker, one after another (`--dist loadgroup`): two servers would race for the default
# port, and each brings JVMs enough to keep both cores busy.
SERVER_FILES = ("test_server.py", "test_security.py", "test_cluster.py", "test_real_cluster.py")


def _on_servers(item) -> bool:
    spec = getattr(item, "callspec", None)
    return (
        item.path.name in SERVER_FILES
        or "connect" in item.nodeid
        or (spec is not None and spec.params.get("where") in SAMPLED)
    )


@pytest.fixture
def where(request) -> str:
    return getattr(request, "param", "local")


_workers: dict = {}


@pytest.fixture(scope="session")
def workers():
    """The worker processes of tests/where.py, started on first use, stopped at the end."""
    try:
        yield _workers
    finally:
        for w in _workers.values():
            w.stop()
        _workers.clear()


@pytest.fixture
def run_cli(request, where):
    """Run ``evtime ARGS`` (in this process on the shared Spark session, or in the worker
    for ``where``); returns a Result."""
    from tests.where import Worker, invoke

    if where in ("local", "distributed"):
        request.getfixturevalue("spark")
        call = invoke
        if where == "distributed":  # what inputs above EVTIME_DRIVER_IO_MAX bytes get
            request.getfixturevalue("monkeypatch").setenv("EVTIME_DRIVER_IO_MAX", "0")
    else:
        from tests.where import WHERE

        if where not in WHERE:  # (a test's own parameter named "where" took this one's place)
            raise ValueError(f"run_cli: {where!r} is no kind of Spark: {WHERE}")
        pool = request.getfixturevalue("workers")
        if where not in pool:
            pool[where] = Worker(where)
        call = pool[where].run

    def run(*args: str, input: str | bytes | None = None) -> Result:
        return Result(*call([str(a) for a in args], input))

    return run


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope="session")
def cli_env():
    """The environment of subprocess runs.  The class archive of the test session's cache
    is written first, by a quiet run of its own; the runs of the tests then only read it
    (``EVTIME_CLASS_CACHE=read``): no test's run is the first run (which does more work and
    says so on stderr), whatever order the tests run in, and even when that first writing
    failed (once, on a loaded machine, the archive was then written by a test's run, which
    said so).  test_classcache writes archives in caches of its own."""
    env = dict(os.environ)
    env.setdefault("EVTIME_CONF", "spark.sql.shuffle.partitions=2")
    cache = Path(env["EVTIME_CACHE_DIR"])
    if not list(cache.glob("*.jsa")):
        subprocess.run(
            [sys.executable, "-m", "evtime", "adjust", "-q", "--unit", "sec", "--range", "0",
             str(SAMPLES / "tuples.parquet")],
            env=env, capture_output=True, timeout=900, check=False,
        )  # fmt: skip
    if env.get("EVTIME_CLASS_CACHE") in (None, "1"):
        env["EVTIME_CLASS_CACHE"] = "read"
    return env


@pytest.fixture(scope="session")
def s3():
    """A real S3 API (moto's server) on 127.0.0.1; yields an s3fs filesystem."""
    import s3fs
    from moto import backends
    from moto.server import ThreadedMotoServer

    # moto's server lists its own package's directories (~160 stat calls) at every request
    # to match the Host header against its services' names: once is enough (they do not
    # change), a few ms less per request, of the thousands the S3 tests make
    listed = backends.list_of_moto_modules
    modules = tuple(listed())
    backends.list_of_moto_modules = lambda: iter(modules)
    if _S3_RESERVED is not None:
        _S3_RESERVED.close()  # (the server binds it at once, with SO_REUSEADDR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=S3_PORT, verbose=False)
    server.start()
    with socket.create_connection(("127.0.0.1", S3_PORT), timeout=10):
        pass  # (listening: or the S3 tests fail here, once, with the reason)
    try:
        yield s3fs.S3FileSystem()
    finally:
        server.stop()
        backends.list_of_moto_modules = listed


@pytest.fixture
def bucket(s3):
    """A fresh bucket holding the seed tuples as s3://BUCKET/in/a-tuples.parquet and
    s3://BUCKET/in/b-tuples.jsonl."""
    name = f"evtime-{uuid.uuid4().hex[:8]}"
    s3.mkdir(name)
    s3.put(str(SAMPLES / "tuples.parquet"), f"{name}/in/a-tuples.parquet")
    s3.put(str(SAMPLES / "tuples.jsonl"), f"{name}/in/b-tuples.jsonl")
    return name


# ------------------------------------------------------------------ hypothesis in CI
# Hypothesis's own `ci` profile (loaded when CI is set) is derandomized: each test tried the
# same few streams on every CI run.  Here CI runs stay reproducible but each commit tries
# other streams: the seed comes from the commit (`git rev-parse HEAD`), printed in the
# header; EVTIME_HYPOTHESIS_SEED=N replays a run (in CI or not), and pytest's own
# --hypothesis-seed wins over both.
SEED_VAR = "EVTIME_HYPOTHESIS_SEED"


def _hypothesis_seed() -> tuple[int, str] | None:
    """(seed, where it comes from), or None for hypothesis's own random seed."""
    from hypothesis._settings import is_in_ci

    given = os.environ.get(SEED_VAR, "").strip()
    if given:
        try:
            return int(given, 0), f"{SEED_VAR}"
        except ValueError:
            raise pytest.UsageError(f"{SEED_VAR} takes a whole number, not {given!r}") from None
    if not is_in_ci():
        return None
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=30
        ).stdout.strip()
        return int(head[:16], 16), f"commit {head[:12]}"
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return 0, "not a git checkout"  # (still deterministic)


_SEED: tuple[int, str] | None = None


@pytest.hookimpl(tryfirst=True)  # (before hypothesis's plugin reads --hypothesis-seed)
def pytest_configure(config):
    global _SEED
    if config.getoption("hypothesis_seed", None) is not None:
        return
    _SEED = _hypothesis_seed()
    if _SEED is None:
        return
    from hypothesis import settings

    # the `ci` profile (no deadline, no example database, ...) but random from the seed
    settings.register_profile("evtime-ci", settings.get_profile("ci"), derandomize=False)
    settings.load_profile("evtime-ci")
    config.option.hypothesis_seed = str(_SEED[0])


def pytest_report_header(config):
    if _SEED is not None:
        seed, source = _SEED
        return f"hypothesis seed {seed} ({source}): replay with {SEED_VAR}={seed}"
    return None
