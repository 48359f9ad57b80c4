"""tests/cpu_shares.py: each xdist worker, and what it starts, in a CPU cgroup of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.cpu_shares import CPU_V1, PARENT, leave, worker_cgroup

ROOT = Path(__file__).resolve().parents[1]

# each test writes the cpu cgroup of its worker and of a child process it starts
PROBE = """
import json, os, subprocess, sys

CGROUP = (
    "lines = open('/proc/self/cgroup').read().splitlines();"
    "print(next(l.split(':', 2)[2] for l in lines if 'cpu' in l.split(':')[1].split(',')))"
)

def _record(name):
    own = subprocess.run([sys.executable, "-c", CGROUP], capture_output=True, text=True)
    worker = os.environ["PYTEST_XDIST_WORKER"]
    with open(os.path.join(os.environ["PROBE_OUT"], f"{worker}-{name}.json"), "w") as f:
        json.dump({"worker": worker, "child": own.stdout.strip()}, f)

def test_a():
    _record("a")

def test_b():
    _record("b")
"""


def _writable() -> bool:
    return (CPU_V1 / "cpu.shares").is_file() and os.access(CPU_V1, os.W_OK)


def test_each_worker_runs_in_a_cpu_cgroup_of_its_own(tmp_path: Path) -> None:
    (tmp_path / "test_probe.py").write_text(PROBE)
    out = tmp_path / "out"
    out.mkdir()
    env = {
        k: v for k, v in os.environ.items() if k not in {"PYTEST_ADDOPTS", "S3TM_TEST_CPU_SHARES"}
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-p", "tests.cpu_shares", "--rootdir", str(tmp_path), "-n", "2", "--dist", "each",
         str(tmp_path / "test_probe.py")],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
        env={**env, "PROBE_OUT": str(out)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    seen = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
    assert len(seen) == 4  # --dist each: both workers ran both tests
    by_worker = {
        s["worker"]: {t["child"] for t in seen if t["worker"] == s["worker"]} for s in seen
    }
    assert set(by_worker) == {"gw0", "gw1"}
    if not _writable():
        # no cpu hierarchy to write here: the workers stay where pytest started them
        assert all(f"/{PARENT}/" not in g for groups in by_worker.values() for g in groups)
        return
    # what a worker started ran in the worker's cgroup: one per worker, not shared
    gw0, gw1 = (next(iter(by_worker[w])) for w in ("gw0", "gw1"))
    assert all(len(g) == 1 for g in by_worker.values()), by_worker
    assert gw0.startswith(f"/{PARENT}/gw0-") and gw1.startswith(f"/{PARENT}/gw1-"), by_worker
    # and the workers' cgroups are gone once they exited (nothing left running in them)
    assert not (CPU_V1 / gw0.lstrip("/")).exists() and not (CPU_V1 / gw1.lstrip("/")).exists()


def test_a_process_joins_a_cgroup_and_leaves_it(tmp_path: Path) -> None:
    """The two steps on a stand-in hierarchy (a folder with the files the kernel's has)."""
    root = tmp_path / "cpu"
    root.mkdir()
    (root / "cpu.shares").write_text("1024\n")
    (root / "cgroup.procs").write_text("")
    folder = worker_cgroup("gw0", root)
    assert folder == root / PARENT / f"gw0-{os.getpid()}"
    assert (folder / "cgroup.procs").read_text() == str(os.getpid())
    leave(folder, root)
    assert (root / "cgroup.procs").read_text() == str(os.getpid())
    # a stand-in folder keeps the file written into it, as a busy cgroup keeps its process
    assert folder.exists()
    (root / "cpu.shares").unlink()
    assert worker_cgroup("gw1", root) is None  # no cpu hierarchy: nothing done
