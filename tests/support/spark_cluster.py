"""A Spark standalone cluster on loopback: a master and workers started from pyspark's own
distribution (``bin/spark-class ...Master`` / ``...Worker``), what ``docker/compose.yaml``'s
``spark-master`` and ``spark-worker`` services run, without Docker.

The standalone-cluster tests use it. Every application gets one
core unless it asks for more (``spark.deploy.defaultCores``): the stream and an Airflow
task share two 1-core workers instead of the first taking both.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyspark

from core.errors import S3TMError
from devtools.local.processes import stop_group

SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"
START_TIMEOUT_S = 180.0


class ClusterStartFailed(S3TMError):
    """A daemon exited, or the workers did not register in time."""


@dataclass
class StandaloneCluster:
    """A master and ``workers`` workers of ``cores`` cores and ``memory`` each, their logs
    and work folders under ``folder``; ``env``: added to the daemons' environment."""

    folder: Path
    workers: int = 2
    cores: int = 1
    memory: str = "2g"
    # 0: the master binds ports of its choosing and says which in its log (read back)
    port: int = 0
    ui_port: int = 0
    # variables the daemons pass on to executors (S3A reads the object store's keys there)
    env: dict[str, str] = field(default_factory=dict)
    _processes: list[subprocess.Popen[bytes]] = field(default_factory=list, repr=False)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "SPARK_HOME": str(SPARK_CLASS.parent.parent),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(self.folder / "logs"),
            "SPARK_MASTER_OPTS": "-Dspark.deploy.defaultCores=1",
            "PYSPARK_PYTHON": sys.executable,  # executors run the project's interpreter
            **self.env,
        }

    def _start(self, name: str, argv: list[str]) -> None:
        with (self.folder / f"{name}.log").open("w") as log:
            self._processes.append(
                subprocess.Popen(
                    [str(SPARK_CLASS), *argv],
                    env=self._env(),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    def start(self) -> str:
        """Starts the master, then the workers once the master is bound, and waits until
        every worker registered; returns the master URL.

        The ports are the master's own word, read off its log: a port picked free here can
        be taken before the JVM binds it, and Spark then binds the next one (a CI run met
        another server's page on the UI port). The workers' UIs take ephemeral ports.

        Raises:
            ClusterStartFailed: with the daemons' last log lines.
        """
        self.folder.mkdir(parents=True, exist_ok=True)
        self._start(
            "master",
            ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(self.port), "--webui-port", str(self.ui_port)],
        )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT_S
        while (bound := self._bound_ports()) is None:
            self._check(deadline, "the master did not bind its ports")
            time.sleep(0.2)
        self.port, self.ui_port = bound
        for k in range(self.workers):
            self._start_worker(k)
        while self.alive_workers() < self.workers:
            self._check(deadline, "the workers did not register")
            time.sleep(1)
        return self.master_url

    def _start_worker(self, k: int) -> None:
        self._start(
            f"worker{k}",
            ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
             "--port", "0", "--cores", str(self.cores), "--memory", self.memory,
             "--work-dir", str(self.folder / f"work{k}"),
             "--webui-port", "0", self.master_url],
        )  # fmt: skip

    def add_worker(self) -> int:
        """Starts one more worker (``cores`` cores) and waits until the master counts it;
        returns the number of live workers. Raises ClusterStartFailed as ``start`` does."""
        before = self.alive_workers()
        self._start_worker(len(list(self.folder.glob("worker*.log"))))
        deadline = time.monotonic() + START_TIMEOUT_S
        while self.alive_workers() <= before:
            self._check(deadline, "the added worker did not register")
            time.sleep(1)
        return self.alive_workers()

    def _bound_ports(self) -> tuple[int, int] | None:
        """(RPC port, UI port) the master's log says it bound, once it said both."""
        log = self.folder / "master.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        rpc = re.search(r"Starting Spark master at spark://[^:\s]+:(\d+)", text)
        ui = re.search(r"Successfully started service 'MasterUI' on port (\d+)", text)
        return (int(rpc.group(1)), int(ui.group(1))) if rpc and ui else None

    def _check(self, deadline: float, what: str) -> None:
        if time.monotonic() > deadline or any(p.poll() is not None for p in self._processes):
            logs = {p.name: p.read_text()[-1500:] for p in self.folder.glob("*.log")}
            self.stop()
            raise ClusterStartFailed(f"the Spark cluster did not come up ({what}): {logs}")

    def state(self) -> dict[str, Any]:
        """The master's JSON status page (workers, applications); empty when it is down."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
                return dict(json.load(r))
        except (OSError, ValueError):  # down, or not (yet) the master's JSON
            return {}

    def alive_workers(self) -> int:
        workers = self.state().get("workers") or []
        return sum(1 for w in workers if isinstance(w, dict) and w.get("state") == "ALIVE")

    def applications(self) -> list[str]:
        """Names of the applications the master has run or runs."""
        state = self.state()
        apps = [*(state.get("completedapps") or []), *(state.get("activeapps") or [])]
        return [str(app["name"]) for app in apps if isinstance(app, dict)]

    def stop(self) -> None:
        """SIGTERM to every daemon's process group, then SIGKILL to those still up."""
        for process in self._processes:
            stop_group(process, timeout_s=30)
        self._processes.clear()
