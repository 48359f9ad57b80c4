"""The DAG tests' Airflow environment: the demo's embedded default (SQLite, local Spark)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

AirflowEnv = Callable[..., dict[str, str]]


def embedded_env(home: Path, base: dict[str, str] | None = None, **extra: str) -> dict[str, str]:
    """The demo's embedded-default environment, with local[2], no retries, small driver."""
    from devtools.local.airflow.demo import airflow_env

    env = {k: v for k, v in (base or {}).items() if not k.startswith("AIRFLOW")}
    # the demo's settings win (PATH with this virtualenv's spark-submit first, ...)
    env.update(
        airflow_env(
            home,
            extra.pop("S3TM_LAKEHOUSE", str(home / "lakehouse")),
            extra.pop("S3TM_LANDING", str(home / "landing")),
        )
    )
    conn = json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"])
    conn["host"] = "local[2]"
    env.update(
        {
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(conn),
            "S3TM_TASK_RETRIES": "0",
            "S3TM_DRIVER_MEMORY": "1g",
            **extra,
        }
    )
    return env


@pytest.fixture(scope="session")
def airflow_process_env(spark_process_env: dict[str, str]) -> AirflowEnv:
    """``make(home, **extra)``: the environment of `airflow` commands (db migrate, dags test)
    whose tasks spark-submit the jobs."""

    def make(home: Path, **extra: str) -> dict[str, str]:
        return embedded_env(home, spark_process_env, **extra)

    return make
