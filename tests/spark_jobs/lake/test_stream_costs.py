"""The stream cost model fitted to a lakehouse's own batches (delta-rs, no JVM): steady
batches only, joined with their matchers' work; the defaults until two versions ran."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from core.stream.costs import DEFAULT_COSTS, task_seconds
from schemas import table
from spark_jobs.lake.delta_io import Lakehouse
from spark_jobs.lake.stream_costs import WARM_UP_BATCHES, steady_batches, stream_costs

T0 = dt.datetime(2026, 12, 7, tzinfo=dt.UTC)
PER_POST, PER_COPY, PER_WORK, PER_MATCH = 2e-6, 0.5e-6, 0.05e-6, 0.3e-6


def _rows(query: str, version: int, batches: int, spread: float) -> tuple[list, list]:
    committed, health = [], []
    for b in range(batches):
        posts = 10_000 + 1_000 * b
        copies, work, matches = int(posts * spread), posts * (20 + 3 * b), posts * (5 + b)
        warm = 3.0 if b < WARM_UP_BATCHES else 1.0  # the warm-up's batches cost more
        committed.append({
            "query_id": query, "batch_id": b, "stage": "committed", "routing_version": version,
            "epoch": 0, "recorded_at": T0, "posts": posts, "routed_pairs": copies,
            "matches": matches, "seconds_route": warm * (PER_POST * posts + PER_COPY * copies),
            "seconds_match": warm * PER_WORK * work, "seconds_dispatch": PER_MATCH * matches,
        })  # fmt: skip
        health.append({
            "query_id": query, "batch_id": b, "routing_version": version, "n_matchers": 2,
            "recorded_at": T0, "work": [work // 3, work - work // 3],
        })  # fmt: skip
    return committed, health


def _write(lake: Lakehouse, name: str, rows: list) -> None:
    lake.write_arrow(pa.Table.from_pylist(rows, schema=table(name).schema), name)


def test_two_versions_batches_fit_their_own_costs_and_one_version_keeps_the_defaults(
    tmp_path,
) -> None:
    lake = Lakehouse(None, str(tmp_path / "lake"), engine="rs")
    assert stream_costs(lake) == DEFAULT_COSTS  # no stream yet
    batches, health = _rows("q1", 1, 6, spread=2.0)
    _write(lake, "stream.batches", batches)
    _write(lake, "stream.health", health)
    assert stream_costs(lake) == DEFAULT_COSTS  # one version: copies and work move together
    batches, health = _rows("q2", 2, 6, spread=5.0)
    _write(lake, "stream.batches", batches)
    _write(lake, "stream.health", health)
    steady = steady_batches(lake.read_arrow("stream.batches"), lake.read_arrow("stream.health"))
    assert len(steady) == 2 * (6 - WARM_UP_BATCHES)  # each query's warm-up left out
    costs = stream_costs(lake)
    assert costs.source == "fitted on 8 batches"
    for _, counts in steady:
        measured = counts.route_seconds + counts.match_seconds + counts.dispatch_seconds
        assert task_seconds(costs, counts) == pytest.approx(measured, rel=1e-6)
