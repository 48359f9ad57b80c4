"""The package as a team installs it beside its own Airflow: the wheel built from this
tree and the Airflow version it runs here (uv.lock's), resolved by uv from the ranges the
wheel declares (not from the lock), in an empty virtual environment; the team points
Airflow at the project's DAG files, and all four parse with no import error.

(Airflow's constraints file for that version would pin the resolution further; it is
served from raw.githubusercontent.com only, which this machine cannot reach.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
UV = Path(sys.executable).with_name("uv")


def _run(*args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, capture_output=True, text=True, timeout=1200, **kwargs)
    assert done.returncode == 0, f"{' '.join(args)}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.mark.airflow
def test_the_wheel_beside_a_teams_airflow_parses_the_four_dags(tmp_path):
    lock = tomllib.loads((REPO / "uv.lock").read_text())
    airflow = next(p["version"] for p in lock["package"] if p["name"] == "apache-airflow")
    # built from a copy: setuptools leaves build/ and an egg-info beside the sources
    source = tmp_path / "source"
    for name in ("pyproject.toml", "README.md", "uv.lock"):
        source.mkdir(exist_ok=True)
        shutil.copy2(REPO / name, source / name)
    for package in ("core", "schemas", "spark_jobs", "s3tm"):
        shutil.copytree(
            REPO / package, source / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    _run(str(UV), "build", "--wheel", "--quiet", "--out-dir", str(tmp_path / "dist"), cwd=source)
    (wheel,) = (tmp_path / "dist").glob("s3tm-*.whl")
    team = tmp_path / "team"
    _run(str(UV), "venv", "--quiet", "--python", sys.executable, str(team))
    python = team / "bin" / "python"
    _run(
        str(UV), "pip", "install", "--quiet", "--python", str(python),
        str(wheel), f"apache-airflow=={airflow}",
    )  # fmt: skip
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "S3TM_"))},
        "AIRFLOW_HOME": str(tmp_path / "airflow"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "S3TM_LAKEHOUSE": str(tmp_path / "lakehouse"),
    }
    airflow_cli = str(team / "bin" / "airflow")
    # run outside the checkout: the DAGs import the installed package, not this tree
    _run(airflow_cli, "db", "migrate", env=env, cwd=tmp_path)
    listed = _run(airflow_cli, "dags", "list", "--local", "-o", "json", env=env, cwd=tmp_path)
    # (Airflow's warnings go to stdout too: the JSON is the line that starts with it)
    dags = json.loads(next(x for x in listed.stdout.splitlines() if x.startswith("[")))
    assert sorted(d["dag_id"] for d in dags) == [
        "s3tm_ingest", "s3tm_maintenance", "s3tm_monitor", "s3tm_remap",
    ]  # fmt: skip
    assert all(str(team) not in d["fileloc"] for d in dags)  # the team's folder, not the wheel
    errors = _run(
        airflow_cli, "dags", "list-import-errors", "--local", "-o", "json", env=env, cwd=tmp_path
    )
    reported = [x for x in errors.stdout.splitlines() if x.startswith("[")]
    assert reported in ([], ["[]"]) and "Traceback" not in errors.stdout, errors.stdout
    found = _run(str(python), "-c", "import s3tm, spark_jobs; print(s3tm.__file__)", cwd=tmp_path)
    assert str(team) in found.stdout
    # the checkout's commands say where they are, in a wheel without them
    for command in ("demo", "bench"):
        done = subprocess.run(
            [str(team / "bin" / "s3tm"), command, "--help"],
            capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 2 and "checkout" in done.stderr, (command, done.stderr)
