"""The file source's backlog, read from Spark's source log and the landing folder (the same
code reads ``s3a://`` checkpoints and landings: ``tests/spark_jobs/test_s3a.py`` runs it
there)."""

from __future__ import annotations

import json
from pathlib import Path

from spark_jobs.stream.backlog import file_backlog, source_log_entries


def _log(folder: Path, name: str, entries: list[tuple[str, int]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["v1", *(json.dumps({"path": p, "batchId": b, "size": 1}) for p, b in entries)]
    (folder / name).write_text("\n".join(lines) + "\n")


def test_the_backlog_is_this_batchs_files_and_the_ones_no_batch_took(tmp_path: Path) -> None:
    landing, checkpoint = tmp_path / "landing", tmp_path / "checkpoint"
    landing.mkdir()
    for k, size in enumerate((100, 200, 300, 400)):
        (landing / f"posts-{k}.jsonl").write_bytes(b"x" * size)
    (landing / ".posts-4.jsonl.tmp").write_bytes(b"x" * 999)  # being written: not landed
    (landing / "_SUCCESS").write_bytes(b"")
    sources = checkpoint / "sources" / "0"
    # a compacted log holds every batch before it; the files before it are not read again
    _log(sources, "0", [(f"file:{landing}/stale.jsonl", 0)])
    _log(sources, "1.compact", [(f"file:{landing}/posts-0.jsonl", 0)])
    _log(sources, "2", [(f"file:{landing}/posts-1.jsonl", 2)])
    (sources / ".2.crc").write_bytes(b"")

    entries = source_log_entries(str(checkpoint))
    assert [e["batchId"] for e in entries] == [0, 2]
    backlog = file_backlog(str(checkpoint), str(landing), 2)
    assert (backlog.batch_bytes, backlog.waiting_bytes) == (200, 300 + 400)


def test_a_stream_before_its_first_batch_has_everything_waiting(tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "posts-0.jsonl").write_bytes(b"x" * 50)
    backlog = file_backlog(str(tmp_path / "no-checkpoint-yet"), str(landing), 0)
    assert (backlog.batch_bytes, backlog.waiting_bytes) == (0, 50)
