"""One Spark job in a process of its own, as a DAG task runs it (``spark-submit
spark_jobs/jobs/<job>.py``), and the driver's peak memory it reached.

``python -m benchmarks.job_process FIGURES.json JOB [job arguments...]`` runs
``spark_jobs.jobs.JOB.main(arguments)`` in this process. At exit it writes to FIGURES.json
the job's exit code, the Python driver's peak RSS (``VmHWM``, exact) and its JVM's, read
every ``JVM_POLL_SECONDS`` while it runs (a JVM's last fraction of a second, stopping, is
not its peak). What a driver pod of that job needs is the sum of the two.

Benchmarks run the remap's steps this way (``bench subscriptions``): in the benchmark's own
process, a step's peak also holds the benchmark's tweets and subscriptions.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import sys
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from spark_jobs.runtime.peak_rss import peak_mib

JVM_POLL_SECONDS = 0.2


@dataclass(frozen=True)
class JobFigures:
    """What a job process reports: its exit code, its driver's and its JVM's peak MiB."""

    exit_code: int
    driver_peak_mib: float | None
    jvm_peak_mib: float | None

    @classmethod
    def read(cls, path: Path) -> JobFigures:
        return cls(**json.loads(path.read_text()))


def _java_children() -> list[int]:
    """This process' child JVMs (PySpark's gateway starts one)."""
    found = []
    for child in psutil.Process().children():
        with contextlib.suppress(psutil.Error):
            if "java" in child.name():
                found.append(child.pid)
    return found


class _JvmPeak:
    """The largest VmHWM of this process' JVMs, read every ``JVM_POLL_SECONDS``."""

    def __init__(self) -> None:
        self.peak: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="jvm-peak", daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(JVM_POLL_SECONDS):
            self.read()

    def read(self) -> None:
        for pid in _java_children():
            mib = peak_mib(pid)
            if mib is not None and (self.peak is None or mib > self.peak):
                self.peak = mib

    def stop(self) -> float | None:
        self._stop.set()
        self._thread.join()
        return self.peak


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m benchmarks.job_process FIGURES.json JOB [ARGS...]", file=sys.stderr)
        return 2
    out, job, arguments = Path(argv[0]), argv[1], argv[2:]
    module = importlib.import_module(f"spark_jobs.jobs.{job}")
    jvm = _JvmPeak()
    code = 1
    try:
        code = int(module.main(arguments))
    except SystemExit as stop:  # argparse's --help and usage errors
        code = stop.code if isinstance(stop.code, int) else 1
        raise
    finally:
        # after the job: the driver's peak covers all it did
        figures = JobFigures(code, peak_mib("self"), jvm.stop())
        out.write_text(json.dumps(asdict(figures)))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
