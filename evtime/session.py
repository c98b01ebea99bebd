"""Building the SparkSession: embedded local mode by default, a cluster or Spark Connect.

Only this module and the CLI know how Spark is reached; the engine receives DataFrames.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources

from evtime import interrupts
from evtime.errors import SetupError, UsageError

# Settings every evtime session gets (the user's --conf wins).
DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.legacy.parquet.nanosAsLong": "true",
    # PySpark records the Python call site of every DataFrame function (for error
    # contexts): four JVM round trips and a stack walk per call, and an IPython import.
    # Those call sites are evtime's own code, which its one-line errors do not show.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # Rows go to the Python writer in Arrow batches of at most maxRecordsPerBatch (10,000)
    # rows.  Below Int.MaxValue, Spark also measures the whole batch after every row to
    # cap its bytes: a third of the JVM's time in explain's last stage (jstack samples),
    # ~2 s of adjust and ~5 s of explain at 10M rows (bench/RESULTS.md, session 16).
    # Int.MaxValue turns that check off; a batch then holds 10,000 rows, whatever their
    # width (--conf spark.sql.execution.arrow.maxBytesPerBatch=N brings the cap back).
    "spark.sql.execution.arrow.maxBytesPerBatch": "2147483647",  # Int.MaxValue
}
# Small inputs (at most SMALL_INPUT bytes of local files; EVTIME_FAST_START=0 turns this
# off) start the local driver JVM with only the quick JIT tier and the serial GC: it starts
# faster (bench/RESULTS.md: faster in 6 of 6 interleaved pairs), while big jobs, which run
# long in that JVM, keep the full JIT.
SMALL_INPUT = 64 << 20
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# Inputs of at most this many bytes of local files, in local mode, are read and written by
# evtime's own process (evtime.runner.driver.driver_io); EVTIME_DRIVER_IO_MAX overrides it.
DRIVER_IO_MAX = 4 << 20
# Settings of a run whose input is read in the driver (a few MiB at most): one shuffle
# partition, fewer tasks (bench/RESULTS.md: 0.1-0.2 s of a 3.5 s cold run); and no adaptive
# execution, which runs every shuffle's map side as a job of its own to re-plan what follows
# (nothing to gain on a few MiB; explain merge of 10 rows ran ~30 jobs): a plan's stages in
# one job (bench/RESULTS.md, session 43).  And no generated code: Spark compiles Java
# for every stage and expression of a plan (Janino, in a cold JVM), which on a few MiB
# costs more than it saves; its interpreted operators give the same rows (Spark tests
# both).  `factoryMode` is an internal setting of Spark's (its test suites use it); whole
# stages off alone gained a third as much (bench/RESULTS.md, session 44).  --conf wins.
DRIVER_IO_CONF = {
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
# Big local jobs: the driver JVM (which is also the executor) gets a heap of a quarter of
# the machine's memory, Java's own default, within these limits, instead of Spark's 1g;
# sorts of 10M rows spilled to disk with 1g (bench/RESULTS.md).  spark.driver.memory
# (--conf, EVTIME_CONF) or SPARK_DRIVER_MEMORY wins.
HEAP_MIN, HEAP_MAX = 1 << 30, 8 << 30
# Local mode: every port the driver opens stays on loopback, and the Python daemon that
# forks the workers imports pyspark from where it is installed (evtime.daemon; 0.6-0.9 s
# sooner to the first Python task, bench/RESULTS.md session 21).
LOCAL_CONF = {
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.python.daemon.module": "evtime.daemon",
}


# The reused server lives for days and runs every job of every client: what Spark keeps of
# each finished job for its UI (the SQL tab's plans and their metrics, jobs, stages) is kept
# for fewer of them than Spark's 1000, so what it holds stays small (issue 49).  Seeds for
# the run that starts it; --conf wins.
SERVER_CONF = {
    "spark.sql.ui.retainedExecutions": "50",
    "spark.ui.retainedJobs": "100",
    "spark.ui.retainedStages": "100",
    "spark.ui.retainedTasks": "10000",
}
# How long a --reuse-server run waits at exit for the server to release its session.
RELEASE_TIMEOUT = 10.0
# How long a server that did not answer gets to end after SIGTERM before SIGKILL.
SICK_GRACE = 2.0

LOOPBACK = ("localhost", "127.0.0.1", "::1")


@dataclass
class SessionOptions:
    master: str | None = None
    remote: str | None = None
    conf: dict[str, str] = field(default_factory=dict)
    verbose: bool = False
    reuse_server: bool = False
    small: bool = False  # the input is small (see SMALL_INPUT)

    @property
    def fast_start(self) -> bool:
        return self.small and os.environ.get("EVTIME_FAST_START", "1") not in ("0", "false")

    @property
    def local_driver(self) -> bool:
        """Whether Spark runs on this machine with this process as its client: local mode,
        or the reused local server (not a cluster, not a remote server)."""
        if self.remote or under_spark_submit():
            return False
        master = self.master or "local[*]"
        return master == "local" or master.startswith("local[")

    def elsewhere(self) -> str | None:
        """The option that puts Spark's tasks on other machines (a cluster's --master, a
        --remote server that is not on loopback), as the user gave it but for any token;
        None when they run on this one (local mode, local-cluster, the reused server, or
        under spark-submit, which owns its master)."""
        if self.remote:
            from urllib.parse import urlsplit

            where = self.remote.split("/;", 1)[0]
            host = urlsplit(where.replace("sc://", "http://", 1)).hostname
            return None if host in LOOPBACK else f"--remote {where}"
        if under_spark_submit() or self.reuse_server:
            return None
        master = self.master or "local[*]"
        return None if master.startswith("local") else f"--master {master}"

    @classmethod
    def from_cli(
        cls,
        master: str | None,
        remote: str | None,
        conf: tuple[str, ...],
        verbose: bool,
        reuse_server: bool = False,
        small: bool = False,
    ) -> SessionOptions:
        master_given = bool(master)
        pairs: dict[str, str] = {}
        env_conf = [c for c in os.environ.get("EVTIME_CONF", "").split(",") if c.strip()]
        for item in [*env_conf, *conf]:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise UsageError(f"--conf takes KEY=VALUE, got {item!r}")
            pairs[key.strip()] = value.strip()
        master = master or os.environ.get("EVTIME_MASTER")
        if master is not None:
            check_master(master, "--master" if master_given else "EVTIME_MASTER")
        return cls(
            master=master,
            remote=remote or os.environ.get("SPARK_REMOTE"),
            conf=pairs,
            verbose=verbose,
            reuse_server=reuse_server or os.environ.get("EVTIME_REUSE_SERVER", "") in ("1", "true"),
            small=small,
        )


# the master URLs Spark 4 takes (its SparkMasterRegex, and the cluster managers it has)
_MASTERS = re.compile(
    r"local"
    r"|local\[(\*|[1-9][0-9]*)\]"  # local[N], local[*]
    r"|local\[(\*|[1-9][0-9]*)\s*,\s*[0-9]+\]"  # local[N,F]: F failures allowed
    r"|local-cluster\[\s*[1-9][0-9]*\s*,\s*[1-9][0-9]*\s*,\s*[1-9][0-9]*\s*\]"
    r"|spark://[^\s:/,]+:[0-9]+(,[^\s:/,]+:[0-9]+)*"  # (standby masters after commas)
    r"|yarn"
    r"|k8s://\S+"
)


def check_master(master: str, where: str = "--master") -> None:
    """Refuse, in one line and before a JVM starts, a master URL Spark would not take (it
    would print a Java stack trace and end the gateway)."""
    if _MASTERS.fullmatch(master):
        return
    if master.startswith("mesos://"):
        raise UsageError(f"{where} {master}: Spark 4 has no Mesos support")
    raise UsageError(
        f"{where} {master!r}: not a Spark master URL (local, local[N], local[*], local[N,F], "
        "local-cluster[N,C,M], spark://HOST:PORT, yarn, k8s://URL)"
    )


def under_spark_submit() -> bool:
    """Whether this process was started by spark-submit (its JVM is already running)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def check_java() -> str:
    """Fail with one line, before any JVM is started, when Java 17+ is not there; returns
    what identifies this Java (its path and version text)."""
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    hint = (
        "install Java 17 or newer (e.g. 'apt-get install openjdk-17-jre-headless') or set "
        "JAVA_HOME; or run against a Spark Connect server with --remote sc://HOST"
    )
    if not java or not os.path.exists(java):
        raise SetupError(f"evtime runs Spark, which needs Java, and none was found: {hint}")
    text = _version_text(java, hint)
    m = _JAVA_VERSION.search(text)
    if m:
        major = int(m.group(1)) if m.group(1) != "1" else int(m.group(2) or 0)
        if major < 17:
            raise SetupError(f"Spark 4 needs Java 17 or newer; {java} is Java {major}: {hint}")
    return f"{os.path.realpath(java)}\0{text}"


