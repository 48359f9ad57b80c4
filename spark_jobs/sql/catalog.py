"""Every lakehouse table in the Spark session's catalog under its own name
(``routing.versions`` = database ``routing``, table ``versions``; ``matches`` in ``default``).

Catalog tables, not temporary views: a Spark Connect client's session is a new session of
the server's application and sees the shared catalog, never the server's temporary views.

- ``spark`` engine (Delta's JVM jars present): ``USING delta LOCATION <table>``; Delta
  itself serves the latest version.
- ``rs`` engine (no jars): a Delta folder holds files that no version references any more
  (removed, not yet vacuumed) and files being staged, so a plain Parquet table over it would
  read wrong rows. Each table version gets a *snapshot folder* instead: hard links to exactly
  the files of that version (delta-rs says which), laid out by partition value, the way
  Delta's symlink manifests serve Presto. A new version gets a new folder and the catalog
  table is pointed at it; a replaced version's folder and table stay for ``grace_seconds``
  (and the last two always), for queries planned on it and still reading it.
  Hard links cost no space and outlive a vacuum of the originals.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from core.errors import InputDataError
from schemas import TableSpec
from schemas.tables import TABLES
from spark_jobs.lake.delta_io import TableSnapshot
from spark_jobs.lake.storage import spark_uri

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spark_jobs.lake.delta_io import Lakehouse

log = logging.getLogger(__name__)

SNAPSHOTS_DIR = "_sql_snapshots"
KEEP_SNAPSHOTS = 2  # the current one and the one before, however old
# how long a replaced version stays readable: a query planned on it lists its folder then
# reads the files (a long query on stream.batches, which moves every micro-batch)
SNAPSHOT_GRACE_S = 600.0


@dataclass(frozen=True)
class CatalogTable:
    name: str  # lakehouse name: routing.versions
    qualified: str  # Spark name: `routing`.`versions`
    version: int | None  # Delta version served (None: Delta serves the latest itself)
    derived: bool = False  # a view of other tables (``matches`` of ``deliveries``)


@dataclass
class _ServedVersion:
    """A table version's Spark table and snapshot folder; when a newer one replaced it."""

    table: str
    folder: Path
    replaced_at: float | None = None


def spark_name(name: str) -> str:
    database, table = name.split(".", 1) if "." in name else ("default", name)
    return f"`{database}`.`{table}`"


