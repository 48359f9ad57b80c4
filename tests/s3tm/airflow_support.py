"""Driving ``s3tm airflow`` as a user would: start it (after the demo, or on a fresh
folder), and the REST API the UI uses. Shared by the Airflow UI tests."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from devtools.local.airflow.api import RUN_TIMEOUT_S, AirflowApi

PROJECT_DAGS = sorted(p.stem for p in (Path(__file__).parents[2] / "dags").glob("s3tm_*.py"))


def run_demo(out: Path, base_env: dict[str, str]) -> str:
    """The README's first command (`s3tm demo`), small: its Airflow half runs the DAGs with
    `airflow dags test`, which creates their rows in the metadata database. Returns what it
    printed (``test_airflow_command.py``'s first test reads it)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "s3tm.cli.main",
            "demo",
            "--out",
            str(out),
            "--posts",
            "3000",
            "--nodes",
            "4",
            "--airflow-nodes",
            "4",
            "--subscriptions",
            "200",
        ],
        capture_output=True,
        text=True,
        env=base_env,
        timeout=RUN_TIMEOUT_S,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return done.stdout


def start_airflow(
    out: Path, *extra: str, base_env: dict[str, str], after_demo: bool = False
) -> Iterator[dict[str, Any]]:
    """Runs ``s3tm airflow --port 0`` until its ready line (the API server picks its port, the
    command prints it); yields the API client and the paths.
    ``after_demo``: on the folder :func:`run_demo` left (the README's path), else on a fresh
    one. ``base_env``: the environment of processes that start Spark (the test's fixture)."""
    if not after_demo:
        from core.corpus.synthetic import SyntheticCorpusSpec
        from spark_jobs.lake.corpus_files import write_demo_corpus

        write_demo_corpus(
            out / "landing" / "posts.jsonl.gz",
            SyntheticCorpusSpec(n_posts=1500, n_words=1500, seed=9),
            days=2,
        )
    env = dict(base_env)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "s3tm.cli.main",
            "airflow",
            "--out",
            str(out),
            "--port",
            "0",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    printed: list[str] = []
    try:
        assert process.stdout is not None
        for line in process.stdout:
            printed.append(line)
            if line.startswith("Press Ctrl-C"):
                break
        output = "".join(printed)
        up = re.search(r"Airflow is up: (http://127\.0\.0\.1:(\d+))\n", output)
        assert up and 1 <= int(up.group(2)) <= 65535, output[-3000:]
        password = output.split("with password '", 1)[1].split("'", 1)[0]
        base_url = up.group(1)
        yield {
            "api": AirflowApi(base_url, password),
            "base_url": base_url,
            "password": password,
            "printed": output,
            "out": out,
            "pid": process.pid,
        }
    finally:
        process.terminate()  # SIGTERM: the command stops Airflow's whole process group
        try:
            process.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
    assert process.returncode == 0, f"s3tm airflow exited {process.returncode}"
