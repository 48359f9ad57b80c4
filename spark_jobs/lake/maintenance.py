"""Delta table maintenance with delta-rs (no Spark): compaction, retention by day, log
checkpoints and vacuum, with the file counts before and after.

Safe while the streaming matcher runs:
- ``optimize.compact`` rewrites small files into larger ones in one commit; the files it
  replaces stay on disk (only *removed* from the log), so a reader that planned a query on
  an earlier version still finds them; the stream's appends do not conflict with it (a
  compaction only removes files it read, an append only adds).
- ``vacuum`` deletes files no version inside the retention window references, and files
  the log never referenced (a micro-batch's staged files before their commit are such
  files): so the retention has a floor of ``MIN_VACUUM_HOURS``, far longer than a batch
  takes from staging to commit.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from core.errors import InvalidArgumentError

if TYPE_CHECKING:
    from spark_jobs.lake.delta_store import DeltaStore

log = logging.getLogger(__name__)

MIN_VACUUM_HOURS = 1
# Tables every micro-batch or ingest run appends small files to.
COMPACTED_TABLES = (
    "matches",
    "deliveries",
    "stream.batches",
    "stream.health",
    "bronze.posts",
    "silver.posts",
    "silver.posts_quarantine",
    "routing.placements",
)
# The day each row belongs to, per table that has a retention policy.
DAY_COLUMNS = {
    "bronze.posts": ("event_day", "date"),
    "silver.posts": ("event_day", "date"),
    "matches": ("matched_at", "timestamp"),
    "deliveries": ("delivered_at", "timestamp"),
    "stream.health": ("recorded_at", "timestamp"),
}


DEFAULT_KEEP_DAYS: Mapping[str, int] = {
    "matches": 30,
    "deliveries": 30,
    # the monitor reads hours of it, the learn job's live hot words 6 hours
    "stream.health": 30,
    "bronze.posts": 0,
    "silver.posts": 0,
}


def keep_days_with(overrides: Mapping[str, int]) -> dict[str, int]:
    """The default retention with some tables' days replaced (the CLI and the DAG alike:
    naming one table must not drop the others' retention)."""
    return {**DEFAULT_KEEP_DAYS, **{name: int(days) for name, days in overrides.items()}}


@dataclass(frozen=True)
class MaintenancePolicy:
    """What one maintenance run does.

    ``keep_days``: rows older than this many days are deleted (0 keeps everything). Bronze
    and silver keep everything by default: ingest recognises landing files and duplicate
    ids from bronze, so a landing folder that still holds older files would be ingested
    again after their rows were deleted.
    """

    tables: tuple[str, ...] = COMPACTED_TABLES
    keep_days: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_KEEP_DAYS))
    vacuum_hours: int = 168
    dry_run: bool = False

    def __post_init__(self) -> None:
        unknown = [t for t in (*self.tables, *self.keep_days) if t not in _known_tables()]
        if unknown:
            raise InvalidArgumentError(f"unknown tables {unknown}")
        no_day = [t for t, days in self.keep_days.items() if days and t not in DAY_COLUMNS]
        if no_day:
            raise InvalidArgumentError(
                f"no retention by day for {no_day} (tables with a day: {sorted(DAY_COLUMNS)})"
            )
        if any(days < 0 for days in self.keep_days.values()):
            raise InvalidArgumentError("keep days must be >= 0 (0 keeps everything)")
        if self.vacuum_hours < MIN_VACUUM_HOURS:
            raise InvalidArgumentError(
                f"vacuum retention must be at least {MIN_VACUUM_HOURS} hour(s): shorter could "
                "delete a running micro-batch's staged files before their commit"
            )


def _known_tables() -> set[str]:
    from schemas.tables import TABLES

    return set(TABLES)


