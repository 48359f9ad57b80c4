"""Stopping a service stops everything it started, even children that outlive their leader."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from devtools.local.processes import group_members, stop_group

# The leader starts a child and exits at once on SIGTERM; the child takes `delay` seconds to
# end on SIGTERM, or ignores it (delay < 0), like a dag-processor still shutting down.
_LEADER = textwrap.dedent(
    """
    import signal, subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", sys.argv[1]])
    print(child.pid, flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        time.sleep(0.1)
    """
)
_CHILD = textwrap.dedent(
    """
    import signal, sys, time
    delay = {delay}
    def on_term(*_):
        time.sleep(delay)
        sys.exit(0)
    signal.signal(signal.SIGTERM, signal.SIG_IGN if delay < 0 else on_term)
    print("ready", flush=True)
    while True:
        time.sleep(0.1)
    """
)


def _start(delay: float) -> tuple[subprocess.Popen[bytes], int]:
    leader = subprocess.Popen(
        [sys.executable, "-c", _LEADER, _CHILD.format(delay=delay)],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert leader.stdout is not None
    child = int(leader.stdout.readline())
    assert leader.stdout.readline().strip() == b"ready"  # its SIGTERM handler is set
    return leader, child


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_stop_waits_for_a_child_that_outlives_its_leader():
    leader, child = _start(delay=1.5)
    assert set(group_members(leader.pid)) == {leader.pid, child}
    assert stop_group(leader, timeout_s=30) is True
    # the leader exits at once; the stop returned only once the child had ended too
    assert not _alive(child)
    assert group_members(leader.pid) == []


def test_a_child_that_ignores_sigterm_is_killed_after_the_timeout():
    leader, child = _start(delay=-1)
    assert stop_group(leader, timeout_s=1) is False
    assert not _alive(child)
    assert group_members(leader.pid) == []


def test_a_group_whose_leader_already_ended_is_still_stopped():
    leader, child = _start(delay=-1)
    leader.terminate()  # only the leader
    leader.wait(timeout=10)
    assert _alive(child)
    assert stop_group(leader, timeout_s=1) is False
    assert not _alive(child)