_JAVA_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')


def _version_text(java: str, hint: str) -> str:
    """What ``java -version`` prints.  Running it costs every run time, so the
    text is kept in evtime's cache directory (:func:`evtime.classcache.cache_dir`; not
    with ``EVTIME_CLASS_CACHE=0``) under a name made of the identity (path, inode, size,
    time) of the binary and of its JDK's ``lib/modules``: installing another Java, or
    upgrading this one, asks it again."""
    import hashlib

    from evtime.classcache import cache_dir

    real = os.path.realpath(java)
    identity = [real]
    for path in (real, os.path.join(os.path.dirname(os.path.dirname(real)), "lib", "modules")):
        try:
            st = os.stat(path)
            identity.append(f"{st.st_ino} {st.st_size} {st.st_mtime_ns}")
        except OSError:
            identity.append("-")
    folder = cache_dir()
    name = "java-" + hashlib.sha256("\0".join(identity).encode()).hexdigest()[:16] + ".txt"
    kept = folder / name if folder is not None else None
    if kept is not None:
        try:
            return kept.read_text()
        except (OSError, UnicodeDecodeError):
            pass
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise SetupError(f"cannot run {java}: {err}: {hint}") from None
    text = out.stderr + out.stdout
    if kept is not None and out.returncode == 0 and _JAVA_VERSION.search(text):
        tmp = kept.with_name(f"{name}.{os.getpid()}")
        try:
            tmp.write_text(text)
            os.replace(tmp, kept)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()
    return text


