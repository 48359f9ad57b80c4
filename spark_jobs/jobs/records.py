"""The line judge: one raw record (a landing file's line or a Kafka value) -> a parsed row,
good with its fields or bad with the reason. Ingest reads landing files and Kafka; both
judge their records here (``core.corpus.records.parse_json_record``'s rules)."""

from __future__ import annotations

from typing import TypedDict

import pyarrow as pa

from core.corpus.records import MAX_TEXT_CHARS, parse_json_record

PARSED_SCHEMA = (
    "ok boolean, post_id string, text string, source string, created_at string, "
    "source_file string, line_number long, reason string, raw string"
)

PARSED_ARROW = pa.schema(
    [
        ("ok", pa.bool_()),
        ("post_id", pa.string()),
        ("text", pa.string()),
        ("source", pa.string()),
        ("created_at", pa.string()),
        ("source_file", pa.string()),
        ("line_number", pa.int64()),
        ("reason", pa.string()),
        ("raw", pa.string()),
    ]
)


class ParsedRow(TypedDict, total=False):
    """A row of ``PARSED_SCHEMA``: a good record's fields, or a bad one's reason."""

    ok: bool
    post_id: str
    text: str
    source: str | None
    created_at: str | None
    source_file: str
    line_number: int
    reason: str
    raw: str


def judge_record(raw: bytes, source_file: str, line_number: int) -> ParsedRow:
    """One record (a landing line or a Kafka value) as a parsed row: ``ok`` with its fields,
    or not ``ok`` with the reason (``core.corpus.records.parse_json_record``'s rules)."""
    record, reason = parse_json_record(raw) if raw.strip() else (None, "blank line")
    row: ParsedRow = {
        "ok": record is not None,
        "source_file": source_file,
        "line_number": line_number,
        "raw": raw[: 2 * MAX_TEXT_CHARS].decode("utf-8", errors="replace"),
    }
    if record is None:
        row["reason"] = reason
        return row
    post_id = record.get("id")
    row["post_id"] = str(post_id) if post_id is not None else f"{source_file}:{line_number}"
    row["text"] = record["text"]
    row["source"] = str(record["source"]) if record.get("source") is not None else None
    created = record.get("created_at")
    row["created_at"] = str(created) if created is not None else None
    return row
