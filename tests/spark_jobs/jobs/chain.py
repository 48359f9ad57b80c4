"""The remap chain in one session on a landing folder, as the job tests and the SQL
tests' lakehouse run it."""

from __future__ import annotations

import datetime as dt

from spark_jobs.jobs import pipeline


def run_chain(lakehouse, landing, *, nodes=8, algorithm="salb", margin=None, batch=1):
    """``s3tm pipeline`` at its defaults but for N, the learner, the margin and the batch
    (and one event day for posts without a time)."""
    config = pipeline.PipelineConfig(
        landing=str(landing), default_day=dt.date(2026, 2, 1), batch_id=batch, nodes=nodes,
        algorithm=algorithm, margin=margin,
    )  # fmt: skip
    return pipeline.run(config, lakehouse)
