"""All Delta reads and writes of the platform, with two engines (docs/ARCHITECTURE.md,
"Delta engines").

- ``spark``: delta-spark, when the session has Delta's JVM classes: ``format("delta")``
  reads and writes, ``txnAppId``/``txnVersion`` for idempotent appends.
- ``rs``: delta-rs. Reads ask delta-rs for the Parquet files of a table version and hand
  them to Spark. Writes let the executors write Parquet files into the table folder and the
  driver commit them in ONE Delta transaction (``staged_writes``), with the application
  transaction (app id, batch id) in the same commit.

Same tables, same protocol: a table written by either engine is read by the other, and
``deltalake.DeltaTable`` reads both. :class:`Lakehouse` is a :class:`DeltaStore` (delta-rs:
metadata, locks, Arrow reads and writes on the driver) with a Spark session for DataFrames;
``Lakehouse(None, root, engine="rs")`` serves the commands that need no JVM.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

import pyarrow as pa

from core.errors import InvalidArgumentError
from schemas import TableSpec, table
from spark_jobs.lake import storage
from spark_jobs.lake.delta_store import (
    LAKEHOUSE_ENV,
    DeltaStore,
    default_lakehouse,
)
from spark_jobs.lake.table_files import (
    WRITE_DIR_KEY,
    CommitOptions,
    Engine,
    TableSnapshot,
    WriteMode,
    WriteResult,
    check_write_args,
    checked_commit,
    local_path,
    overwrite_predicate,
)
from spark_jobs.settings import env_name, settings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "LAKEHOUSE_ENV",
    "WRITE_DIR_KEY",
    "Engine",
    "Lakehouse",
    "TableSnapshot",
    "WriteMode",
    "WriteResult",
    "default_lakehouse",
]


# How far back a delta-spark write looks for its own commit (concurrent writers commit too)
WRITE_HISTORY_DEPTH = 50


def _metric(metrics: Mapping[str, object], *names: str) -> int | None:
    """The first of ``names`` in a commit's operation metrics (delta-spark writes strings)."""
    for name in names:
        if metrics.get(name) is not None:
            return int(str(metrics[name]))
    return None


ENGINE_ENV = env_name("delta_engine")


def _session_has_delta(spark: SparkSession | None) -> bool:
    if spark is None:
        return False
    jvm = spark._jvm
    if jvm is None:  # a Spark Connect session: no JVM gateway here
        return False
    from py4j.protocol import Py4JJavaError

    try:
        jvm.java.lang.Class.forName("io.delta.tables.DeltaTable")
    except Py4JJavaError:  # py4j's wrapper of the JVM's ClassNotFoundException
        return False
    return True


def configured_engine() -> Engine:
    """``$S3TM_DELTA_ENGINE``: ``rs`` (the default) or ``spark``.

    Raises:
        InvalidArgumentError: another value.
    """
    return settings().delta_engine


