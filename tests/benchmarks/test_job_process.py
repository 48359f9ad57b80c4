"""``benchmarks.job_process``: a job in a process of its own reports its exit code and its
driver's peak memory, which is at least what the job itself allocated."""

from __future__ import annotations

import subprocess
import sys

from benchmarks import job_process

# A stand-in job holding 200 MiB, run as ``benchmarks.job_process`` runs a job, in a process
# of its own: pytest's process may hold another test's Spark JVM as its child.
HELD_JOB = """
import sys, types
from benchmarks import job_process

job = types.ModuleType("spark_jobs.jobs._held")

def main(arguments):
    held = bytearray(200 << 20)  # touched: resident
    return 3 if arguments == ["--fail"] and len(held) else 0

job.main = main
sys.modules["spark_jobs.jobs._held"] = job
sys.exit(job_process.main(sys.argv[1:]))
"""


def test_a_job_reports_its_exit_code_and_a_driver_peak_above_what_it_held(tmp_path):
    """The driver's peak covers what the job held, and its code is the one the job returned."""
    figures_path = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, "-c", HELD_JOB, str(figures_path), "_held", "--fail"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    figures = job_process.JobFigures.read(figures_path)
    assert figures.exit_code == 3
    assert figures.driver_peak_mib is not None and figures.driver_peak_mib >= 200
    assert figures.jvm_peak_mib is None  # no JVM was started


def test_a_usage_error_is_recorded_with_its_code(tmp_path):
    figures_path = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.job_process", str(figures_path), "place", "--nope"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "Unrecognized options: --nope" in done.stderr
    assert job_process.JobFigures.read(figures_path).exit_code == 2


def test_without_a_job_it_says_how_to_call_it(capsys):
    assert job_process.main([]) == 2
    assert "usage" in capsys.readouterr().err
