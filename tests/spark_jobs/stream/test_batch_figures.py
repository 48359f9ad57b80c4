"""A batch's figures from its task notes: a pure function, checked against sums by hand."""

from __future__ import annotations

import numpy as np
import pytest

from core.stream.latency import PROMETHEUS_BOUNDS, age_histogram
from spark_jobs.stream.batch_log import BatchClock, BatchFigures, BatchNotes


def _route(posts: int, pairs: int, shed: list[int], payload: int) -> dict:
    return {
        "kind": "route", "posts": posts, "pairs": pairs, "routed_pairs": pairs + sum(shed),
        "quarantined": 0, "bytes": 10 * posts, "payload_bytes": payload, "capped_posts": 1,
        "dropped_posts": 2, "dropped_value": 0.0, "kept_value": 0.0, "shed_by_matcher": shed,
        "spread_counts": [0, posts, 0], "seconds": 0.5,
    }  # fmt: skip


def test_figures_sum_the_notes_and_the_slowest_matcher_sums_its_tasks() -> None:
    route = [_route(100, 150, [1, 2], 7), _route(50, 60, [0, 3], 5)]
    # matcher 1 ran in both tasks (a fused shape: every task meets every matcher)
    match = [
        {"kind": "match", "rows": 3, "matches": 4, "payload_bytes": 11, "seconds": 0.25,
         "matcher_seconds": {"0": 0.05, "1": 0.125}},
        {"kind": "match", "rows": 3, "matches": 4, "payload_bytes": 13, "seconds": 0.5,
         "matcher_seconds": {"1": 0.25}},
    ]  # fmt: skip
    dispatch = [
        {"kind": "dispatch", "rows": 2, "matches": 8, "deliveries": 6,
         "written_bytes": {"matches": 100, "deliveries": 50}, "seconds": 0.125,
         "task_seconds": 0.2,
         # 9 deliveries of posts 1 s old at the batch's stamp, 1 of a post 10 s old
         "latency_ages": {str(b): c for b, c in age_histogram(np.array([1000.0] * 9)).items()}
         | {str(b): c for b, c in age_histogram(np.array([10_000.0])).items()}},
    ]  # fmt: skip
    figures = BatchFigures.of(
        BatchNotes(2, route, match, dispatch, [{"kind": "quarantine"}] * 3),  # type: ignore[arg-type,list-item,typeddict-item]
        BatchClock(started=10.0, synced=10.5, computed=12.0, committed=12.25, stamped=11.0),
        subscriptions=9,
        shedding=True,
    )
    assert (figures.posts, figures.routed_pairs, figures.capped_posts) == (150, 210, 2)
    assert figures.shed_pairs_by_matcher == [1, 5] and figures.shed_pairs == 6
    assert (figures.matches, figures.deliveries, figures.written_bytes) == (8, 6, 150)
    assert (figures.routed_bytes, figures.matched_bytes, figures.quarantined) == (12, 24, 3)
    assert figures.seconds_match == 0.75 and figures.seconds_dispatch == 0.125
    assert (figures.seconds_sync, figures.seconds_spark, figures.seconds_commit) == (
        0.5, 1.5, 0.25,
    )  # fmt: skip
    assert figures.seconds_total == 2.25
    assert figures.seconds_match_slowest == 0.375  # matcher 1: 0.125 + 0.25
    # latency: the age at the stamp plus the 1.25 s from the stamp to the commit
    assert figures.latency_p50 == pytest.approx(2.25, rel=0.01)
    assert figures.latency_p95 == figures.latency_p99 == pytest.approx(11.25, rel=0.01)
    assert figures.latency_buckets is not None and sum(figures.latency_buckets) == 10
    assert figures.latency_buckets[PROMETHEUS_BOUNDS.index(5.0)] == 9
    assert figures.latency_buckets[PROMETHEUS_BOUNDS.index(20.0)] == 1
    assert figures.latency_sum == pytest.approx(9 * 2.25 + 11.25, rel=0.01)
    unshed = BatchFigures.of(
        BatchNotes(2, route, [], [{**dispatch[0], "latency_ages": {}}]),  # type: ignore[arg-type,list-item,typeddict-item]
        BatchClock(0, 0, 0, 0),
        subscriptions=9,
        shedding=False,
    )
    assert unshed.shed_pairs_by_matcher is None and unshed.seconds_match_slowest is None
    assert unshed.latency_p99 is None and unshed.latency_buckets is None