def check_reachable(remote: str, timeout: float = 10.0) -> None:
    """Fail with one line when nothing answers at an ``sc://HOST:PORT`` URL (PySpark's
    client would retry for about ten minutes); the line names host and port only, never the
    URL's parameters (a token may be one of them)."""
    if not remote.startswith("sc://"):
        return
    hostport = remote[len("sc://") :].split("/", 1)[0]
    host, sep, port_text = hostport.rpartition(":")
    if not sep or host.endswith(":"):  # no port (or a bare IPv6 address)
        host, port_text = hostport, "15002"
    host = host.strip("[]")
    try:
        port = int(port_text)
    except ValueError:
        port = 0
    if not 0 < port < 65536:  # (a port out of range is refused, not "unreachable")
        raise UsageError(f"--remote: bad port in sc://{hostport} (1-65535)")
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as err:
        why = err.strerror or type(err).__name__
        raise SetupError(
            f"cannot reach the Spark Connect server at sc://{hostport}: {why}"
        ) from None


JAVA_OPTIONS = "spark.driver.extraJavaOptions"


def driver_java_options(own: str, conf: dict[str, str]) -> str:
    """The driver JVM's options of a JVM evtime starts: its own (logging, the class
    archive), then those of the user's ``--conf spark.driver.extraJavaOptions=...``, which
    add to them (and win where the same option is given twice: the JVM takes the last)."""
    return " ".join(filter(None, [own.strip(), conf.get(JAVA_OPTIONS, "").strip()]))


