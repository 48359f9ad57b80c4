"""`pytest --cpu-report FILE` (tests/cpu_accounting.py): each test phase's CPU seconds,
children included, counted by the cgroup the pytest process runs in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# a child process that burns 1 s of CPU and exits: its CPU is the test's
BURN = r"import time\nt = time.process_time()\nwhile time.process_time() - t < 1.0: pass"
PROBE = f"""
import subprocess, sys, time

def test_busy_child():
    subprocess.run([sys.executable, "-c", "{BURN}"], check=True)

def test_idle():
    time.sleep(0.5)
"""


def test_a_childs_cpu_is_counted_to_the_test_that_started_it(tmp_path: Path) -> None:
    (tmp_path / "test_probe.py").write_text(PROBE)
    report = tmp_path / "cpu.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-p", "tests.cpu_accounting", "--rootdir", str(tmp_path),
         "--cpu-report", str(report), str(tmp_path / "test_probe.py")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        # this run's own options (a whole run's --store-durations) are not the probe's
        env={k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    if "no cgroup to measure in" in done.stdout:
        # said, not silently skipped: this machine gives the process no cgroup to write
        assert not report.exists()
        return
    rows = {(r["test"].split("::")[-1], r["phase"]): r for r in json.loads(report.read_text())}
    phases = ("setup", "call", "teardown")
    assert set(rows) == {(t, p) for t in ("test_busy_child", "test_idle") for p in phases}
    assert rows["test_busy_child", "call"]["cpu_s"] >= 0.9
    assert rows["test_idle", "call"]["cpu_s"] < 0.3 and rows["test_idle", "call"]["wall_s"] >= 0.5
    assert "CPU seconds by file" in done.stdout
