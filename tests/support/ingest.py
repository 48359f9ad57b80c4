"""The ingest job on a landing folder, as the job tests run it: every JSON-lines file, one
default day for records without a parseable time."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from spark_jobs.jobs import ingest
from spark_jobs.lake.delta_io import Lakehouse

DEFAULT_DAY = dt.date(2026, 2, 1)


def ingest_landing(lakehouse: Lakehouse, landing: Path, batch: int) -> int:
    """``spark_jobs.jobs.ingest`` over ``landing`` as batch ``batch``; its exit code."""
    return ingest.run(
        ingest.IngestConfig(
            landing=str(landing), pattern="*.jsonl*", batch_id=batch, default_day=DEFAULT_DAY
        ),
        lakehouse,
    )