@dataclass
class TableReport:
    """One table's maintenance figures."""

    table: str
    files_before: int = 0
    files_after: int = 0
    rows_before: int = 0
    rows_after: int = 0
    version_before: int | None = None
    version_after: int | None = None
    rows_deleted: int = 0
    files_compacted: int = 0
    files_vacuumed: int = 0
    seconds: float = 0.0
    note: str = ""

    def as_row(self) -> list[object]:
        return [
            self.table,
            self.files_before,
            self.files_after,
            self.rows_before,
            self.rows_after,
            self.rows_deleted,
            self.files_vacuumed,
            f"{self.seconds:.1f}",
            self.note,
        ]


REPORT_HEADER = [
    "table",
    "files before",
    "files after",
    "rows before",
    "rows after",
    "rows deleted",
    "files vacuumed",
    "seconds",
    "note",
]


def file_count(lakehouse: DeltaStore, name: str) -> int:
    """Data files of the table's latest version (0 when absent)."""
    if not lakehouse.exists(name):
        return 0
    return len(lakehouse.delta_table(name).file_uris())


def _retention_predicate(name: str, days: int, today: dt.date) -> str:
    column, kind = DAY_COLUMNS[name]
    cutoff = today - dt.timedelta(days=days)
    if kind == "date":
        return f"{column} < '{cutoff.isoformat()}'"
    return f"{column} < '{cutoff.isoformat()}T00:00:00Z'"


def maintain_table(
    lakehouse: DeltaStore, name: str, policy: MaintenancePolicy, *, today: dt.date | None = None
) -> TableReport:
    """Retention, compaction, checkpoint and vacuum of one table."""
    started = time.perf_counter()
    report = TableReport(name)
    if not lakehouse.exists(name):
        report.note = "absent"
        return report
    delta = lakehouse.delta_table(name)
    report.version_before = delta.version()
    report.files_before = len(delta.file_uris())
    report.rows_before = lakehouse.row_count(name)
    if policy.dry_run:
        report.files_after, report.rows_after = report.files_before, report.rows_before
        report.files_vacuumed = len(
            delta.vacuum(
                retention_hours=policy.vacuum_hours, dry_run=True, enforce_retention_duration=False
            )
        )
        report.note = "dry run"
        return report
    days = policy.keep_days.get(name, 0)
    if days:
        predicate = _retention_predicate(name, days, today or dt.datetime.now(dt.UTC).date())
        deleted = delta.delete(predicate)
        report.rows_deleted = int(deleted.get("num_deleted_rows", 0) or 0)
        delta = lakehouse.delta_table(name)
    compacted = delta.optimize.compact()
    report.files_compacted = int(compacted.get("numFilesRemoved", 0) or 0)
    delta = lakehouse.delta_table(name)
    delta.create_checkpoint()
    delta.cleanup_metadata()  # log entries older than the table's log retention
    report.files_vacuumed = len(
        delta.vacuum(
            retention_hours=policy.vacuum_hours,
            dry_run=False,
            # Our floor (MIN_VACUUM_HOURS) replaces delta-rs' 7-day default check.
            enforce_retention_duration=False,
        )
    )
    delta = lakehouse.delta_table(name)
    report.version_after = delta.version()
    report.files_after = len(delta.file_uris())
    report.rows_after = lakehouse.row_count(name)
    report.seconds = time.perf_counter() - started
    log.info(
        "%s: %d -> %d files, %d rows deleted, %d files vacuumed",
        name,
        report.files_before,
        report.files_after,
        report.rows_deleted,
        report.files_vacuumed,
    )
    return report


def maintain(
    lakehouse: DeltaStore, policy: MaintenancePolicy, *, today: dt.date | None = None
) -> list[TableReport]:
    """Every table of the policy, in order; one table's failure does not stop the others
    (its report row says why) and is raised at the end."""
    reports: list[TableReport] = []
    for name in policy.tables:
        try:
            reports.append(maintain_table(lakehouse, name, policy, today=today))
        except Exception as err:
            log.exception("maintenance of %s failed", name)
            reports.append(TableReport(name, note=f"FAILED: {type(err).__name__}: {err}"))
    return reports


def failed(reports: Sequence[TableReport]) -> list[str]:
    return [r.table for r in reports if r.note.startswith("FAILED")]