class Lakehouse(DeltaStore):
    """The Delta tables under one root, read and written through one engine; DataFrames
    through the Spark session (``spark`` may be None for the Arrow-only paths)."""

    def __init__(
        self,
        spark: SparkSession | None,
        root: str | Path | None = None,
        engine: Engine | None = None,
    ) -> None:
        super().__init__(root)
        self._spark = spark
        chosen = engine or ("rs" if spark is None else configured_engine())
        if chosen == "spark" and self.remote and engine is None:
            # On an object store every commit goes through delta-rs: its S3 commits are
            # conditional puts (safe with any number of writers), where delta-spark's S3
            # log store is safe only while one driver writes, and the stream, maintenance
            # and the CLI commit to the same tables with delta-rs.
            chosen = "rs"
        self.engine: Engine = chosen
        if self.engine == "spark" and not _session_has_delta(spark):
            raise InvalidArgumentError(
                "engine 'spark' needs Delta's JVM classes in the session (run `make setup`), "
                f"or set {ENGINE_ENV}=rs"
            )

    @property
    def spark(self) -> SparkSession:
        """The session (raises when this lakehouse was opened without one)."""
        if self._spark is None:
            raise InvalidArgumentError("this lakehouse was opened without a Spark session")
        return self._spark

    # -- reads -------------------------------------------------------------------------------
    def read(self, name: str, version: int | None = None) -> DataFrame:
        """The table (at ``version``, default latest) as a Spark DataFrame in its schema."""
        from pyspark.sql import functions as F

        spec = table(name)
        location = storage.spark_uri(self.path(name))
        if self.engine == "spark":
            if not self.exists(name):
                self.delta_table(name)  # raises the lakehouse's "does not exist" error
            reader = self.spark.read.format("delta")
            if version is not None:
                reader = reader.option("versionAsOf", version)
            frame = reader.load(location)
        else:
            files = self.delta_table(name, version).file_uris()
            if not files:
                return self.spark.createDataFrame([], spec.spark_schema())
            frame = self._read_files(spec, files)
        schema = spec.spark_schema()
        return frame.select([F.col(f.name).cast(f.dataType).alias(f.name) for f in schema])

    def _read_files(self, spec: TableSpec, files: Sequence[str]) -> DataFrame:
        """The Parquet files of a version, partition columns taken from each file's path.

        Not Spark's partition discovery: files sit at different depths once delta-rs has
        compacted a table (``<table>/part-*.parquet`` beside the staged
        ``<table>/s3tm_write=.../part-*.parquet``), which discovery rejects.
        """
        from pyspark.sql import functions as F
        from pyspark.sql.pandas.types import from_arrow_schema

        data_schema = pa.schema([f for f in spec.schema if f.name not in spec.partition_by])
        uris = [storage.spark_uri(local_path(f)) for f in files]
        frame = self.spark.read.schema(from_arrow_schema(data_schema)).parquet(*uris)
        path = F.col("_metadata.file_path")
        for column in spec.partition_by:
            raw = F.regexp_extract(path, f"/{column}=([^/]*)/", 1)
            value = F.url_decode(raw)
            frame = frame.withColumn(
                column, F.when(value == "__HIVE_DEFAULT_PARTITION__", None).otherwise(value)
            )
        return frame

    def write(
        self,
        frame: DataFrame,
        name: str,
        *,
        mode: WriteMode = "append",
        replace_where: Mapping[str, Sequence[object]] | None = None,
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
        check_write_args(spec, mode, replace_where, app_id, batch_id)
        if self.already_committed(name, app_id, batch_id):
            return WriteResult(name, self.version(name), 0, 0, skipped=True)
        self.evolve(name)
        conformed = self._conform(frame, spec)
        if self.engine == "spark":
            return self._write_spark(conformed, spec, mode, replace_where, app_id, batch_id)
        return self._write_rs(conformed, spec, mode, replace_where, app_id, batch_id)

    def commit_staged(
        self, name: str, staging: str | Path, **options: Unpack[CommitOptions]
    ) -> WriteResult:
        """Commit the Parquet files staged under ``staging`` (the stream's tasks write them)
        to table ``name`` in one Delta commit. With engine ``spark`` delta-spark commits:
        it adds only files it wrote, so the staged rows are read back and written with
        ``format("delta")`` (one more pass over them), then the staged files are removed."""
        if self.engine != "spark":
            return super().commit_staged(name, staging, **options)
        import pyarrow.fs as pafs

        spec = table(name)
        commit = checked_commit(spec, options)
        staging = str(staging)
        try:
            if self.already_committed(name, commit.app_id, commit.batch_id):
                return WriteResult(name, self.version(name), 0, 0, skipped=True)
            listing = self.fs.get_file_info(
                pafs.FileSelector(self.fs_path(staging), recursive=True, allow_not_found=True)
            )
            staged = [f.path for f in listing if f.base_name.endswith(".parquet")]
            frame = (
                self._read_staged(spec, staging, staged[0])
                if staged
                else self.spark.createDataFrame([], spec.spark_schema())
            )
            self.evolve(name)
            conformed = self._conform(frame, spec)
            return self._write_spark(
                conformed, spec, commit.mode, commit.replace_where, commit.app_id, commit.batch_id
            )
        finally:
            self.discard_staged(staging)

    def _read_staged(self, spec: TableSpec, staging: str, first_file: str) -> DataFrame:
        """The staged files as a DataFrame. When a file's footer has every column of the
        spec (the stream's tasks write them so), the spec's schema is named: Spark would
        otherwise run a job to read a footer and infer it (0.07-0.6 s a commit, four commits
        a batch). Otherwise Spark infers, and :meth:`_conform` names what is missing."""
        import pyarrow.parquet as pq
        from pyspark.sql.types import StructType

        data = [f for f in spec.spark_schema() if f.name not in spec.partition_by]
        present = set(pq.read_schema(first_file, filesystem=self.fs).names)
        reader = self.spark.read
        if {f.name for f in data} <= present:
            reader = reader.schema(StructType(data))  # partition columns: from the paths
        return reader.parquet(storage.spark_uri(staging))

    @staticmethod
    def _conform(frame: DataFrame, spec: TableSpec) -> DataFrame:
        from pyspark.sql import functions as F

        missing = [c for c in spec.columns if c not in frame.columns]
        if missing:
            raise InvalidArgumentError(f"{spec.name}: DataFrame lacks columns {missing}")
        return frame.select(
            [F.col(f.name).cast(f.dataType).alias(f.name) for f in spec.spark_schema()]
        )

    def _write_spark(
        self,
        frame: DataFrame,
        spec: TableSpec,
        mode: str,
        replace_where: Mapping[str, Sequence[object]] | None,
        app_id: str | None,
        batch_id: int | None,
    ) -> WriteResult:
        # The commit is found again by a token in its commitInfo (another writer may have
        # committed since): its version and metrics fill the result; no commit means
        # delta-spark skipped an application transaction it had already seen.
        self.create(spec.name)
        token = f"s3tm-write-{uuid.uuid4().hex}"
        writer = frame.write.format("delta").mode(mode).option("userMetadata", token)
        if spec.partition_by:
            writer = writer.partitionBy(*spec.partition_by)
        if replace_where:
            writer = writer.option("replaceWhere", overwrite_predicate(replace_where))
        if app_id is not None:
            writer = writer.option("txnAppId", app_id).option("txnVersion", batch_id)
        writer.save(storage.spark_uri(self.path(spec.name)))
        for commit in self.delta_table(spec.name).history(WRITE_HISTORY_DEPTH):
            if commit.get("userMetadata") == token:
                metrics = commit.get("operationMetrics") or {}
                return WriteResult(
                    spec.name,
                    int(commit["version"]),
                    _metric(metrics, "numFiles", "numAddedFiles"),
                    _metric(metrics, "numOutputRows"),
                )
        return WriteResult(spec.name, self.version(spec.name), 0, 0, skipped=True)

    def _write_rs(
        self,
        frame: DataFrame,
        spec: TableSpec,
        mode: WriteMode,
        replace_where: Mapping[str, Sequence[object]] | None,
        app_id: str | None,
        batch_id: int | None,
    ) -> WriteResult:
        target = self.staging_dir(spec.name)
        writer = frame.write.mode("error")
        if spec.partition_by:
            writer = writer.partitionBy(*spec.partition_by)
        try:
            writer.parquet(storage.spark_uri(target))
        except BaseException:  # an interrupt too: nothing is committed, then re-raised
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
