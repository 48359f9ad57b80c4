"""``docker/clean-logs.sh`` (the image's ``/clean-logs``, which the Airflow chart's log
groomers run): it deletes the log files past the retention and the folders left empty, and
keeps the rest."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "docker" / "clean-logs.sh"


def test_old_logs_go_and_recent_ones_stay(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    old = logs / "dag_id=s3tm_remap" / "run_id=old" / "attempt=1.log"
    recent = logs / "dag_id=s3tm_remap" / "run_id=new" / "attempt=1.log"
    for path in (old, recent):
        path.parent.mkdir(parents=True)
        path.write_text("log\n")
    ages = time.time() - 20 * 86_400
    os.utime(old, (ages, ages))
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__LOG_RETENTION_DAYS": "15"}
    env.pop("AIRFLOW__LOGGING__BASE_LOG_FOLDER", None)
    # it loops forever: one round, then the timeout ends its sleep
    done = subprocess.run(
        ["timeout", "3", "bash", str(SCRIPT)], env=env, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    assert done.returncode == 124, done.stderr  # stopped by the timeout, not by an error
    assert not old.exists() and not old.parent.exists()
    assert recent.read_text() == "log\n"


def test_it_cleans_the_folder_airflow_logs_to(tmp_path: Path) -> None:
    """The image logs to AIRFLOW__LOGGING__BASE_LOG_FOLDER (not under its home): that is
    the folder cleaned."""
    logs = tmp_path / "task-logs"
    old = logs / "dag_id=s3tm_remap" / "run_id=old" / "attempt=1.log"
    old.parent.mkdir(parents=True)
    old.write_text("log\n")
    ages = time.time() - 20 * 86_400
    os.utime(old, (ages, ages))
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "home"),
           "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(logs)}  # fmt: skip
    done = subprocess.run(["timeout", "3", "bash", str(SCRIPT)], env=env, capture_output=True,
                          text=True, check=False)  # fmt: skip
    assert done.returncode == 124, done.stderr
    assert not old.exists() and str(logs) in done.stdout
