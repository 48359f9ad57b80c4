"""Stopping a local service and everything it started.

Each service here (Airflow's components, Spark daemons, the stream) is started as the leader of
its own session, so its process group holds its children. A leader can exit before its
children do (an Airflow component can exit while another is still shutting down), so
stopping waits for the whole group, not for the leader alone, and kills what is left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time

import psutil

_POLL_S = 0.2


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes in process group ``pgid``."""
    members = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error, ProcessLookupError):
            if os.getpgid(process.pid) == pgid and process.status() != psutil.STATUS_ZOMBIE:
                members.append(process.pid)
    return members


def _wait_group(process: subprocess.Popen[bytes], deadline: float) -> bool:
    """Wait for the leader and its group to end by ``deadline``; whether they did."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=max(0.0, deadline - time.monotonic()))
    while group_members(process.pid) and time.monotonic() < deadline:
        time.sleep(_POLL_S)
    return process.poll() is not None and not group_members(process.pid)


def stop_group(
    process: subprocess.Popen[bytes],
    *,
    first: signal.Signals = signal.SIGTERM,
    leader_only: bool = False,
    timeout_s: float = 60.0,
) -> bool:
    """Send ``first`` (to the group, or to the leader only: a Ctrl-C the leader handles), wait
    up to ``timeout_s`` for the leader and the whole group to end, then SIGKILL what is left.
    Returns whether everything ended without the SIGKILL."""
    with contextlib.suppress(ProcessLookupError):
        if process.poll() is None and leader_only:
            process.send_signal(first)
        elif process.poll() is None or group_members(process.pid):
            os.killpg(process.pid, first)
    if _wait_group(process, time.monotonic() + timeout_s):
        return True
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    _wait_group(process, time.monotonic() + 30.0)
    return False
