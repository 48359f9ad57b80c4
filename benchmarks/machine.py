"""Facts about the machine a benchmark ran on, and process memory probes (Linux)."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import numba
import numpy as np
import psutil

from spark_jobs.runtime.peak_rss import peak_mib, reset_peak


def machine_summary() -> str:
    """One line: CPU model, cores usable, memory, Python/numpy/numba versions."""
    cpu = "unknown CPU"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{cpu}, {len(os.sched_getaffinity(0))} cores usable, {mem_gib:.0f} GiB, "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}, "
        f"numpy {np.__version__}, numba {numba.__version__}"
    )


def pin_to_one_core() -> int:
    """Restrict this process to one core (the bars say 'one core'); returns the core id."""
    core = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {core})
    return core


def reset_peak_rss() -> bool:
    """Reset this process' peak-RSS mark (VmHWM); False where that is not allowed."""
    reset_peak("self")
    return peak_mib("self") is not None


def rss_mib() -> float:
    """Current resident set size in MiB."""
    return float(psutil.Process().memory_info().rss / 2**20)


def peak_rss_mib() -> float:
    """Peak resident set size since start or the last :func:`reset_peak_rss`, in MiB."""
    value = peak_mib("self")
    return float("nan") if value is None else value
