"""The stream's backlog: posts landed and not yet processed, as the source tells it.

A file source: bytes of the files Spark's file-source log has not yet handed to a batch,
plus this batch's (the driver turns bytes into posts by the bytes per post measured so
far). Kafka: the source's own offsets-behind-latest metric.
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, TypedDict, cast

from core.stream.shedding_policy import Backlog
from spark_jobs.lake.storage import filesystem, fs_path, join

if TYPE_CHECKING:
    import pyarrow.fs as pafs
    from pyspark.sql.streaming import StreamingQuery


class SourceLogEntry(TypedDict):
    """A file a batch took, as Spark's file-source log records it (its other keys unread)."""

    path: str  # as Spark names the file: file:/..., s3a://...
    batchId: int  # (Spark's key)


@functools.lru_cache(maxsize=8)
def _filesystem(location: str) -> tuple[pafs.FileSystem, str]:
    """One file system per location for the stream's life (an S3 client is made once)."""
    return filesystem(location)


def _log_entries(fs: pafs.FileSystem, folder: str) -> list[SourceLogEntry]:
    """Entries of Spark's file-source metadata log (``<checkpoint>/sources/0``): the latest
    compacted file (it holds every earlier batch) and the batch files after it."""
    import pyarrow.fs as pafs

    batches: list[tuple[int, str, bool]] = []
    for info in fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True)):
        stem = info.base_name.removesuffix(".compact")
        if info.type == pafs.FileType.File and stem.isdigit():
            batches.append((int(stem), info.path, info.base_name.endswith(".compact")))
    batches.sort()
    compacted = [i for i, (_, _, compact) in enumerate(batches) if compact]
    entries = []
    for _, path, _ in batches[compacted[-1] if compacted else 0 :]:
        with fs.open_input_stream(path) as stream:
            lines = stream.read().decode("utf-8").splitlines()[1:]  # the first is "v1"
        entries += [cast(SourceLogEntry, json.loads(line)) for line in lines if line.strip()]
    return entries


def source_log_entries(checkpoint: str) -> list[SourceLogEntry]:
    """The file source's log of the stream at ``checkpoint``: one entry per file a batch
    took (``path`` as Spark names it, ``batchId``)."""
    fs, _ = _filesystem(checkpoint)
    return _log_entries(fs, fs_path(join(checkpoint, "sources", "0")))


def file_backlog(checkpoint: str, landing: str, batch_id: int) -> Backlog:
    """Bytes of this batch's files and of the landed files no batch has taken yet (a local
    folder or an object store: ``s3a://`` as Spark names it, ``s3://``)."""
    import pyarrow.fs as pafs

    entries = source_log_entries(checkpoint)
    # the log names files as Spark does (file:/..., s3a://...): matched by name
    taken = {e["path"].rsplit("/", 1)[-1]: e["batchId"] for e in entries}
    landing_fs, folder = _filesystem(landing)
    batch = waiting = 0
    for info in landing_fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True)):
        if info.base_name.startswith((".", "_")) or info.type != pafs.FileType.File:
            continue
        owner = taken.get(info.base_name)
        if owner is None:
            waiting += info.size
        elif owner == batch_id:
            batch += info.size
    return Backlog(batch, waiting)


def kafka_backlog(query: StreamingQuery | None) -> Backlog | None:
    """Records behind the latest offsets, from the Kafka source's last progress report."""
    progress = getattr(query, "lastProgress", None) if query is not None else None
    if not progress or not progress.get("sources"):
        return None
    source = progress["sources"][0]
    metrics = source.get("metrics") or {}
    if "avgOffsetsBehindLatest" not in metrics:
        return None
    end = source.get("endOffset")
    offsets = json.loads(end) if isinstance(end, str) else (end or {})
    partitions = sum(len(p) for p in offsets.values()) or 1
    behind = float(metrics["avgOffsetsBehindLatest"]) * partitions
    return Backlog(0, 0, int(source.get("numInputRows") or 0), int(behind))