def _log4j_options(verbose: bool) -> str:
    path = resources.files("evtime").joinpath("log4j2.properties")
    level = "warn" if verbose else "off"
    return f"-Dlog4j2.configurationFile=file:{path} -Devtime.loglevel={level}"


# Lines the JVM prints to stderr by itself (not through log4j) that say nothing to users.
_JVM_NOISE = re.compile(
    rb"^(WARNING: Using incubator modules|Setting default log level|"
    rb"To adjust logging level|WARNING: .*(sun.misc.Unsafe|restricted method))"
)


def _filter_jvm_stderr(verbose: bool) -> Callable[[], None]:
    """Give the JVM about to start a stderr that drops known noise (all of it passes with
    -v) and that is not evtime's own: a JVM that outlives evtime (its shutdown, writing the
    class archive) then holds no pipe of the user's open.  Returns 'restore'."""
    read_fd, write_fd = os.pipe()
    saved = os.dup(2)
    os.dup2(write_fd, 2)
    os.close(write_fd)

    def pump() -> None:
        with os.fdopen(read_fd, "rb") as pipe:
            for line in pipe:
                if verbose or not _JVM_NOISE.match(line):
                    os.write(saved, line)

    threading.Thread(target=pump, name="evtime-jvm-stderr", daemon=True).start()

    def restore() -> None:
        os.dup2(saved, 2)

    return restore


# what every run imports once its session is up: imported meanwhile, while this process
# only waits for the JVM (or a server) to start (pandas alone took 0.14 s of a 2.8 s run)
WHILE_STARTING = ("pandas", "pyarrow.ipc")


def _import_meanwhile(modules: tuple[str, ...] = WHILE_STARTING) -> threading.Thread:
    """Import ``modules`` in a background thread (a failure is left for the real import to
    report)."""
    import importlib

    def run() -> None:
        for name in modules:
            with contextlib.suppress(Exception):  # (the real import reports a failure)
                importlib.import_module(name)

    thread = threading.Thread(target=run, name="evtime-imports", daemon=True)
    thread.start()
    return thread


def build_session(opts: SessionOptions):  # -> pyspark.sql.SparkSession
    """A SparkSession for the options; pyspark is imported here, not at CLI import time."""
    # PySpark imports IPython, when it is installed, only to size the Spark Connect
    # progress bar and to name notebook cells; evtime has neither, and the import costs
    # 0.25-0.4 s of every run.  (An IPython already imported, as in a notebook, stays.)
    sys.modules.setdefault("IPython", None)  # type: ignore[arg-type]
    _import_meanwhile()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("evtime")
    conf = dict(DEFAULT_CONF)
    if opts.reuse_server and not opts.remote:
        return _reused_server_session(builder, opts, conf)
    launch = False  # evtime starts the driver JVM (local mode or a cluster's client)
    if opts.remote:
        check_reachable(opts.remote)
        builder = builder.remote(opts.remote)
        conf = {k: v for k, v in conf.items() if k.startswith(("spark.sql.", "spark.python.sql."))}
    elif under_spark_submit():
        # spark-submit started the driver JVM with its --master and --conf: keep them
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()
        given = dict(SparkConf().getAll())
        if (opts.master or given.get("spark.master", "")).startswith("local"):
            conf.update(LOCAL_CONF)
        conf = {k: v for k, v in conf.items() if k not in given}
        if opts.master:
            builder = builder.master(opts.master)
    else:
        from pyspark.find_spark_home import _find_spark_home

        from evtime import classcache

        java_id = check_java()
        # (spark-submit would otherwise start a Python to find it)
        os.environ.setdefault("SPARK_HOME", _find_spark_home())
        master = opts.master or "local[*]"
        builder = builder.master(master)
        if master.startswith("local"):
            conf.update(LOCAL_CONF)
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            use_this_python(opts.conf)
        java_opts = _log4j_options(opts.verbose)
        if opts.fast_start:
            java_opts = f"{java_opts} {FAST_JVM}"
        launch = not _jvm_running()  # (a JVM already there keeps its options)
        if launch:
            java_opts = f"{java_opts} {classcache.java_options(java_id)}".rstrip()
        conf[JAVA_OPTIONS] = driver_java_options(java_opts, opts.conf)
        if heap := local_heap_setting(opts):
            conf["spark.driver.memory"] = heap  # (opts.conf wins below)
    conf.update({k: v for k, v in opts.conf.items() if k != JAVA_OPTIONS})
    for key, value in conf.items():
        builder = builder.config(key, value)
    restore = _filter_jvm_stderr(opts.verbose) if not opts.remote else None
    try:
        if launch:
            _launch_jvm(conf, opts.master or "local[*]")
        spark = builder.getOrCreate()
    finally:
        if restore:
            restore()
    if not opts.remote:
        spark.sparkContext.setLogLevel("WARN" if opts.verbose else "OFF")
    interrupts.reinstall()  # (the SparkContext took SIGINT)
    return spark


