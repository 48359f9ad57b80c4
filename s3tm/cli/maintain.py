"""``s3tm maintain``: compaction, retention by day, checkpoints and vacuum of the lakehouse's
Delta tables (``spark_jobs.lake.maintenance``), safe while the stream runs."""

from __future__ import annotations

import argparse
import datetime as dt

from s3tm.cli.text import plain


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from spark_jobs.lake.maintenance import COMPACTED_TABLES, MaintenancePolicy

    defaults = MaintenancePolicy()
    p = sub.add_parser(
        "maintain",
        help="compact, apply retention, checkpoint and vacuum the Delta tables",
        description=plain(__doc__),
    )
    p.add_argument("--lakehouse", default=None, help="lakehouse root (default: ./lakehouse)")
    p.add_argument(
        "--tables",
        default=",".join(COMPACTED_TABLES),
        help="comma-separated tables (default: %(default)s)",
    )
    p.add_argument(
        "--keep-days",
        action="append",
        default=[],
        metavar="TABLE=DAYS",
        help="delete rows older than DAYS days (0 keeps all); defaults: "
        + ", ".join(f"{t}={d}" for t, d in defaults.keep_days.items()),
    )
    p.add_argument(
        "--vacuum-hours",
        type=int,
        default=defaults.vacuum_hours,
        help="vacuum retention in hours (default: %(default)s, at least 1)",
    )
    p.add_argument("--dry-run", action="store_true", help="report only; change nothing")
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from core.formatting import format_table
    from s3tm.orchestration.maintenance_tasks import parse_keep_days, run_maintenance
    from spark_jobs.lake.delta_io import default_lakehouse
    from spark_jobs.lake.maintenance import REPORT_HEADER, MaintenancePolicy, keep_days_with

    keep = keep_days_with(parse_keep_days(args.keep_days))
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
