"""``s3tm airflow``: the Airflow UI on the embedded default (see
``s3tm.orchestration.standalone``)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "airflow",
        help="start the Airflow UI with the project's DAGs on the demo's lakehouse",
        description=(
            "Start Airflow (API server and UI, scheduler, dag-processor, triggerer) with only "
            "the project's DAGs, spark_default=local[*], "
            "the lakehouse and landing folders under --out (those of `s3tm demo`), and an "
            "admin login. Prints the URL and the password; Ctrl-C stops it."
        ),
    )
    p.add_argument("--out", default="demo-output", help="the demo's output folder")
    p.add_argument(
        "--port",
        type=int,
        default=8080,
        help="port of the UI and REST API (default %(default)s; 0: a free one the API server "
        "picks, printed when it is up)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address the UI listens on")
    p.add_argument(
        "--database-url",
        default=None,
        help="metadata database (SQLAlchemy URL, e.g. postgresql+psycopg2://user:pw@host/db; "
        "uses the LocalExecutor); default: SQLite under <out>/airflow",
    )
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from s3tm.orchestration import standalone

    return standalone.run(
        Path(args.out), port=args.port, host=args.host, database_url=args.database_url
    )
