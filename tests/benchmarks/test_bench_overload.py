"""The overload bench's bookkeeping: the runs it makes, its summary and the oracle (the
streaming runs themselves are measured, not tested: `s3tm bench stream --overload`)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.overload import (
    _modes,
    batch_offset_ranges,
    oracle_accuracy,
    random_at_same_rate,
    summarise,
)
from core.errors import InputDataError
from core.stream.latency import age_histogram


def _row(batch: int, posts: int, dropped: int, matches: int, truth: list[int]) -> dict:
    return {
        "factor": 2.0, "shedding": "yield value drop", "batch": batch, "backlog_posts": 10,
        "delay_s": 1.0, "level": 5, "posts": posts, "dropped_posts": dropped, "batch_s": 2.0,
        "matches": matches, "exact_matches": sum(truth), "_post_matches": np.array(truth),
    }  # fmt: skip


def test_the_oracle_keeps_the_posts_with_most_matches() -> None:
    rows = [_row(0, 1, 1, 0, [9, 9]), _row(1, 2, 2, 5, [5, 0, 3, 1]), _row(2, 1, 1, 2, [2, 4])]
    # warm-up batch 0 left out: batch 1 keeps 5 + 3 of 9, batch 2 keeps 4 of 6
    assert oracle_accuracy(rows, warmup=1) == pytest.approx(12 / 15, abs=1e-4)
    assert all("_post_matches" not in r for r in rows)  # not written to the CSV
    # random drop at each batch's rate: half of batch 1's 9 true matches, half of batch 2's 6
    assert random_at_same_rate(rows, warmup=1) == pytest.approx((4.5 + 3) / 15, abs=1e-4)


def test_summary_counts_processed_posts_against_capacity() -> None:
    rows = [_row(b, 100, 100, 50, [1] * 200) for b in range(4)]
    got = summarise(rows, trigger=5.0, warmup=1, capacity=40.0, duration=10.0)
    assert got["processed / capacity"] == 1.0  # 400 posts = 40/s x 10 s
    assert got["dropped share"] == 0.5
    assert got["accuracy"] == pytest.approx(150 / 600)
    assert got["p95 / trigger"] == 0.4
    assert got["latency p99 s"] is None  # no delivery carried an arrival time


def test_summary_pools_the_steady_batches_delivery_latency() -> None:
    rows = [_row(b, 100, 0, 50, [1] * 100) for b in range(3)]
    # warm-up batch 0 (left out): 10 s; batch 1: 99 deliveries 0.2 s old at its stamp and
    # committed 0.5 s later; batch 2: one delivery 10 s old, committed 1 s after its stamp
    rows[0]["_latency"] = (age_histogram(np.full(5, 10_000.0)), 0.0)
    rows[1]["_latency"] = (age_histogram(np.full(99, 200.0)), 0.5)
    rows[2]["_latency"] = (age_histogram(np.array([10_000.0])), 1.0)
    got = summarise(rows, trigger=5.0, warmup=1, capacity=40.0, duration=10.0)
    assert got["latency p50 s"] == pytest.approx(0.7, rel=0.01)
    assert got["latency p95 s"] == pytest.approx(0.7, rel=0.01)
    assert got["latency p99 s"] == pytest.approx(0.7, rel=0.01)  # the 99th of 100
    assert all("_latency" not in r for r in rows)  # not written to the CSV
    rows = [_row(b, 100, 0, 50, [1] * 100) for b in range(2)]
    rows[1]["_latency"] = (age_histogram(np.array([200.0] * 98 + [10_000.0] * 2)), 1.0)
    got = summarise(rows, trigger=5.0, warmup=1, capacity=40.0, duration=10.0)
    assert got["latency p99 s"] == pytest.approx(11.0, rel=0.01)
    assert got["p99 latency / trigger"] == pytest.approx(2.2, rel=0.01)


def test_modes_name_the_runs() -> None:
    assert _modes("value,random", "yield") == [
        ("yield value drop", "yield", "value"),
        ("yield random drop", "yield", "random"),
    ]
    assert _modes("off", "yield") == [("off", "off", "value")]
    with pytest.raises(InputDataError):
        _modes("fast", "yield")


def test_batch_ranges_come_from_the_kafka_sources_offset_log(tmp_path) -> None:
    """Spark's offset log: ``v1``, the batch metadata, then the source's end offsets."""
    folder = tmp_path / "offsets"
    folder.mkdir()
    for batch, end in ((0, 500), (1, 1300), (2, 1300)):
        (folder / str(batch)).write_text(
            f'v1\n{{"batchWatermarkMs":0,"batchTimestampMs":{batch}}}\n{{"t":{{"0":{end}}}}}\n'
        )
    (folder / ".1.crc").write_text("")  # Spark's checksum files are not batches
    assert batch_offset_ranges(tmp_path) == {0: (0, 500), 1: (500, 1300), 2: (1300, 1300)}
    assert batch_offset_ranges(tmp_path / "missing") == {}