def use_this_python(conf: dict[str, str]) -> None:
    """Local Python workers run the interpreter evtime runs in, which has evtime and
    pyarrow: Spark would start ``python3`` from PATH, which under cron, systemd or pipx (the
    venv's script run by its absolute path) is the system's.  A ``PYSPARK_PYTHON`` or
    ``spark.pyspark.python`` the user set wins."""
    if "PYSPARK_PYTHON" in os.environ:
        return
    os.environ["PYSPARK_PYTHON"] = conf.get("spark.pyspark.python") or sys.executable


def local_heap_setting(opts: SessionOptions) -> str | None:
    """spark.driver.memory for a local driver JVM that evtime starts: :func:`local_heap`
    for big inputs, None (Spark's default) for small ones, for clusters (local-cluster too:
    its executors have their own JVMs) or with SPARK_DRIVER_MEMORY."""
    if not opts.local_driver or opts.small or os.environ.get("SPARK_DRIVER_MEMORY"):
        return None
    return f"{local_heap() >> 20}m"


def local_heap(physical: int | None = None) -> int:
    """The local driver JVM's heap in bytes for big inputs: a quarter of ``physical`` (the
    machine's memory, or its container's limit when lower), at least :data:`HEAP_MIN`, at
    most :data:`HEAP_MAX`."""
    if physical is None:
        try:
            physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):  # not a POSIX system: Spark's default
            return HEAP_MIN
        physical = min(physical, *_cgroup_limits())
    return min(HEAP_MAX, max(HEAP_MIN, physical // 4))


CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def _cgroup_limits(paths: tuple[str, ...] = CGROUP_LIMITS) -> list[int]:
    """The memory limits of this process's container (cgroup v2 or v1), in bytes: a
    container may have much less memory than the machine it runs on."""
    limits = []
    for path in paths:
        try:
            with open(path) as fh:
                text = fh.read().strip()
        except OSError:
            continue
        if text.isdigit():  # ("max": no limit)
            limits.append(int(text))
    return limits


def _jvm_running() -> bool:
    """Whether this process already has Spark's JVM (a session built before, or
    spark-submit's)."""
    from pyspark import SparkContext

    return SparkContext._gateway is not None or under_spark_submit()


def _launch_jvm(conf: dict[str, str], master: str) -> None:
    """Start the driver JVM as PySpark would, but with its stdout on (filtered) stderr:
    it is not evtime's output, and a JVM outliving evtime must not hold the user's pipe."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    sconf = SparkConf(loadDefaults=False).setMaster(master).setAppName("evtime")
    sconf.setAll(list(conf.items()))
    SparkContext(conf=sconf, gateway=launch_gateway(sconf, popen_kwargs={"stdout": 2}))


def _reused_server_session(builder, opts: SessionOptions, conf: dict[str, str]):
    """A session on the persistent local Spark Connect server that PySpark manages
    (``spark.local.connect.reuse``): the first run starts it (loopback only, token in a
    per-user 0700 directory), later runs reconnect in about a second."""
    master = opts.master or "local[*]"
    if not master.startswith("local"):
        raise UsageError(
            "--reuse-server runs a local server: it does not combine with --master "
            f"{master} (use --remote sc://HOST:PORT for a remote server)"
        )
    from evtime import classcache

    java_id = check_java()
    use_this_python(opts.conf)
    conf.update(LOCAL_CONF)
    conf.update(SERVER_CONF)
    # (the server maps the class archive when there is one; it lives too long to write it)
    java_opts = f"{_log4j_options(opts.verbose)} {classcache.java_options(java_id, write=False)}"
    conf.update(opts.conf)
    conf[JAVA_OPTIONS] = driver_java_options(java_opts, opts.conf)
    _allow_slow_server_start()
    builder = builder.remote(master).config("spark.local.connect.reuse", "true")
    for key, value in conf.items():
        builder = builder.config(key, value)
    with warnings.catch_warnings():
        # static settings seed the server when the first run starts it; later runs cannot
        # change them, and PySpark warns about each one
        warnings.filterwarnings("ignore", message="Failed to set spark")
        info = server_status()
        if info is not None and info["running"] and not server_answers():
            # listening but sick (out of heap, stopped): a fresh server instead (issue 49);
            # asked before getOrCreate, whose settings would wait for it forever
            sys.stderr.write(
                f"evtime: the local server (pid {info['pid']}) does not answer within "
                f"{health_timeout():g}s: restarting it\n"
            )
            sys.stderr.flush()  # (said before the wait, not after)
            # (a short grace: a stopped JVM, or one out of heap, may never act on SIGTERM)
            server_stop(wait=True, grace=SICK_GRACE)
            # a session this process holds is on the sick server: getOrCreate would return
            # it, and its first request would wait for that server forever
            _forget_sessions()
        spark = builder.getOrCreate()
    release_at_exit(spark)
    return spark


def health_timeout() -> float:
    try:
        return float(os.environ.get("EVTIME_SERVER_HEALTH_TIMEOUT", "60"))
    except ValueError:
        raise UsageError("EVTIME_SERVER_HEALTH_TIMEOUT takes a number of seconds") from None


def answers(spark, timeout: float | None = None) -> bool:
    """Whether the server behind the Connect session ``spark`` answers a request (its Spark
    version: one small round trip) within ``timeout`` seconds (EVTIME_SERVER_HEALTH_TIMEOUT,
    default 60).  A server that ran out of heap, or is stopped, still accepts connections
    but never answers."""
    box: list[bool] = []

    def ask() -> None:
        with contextlib.suppress(Exception):
            box.append(bool(spark.version))

    thread = threading.Thread(target=ask, name="evtime-health", daemon=True)
    thread.start()
    thread.join(health_timeout() if timeout is None else timeout)
    return bool(box and box[0])


def _forget_sessions() -> None:
    """Forget this process's default and active Spark Connect sessions (see
    :func:`_forget_session`)."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    for spark in {
        id(s): s
        for s in (
            ConnectSession._default_session,
            getattr(ConnectSession._active_session, "session", None),
        )
        if s is not None
    }.values():
        _forget_session(spark)


