"""Staged writes: executors (or Spark) write Parquet files into a staging folder inside
the table, and the driver commits them all in ONE Delta transaction through delta-rs
(``create_table_with_add_actions`` for a new table, ``create_write_transaction``
otherwise), with the application transaction (app id, batch id) in the same commit."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

import pyarrow as pa
import pyarrow.fs
import pyarrow.parquet as pq

from core.errors import InvalidArgumentError
from schemas import table
from spark_jobs.lake import storage
from spark_jobs.lake.table_files import (
    WRITE_DIR_KEY,
    CommitOptions,
    WriteResult,
    checked_commit,
    partition_values,
)

if TYPE_CHECKING:
    from spark_jobs.lake.table_store import TableStore


def staging_dir(store: TableStore, name: str) -> str:
    """A fresh folder inside table ``name`` for files to commit with :meth:`commit_staged`.

    Named key=value so that every file of the table sits at the same depth
    (s3tm_write=.../<partitions>/part-*.parquet) and Spark's partition discovery accepts
    the file list on read (the extra column is dropped).
    """
    stamp = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:12]}"
    return storage.join(store.path(name), f"{WRITE_DIR_KEY}={stamp}")


def discard_staged(store: TableStore, staging: str) -> None:
    """Remove a staging folder whose files will not be committed (absent: nothing)."""
    with contextlib.suppress(FileNotFoundError, OSError):
        store.fs.delete_dir(store.fs_path(staging))


def commit_staged(
    store: TableStore, name: str, staging: str | Path, **options: Unpack[CommitOptions]
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
    write = checked_commit(spec, options)
    app_id, batch_id = write.app_id, write.batch_id
    root = store.path(name)
    staging = str(staging)
    parent, _, folder = staging.rstrip("/").rpartition("/")
    if parent != root or not folder.startswith(f"{WRITE_DIR_KEY}="):
        raise InvalidArgumentError(f"{staging} is not a staging folder of {name}")
    if store.already_committed(name, app_id, batch_id):
        discard_staged(store, staging)
        return WriteResult(name, store.version(name), 0, 0, skipped=True)
    try:
        store.evolve(name)
        actions: list[AddAction] = []
        rows = 0
        root_path = store.fs_path(root).rstrip("/")
        listing = store.fs.get_file_info(
            pa.fs.FileSelector(store.fs_path(staging), recursive=True, allow_not_found=True)
        )
        files = sorted((f for f in listing if f.type == pa.fs.FileType.File), key=lambda f: f.path)
        for file in files:
            if not file.base_name.endswith(".parquet") or file.base_name.startswith("."):
                continue
            relative = file.path[len(root_path) + 1 :]
            n_rows = pq.read_metadata(file.path, filesystem=store.fs).num_rows
            rows += n_rows
            modified = file.mtime.timestamp() if file.mtime else time.time()
            actions.append(
                AddAction(
                    path=relative,
                    size=int(file.size),
                    partition_values=partition_values(relative, spec.partition_by),
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
        if not store.exists(name):
            create_table_with_add_actions(
                root,
                spec.delta_schema(),
                actions,
                mode="append",
                partition_by=partition_by,
                name=name,
                description=spec.description or None,
                commit_properties=commit,
                storage_options=store.storage_options,
            )
        else:
            filters = (
                [
                    (col, "in", [str(v) for v in values])
                    for col, values in write.replace_where.items()
                ]
                if write.replace_where
                else None
            )
            DeltaTable(root, storage_options=store.storage_options).create_write_transaction(
                list[Any](actions),
                write.mode,
                spec.schema,
                partition_by=partition_by,
                partition_filters=filters,
                commit_properties=commit,
            )
    except BaseException:  # an interrupt too: nothing is committed, then re-raised
        discard_staged(store, staging)  # nothing committed: drop the files
        raise
    return WriteResult(name, store.version(name), len(actions), rows)
