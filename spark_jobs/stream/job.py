"""stream: the streaming matcher. Posts -> route -> match -> dispatch, per micro-batch.

A Spark Structured Streaming query reads posts (JSON lines landing in a directory by
default; Kafka on a cluster) and, in ``foreachBatch``, plans each micro-batch (the published
routing version and registry snapshot, logged first so a replay repeats it), brings the
placement up to date, runs one Spark job (route, match, dispatch) and commits its outputs
once (``spark_jobs.stream.matcher``). ``status`` prints the last committed batches.

This module is the command line (``spark-submit spark_jobs/stream/job.py run|status`` and
``s3tm stream``); the parts: ``config`` (options), ``matcher`` (the handler and the query),
``pipeline`` (the Spark job), ``placement_sync``, ``warm_up``, ``batch_log``, ``status``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from spark_jobs import failpoints
from spark_jobs.common import exit_process, job_main
from spark_jobs.lake.storage import join, spark_uri
from spark_jobs.stream.config import StreamCommand, StreamRun, StreamStatus
from spark_jobs.stream.matcher import start
from spark_jobs.stream.status import print_status

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from spark_jobs.lake.delta_io import Lakehouse

__all__ = ["StreamCommand", "main", "run"]


def run(command: StreamRun | StreamStatus, lakehouse: Lakehouse) -> int:
    if isinstance(command, StreamStatus):
        print_status(lakehouse, command.last, as_json=command.as_json)
        return 0
    config = command.config
    if config.checkpoint is None:
        config = config.with_checkpoint(
            spark_uri(join(lakehouse.location, "_checkpoints", config.query_name))
        )
    query, _ = start(lakehouse.spark, lakehouse, config)
    log.info(
        "stream: query %s running (checkpoint %s); Ctrl-C stops it", query.name, config.checkpoint
    )
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    failpoints.arm()
    return job_main("stream", __doc__ or "", StreamCommand, run, argv)


if __name__ == "__main__":
    exit_process(main())
