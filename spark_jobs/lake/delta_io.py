"""All Delta reads and writes of the platform, with two engines (DESIGN.md section 4).

- ``spark``: delta-spark, when the session has Delta's JVM classes (a cluster image with the
  jars baked in): ``format("delta")`` reads and writes, ``txnAppId``/``txnVersion`` for
  idempotent appends.
- ``rs``: delta-rs. Reads ask delta-rs for the Parquet files of a table version and hand
  them to Spark. Writes let the executors write Parquet files into the table folder and the
  driver commit them in ONE Delta transaction (``create_table_with_add_actions`` for a new
  table, ``create_write_transaction`` otherwise), with the application transaction
  (app id, batch id) in the same commit.

Same tables, same protocol: a table written by either engine is read by the other, and
``deltalake.DeltaTable`` reads both. Small driver-side tables (routing versions, the
subscription registry) can be written straight from Arrow with :meth:`Lakehouse.write_arrow`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.fs
import pyarrow.parquet as pq

from core.errors import InputDataError, InvalidArgumentError
from schemas import TableSpec, table
from spark_jobs.lake import storage

log = logging.getLogger(__name__)

WriteMode = Literal["append", "overwrite"]
Engine = Literal["spark", "rs"]
DEFAULT_LAKEHOUSE = "lakehouse"
WRITE_DIR_KEY = "s3tm_write"
LAKEHOUSE_ENV = "S3TM_LAKEHOUSE"


def default_lakehouse() -> str:
    """``$S3TM_LAKEHOUSE`` or ``./lakehouse`` (a local path or an ``s3://`` URI)."""
    return storage.normalise_root(os.environ.get(LAKEHOUSE_ENV, DEFAULT_LAKEHOUSE))


@dataclass(frozen=True)
class WriteResult:
    """What a write did: the table version it produced (or found), files and rows added."""

    table: str
    version: int | None
    files: int
    rows: int
    skipped: bool = False


@dataclass(frozen=True)
class TableSnapshot:
    """A table at one Delta version, as a lazy pyarrow dataset over that version's files."""

    name: str
    version: int
    dataset: Any  # pyarrow.dataset.FileSystemDataset
    files: list[str]  # the version's Parquet files, as paths in ``filesystem``
    partitions: list[dict[str, str | None]]  # each file's partition values (from its path)
    filesystem: Any = None  # pyarrow.fs.FileSystem of ``files`` (local or an object store)


def _session_has_delta(spark: Any) -> bool:
    if os.environ.get("S3TM_DELTA_ENGINE") == "rs":
        return False
    try:
        spark._jvm.java.lang.Class.forName("io.delta.tables.DeltaTable")
    except Exception:  # py4j raises a generic Py4JJavaError for ClassNotFoundException
        return False
    return True


def _partition_values(relative: str, columns: Sequence[str]) -> dict[str, str | None]:
    """Partition values of a file from its Hive-style path (only the table's columns)."""
    values: dict[str, str | None] = {}
    for part in Path(relative).parts[:-1]:
        if "=" in part:
            key, value = part.split("=", 1)
            if key in columns:
                value = unquote(value)
                values[key] = None if value == "__HIVE_DEFAULT_PARTITION__" else value
    return values


def _local_path(uri: str) -> str:
    """A file URI of delta-rs as a local path (``file:///x`` -> ``/x``; paths unchanged)."""
    return unquote(uri[len("file://") :]) if uri.startswith("file://") else uri


# Locks this thread holds, by lock-file path: re-entrant, so a locked read-modify-write may
# call another one on the same table (flock would deadlock on a second open of the file).
_HELD = threading.local()


def _relative(uri: str, location: str) -> str:
    """Path of a table's file (a delta-rs URI) relative to the table's location."""
    path = _local_path(uri)
    base = storage.arrow_uri(location).rstrip("/") + "/"
    if path.startswith(base):
        return path[len(base) :]
    return os.path.relpath(path, location)


class Lakehouse:
    """The Delta tables under one root, read and written through one engine.

    The root is a local folder or an object-store URI (``s3://bucket/prefix``, see
    :mod:`spark_jobs.lake.storage`): ``location`` spells it, ``remote`` says which, and
    ``root`` is the local folder for what must sit on a file system (the lakehouse itself
    when local).
    """

    def __init__(
        self, spark: Any, root: str | Path | None = None, engine: Engine | None = None
    ) -> None:
        self.spark = spark
        self.location = storage.normalise_root(root) if root else default_lakehouse()
        self.remote = storage.is_remote(self.location)
        self.root = storage.local_state_dir(self.location)
        self.storage_options = storage.delta_storage_options(self.location)
        self.fs, _ = storage.filesystem(self.location)
        self.engine: Engine = engine or ("spark" if _session_has_delta(spark) else "rs")
        if self.engine == "spark" and not _session_has_delta(spark):
            raise InvalidArgumentError("engine 'spark' needs Delta's JVM classes in the session")

    # -- locations and metadata ------------------------------------------------------------
    def path(self, name: str) -> str:
        """Table ``name``'s location: a local path or an ``s3://`` URI (delta-rs' spelling;
        :func:`storage.spark_uri` gives Spark's)."""
        return storage.join(self.location, table(name).relative_path.as_posix())

    def _fs_path(self, location: str) -> str:
        """``location`` (a path or URI of this lakehouse) as a path in ``self.fs``."""
        return storage.fs_path(_local_path(location))

    def exists(self, name: str) -> bool:
        from deltalake import DeltaTable

        return DeltaTable.is_deltatable(self.path(name), storage_options=self.storage_options)

    def _delta(self, name: str, version: int | None = None) -> Any:
        from deltalake import DeltaTable

        if not self.exists(name):
            raise InputDataError(
                f"table {name} does not exist under {self.location} "
                "(run the job that writes it first)"
            )
        return DeltaTable(self.path(name), version=version, storage_options=self.storage_options)

    @contextlib.contextmanager
    def locked(self, name: str) -> Iterator[None]:
        """Hold the lakehouse's lock of table ``name`` (an exclusive ``flock`` on
        ``<root>/_locks/<name>.lock``): a read-modify-write of a small driver-side table
        (allocating the next routing version or subscription id, updating version statuses)
        is serialised with every other process of this lakehouse's machine or shared file
        system. Appends need no lock: Delta commits them atomically.

        On an object store the lock is a lease object ``<root>/_locks/<name>.lock`` created
        with a conditional put (:func:`storage.object_lock`): exclusive across machines.
        """
        key = storage.join(self.location, "_locks", f"{name}.lock")
        held: dict[str, int] = _HELD.__dict__.setdefault("paths", {})
        if held.get(key):
            held[key] += 1
            try:
                yield
            finally:
                held[key] -= 1
            return
        if self.remote:
            with storage.object_lock(key):
                held[key] = 1
                try:
                    yield
                finally:
                    held.pop(key, None)
            return
        lock_path = Path(key)
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        with lock_path.open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            held[key] = 1
            try:
                yield
            finally:
                held.pop(key, None)
                fcntl.flock(handle, fcntl.LOCK_UN)

    def delta_table(self, name: str, version: int | None = None) -> Any:
        """The table's ``deltalake.DeltaTable`` (for maintenance: optimize, vacuum, ...).

        Raises:
            InputDataError: when the table does not exist.
        """
        return self._delta(name, version)

    def version(self, name: str) -> int | None:
        """The table's latest version, or None when it does not exist."""
        return self._delta(name).version() if self.exists(name) else None

    def history(self, name: str, limit: int | None = None) -> list[dict[str, Any]]:
        """Commit history, newest first (operation, version, timestamp, parameters...)."""
        return list(self._delta(name).history(limit))

    def row_count(self, name: str) -> int:
        """Rows of the table's latest version (0 when the table does not exist): from the
        Delta log's file statistics, or the Parquet footer of a file committed without
        them (no data is scanned)."""
        if not self.exists(name):
            return 0
        delta = self._delta(name)
        actions = pa.table(delta.get_add_actions(flatten=True)).to_pylist()
        missing = {a["path"] for a in actions if a.get("num_records") is None}
        counted = sum(int(a["num_records"]) for a in actions if a.get("num_records") is not None)
        for uri in delta.file_uris():
            if any(_local_path(uri).endswith(unquote(path)) for path in missing):
                counted += pq.read_metadata(self._fs_path(uri), filesystem=self.fs).num_rows
        return counted

    def last_batch(self, name: str, app_id: str) -> int | None:
        """The latest batch id committed to ``name`` by ``app_id`` (Delta txn action)."""
        return self._delta(name).transaction_version(app_id) if self.exists(name) else None

    # -- reads -------------------------------------------------------------------------------
    def read(self, name: str, version: int | None = None) -> Any:
        """The table (at ``version``, default latest) as a Spark DataFrame in its schema."""
        from pyspark.sql import functions as F

        spec = table(name)
        location = storage.spark_uri(self.path(name))
        if self.engine == "spark":
            reader = self.spark.read.format("delta")
            if version is not None:
                reader = reader.option("versionAsOf", version)
            frame = reader.load(location)
        else:
            files = self._delta(name, version).file_uris()
            if not files:
                return self.spark.createDataFrame([], spec.spark_schema())
            frame = self._read_files(spec, files)
        schema = spec.spark_schema()
        return frame.select([F.col(f.name).cast(f.dataType).alias(f.name) for f in schema])

    def _read_files(self, spec: TableSpec, files: Sequence[str]) -> Any:
        """The Parquet files of a version, partition columns taken from each file's path.

        Not Spark's partition discovery: files sit at different depths once delta-rs has
        compacted a table (``<table>/part-*.parquet`` beside the staged
        ``<table>/s3tm_write=.../part-*.parquet``), which discovery rejects.
        """
        from pyspark.sql import functions as F
        from pyspark.sql.pandas.types import from_arrow_schema

        data_schema = pa.schema([f for f in spec.schema if f.name not in spec.partition_by])
        uris = [storage.spark_uri(_local_path(f)) for f in files]
        frame = self.spark.read.schema(from_arrow_schema(data_schema)).parquet(*uris)
        path = F.col("_metadata.file_path")
        for column in spec.partition_by:
            raw = F.regexp_extract(path, f"/{column}=([^/]*)/", 1)
            value = F.url_decode(raw)
            frame = frame.withColumn(
                column, F.when(value == "__HIVE_DEFAULT_PARTITION__", None).otherwise(value)
            )
        return frame

    def read_arrow(self, name: str, version: int | None = None) -> pa.Table:
        """The table as a pyarrow Table, on the driver (small tables).

        delta-rs resolves the files of the version; pyarrow reads them with its own file
        system. Not ``DeltaTable.to_pyarrow_table()``: that scans through delta-rs' Python
        file-system handler, whose Rust runtime and Arrow's I/O threads are torn down in
        the wrong order at interpreter exit, so about one process in ten aborted with
        ``terminate called without an active exception`` after finishing its work
        (delta-rs issue 2184; tests/spark_jobs/lake/test_clean_exit.py).
        """
        import pyarrow.dataset as pads

        spec = table(name)
        if not self.exists(name):
            return spec.schema.empty_table()
        files = self._delta(name, version).file_uris()
        if not files:
            return spec.schema.empty_table()
        location = self.path(name)
        pieces = []
        for uri in files:
            piece = pads.dataset(
                self._fs_path(uri), format="parquet", filesystem=self.fs
            ).to_table()
            # Partition columns live in the path (Hive style), not in the file.
            values = _partition_values(_relative(uri, location), spec.columns)
            columns = []
            for field in spec.schema:
                if field.name in spec.partition_by:
                    column = pa.array([values.get(field.name)] * piece.num_rows, pa.string())
                elif field.name in piece.column_names:
                    column = piece[field.name]
                else:  # a column added after this file was written
                    column = pa.nulls(piece.num_rows, field.type)
                columns.append(column.cast(field.type))
            pieces.append(pa.Table.from_arrays(columns, schema=spec.schema))
        return pa.concat_tables(pieces)

    def recent_rows(self, name: str, columns: Sequence[str], limit: int) -> pa.Table:
        """Up to ``limit`` rows of ``columns`` (not partition columns) from the table's
        newest files: partition paths sort by their values (``event_day=YYYY-MM-DD``), file
        names by nothing, so "newest" is the last partition's files. A sample, not a query:
        files are read whole, newest first, until ``limit`` rows are in."""
        import pyarrow.parquet as pq

        spec = table(name)
        schema = pa.schema([spec.schema.field(c) for c in columns])
        if not self.exists(name) or limit <= 0:
            return schema.empty_table()
        location = self.path(name)
        uris = sorted(
            self._delta(name).file_uris(),
            key=lambda uri: _relative(uri, location).rsplit("/", 1)[0],
            reverse=True,
        )
        pieces: list[pa.Table] = []
        rows = 0
        for uri in uris:
            piece = pq.read_table(self._fs_path(uri), columns=list(columns), filesystem=self.fs)
            pieces.append(piece.cast(schema))
            rows += piece.num_rows
            if rows >= limit:
                break
        return pa.concat_tables(pieces).slice(0, limit) if pieces else schema.empty_table()

    def snapshot(self, name: str, as_of: int | dt.datetime | None = None) -> TableSnapshot:
        """One version of a table as a lazy pyarrow dataset (for SQL engines: DuckDB,
        Polars, ...): exactly the files of that version, partition values from their paths.

        ``as_of``: a table version, a timestamp (the version current then), or None (latest).

        Raises:
            InputDataError: the table does not exist, or has no such version / no version
                as early as that timestamp.
        """
        import pyarrow.dataset as pads

        spec = table(name)
        delta = self._delta(name)
        if as_of is not None:
            history = delta.history()
            first, latest = min(h["version"] for h in history), max(h["version"] for h in history)
            created = dt.datetime.fromtimestamp(min(h["timestamp"] for h in history) / 1000, dt.UTC)
            # delta-rs loads the first version for a time before it: say so instead
            if isinstance(as_of, dt.datetime) and as_of < created:
                raise InputDataError(
                    f"table {name} did not exist yet at {as_of} (created {created})"
                )
            target: int | dt.datetime = as_of if isinstance(as_of, dt.datetime) else int(as_of)
            if isinstance(as_of, dt.datetime):
                # the version current then by the commits' own timestamps (what `history`
                # shows): delta-rs goes by the log files' modification times, which can lag
                # a commit's timestamp by a few milliseconds and so name the version before
                aware = as_of if as_of.tzinfo else as_of.replace(tzinfo=dt.UTC)
                since_epoch = aware - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
                stamp_ms = since_epoch // dt.timedelta(milliseconds=1)
                current = [h["version"] for h in history if h["timestamp"] <= stamp_ms]
                if current:
                    target = max(current)
            try:
                delta.load_as_version(target)
            except Exception as err:  # delta-rs raises DeltaError / ValueError variants
                raise InputDataError(
                    f"table {name} has no version {as_of} (versions {first}..{latest})"
                ) from err
        location = self.path(name)
        paths, values_of, partitions = [], [], []
        for uri in delta.file_uris():
            paths.append(self._fs_path(uri))
            values = _partition_values(_relative(uri, location), spec.partition_by)
            values_of.append(values)
            expression = pads.scalar(True)
            for column in spec.partition_by:
                kind = spec.schema.field(column).type
                value = values.get(column)
                field = pads.field(column)
                expression &= (
                    field.is_null() if value is None else field == pa.scalar(value).cast(kind)
                )
            partitions.append(expression)
        dataset = pads.FileSystemDataset.from_paths(
            paths,
            schema=spec.schema,
            format=pads.ParquetFileFormat(),
            filesystem=self.fs,
            partitions=partitions,
        )
        return TableSnapshot(name, delta.version(), dataset, paths, values_of, self.fs)

    # -- writes ------------------------------------------------------------------------------
    def evolve(self, name: str) -> list[str]:
        """Add the columns the table's spec gained since the table was created (nullable
        only: old rows read them as null). Returns the names added."""
        import deltalake

        spec = table(name)
        checked: set[str] = self.__dict__.setdefault("_evolved", set())
        if name in checked or not self.exists(name):
            return []
        checked.add(name)  # once per process: a spec does not change while it runs
        with self.locked(name):
            present = {f.name for f in self._delta(name).schema().fields}
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

    def write(
        self,
        frame: Any,
        name: str,
        *,
        mode: WriteMode = "append",
        replace_where: Mapping[str, Sequence[Any]] | None = None,
        app_id: str | None = None,
        batch_id: int | None = None,
    ) -> WriteResult:
        """Write a DataFrame to a table in one Delta commit.

        Args:
            frame: rows in (or castable to) the table's schema.
            name: table name, e.g. ``silver.posts``.
            mode: ``append``, or ``overwrite`` (the whole table, or only the partitions
                ``replace_where`` names, e.g. ``{"day": [date(2026, 1, 1)]}``).
            app_id, batch_id: make the write idempotent: when ``batch_id`` is not above the
                last batch committed by ``app_id``, nothing is written.

        Raises:
            InvalidArgumentError: on a bad mode, a half-given (app_id, batch_id), or
                ``replace_where`` on a column that does not partition the table.
        """
        spec = table(name)
        self._check_write_args(spec, mode, replace_where, app_id, batch_id)
        if self._already_committed(name, app_id, batch_id):
            return WriteResult(name, self.version(name), 0, 0, skipped=True)
        self.evolve(name)
        conformed = self._conform(frame, spec)
        if self.engine == "spark":
            return self._write_spark(conformed, spec, mode, replace_where, app_id, batch_id)
        return self._write_rs(conformed, spec, mode, replace_where, app_id, batch_id)

    def write_arrow(
        self,
        data: pa.Table,
        name: str,
        *,
        mode: WriteMode = "append",
        replace_where: Mapping[str, Sequence[Any]] | None = None,
        app_id: str | None = None,
        batch_id: int | None = None,
    ) -> WriteResult:
        """Write a pyarrow Table from the driver (small tables) in one Delta commit."""
        from deltalake import CommitProperties, Transaction, write_deltalake

        spec = table(name)
        self._check_write_args(spec, mode, replace_where, app_id, batch_id)
        if self._already_committed(name, app_id, batch_id):
            return WriteResult(name, self.version(name), 0, 0, skipped=True)
        self.evolve(name)
        conformed = data.select(spec.columns).cast(spec.schema)
        commit = CommitProperties(
            app_transactions=[Transaction(app_id, batch_id)]
            if app_id is not None and batch_id is not None
            else None
        )
        partition_by = list(spec.partition_by) or None
        if replace_where:
            write_deltalake(
                self.path(name),
                conformed,
                mode="overwrite",
                partition_by=partition_by,
                predicate=_predicate(replace_where),
                commit_properties=commit,
                storage_options=self.storage_options,
            )
        else:
            write_deltalake(
                self.path(name),
                conformed,
                mode=mode,
                partition_by=partition_by,
                commit_properties=commit,
                storage_options=self.storage_options,
            )
        return WriteResult(name, self.version(name), -1, conformed.num_rows)

    def _already_committed(self, name: str, app_id: str | None, batch_id: int | None) -> bool:
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

    @staticmethod
    def _check_write_args(
        spec: TableSpec, mode: str, replace_where: Any, app_id: Any, batch_id: Any
    ) -> None:
        if mode not in ("append", "overwrite"):
            raise InvalidArgumentError(f"mode must be 'append' or 'overwrite', got {mode!r}")
        if (app_id is None) != (batch_id is None):
            raise InvalidArgumentError("app_id and batch_id go together")
        if batch_id is not None and batch_id < 0:
            raise InvalidArgumentError(f"batch_id must be >= 0, got {batch_id}")
        if replace_where:
            if mode != "overwrite":
                raise InvalidArgumentError("replace_where needs mode='overwrite'")
            bad = set(replace_where) - set(spec.partition_by)
            if bad:
                raise InvalidArgumentError(
                    f"replace_where columns {sorted(bad)} do not partition {spec.name} "
                    f"(partitioned by {list(spec.partition_by)})"
                )

    @staticmethod
    def _conform(frame: Any, spec: TableSpec) -> Any:
        from pyspark.sql import functions as F

        missing = [c for c in spec.columns if c not in frame.columns]
        if missing:
            raise InvalidArgumentError(f"{spec.name}: DataFrame lacks columns {missing}")
        return frame.select(
            [F.col(f.name).cast(f.dataType).alias(f.name) for f in spec.spark_schema()]
        )

    def _write_spark(
        self,
        frame: Any,
        spec: TableSpec,
        mode: str,
        replace_where: Mapping[str, Sequence[Any]] | None,
        app_id: str | None,
        batch_id: int | None,
    ) -> WriteResult:
        writer = frame.write.format("delta").mode(mode)
        if spec.partition_by:
            writer = writer.partitionBy(*spec.partition_by)
        if replace_where:
            writer = writer.option("replaceWhere", _predicate(replace_where))
        if app_id is not None:
            writer = writer.option("txnAppId", app_id).option("txnVersion", batch_id)
        writer.save(storage.spark_uri(self.path(spec.name)))
        return WriteResult(spec.name, self.version(spec.name), -1, -1)

    def staging_dir(self, name: str) -> str:
        """A fresh folder inside table ``name`` for files to commit with :meth:`commit_staged`.

        Named key=value so that every file of the table sits at the same depth
        (s3tm_write=.../<partitions>/part-*.parquet) and Spark's partition discovery accepts
        the file list on read (the extra column is dropped).
        """
        stamp = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:12]}"
        return storage.join(self.path(name), f"{WRITE_DIR_KEY}={stamp}")

    def discard_staged(self, staging: str) -> None:
        """Remove a staging folder whose files will not be committed (absent: nothing)."""
        with contextlib.suppress(FileNotFoundError, OSError):
            self.fs.delete_dir(self._fs_path(staging))

    def _write_rs(
        self,
        frame: Any,
        spec: TableSpec,
        mode: WriteMode,
        replace_where: Mapping[str, Sequence[Any]] | None,
        app_id: str | None,
        batch_id: int | None,
    ) -> WriteResult:
        target = self.staging_dir(spec.name)
        writer = frame.write.mode("error")
        if spec.partition_by:
            writer = writer.partitionBy(*spec.partition_by)
        try:
            writer.parquet(storage.spark_uri(target))
        except Exception:
            self.discard_staged(target)  # nothing committed: drop the files
            raise
        return self.commit_staged(
            spec.name,
            target,
            mode=mode,
            replace_where=replace_where,
            app_id=app_id,
            batch_id=batch_id,
        )

    def commit_staged(
        self,
        name: str,
        staging: str | Path,
        *,
        mode: WriteMode = "append",
        replace_where: Mapping[str, Sequence[Any]] | None = None,
        app_id: str | None = None,
        batch_id: int | None = None,
    ) -> WriteResult:
        """Commit every Parquet file under ``staging`` (from :meth:`staging_dir`, written by
        Spark or by workers) to table ``name`` in ONE Delta transaction.

        With ``app_id``/``batch_id`` already committed, nothing is committed and the staged
        files are removed. Files must be in the table's schema (and partition layout).
        """
        from deltalake import CommitProperties, DeltaTable, Transaction
        from deltalake.transaction import (
            AddAction,
            create_table_with_add_actions,
        )

        spec = table(name)
        self._check_write_args(spec, mode, replace_where, app_id, batch_id)
        root = self.path(name)
        staging = str(staging)
        parent, _, folder = staging.rstrip("/").rpartition("/")
        if parent != root or not folder.startswith(f"{WRITE_DIR_KEY}="):
            raise InvalidArgumentError(f"{staging} is not a staging folder of {name}")
        if self._already_committed(name, app_id, batch_id):
            self.discard_staged(staging)
            return WriteResult(name, self.version(name), 0, 0, skipped=True)
        try:
            self.evolve(name)
            actions: list[AddAction] = []
            rows = 0
            root_path = self._fs_path(root).rstrip("/")
            listing = self.fs.get_file_info(
                pa.fs.FileSelector(self._fs_path(staging), recursive=True, allow_not_found=True)
            )
            files = sorted(
                (f for f in listing if f.type == pa.fs.FileType.File), key=lambda f: f.path
            )
            for file in files:
                if not file.base_name.endswith(".parquet") or file.base_name.startswith("."):
                    continue
                relative = file.path[len(root_path) + 1 :]
                n_rows = pq.read_metadata(file.path, filesystem=self.fs).num_rows
                rows += n_rows
                modified = file.mtime.timestamp() if file.mtime else time.time()
                actions.append(
                    AddAction(
                        path=relative,
                        size=int(file.size),
                        partition_values=_partition_values(relative, spec.partition_by),
                        modification_time=int(modified * 1000),
                        data_change=True,
                        stats=json.dumps({"numRecords": n_rows}),
                    )
                )
            commit = CommitProperties(
                app_transactions=[Transaction(app_id, batch_id)]
                if app_id is not None and batch_id is not None
                else None
            )
            partition_by = list(spec.partition_by) or None
            if not self.exists(name):
                create_table_with_add_actions(
                    root,
                    spec.delta_schema(),
                    actions,
                    mode="append",
                    partition_by=partition_by,
                    name=name,
                    description=spec.description or None,
                    commit_properties=commit,
                    storage_options=self.storage_options,
                )
            else:
                filters = (
                    [(col, "in", [str(v) for v in values]) for col, values in replace_where.items()]
                    if replace_where
                    else None
                )
                DeltaTable(root, storage_options=self.storage_options).create_write_transaction(
                    list[Any](actions),
                    mode,
                    spec.schema,
                    partition_by=partition_by,
                    partition_filters=filters,
                    commit_properties=commit,
                )
        except Exception:
            self.discard_staged(staging)  # nothing committed: drop the files
            raise
        return WriteResult(name, self.version(name), len(actions), rows)


def _predicate(replace_where: Mapping[str, Sequence[Any]]) -> str:
    """A SQL predicate such as ``day IN ('2026-01-01')``, for replaceWhere / delta-rs."""
    clauses = []
    for column, values in replace_where.items():
        if not values:
            raise InvalidArgumentError(f"replace_where[{column!r}] is empty")
        quoted = ", ".join(f"'{v}'" if not isinstance(v, int | float) else str(v) for v in values)
        clauses.append(f"{column} IN ({quoted})")
    return " AND ".join(clauses)
