"""``s3tm airflow``: the Airflow UI on the embedded default (see
``devtools.local.airflow.standalone``)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from s3tm.cli.options import add_command


@dataclass(frozen=True, kw_only=True)
class AirflowOptions:
    """start the Airflow UI with the project's DAGs on the demo's lakehouse

    Start Airflow (API server and UI, scheduler, dag-processor, triggerer) with only the
    project's DAGs, spark_default=local[*], the lakehouse and landing folders under --out
    (those of `s3tm demo`), and an admin login. Prints the URL and the password; Ctrl-C
    stops it."""

    out: str = "demo-output"
    """the demo's output folder"""
    port: int = 8080
    """port of the UI and REST API (0: a free one the API server picks, printed when it is
    up)"""
    host: str = "127.0.0.1"
    """address the UI listens on"""
    database_url: str | None = None
    """metadata database (SQLAlchemy URL, e.g. postgresql+psycopg2://user:pw@host/db; uses
    the LocalExecutor); default: SQLite under <out>/airflow"""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    add_command(sub, "airflow", AirflowOptions, _run, prog="s3tm")


def _run(args: AirflowOptions) -> int:
    from devtools.local.airflow import standalone

    return standalone.run(
        Path(args.out), port=args.port, host=args.host, database_url=args.database_url
    )
