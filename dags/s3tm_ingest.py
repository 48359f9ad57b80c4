"""
## s3tm_ingest

Schedule: `0 * * * *` (UTC, hourly), or Trigger. Lands new JSON-lines files into
`bronze.posts` (bad records go to `silver.posts_quarantine` with a reason), then normalises
and samples them into `silver.posts`, the posts `s3tm_remap` learns from. Ingesting does not
start a remap: `s3tm_monitor` asks for one when the live routing stops paying.

Params: `landing` (directory or s3:// prefix of JSON-lines files), `lakehouse` (root),
`sample_rate`.
"""

from __future__ import annotations

from airflow.sdk import Param, dag

from s3tm.orchestration.dag_support import (
    BATCH_ID_TEMPLATE,
    DEFAULT_ARGS,
    DEFAULT_LAKEHOUSE,
    DEFAULT_LANDING,
    cron_schedule,
    spark_job,
)
from schemas.assets import asset


@dag(
    dag_id="s3tm_ingest",
    # no start_date: the first scheduled run is the next slot (see cron_schedule)
    schedule=cron_schedule("0 * * * *"),
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    tags=["s3tm", "ingest", "spark"],
    doc_md=__doc__,
    params={
        "landing": Param(
            DEFAULT_LANDING, type="string", description="landing directory or s3:// prefix"
        ),
        "lakehouse": Param(DEFAULT_LAKEHOUSE, type="string", description="lakehouse root"),
        "sample_rate": Param(1.0, type="number", minimum=0.0001, maximum=1.0),
    },
)
def s3tm_ingest() -> None:
    ingest = spark_job(
        "ingest",
        "ingest",
        [
            "--landing",
            "{{ params.landing }}",
            "--batch-id",
            BATCH_ID_TEMPLATE,
        ],
        outlets=[asset("bronze.posts"), asset("silver.posts_quarantine")],
    )
    normalise = spark_job(
        "normalise",
        "normalise",
        ["--sample-rate", "{{ params.sample_rate }}"],
        outlets=[asset("silver.posts")],
    )
    ingest >> normalise


s3tm_ingest()
