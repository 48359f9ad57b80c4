"""A Delta table's files as delta-rs names them: partition values from Hive-style paths,
paths relative to the table, file URIs as local paths; and the predicate of a partition
overwrite. Pure string work, shared by both engines' reads and the staged commits."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict
from urllib.parse import unquote

from core.errors import InvalidArgumentError
from spark_jobs.lake import storage

if TYPE_CHECKING:
    import pyarrow.dataset
    import pyarrow.fs

    from schemas import TableSpec

WriteMode = Literal["append", "overwrite"]
Engine = Literal["spark", "rs"]
# the key of a staging folder inside a table (see ``staged_writes.staging_dir``)
WRITE_DIR_KEY = "s3tm_write"


@dataclass(frozen=True)
class WriteResult:
    """What a write did: the table version it produced (or found), files and rows added
    (None: not counted, as when Spark wrote through delta-spark)."""

    table: str
    version: int | None
    files: int | None
    rows: int | None
    skipped: bool = False


@dataclass(frozen=True)
class TableSnapshot:
    """A table at one Delta version, as a lazy pyarrow dataset over that version's files."""

    name: str
    version: int
    dataset: pyarrow.dataset.FileSystemDataset
    files: list[str]  # the version's Parquet files, as paths in ``filesystem``
    partitions: list[dict[str, str | None]]  # each file's partition values (from its path)
    filesystem: pyarrow.fs.FileSystem | None = None  # of ``files`` (local or an object store)


class CommitOptions(TypedDict, total=False):
    """``commit_staged``'s keyword options, as ``write`` names them: ``mode`` (append),
    ``replace_where`` (partition column -> values an overwrite replaces), and the stream's
    ``app_id`` with ``batch_id`` (a batch committed already is skipped)."""

    mode: WriteMode
    replace_where: Mapping[str, Sequence[object]] | None
    app_id: str | None
    batch_id: int | None


@dataclass(frozen=True)
class CheckedCommit:
    """:class:`CommitOptions` with their defaults, checked against a table."""

    mode: WriteMode
    replace_where: Mapping[str, Sequence[object]] | None
    app_id: str | None
    batch_id: int | None


def checked_commit(spec: TableSpec, options: CommitOptions) -> CheckedCommit:
    """``options`` with their defaults (raises InvalidArgumentError on what ``spec`` does
    not accept)."""
    commit = CheckedCommit(
        options.get("mode", "append"),
        options.get("replace_where"),
        options.get("app_id"),
        options.get("batch_id"),
    )
    check_write_args(spec, commit.mode, commit.replace_where, commit.app_id, commit.batch_id)
    return commit


def check_write_args(
    spec: TableSpec,
    mode: str,
    replace_where: Mapping[str, Sequence[object]] | None,
    app_id: str | None,
    batch_id: int | None,
) -> None:
    """The write options a table accepts (raises InvalidArgumentError otherwise)."""
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


def partition_values(relative: str, columns: Sequence[str]) -> dict[str, str | None]:
    """Partition values of a file from its Hive-style path (only the table's columns)."""
    values: dict[str, str | None] = {}
    for part in Path(relative).parts[:-1]:
        if "=" in part:
            key, value = part.split("=", 1)
            if key in columns:
                value = unquote(value)
                values[key] = None if value == "__HIVE_DEFAULT_PARTITION__" else value
    return values


def local_path(uri: str) -> str:
    """A file URI of delta-rs as a local path (``file:///x`` -> ``/x``; paths unchanged)."""
    return unquote(uri[len("file://") :]) if uri.startswith("file://") else uri


def relative_path(uri: str, location: str) -> str:
    """Path of a table's file (a delta-rs URI) relative to the table's location."""
    path = local_path(uri)
    base = storage.arrow_uri(location).rstrip("/") + "/"
    if path.startswith(base):
        return path[len(base) :]
    return os.path.relpath(path, location)


def overwrite_predicate(replace_where: Mapping[str, Sequence[object]]) -> str:
    """A SQL predicate such as ``day IN ('2026-01-01')``, for replaceWhere / delta-rs."""
    clauses = []
    for column, values in replace_where.items():
        if not values:
            raise InvalidArgumentError(f"replace_where[{column!r}] is empty")
        quoted = ", ".join(f"'{v}'" if not isinstance(v, int | float) else str(v) for v in values)
        clauses.append(f"{column} IN ({quoted})")
    return " AND ".join(clauses)
