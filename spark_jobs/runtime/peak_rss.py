"""Peak resident memory of a process between two points (Linux ``/proc``: psutil reads a
process' current RSS but not its peak, the kernel's ``VmHWM``, nor resets it).

``VmHWM`` is a process' peak RSS since it started, or since ``5`` was written to its
``clear_refs``; so each step of a chain gets its own peak. Elsewhere (no ``/proc``) the
figures are None.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def reset_peak(pid: int | str | None = "self") -> None:
    """Start a new peak for ``pid`` (its peak becomes its current RSS)."""
    if pid is None:
        return
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/clear_refs").write_text("5")


def peak_mib(pid: int | str | None = "self") -> float | None:
    """Peak RSS of ``pid`` in MiB since the last reset; None when it cannot be read."""
    if pid is None:
        return None
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return None


def driver_jvm_pid(spark: SparkSession | None) -> int | None:
    """The pid of the JVM a PySpark driver talks to (this machine's), None without one."""
    jvm = spark._jvm if spark is not None else None
    return int(jvm.java.lang.ProcessHandle.current().pid()) if jvm is not None else None
