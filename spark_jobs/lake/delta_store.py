"""The Delta tables under one root, through delta-rs alone: locations, metadata, locks,
schema evolution, and reads and writes of Arrow tables on the driver. No JVM: this is what
the commands that answer at once use (``s3tm sql``, ``routing list``, the monitor,
maintenance). :class:`spark_jobs.lake.delta_io.Lakehouse` adds Spark DataFrames.

The root is a local folder or an object-store URI (``s3://bucket/prefix``, see
:mod:`spark_jobs.lake.storage`).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Unpack
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from core.errors import InputDataError, InvalidArgumentError
from schemas import table
from spark_jobs.lake import arrow_reads, staged_writes, storage
from spark_jobs.lake.locks import table_lock
from spark_jobs.lake.table_files import (
    CommitOptions,
    TableSnapshot,
    WriteMode,
    WriteResult,
    check_write_args,
    local_path,
    overwrite_predicate,
)
from spark_jobs.settings import env_name, settings

if TYPE_CHECKING:
    import contextlib

    import deltalake

log = logging.getLogger(__name__)

LAKEHOUSE_ENV = env_name("lakehouse")
# rows per Parquet row group of a driver-side write (see write_arrow)
ROW_GROUP_ROWS = 65_536


def default_lakehouse() -> str:
    """``$S3TM_LAKEHOUSE`` or ``./lakehouse`` (a local path or an ``s3://`` URI)."""
    return storage.normalise_root(settings().lakehouse)


class DeltaStore:
    """The Delta tables under one root, read and written through delta-rs.

    ``location`` spells the root, ``remote`` says whether it is an object store, and
    ``root`` is the local folder for what must sit on a file system (the lakehouse itself
    when local).
    """

    def __init__(self, root: str | Path | None = None) -> None:
        self.location = storage.normalise_root(root) if root else default_lakehouse()
        self.remote = storage.is_remote(self.location)
        self.root = storage.local_state_dir(self.location)
        self.storage_options = storage.delta_storage_options(self.location)
        self.fs, _ = storage.filesystem(self.location)
        self._evolved: set[str] = set()

    # -- locations and metadata ------------------------------------------------------------
    def path(self, name: str) -> str:
        """Table ``name``'s location: a local path or an ``s3://`` URI (delta-rs' spelling;
        :func:`storage.spark_uri` gives Spark's)."""
        return storage.join(self.location, table(name).relative_path.as_posix())

    def fs_path(self, location: str) -> str:
        """``location`` (a path or URI of this lakehouse) as a path in ``self.fs``."""
        return storage.fs_path(local_path(location))

    def exists(self, name: str) -> bool:
        from deltalake import DeltaTable

        return DeltaTable.is_deltatable(self.path(name), storage_options=self.storage_options)

    def delta_table(self, name: str, version: int | None = None) -> deltalake.DeltaTable:
        """The table's ``deltalake.DeltaTable`` (for maintenance: optimize, vacuum, ...).

        Raises:
            InputDataError: when the table does not exist.
        """
        from deltalake import DeltaTable

        if not self.exists(name):
            raise InputDataError(
                f"table {name} does not exist under {self.location} "
                "(run the job that writes it first)"
            )
        return DeltaTable(self.path(name), version=version, storage_options=self.storage_options)

    def locked(self, name: str) -> contextlib.AbstractContextManager[None]:
        """Hold the lakehouse's lock of table ``name`` (:func:`locks.table_lock`)."""
        return table_lock(self.location, name, remote=self.remote)

    def version(self, name: str) -> int | None:
        """The table's latest version, or None when it does not exist."""
        return self.delta_table(name).version() if self.exists(name) else None

    def history(self, name: str, limit: int | None = None) -> list[dict[str, object]]:
        """Commit history, newest first (operation, version, timestamp, parameters...)."""
        return list(self.delta_table(name).history(limit))

    def row_count(self, name: str) -> int:
        """Rows of the table's latest version (0 when the table does not exist): from the
        Delta log's file statistics, or the Parquet footer of a file committed without
        them (no data is scanned)."""
        if not self.exists(name):
            return 0
        delta = self.delta_table(name)
        actions = pa.table(delta.get_add_actions(flatten=True)).to_pylist()
        missing = {a["path"] for a in actions if a.get("num_records") is None}
        counted = sum(int(a["num_records"]) for a in actions if a.get("num_records") is not None)
        for uri in delta.file_uris():
            if any(local_path(uri).endswith(unquote(path)) for path in missing):
                counted += pq.read_metadata(self.fs_path(uri), filesystem=self.fs).num_rows
        return counted

    def last_batch(self, name: str, app_id: str) -> int | None:
        """The latest batch id committed to ``name`` by ``app_id`` (Delta txn action)."""
        return self.delta_table(name).transaction_version(app_id) if self.exists(name) else None

    # -- reads on the driver (arrow_reads) --------------------------------------------------
    # the table as a pyarrow Table, on the driver (small tables, or the columns, rows and
    # partitions asked for): ``store.read_arrow(name, version, columns=, where=, partitions=)``
    read_arrow = arrow_reads.read_arrow

    def recent_rows(self, name: str, columns: Sequence[str], limit: int) -> pa.Table:
        """Up to ``limit`` rows of ``columns`` from the table's newest files (a sample)."""
        return arrow_reads.recent_rows(self, name, columns, limit)

    def snapshot(self, name: str, as_of: int | dt.datetime | None = None) -> TableSnapshot:
        """One version of a table as a lazy pyarrow dataset (for SQL engines)."""
        return arrow_reads.snapshot(self, name, as_of)

    # -- writes ------------------------------------------------------------------------------
    def evolve(self, name: str) -> list[str]:
        """Add the columns the table's spec gained since the table was created (nullable
        only: old rows read them as null). Returns the names added."""
        import deltalake

        spec = table(name)
        checked = self._evolved
        if name in checked or not self.exists(name):
            return []
        checked.add(name)  # once per process: a spec does not change while it runs
        with self.locked(name):
            present = {f.name for f in self.delta_table(name).schema().fields}
            missing = [f for f in spec.schema if f.name not in present]
            if not missing:
                return []
            required = [f.name for f in missing if not f.nullable]
            if required:
                raise InvalidArgumentError(
                    f"{name}: cannot add required columns {required} to an existing table"
                )
            fields = [f for f in spec.delta_schema().fields if f.name in {m.name for m in missing}]
            deltalake.DeltaTable(
                self.path(name), storage_options=self.storage_options
            ).alter.add_columns(fields)
        log.info("%s: added columns %s", name, [f.name for f in missing])
        return [f.name for f in missing]

    def create(self, name: str) -> bool:
        """Create table ``name`` empty, in its spec's schema (nullability and partitioning
        included), unless it exists. Returns whether this call created it.

        delta-spark would take the schema of the first DataFrame written, where every
        column is nullable: the spec's constraints would be lost."""
        import deltalake

        spec = table(name)
        with self.locked(name):
            if self.exists(name):
                return False
            deltalake.DeltaTable.create(
                self.path(name),
                spec.delta_schema(),
                mode="ignore",
                partition_by=list(spec.partition_by) or None,
                name=name,
                description=spec.description or None,
                storage_options=self.storage_options,
            )
        return True

    def write_arrow(
        self,
        data: pa.Table,
        name: str,
        *,
        mode: WriteMode = "append",
        replace_where: Mapping[str, Sequence[object]] | None = None,
        app_id: str | None = None,
        batch_id: int | None = None,
    ) -> WriteResult:
        """Write a pyarrow Table from the driver (small tables) in one Delta commit."""
        from deltalake import CommitProperties, Transaction, WriterProperties, write_deltalake

        spec = table(name)
        check_write_args(spec, mode, replace_where, app_id, batch_id)
        if self.already_committed(name, app_id, batch_id):
            return WriteResult(name, self.version(name), 0, 0, skipped=True)
        self.evolve(name)
        conformed = data.select(spec.columns).cast(spec.schema)
        commit = CommitProperties(
            app_transactions=[Transaction(app_id, batch_id)]
            if app_id is not None and batch_id is not None
            else None
        )
        partition_by = list(spec.partition_by) or None
        # row groups of ROW_GROUP_ROWS, not the writer's default of a million: a read of a
        # few ids (the stream's arriving subscriptions) skips the groups whose sub_id range
        # rules them out, instead of decoding every word list of a million-row group
        properties = WriterProperties(max_row_group_size=ROW_GROUP_ROWS)
        if replace_where:
            write_deltalake(
                self.path(name),
                conformed,
                mode="overwrite",
                partition_by=partition_by,
                predicate=overwrite_predicate(replace_where),
                writer_properties=properties,
                commit_properties=commit,
                storage_options=self.storage_options,
            )
        else:
            write_deltalake(
                self.path(name),
                conformed,
                mode=mode,
                partition_by=partition_by,
                writer_properties=properties,
                commit_properties=commit,
                storage_options=self.storage_options,
            )
        return WriteResult(name, self.version(name), None, conformed.num_rows)

    def already_committed(self, name: str, app_id: str | None, batch_id: int | None) -> bool:
        """Whether ``batch_id`` of ``app_id`` is at or below the table's last committed one."""
        if app_id is None or batch_id is None:
            return False
        last = self.last_batch(name, app_id)
        if last is not None and batch_id <= last:
            log.info(
                "%s: batch %d of %s already committed (last %d); skipped",
                name,
                batch_id,
                app_id,
                last,
            )
            return True
        return False

    # -- staged writes (staged_writes) -------------------------------------------------------
    def staging_dir(self, name: str) -> str:
        """A fresh folder inside table ``name`` for files to commit with :meth:`commit_staged`."""
        return staged_writes.staging_dir(self, name)

    def discard_staged(self, staging: str) -> None:
        """Remove a staging folder whose files will not be committed (absent: nothing)."""
        staged_writes.discard_staged(self, staging)

    def commit_staged(
        self, name: str, staging: str | Path, **options: Unpack[CommitOptions]
    ) -> WriteResult:
        """Commit every Parquet file under ``staging`` to table ``name`` in ONE Delta
        transaction (:func:`staged_writes.commit_staged`)."""
        return staged_writes.commit_staged(self, name, staging, **options)
