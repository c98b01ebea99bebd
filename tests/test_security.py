"""Servers and ports evtime opens: loopback only, the reused Spark Connect server refuses
clients without its token, and no token is ever printed (also with -v, also on failure)."""

from __future__ import annotations

import glob
import ipaddress
import json
import os
import socket
import subprocess
import sys

import pytest

from tests.conftest import SAMPLES
from tests.where import Worker

SAMPLE = ["adjust", "--unit", "msec", "--range", "999", str(SAMPLES / "tuples.parquet")]


def listening(pid: int) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket process ``pid`` listens on (from /proc)."""
    inodes = set()
    for fd in glob.glob(f"/proc/{pid}/fd/*"):
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    found = []
    for table, width in (("tcp", 4), ("tcp6", 16)):
        with open(f"/proc/{pid}/net/{table}") as fh:
            next(fh)
            for line in fh:
                cols = line.split()
                local, state, inode = cols[1], cols[3], cols[9]
                if state != "0A" or inode not in inodes:  # 0A = LISTEN
                    continue
                hex_addr, hex_port = local.split(":")
                raw = bytes.fromhex(hex_addr)
                # /proc prints the address as host-order 32-bit words
                raw = b"".join(raw[i : i + 4][::-1] for i in range(0, width, 4))
                found.append((str(ipaddress.ip_address(raw)), int(hex_port, 16)))
    return found


def is_loopback(addr: str) -> bool:
    ip = ipaddress.ip_address(addr)
    if ip.version == 6 and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def test_local_mode_jvm_listens_on_loopback_only(spark):
    """The session every local run builds (evtime.session.build_session, local master)."""
    pid = spark.sparkContext._gateway.proc.pid
    assert "java" in os.readlink(f"/proc/{pid}/exe")
    ports = listening(pid)
    assert ports, "the driver JVM should listen (RPC, block manager)"
    assert [p for p in ports if not is_loopback(p[0])] == [], ports


@pytest.fixture(scope="module")
def server(workers):
    """The reused local Connect server of the 'connect' test worker: started by a real
    ``evtime --reuse-server`` run; its discovery record (port, token, pid)."""
    if "connect" not in workers:
        workers["connect"] = Worker("connect")
    w = workers["connect"]
    code, _, err, exc = w.run(SAMPLE, None)
    assert code == 0, (err, exc)
    with open(w.env["SPARK_LOCAL_CONNECT_DISCOVERY"]) as fh:
        record = json.load(fh)
    return w, record


CLIENT = (
    "import sys\n"
    "from pyspark.sql import SparkSession\n"
    "spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()\n"
    "print('ROWS', spark.range(3).count())\n"
)


def client(url: str, token: str | None) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SPARK_CONNECT", "SPARK_REMOTE", "SPARK_LOCAL_CONNECT"))
    }
    if token is not None:
        env["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-c", CLIENT, url],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@pytest.mark.slow
@pytest.mark.parametrize("token", [None, "not-the-token"])
def test_reused_server_refuses_clients_without_its_token(server, token):
    _, record = server
    url = f"sc://localhost:{record['port']}"
    p = client(url, token)
    assert p.returncode != 0 and "ROWS" not in p.stdout
    assert "UNAUTHENTICATED" in p.stderr or "authenticat" in p.stderr.lower(), p.stderr[-2000:]
    # the same client with the right token is served: it was the token that was missing
    ok = client(url, record["token"])
    assert ok.returncode == 0 and "ROWS 3" in ok.stdout, ok.stderr[-2000:]


@pytest.mark.slow
def test_reused_server_listens_on_loopback_only(server):
    _, record = server
    ports = listening(record["pid"])
    assert record["port"] in [p for _, p in ports]
    assert [p for p in ports if not is_loopback(p[0])] == [], ports


@pytest.mark.slow
def test_reuse_server_token_not_printed_or_logged_with_verbose(server):
    w, record = server
    code, out, err, exc = w.run(["adjust", "-v", *SAMPLE[1:]], None)
    assert code == 0, (err, exc)
    assert record["token"] not in out + err
    logs = glob.glob(
        os.path.join(os.path.dirname(w.env["SPARK_LOCAL_CONNECT_DISCOVERY"]), "**"), recursive=True
    )
    texts = [p for p in logs if os.path.isfile(p) and not p.endswith(".json")]
    assert texts, "the server writes logs next to its discovery record"
    for path in texts:
        with open(path, errors="replace") as fh:
            assert record["token"] not in fh.read(), path


SECRET = "evtime-test-secret-9f2c41"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def evtime_remote(url: str, cli_env, token: str | None = SECRET) -> subprocess.CompletedProcess:
    env = {k: v for k, v in cli_env.items() if not k.startswith("SPARK_LOCAL_CONNECT")}
    env.pop("EVTIME_REUSE_SERVER", None)
    if token is not None:
        env["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "evtime", "adjust", "-v", "--remote", url, *SAMPLE[1:]],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_remote_token_not_printed_when_nothing_listens(cli_env):
    url = f"sc://localhost:{_free_port()}"
    p = evtime_remote(url, cli_env)
    assert p.returncode == 1
    assert "cannot reach the Spark Connect server at " + url[: len(url)] in p.stderr
    assert SECRET not in p.stdout + p.stderr


def test_remote_token_in_url_not_printed_when_nothing_listens(cli_env):
    url = f"sc://localhost:{_free_port()}/;token={SECRET}"
    p = evtime_remote(url, cli_env, token=None)
    assert p.returncode == 1
    assert "cannot reach the Spark Connect server" in p.stderr
    assert SECRET not in p.stdout + p.stderr


@pytest.mark.slow
def test_remote_wrong_token_refused_and_not_printed(server, cli_env):
    _, record = server
    p = evtime_remote(f"sc://localhost:{record['port']}", cli_env)
    assert p.returncode != 0, p.stdout
    assert p.stderr.strip(), "a refused run says why"
    assert SECRET not in p.stdout + p.stderr
    assert record["token"] not in p.stdout + p.stderr


@pytest.mark.slow
def test_remote_right_token_runs_and_is_not_printed(server, cli_env):
    _, record = server
    p = evtime_remote(f"sc://localhost:{record['port']}", cli_env, token=record["token"])
    assert p.returncode == 0, p.stderr[-2000:]
    assert "read 5, released 5" in p.stderr
    assert record["token"] not in p.stdout + p.stderr


def test_redact_masks_tokens_in_urls_settings_and_the_environment(monkeypatch):
    from evtime.errors import redact

    monkeypatch.setenv("SPARK_CONNECT_AUTHENTICATE_TOKEN", SECRET)
    text = redact(
        f"sc://h:1/;token={SECRET};use_ssl=true spark.connect.authenticate.token=abc "
        f"Bearer {SECRET}"
    )
    assert SECRET not in text and "abc" not in text
    assert "sc://h:1/;token=***;use_ssl=true" in text
