"""The remap chain in one session on a landing folder, as the job tests and the SQL
tests' lakehouse run it."""

from __future__ import annotations

import datetime as dt

from spark_jobs.jobs import pipeline


def run_chain(lakehouse, landing, *, nodes=8, algorithm="salb", margin=None, batch=1):
    return pipeline.run(
        pipeline.PipelineConfig(
            landing=str(landing),
            pattern="*.jsonl*",
            default_day=dt.date(2026, 2, 1),
            batch_id=batch,
            sample_rate=1.0,
            nodes=nodes,
            algorithm=algorithm,
            split=True,
            holdout_fraction=0.2,
            margin=margin,
            cooccurrence=False,
            seed=0,
            report=None,
        ),
        lakehouse,
    )
