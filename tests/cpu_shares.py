"""Each pytest-xdist worker in a CPU cgroup of its own, so the two workers share the cores
evenly whatever they start.

The kernel shares CPU between runnable threads, not between workers: a test that runs a
dozen busy processes (the cluster demo: a Spark master, workers, drivers and executors,
Airflow's scheduler and its tasks, Kafka, an S3 server) took most of both cores from the
test on the other worker, whose time then depended on what ran beside it (`s3tm demo`'s
set-up, 131 s alone: 156 s beside other files, 210 s beside the cluster demo). In cgroups
of equal ``cpu.shares`` (cgroup v1's ``cpu`` controller) each worker gets half of a busy
machine and all of an idle one: the scheduler still gives away what a worker leaves
unused. Every process a worker starts stays in its cgroup.

On by default where the ``cpu`` hierarchy is writable (root); elsewhere, or with
``S3TM_TEST_CPU_SHARES=off``, the workers run as before. Test-only: what a test asserts is
the same either way.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import pytest

CPU_V1 = Path("/sys/fs/cgroup/cpu")
PARENT = "s3tm-tests"
ENV = "S3TM_TEST_CPU_SHARES"
_FOLDER = pytest.StashKey[Path]()


def worker_cgroup(worker: str, root: Path = CPU_V1) -> Path | None:
    """Move this process into ``<root>/s3tm-tests/<worker>-<pid>`` (default shares), or
    None when there is no writable ``cpu`` hierarchy."""
    if not (root / "cpu.shares").is_file():
        return None
    folder = root / PARENT / f"{worker}-{os.getpid()}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        with contextlib.suppress(OSError):
            folder.rmdir()
        return None
    return folder


def leave(folder: Path, root: Path = CPU_V1) -> None:
    """Back to the root cgroup; the worker's folder goes once nothing is left in it."""
    with contextlib.suppress(OSError):
        (root / "cgroup.procs").write_text(str(os.getpid()))
    # EBUSY while a process the worker started still runs (one exiting on a loaded machine
    # takes a moment): tried for up to 2 s, then left
    for _ in range(20):
        try:
            folder.rmdir()
            return
        except OSError:
            time.sleep(0.1)


def pytest_configure(config: pytest.Config) -> None:
    worker = getattr(config, "workerinput", {}).get("workerid")
    if worker is None or os.environ.get(ENV, "").lower() in {"off", "0", "false"}:
        return
    folder = worker_cgroup(worker)
    if folder is not None:
        config.stash[_FOLDER] = folder


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(_FOLDER, None)
    if folder is not None:
        leave(folder)