class LakehouseCatalog:
    """Registers the lakehouse's tables in ``spark``'s catalog; :meth:`refresh` follows
    new Delta versions."""

    def __init__(
        self,
        spark: SparkSession,
        lakehouse: Lakehouse,
        *,
        grace_seconds: float = SNAPSHOT_GRACE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.spark = spark
        self.lakehouse = lakehouse
        self.tables: dict[str, CatalogTable] = {}
        self._served: dict[str, list[_ServedVersion]] = {}  # oldest first
        self.snapshots = lakehouse.root / SNAPSHOTS_DIR
        self.grace_seconds = grace_seconds
        self._clock = clock

    def refresh(self) -> list[CatalogTable]:
        """Register new tables and move changed ones to their latest version; returns
        what changed."""
        changed = []
        for name, spec in TABLES.items():
            if not self.lakehouse.exists(name):
                continue
            if self.lakehouse.engine == "spark":
                if self._table_of(name) is None:
                    changed.append(self._register_delta(spec))
                continue
            version = self.lakehouse.version(name)
            current = self._table_of(name)
            if current is not None and current.version == version:
                continue
            changed.append(self._register_snapshot(spec))
        for name in self._served:
            self._retire(name)
        if "deliveries" in self.tables and not self.lakehouse.exists("matches"):
            self._derive_matches()
        return changed

    def _table_of(self, name: str) -> CatalogTable | None:
        """The catalog entry of ``name``; a derived view of a table that now exists is
        dropped first, so the table replaces it."""
        entry = self.tables.get(name)
        if entry is not None and entry.derived:
            self.spark.sql(f"DROP VIEW IF EXISTS {entry.qualified}")
            del self.tables[name]
            return None
        return entry

    def _derive_matches(self) -> None:
        """A stream run with ``--no-matches-table`` writes deliveries only; they hold every
        match, so ``matches`` is then a view of them (one row per delivered sub id; a row
        written before matcher ids were kept has NULL matchers)."""
        if "matches" in self.tables:
            return
        deliveries = self.tables["deliveries"].qualified
        self.spark.sql(
            f"CREATE OR REPLACE VIEW {spark_name('matches')} AS SELECT post_id, sub_id, "
            "subscriber, routing_version, CAST(element_at(matcher_ids, pos + 1) AS INT) AS "
            "matcher_id, delivered_at AS matched_at, batch_id "
            f"FROM {deliveries} LATERAL VIEW posexplode(sub_ids) ids AS pos, sub_id"
        )
        self.tables["matches"] = CatalogTable("matches", spark_name("matches"), None, derived=True)

    def _create_database(self, name: str) -> None:
        if "." in name:
            self.spark.sql(f"CREATE DATABASE IF NOT EXISTS `{name.split('.', 1)[0]}`")

    def _register_delta(self, spec: TableSpec) -> CatalogTable:
        self._create_database(spec.name)
        qualified = spark_name(spec.name)
        location = spark_uri(self.lakehouse.path(spec.name))
        self.spark.sql(f"CREATE TABLE IF NOT EXISTS {qualified} USING delta LOCATION '{location}'")
        entry = CatalogTable(spec.name, qualified, None)
        self.tables[spec.name] = entry
        return entry

    def _register_snapshot(self, spec: TableSpec) -> CatalogTable:
        from pyspark.sql.pandas.types import from_arrow_schema

        if self.lakehouse.remote:
            # the snapshot folders hard-link the version's files: a local file system only
            raise InputDataError(
                f"serving {self.lakehouse.location} over JDBC needs Delta's JVM classes in the "
                "session (the platform image has them); `s3tm sql` reads it without"
            )
        snapshot = self.lakehouse.snapshot(spec.name)
        folder = self._link_files(spec, snapshot)
        self._create_database(spec.name)
        qualified = spark_name(spec.name)
        columns = ", ".join(
            f"`{f.name}` {f.dataType.simpleString()}" for f in from_arrow_schema(spec.schema)
        )
        partitioned = (
            f" PARTITIONED BY ({', '.join(f'`{c}`' for c in spec.partition_by)})"
            if spec.partition_by
            else ""
        )
        # a table per version, and the name users query a view of it, moved to the next
        # version by ALTER VIEW: one catalog update. Dropping and re-creating a table, and
        # CREATE OR REPLACE VIEW (Spark drops the view, then creates it), each left a
        # moment in which a query found no table (CI runs met both).
        versioned = spark_name(f"{spec.name}__v{snapshot.version:08d}")
        self.spark.sql(f"DROP TABLE IF EXISTS {versioned}")
        self.spark.sql(
            f"CREATE TABLE {versioned} ({columns}) USING parquet{partitioned} "
            f"LOCATION '{folder.as_uri()}'"
        )
        if spec.partition_by:
            self.spark.sql(f"ALTER TABLE {versioned} RECOVER PARTITIONS")
        served = self._served.setdefault(spec.name, [])
        verb = "ALTER VIEW" if served else "CREATE OR REPLACE VIEW"
        self.spark.sql(f"{verb} {qualified} AS SELECT * FROM {versioned}")
        entry = CatalogTable(spec.name, qualified, snapshot.version)
        self.tables[spec.name] = entry
        now = self._clock()
        for older in served:
            if older.replaced_at is None:
                older.replaced_at = now
        if all(s.table != versioned for s in served):
            served.append(_ServedVersion(versioned, folder))
        self._retire(spec.name)
        self._prune_folders(spec.name)
        log.info("sql catalog: %s -> version %d", spec.name, snapshot.version)
        return entry

    def _retire(self, name: str) -> None:
        """Drop the replaced versions of ``name`` past their grace (never the last
        ``KEEP_SNAPSHOTS``)."""
        served = self._served[name]
        now = self._clock()
        kept = []
        for i, version in enumerate(served):
            recent = i >= len(served) - KEEP_SNAPSHOTS
            replaced = version.replaced_at
            if recent or replaced is None or now - replaced < self.grace_seconds:
                kept.append(version)
                continue
            self.spark.sql(f"DROP TABLE IF EXISTS {version.table}")
            shutil.rmtree(version.folder, ignore_errors=True)
        served[:] = kept

    def _prune_folders(self, name: str) -> None:
        """Remove snapshot folders of ``name`` that no version here serves (an earlier
        run's), but the newest ``KEEP_SNAPSHOTS``."""
        serving = {version.folder for version in self._served.get(name, [])}
        folders = sorted(p for p in (self.snapshots / name).glob("v*") if p.is_dir())
        for old in folders[:-KEEP_SNAPSHOTS]:
            if old not in serving:
                shutil.rmtree(old, ignore_errors=True)

    def _link_files(self, spec: TableSpec, snapshot: TableSnapshot) -> Path:
        """A folder of hard links to the version's files, under canonical partition folders."""
        folder = self.snapshots / spec.name / f"v{snapshot.version:08d}"
        if folder.is_dir():
            return folder
        building = folder.with_name(folder.name + ".building")
        shutil.rmtree(building, ignore_errors=True)
        location = self.lakehouse.path(spec.name)
        for path, values in zip(snapshot.files, snapshot.partitions, strict=True):
            source = Path(path)
            relative = os.path.relpath(source, location)
            parts = [
                f"{c}={'__HIVE_DEFAULT_PARTITION__' if values.get(c) is None else values[c]}"
                for c in spec.partition_by
            ]
            # unique per source path: compacted and staged files may share a base name
            name = hashlib.sha1(relative.encode()).hexdigest()[:12] + "-" + source.name
            target = building.joinpath(*parts, name)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(source, target)
            except OSError:  # another file system: a symbolic link (breaks on vacuum)
                os.symlink(source, target)
        building.mkdir(parents=True, exist_ok=True)  # a table with no files yet
        building.rename(folder)
        return folder
