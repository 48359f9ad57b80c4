"""The stream's backlog: posts landed and not yet processed, as the source tells it.

A file source: bytes of the files Spark's file-source log has not yet handed to a batch,
plus this batch's (the driver turns bytes into posts by the bytes per post measured so
far). Kafka: the source's own offsets-behind-latest metric.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.shedding.policy import Backlog

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery


def _log_entries(folder: Path) -> list[dict[str, Any]]:
    """Entries of Spark's file-source metadata log (``<checkpoint>/sources/0``): the latest
    compacted file (it holds every earlier batch) and the batch files after it."""
    if not folder.is_dir():
        return []
    batches: list[tuple[int, Path]] = []
    for path in folder.iterdir():
        stem = path.name.removesuffix(".compact")
        if stem.isdigit() and not path.name.startswith("."):
            batches.append((int(stem), path))
    batches.sort()
    compacted = [i for i, (_, p) in enumerate(batches) if p.name.endswith(".compact")]
    start = compacted[-1] if compacted else 0
    entries = []
    for _, path in batches[start:]:
        lines = path.read_text(encoding="utf-8").splitlines()[1:]  # the first is "v1"
        entries += [json.loads(line) for line in lines if line.strip()]
    return entries


def file_backlog(checkpoint: str, landing: str, batch_id: int) -> Backlog:
    """Bytes of this batch's files and of the landed files no batch has taken yet."""
    entries = _log_entries(Path(checkpoint) / "sources" / "0")
    taken = {Path(e["path"].removeprefix("file:")).name: e["batchId"] for e in entries}
    batch = waiting = 0
    for path in Path(landing).iterdir():
        if path.name.startswith((".", "_")) or not path.is_file():
            continue
        owner = taken.get(path.name)
        size = path.stat().st_size
        if owner is None:
            waiting += size
        elif owner == batch_id:
            batch += size
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
