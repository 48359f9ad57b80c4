"""The ``matches`` rows of the lakehouse, whether the stream wrote the table or not.

A stream run with ``--no-matches-table`` writes ``deliveries`` only; each delivery's
``sub_ids`` and ``matcher_ids`` hold its matches, so the rows derive from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from core.stream.dispatch import matches_of_deliveries
from schemas import table

if TYPE_CHECKING:
    from spark_jobs.lake.delta_store import DeltaStore


def derived_matches(lakehouse: DeltaStore, version: int | None = None) -> pa.Table:
    """``matches`` rows derived from ``deliveries`` (at ``version``; latest when None), in
    the ``matches`` table's column order; empty when nothing was delivered yet."""
    spec = table("matches")
    if not lakehouse.exists("deliveries"):
        return spec.schema.empty_table()
    derived = matches_of_deliveries(lakehouse.read_arrow("deliveries", version=version))
    return derived.select(spec.schema.names)
