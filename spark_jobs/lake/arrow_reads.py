"""Reads of a Delta table on the driver, without Spark: the whole table as Arrow (small
tables), a sample of its newest rows, and one version as a lazy pyarrow dataset for SQL
engines (DuckDB, Polars). delta-rs resolves a version's files; pyarrow reads them."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from core.errors import InputDataError
from schemas import table
from spark_jobs.lake.table_files import TableSnapshot, partition_values, relative_path

if TYPE_CHECKING:
    from spark_jobs.lake.table_store import TableStore


def read_arrow(
    store: TableStore,
    name: str,
    version: int | None = None,
    *,
    columns: Sequence[str] | None = None,
    where: pc.Expression | None = None,
    partitions: Mapping[str, object] | None = None,
) -> pa.Table:
    """The table as a pyarrow Table, on the driver (small tables, or the parts asked for).

    ``columns``: only these (the others are not read); ``where``: rows matching this filter
    of file columns (Parquet statistics skip the row groups it rules out); ``partitions``:
    only the files of these partition values (``{"routing_version": 3}``).

    delta-rs resolves the files of the version; pyarrow reads them with its own file
    system. Not ``DeltaTable.to_pyarrow_table()``: that scans through delta-rs' Python
    file-system handler, whose Rust runtime and Arrow's I/O threads are torn down in
    the wrong order at interpreter exit, so about one process in ten aborted with
    ``terminate called without an active exception`` after finishing its work
    (delta-rs issue 2184; tests/s3tm/test_clean_exit.py).
    """
    import pyarrow.dataset as pads

    spec = table(name)
    fields = [spec.schema.field(c) for c in columns] if columns is not None else list(spec.schema)
    schema = pa.schema(fields)
    if not store.exists(name):
        return schema.empty_table()
    files = store.delta_table(name, version).file_uris()
    location = store.path(name)
    wanted = {k: str(v) for k, v in (partitions or {}).items()}
    file_columns = [f.name for f in fields if f.name not in spec.partition_by]
    pieces = []
    for uri in files:
        # Partition columns live in the path (Hive style), not in the file.
        values = partition_values(relative_path(uri, location), spec.columns)
        if any(values.get(k) != v for k, v in wanted.items()):
            continue
        dataset = pads.dataset(store.fs_path(uri), format="parquet", filesystem=store.fs)
        present = set(dataset.schema.names)
        piece = dataset.to_table(columns=[c for c in file_columns if c in present], filter=where)
        arrays = []
        for field in fields:
            if field.name in spec.partition_by:
                column = pa.array([values.get(field.name)] * piece.num_rows, pa.string())
            elif field.name in piece.column_names:
                column = piece[field.name]
            else:  # a column added after this file was written
                column = pa.nulls(piece.num_rows, field.type)
            arrays.append(column.cast(field.type))
        pieces.append(pa.Table.from_arrays(arrays, schema=schema))
    return pa.concat_tables(pieces) if pieces else schema.empty_table()


def recent_rows(store: TableStore, name: str, columns: Sequence[str], limit: int) -> pa.Table:
    """Up to ``limit`` rows of ``columns`` (not partition columns) from the table's
    newest files: partition paths sort by their values (``event_day=YYYY-MM-DD``), file
    names by nothing, so "newest" is the last partition's files. A sample, not a query:
    files are read whole, newest first, until ``limit`` rows are in."""
    import pyarrow.parquet as pq

    spec = table(name)
    schema = pa.schema([spec.schema.field(c) for c in columns])
    if not store.exists(name) or limit <= 0:
        return schema.empty_table()
    location = store.path(name)
    uris = sorted(
        store.delta_table(name).file_uris(),
        key=lambda uri: relative_path(uri, location).rsplit("/", 1)[0],
        reverse=True,
    )
    pieces: list[pa.Table] = []
    rows = 0
    for uri in uris:
        piece = pq.read_table(store.fs_path(uri), columns=list(columns), filesystem=store.fs)
        pieces.append(piece.cast(schema))
        rows += piece.num_rows
        if rows >= limit:
            break
    return pa.concat_tables(pieces).slice(0, limit) if pieces else schema.empty_table()


def snapshot(store: TableStore, name: str, as_of: int | dt.datetime | None = None) -> TableSnapshot:
    """One version of a table as a lazy pyarrow dataset (for SQL engines: DuckDB,
    Polars, ...): exactly the files of that version, partition values from their paths.

    ``as_of``: a table version, a timestamp (the version current then), or None (latest).

    Raises:
        InputDataError: the table does not exist, or has no such version / no version
            as early as that timestamp.
    """
    import pyarrow.dataset as pads

    spec = table(name)
    delta = store.delta_table(name)
    if as_of is not None:
        history = delta.history()
        first, latest = min(h["version"] for h in history), max(h["version"] for h in history)
        created = dt.datetime.fromtimestamp(min(h["timestamp"] for h in history) / 1000, dt.UTC)
        # delta-rs loads the first version for a time before it: say so instead
        if isinstance(as_of, dt.datetime) and as_of < created:
            raise InputDataError(f"table {name} did not exist yet at {as_of} (created {created})")
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
        from deltalake.exceptions import DeltaError

        try:
            delta.load_as_version(target)
        except (DeltaError, ValueError) as err:
            raise InputDataError(
                f"table {name} has no version {as_of} (versions {first}..{latest})"
            ) from err
    location = store.path(name)
    paths, values_of, partitions = [], [], []
    for uri in delta.file_uris():
        paths.append(store.fs_path(uri))
        values = partition_values(relative_path(uri, location), spec.partition_by)
        values_of.append(values)
        expression = pads.scalar(True)
        for column in spec.partition_by:
            kind = spec.schema.field(column).type
            value = values.get(column)
            field = pads.field(column)
            expression &= field.is_null() if value is None else field == pa.scalar(value).cast(kind)
        partitions.append(expression)
    dataset = pads.FileSystemDataset.from_paths(
        paths,
        schema=spec.schema,
        format=pads.ParquetFileFormat(),
        filesystem=store.fs,
        partitions=partitions,
    )
    return TableSnapshot(name, delta.version(), dataset, paths, values_of, store.fs)
