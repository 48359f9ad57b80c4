"""A ``deliveries`` row as a lakehouse from before the shedding columns held it: the
schema-growth tests of delta-rs and delta-spark start from it."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from schemas import table

# the columns deliveries gained since
GROWN = ("shedding_level",)


def deliveries_before_shedding() -> tuple[pa.Schema, dict[str, object]]:
    """The old schema and one row of it (every old column set)."""
    old_schema = pa.schema([f for f in table("deliveries").schema if f.name not in GROWN])
    row: dict[str, object] = {
        "post_id": "p1",
        "subscriber": "s",
        "sub_ids": [1],
        "routing_version": 1,
        "delivered_at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        "batch_id": 0,
    }
    return old_schema, {**dict.fromkeys(old_schema.names), **row}