def _forget_session(spark) -> None:
    """Let the next getOrCreate make a new Connect session (without asking the sick server
    to release this one: it would not answer)."""
    cls = type(spark)
    if getattr(cls, "_default_session", None) is spark:
        cls._default_session = None
    active = getattr(cls, "_active_session", None)
    if getattr(active, "session", None) is spark:
        active.session = None
    # closed here, the client asks nothing of the server at exit (PySpark's exit handler
    # cleans its ML cache with a request that a sick server never answers)
    thread = threading.Thread(target=spark.client.close, name="evtime-close", daemon=True)
    thread.start()
    thread.join(RELEASE_TIMEOUT)


_releasing: list = []


def release_at_exit(spark) -> None:
    """At exit, ask the server to release this run's Spark Connect session.  A session
    not released stays on the server, with every plan, cached DataFrame and local
    checkpoint of its run, until it has been idle for an hour
    (spark.connect.session.manager.defaultSessionTimeout): a run a minute kept about 60
    sessions alive, ~1.3 MB of heap per run, and the server died of "Java heap space"
    (issue 49; bench/soak_server.py)."""
    import atexit

    if _releasing:
        _releasing[0] = spark
        return
    _releasing.append(spark)
    atexit.register(release_session)


def release_session(timeout: float = RELEASE_TIMEOUT) -> None:
    """Release the session :func:`release_at_exit` recorded (a server that does not answer
    gets ``timeout`` seconds, then the run ends anyway)."""
    if not _releasing or _releasing[0] is None:
        return
    spark, _releasing[0] = _releasing[0], None

    def stop() -> None:
        with contextlib.suppress(Exception):
            spark.stop()  # (a Connect session: releases it on the server, which keeps running)

    thread = threading.Thread(target=stop, name="evtime-release", daemon=True)
    thread.start()
    thread.join(timeout)


