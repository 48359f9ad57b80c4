"""The body of the ``s3tm_maintenance`` DAG and of ``s3tm maintain``: run the maintenance
policy over the lakehouse (delta-rs, no Spark) and write the run report with every table's
file counts before and after."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from core.errors import S3TMError
from core.formatting import format_table
from s3tm.orchestration.reports.store import write_report
from spark_jobs.lake.delta_io import Lakehouse
from spark_jobs.lake.maintenance import (
    REPORT_HEADER,
    MaintenancePolicy,
    TableReport,
    failed,
    maintain,
)


class MaintenanceFailed(S3TMError):
    """At least one table could not be maintained (the others were)."""


def parse_keep_days(items: list[str]) -> dict[str, int]:
    """``["matches=30", "bronze.posts=0"]`` -> ``{"matches": 30, "bronze.posts": 0}``."""
    from core.errors import InvalidArgumentError

    keep: dict[str, int] = {}
    for item in items:
        name, sep, days = item.partition("=")
        if not sep or not days.strip().isdigit():
            raise InvalidArgumentError(f"--keep-days takes TABLE=DAYS, got {item!r}")
        keep[name.strip()] = int(days)
    return keep


def run_maintenance(
    root: str | Path, policy: MaintenancePolicy, run_id: str
) -> tuple[list[TableReport], Path | str]:
    """Maintain every table of ``policy``; returns the per-table figures and the report.

    Raises:
        MaintenanceFailed: after the report is written, when a table failed.
    """
    lakehouse = Lakehouse(None, root, engine="rs")
    reports = maintain(lakehouse, policy)
    rendered = format_table(REPORT_HEADER, [r.as_row() for r in reports])
    path = write_report(
        root,
        "maintenance",
        run_id,
        [
            f"# s3tm maintenance run {run_id}",
            "",
            f"At {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M:%S} UTC. Policy: keep days "
            f"{dict(policy.keep_days)}, vacuum retention {policy.vacuum_hours} h"
            + (", dry run" if policy.dry_run else ""),
            "",
            "```",
            rendered,
            "```",
            "",
        ],
    )
    bad = failed(reports)
    if bad:
        raise MaintenanceFailed(f"maintenance failed for {bad}; see {path}")
    return reports, path


def summary(reports: list[TableReport]) -> dict[str, Any]:
    """Per table: files before and after (the DAG task's XCom)."""
    return {
        r.table: {"files_before": r.files_before, "files_after": r.files_after} for r in reports
    }
