"""Kill points for the crash tests: ``S3TM_CRASH=<point>`` kills a job there, as a power
cut or an OOM kill would (exit code 137). Unset, each point costs one dict lookup.

Batch jobs: ``learn:after-mapping`` (a candidate's mapping written, its row not),
``place:before-commit``, ``publish:before-commit`` (decided, not committed); the Kafka
ingest: ``ingest:after-plan`` (its offsets recorded, nothing read), ``ingest:after-quarantine``
(the quarantine committed, bronze not).

The streaming job, ``S3TM_CRASH=<point>:<batch id>``: driver points (in ``foreachBatch``,
in order): ``before-plan``, ``after-plan`` (the batch plan is in ``stream.batches``),
``after-sync``, ``after-dispatch`` (the tasks' Parquet files are staged, nothing
committed), ``after-matches``, ``after-deliveries``, ``after-quarantine``, ``after-record``
(everything committed, Spark's checkpoint not yet).
Task points (in the Python workers): ``route``, ``match``, ``dispatch`` (after the task
wrote its staged files). A task point SIGKILLs the driver process: the JVM exits with it
(it watches the driver's pipe), and so do the workers.
"""

from __future__ import annotations

import logging
import os
import signal
import time

from spark_jobs.settings import env_name

log = logging.getLogger(__name__)

# read straight from the environment, not through settings(): a point is checked often
ENV = env_name("crash")
DRIVER_PID_ENV = env_name("stream_driver_pid")
DRIVER_POINTS = (
    "before-plan",
    "after-plan",
    "after-sync",
    "after-dispatch",
    "after-matches",
    "after-deliveries",
    "after-quarantine",
    "after-record",
)
TASK_POINTS = ("route", "match", "dispatch")


def arm() -> None:
    """Before the Spark session starts: workers inherit the driver's pid to kill it."""
    if os.environ.get(ENV):
        os.environ[DRIVER_PID_ENV] = str(os.getpid())


def _armed(point: str, batch_id: int) -> bool:
    return os.environ.get(ENV) == f"{point}:{batch_id}"


def crash(point: str) -> None:
    """Kill this process here when ``S3TM_CRASH`` names ``point``."""
    if os.environ.get(ENV) == point:
        log.error("%s=%s: killing the process", ENV, point)
        os._exit(137)


def crash_driver(point: str, batch_id: int) -> None:
    """Kill the driver process here when armed for ``point`` in this batch."""
    if _armed(point, batch_id):
        log.error("stream: %s=%s:%d: killing the process", ENV, point, batch_id)
        os._exit(137)


def task_point(batch_id: int) -> str | None:
    """The task point armed for this batch (the driver hands it to the tasks), or None."""
    return next((p for p in TASK_POINTS if _armed(p, batch_id)), None)


def crash_from_task(armed: str | None, point: str) -> None:
    """In a worker: SIGKILL the driver when ``armed`` is this ``point``."""
    if armed != point:
        return
    os.kill(int(os.environ[DRIVER_PID_ENV]), signal.SIGKILL)
    time.sleep(120)  # the task must not finish: the JVM is going down with the driver