def _allow_slow_server_start() -> None:
    """PySpark gives the server 120 s to start, then kills it; on a busy machine (measured:
    load 25 on 2 cores) that is not enough.  EVTIME_SERVER_START_TIMEOUT seconds (default
    600) instead, through the launcher's (private) setting when it has one."""
    from pyspark.sql.connect import local_server

    launcher = getattr(local_server, "ServerLauncher", None)
    try:
        wanted = int(os.environ.get("EVTIME_SERVER_START_TIMEOUT", "600"))
    except ValueError:
        raise UsageError("EVTIME_SERVER_START_TIMEOUT takes a number of seconds") from None
    if launcher is not None and isinstance(getattr(launcher, "_READY_TIMEOUT", None), int):
        launcher._READY_TIMEOUT = max(launcher._READY_TIMEOUT, wanted)


def server_status() -> dict[str, object] | None:
    """What is known of the reused local server (never its token), or None."""
    from pyspark.sql.connect.local_server import Discovery, LocalConnectServer

    with Discovery() as discovery:
        server = LocalConnectServer(discovery)
        if server.pid is None:
            return None
        return {
            "url": server.url,
            "pid": server.pid,
            "spark": server.spark_version,
            "running": server.is_reusable(),
            "directory": discovery.directory,
        }


def server_stop(wait: bool = False, grace: float = 30.0) -> bool | None:
    """Stop the recorded server (SIGTERM); True when one was running, None when it could not
    be inspected.  ``wait``: until its process is gone, SIGKILL after ``grace`` seconds (a
    JVM out of heap, or stopped, may never act on SIGTERM)."""
    import signal
    import time

    from pyspark.sql.connect.local_server import stop_local_connect_server

    info = server_status() if wait else None
    stopped = stop_local_connect_server()
    if info is None or not stopped:
        return stopped
    pid = int(info["pid"])  # type: ignore[call-overload]
    deadline, killed = time.monotonic() + grace, False
    while _alive(pid):
        if time.monotonic() > deadline:
            if killed:
                break
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                os.kill(pid, signal.SIGCONT)  # (a stopped process dies only once continued)
            killed, deadline = True, time.monotonic() + grace
        time.sleep(0.2)
    return stopped


def server_answers(timeout: float | None = None) -> bool:
    """Whether the recorded server answers a request (see :func:`answers`)."""
    from pyspark.sql.connect.local_server import Discovery, LocalConnectServer

    with Discovery() as discovery:
        server = LocalConnectServer(discovery)
        if server.token is None or server.host is None:
            return False
        url, token = server.url, server.token
    os.environ["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = token  # (as PySpark does; not printed)
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    spark = ConnectSession.builder.remote(url).create()
    ok = answers(spark, timeout)
    if ok:  # (released now: the run's own session is another one)
        thread = threading.Thread(target=spark.stop, name="evtime-release", daemon=True)
        thread.start()
        thread.join(RELEASE_TIMEOUT)
    else:
        _forget_session(spark)
    return ok


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended but not yet reaped by its parent, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:
            return True
        return True
