"""``s3tm maintain``: compaction, retention by day, checkpoints and vacuum of the lakehouse's
Delta tables (``spark_jobs.lake.maintenance``), safe while the stream runs."""

from __future__ import annotations

import argparse
import datetime as dt
from dataclasses import dataclass
from typing import Annotated

import tyro

from s3tm.cli.options import add_command
from spark_jobs.lake.maintenance import COMPACTED_TABLES, MaintenancePolicy

_DEFAULTS = MaintenancePolicy()


@dataclass(frozen=True, kw_only=True)
class MaintainOptions:
    """compact, apply retention, checkpoint and vacuum the Delta tables"""

    lakehouse: str | None = None
    """lakehouse root (default: $S3TM_LAKEHOUSE or ./lakehouse)"""
    tables: str = ",".join(COMPACTED_TABLES)
    """comma-separated tables"""
    keep_days: Annotated[tuple[str, ...], tyro.conf.UseAppendAction] = ()
    """TABLE=DAYS: delete rows older than DAYS days (0 keeps all; repeatable); the defaults
    are the policy's"""
    vacuum_hours: int = _DEFAULTS.vacuum_hours
    """vacuum retention in hours (at least 1)"""
    dry_run: bool = False
    """report only; change nothing"""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    add_command(sub, "maintain", MaintainOptions, _run, prog="s3tm")


def _run(args: MaintainOptions) -> int:
    from core.formatting import format_table
    from s3tm.orchestration.tasks.maintenance import parse_keep_days, run_maintenance
    from spark_jobs.lake.delta_io import default_lakehouse
    from spark_jobs.lake.maintenance import REPORT_HEADER, keep_days_with

    keep = keep_days_with(parse_keep_days(list(args.keep_days)))
    policy = MaintenancePolicy(
        tables=tuple(t.strip() for t in args.tables.split(",") if t.strip()),
        keep_days=keep,
        vacuum_hours=args.vacuum_hours,
        dry_run=args.dry_run,
    )
    root = args.lakehouse or default_lakehouse()
    run_id = f"cli-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}"
    reports, path = run_maintenance(root, policy, run_id)
    print(format_table(REPORT_HEADER, [r.as_row() for r in reports]))
    print(f"report: {path}")
    return 0
