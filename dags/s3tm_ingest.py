"""
## s3tm_ingest

Schedule: `0 * * * *` (UTC, hourly), or Trigger. Brings new posts into `bronze.posts`
(bad records go to `silver.posts_quarantine` with a reason), then normalises and samples
them into `silver.posts`, the posts `s3tm_remap` learns from. Ingesting does not start a
remap: `s3tm_monitor` asks for one when the live routing stops paying.

The posts come from new JSON-lines files in `landing` (`source` = files), or from the posts
topic on Kafka (`source` = kafka): the records between the offsets the last run read up to
and the topic's end now, recorded in `bronze.kafka_offsets` before they are read, so a
retried or killed run reads each record once.

Params: `source`, `landing` (directory or s3:// prefix), `kafka_bootstrap`, `kafka_topic`,
`lakehouse` (root), `sample_rate` (the fraction of posts learned from, by post id; a topic
is sampled as it is read into bronze).
"""

from __future__ import annotations

from airflow.sdk import Param, dag

from s3tm.orchestration.dag_support import (
    BATCH_ID,
    dag_defaults,
    spark_job,
)
from spark_jobs.jobs.configs import IngestConfig, NormaliseConfig
from spark_jobs.options import Template, job_argv

# the deployment's settings when the file is parsed
DEFAULTS = dag_defaults()
SCHEDULE = "0 * * * *"


@dag(
    dag_id="s3tm_ingest",
    # no start_date: the first scheduled run is the next slot (see cron_schedule)
    **DEFAULTS.dag_arguments(SCHEDULE),
    tags=["s3tm", "ingest", "spark"],
    doc_md=__doc__,
    params={
        "source": Param(
            DEFAULTS.posts_source,
            enum=["files", "kafka"],
            description="landing files, or the posts topic on Kafka",
        ),
        "landing": Param(
            DEFAULTS.landing, type="string", description="landing directory or s3:// prefix"
        ),
        "kafka_bootstrap": Param(
            DEFAULTS.kafka_bootstrap, type="string", description="Kafka brokers, host:port[,...]"
        ),
        "kafka_topic": Param(DEFAULTS.posts_topic, type="string", description="the posts topic"),
        "lakehouse": Param(DEFAULTS.lakehouse, type="string", description="lakehouse root"),
        "sample_rate": Param(
            NormaliseConfig.sample_rate,
            type="number",
            minimum=0.0001,
            maximum=1.0,
            description="fraction of the posts kept, by post id (the topic's in bronze, "
            "every post's in silver)",
        ),
    },
)
def s3tm_ingest() -> None:
    ingest = spark_job(
        "ingest",
        "ingest",
        job_argv(
            IngestConfig,
            source=Template("params.source"),
            landing=Template("params.landing"),
            kafka_bootstrap=Template("params.kafka_bootstrap"),
            kafka_topic=Template("params.kafka_topic"),
            sample_rate=Template("params.sample_rate"),
            batch_id=BATCH_ID,
        ),
        inlets=DEFAULTS.tables("bronze.posts", "bronze.kafka_offsets"),
        outlets=DEFAULTS.tables("bronze.posts", "bronze.kafka_offsets", "silver.posts_quarantine"),
    )
    normalise = spark_job(
        "normalise",
        "normalise",
        job_argv(NormaliseConfig, sample_rate=Template("params.sample_rate")),
        inlets=DEFAULTS.tables("bronze.posts"),
        outlets=DEFAULTS.tables("silver.posts", "silver.posts_quarantine"),
    )
    ingest >> normalise


s3tm_ingest()
