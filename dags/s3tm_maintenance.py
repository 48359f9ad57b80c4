"""
## s3tm_maintenance

Schedule: `0 3 * * *` (UTC, daily), or Trigger. Keeps the lakehouse's Delta tables fast to
read while the stream keeps appending.

For each table (matches, deliveries, stream.batches, bronze, silver, quarantine, placements):
retention by day (matches, deliveries and stream.health 30 days, bronze and silver kept;
`keep_days` replaces the days of the tables it names, 0 keeps everything) -> compaction
(delta-rs `optimize`) -> a log checkpoint -> `vacuum` of files older than `vacuum_hours`.
Safe while the streaming matcher runs. The report, with every table's file counts before
and after, goes to `<lakehouse>/reports/maintenance-<run>.md`. Same as `s3tm maintain`.
"""

from __future__ import annotations

from airflow.sdk import Param, dag, task

from s3tm.orchestration.dag_support import (
    dag_defaults,
)

# the deployment's settings when the file is parsed
DEFAULTS = dag_defaults()
SCHEDULE = "0 3 * * *"


@dag(
    dag_id="s3tm_maintenance",
    **DEFAULTS.dag_arguments(SCHEDULE),
    tags=["s3tm", "maintenance", "delta"],
    doc_md=__doc__,
    params={
        "lakehouse": Param(DEFAULTS.lakehouse, type="string"),
        "keep_days": Param(
            {},
            type="object",
            description="per-table retention in days replacing the defaults of `s3tm maintain "
            '--help` for the tables named (0 keeps all), e.g. {"matches": 7}',
        ),
        "vacuum_hours": Param(168, type="integer", minimum=1, description="vacuum retention"),
        "dry_run": Param(False, type="boolean", description="report only"),
    },
)
def s3tm_maintenance() -> None:
    @task
    def maintain(params: dict | None = None, run_id: str | None = None) -> dict:
        from s3tm.orchestration.tasks.maintenance import run_maintenance, summary
        from spark_jobs.lake.maintenance import MaintenancePolicy, keep_days_with

        policy = MaintenancePolicy(
            keep_days=keep_days_with(params["keep_days"]),
            vacuum_hours=int(params["vacuum_hours"]),
            dry_run=bool(params["dry_run"]),
        )
        reports, path = run_maintenance(params["lakehouse"], policy, run_id or "manual")
        return {"report": str(path), "tables": summary(reports)}

    maintain()


s3tm_maintenance()
