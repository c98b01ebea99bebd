"""A real Spark standalone cluster on this machine, as users' clusters are: pyspark's own
``spark-class`` master and worker on 127.0.0.1, the worker in a mount namespace of its
own with a private /tmp (``unshare -m`` and a tmpfs), so its executors see none of the
driver's temporary files, only what every node shares (here: S3 on moto's server, and a
directory outside /tmp standing for a shared mount)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pyspark


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def unshare_refusal() -> str | None:
    """Why a worker cannot have a mount namespace of its own here, or None."""
    if shutil.which("unshare") is None:
        return "no unshare command"
    p = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount -t tmpfs tmpfs /tmp"],
        capture_output=True,
        text=True,
    )
    return None if p.returncode == 0 else f"unshare -m refused: {p.stderr.strip()}"


class Standalone:
    """Master and worker processes; :attr:`url` is the master's spark:// URL."""

    def __init__(self, work: Path, cores: int = 2, memory: str = "2g", app_cores: int = 0):
        """``cores`` and ``memory``: what the worker offers; ``app_cores``: at most that many
        cores for an application that does not say (the master's spark.deploy.defaultCores;
        0: all it can get), so that applications can run side by side."""
        self.work = work
        home = Path(pyspark.__file__).resolve().parent
        port, ui = _free_port(), _free_port()
        self.url = f"spark://127.0.0.1:{port}"
        env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1")
        env["SPARK_WORKER_DIR"] = str(work / "worker")  # (not under the installed pyspark)
        env.pop("PYSPARK_GATEWAY_PORT", None)
        if app_cores:
            opts = env.get("SPARK_MASTER_OPTS", "")
            env["SPARK_MASTER_OPTS"] = f"{opts} -Dspark.deploy.defaultCores={app_cores}".strip()
        cls = str(home / "bin" / "spark-class")
        self.log = work / "master.log"
        self.master = subprocess.Popen(
            [cls, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(port), "--webui-port", str(ui)],
            env=env, stdout=open(self.log, "wb"), stderr=subprocess.STDOUT,  # noqa: SIM115
            start_new_session=True,
        )  # fmt: skip
        worker = (
            f"mount -t tmpfs tmpfs /tmp && exec {cls} org.apache.spark.deploy.worker.Worker "
            f"--host 127.0.0.1 --cores {cores} --memory {memory} --webui-port {_free_port()} "
            f"{self.url}"
        )
        self.worker = subprocess.Popen(
            ["unshare", "-m", "sh", "-c", worker],
            env=env, stdout=open(work / "worker.log", "wb"), stderr=subprocess.STDOUT,  # noqa: SIM115
            start_new_session=True,
        )  # fmt: skip
        self._wait_for("Registering worker", 180)

    def _wait_for(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log.read_text(errors="replace"):
                return
            for p in (self.master, self.worker):
                if p.poll() is not None:
                    raise RuntimeError(f"a cluster process ended: see {self.work}")
            time.sleep(0.2)
        raise RuntimeError(f"no {text!r} in {self.log} within {timeout} s")

    def stop(self) -> None:
        for p in (self.worker, self.master):
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except OSError:
                continue
        for p in (self.worker, self.master):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
