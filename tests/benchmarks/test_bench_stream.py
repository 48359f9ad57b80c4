"""The stream bench's skeleton: the query shape with no work moves the bytes it is asked to
and counts every post once (its bodies chained here without Spark, as the shuffles would)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from benchmarks.stream import _skeleton_dispatch, _skeleton_match, _skeleton_route


def _lines(n: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"line": [b"{}"] * n})


def _by_key(batches: list[pa.RecordBatch]) -> dict[int, list[pa.RecordBatch]]:
    table = pa.Table.from_batches(batches)
    return {
        key: table.filter(pc.equal(table["key"], key)).to_batches()
        for key in pc.unique(table["key"]).to_pylist()
    }


def _bytes(batches: list[pa.RecordBatch]) -> int:
    return sum(pc.sum(pc.binary_length(b.column("payload"))).as_py() or 0 for b in batches)


@pytest.mark.parametrize("bytes_per_post", [0.0, 40.0, 437.0])
def test_skeleton_moves_the_asked_bytes_and_counts_every_post(bytes_per_post: float) -> None:
    match_keys, dispatch_keys = [3, 8], [5, 1]
    route_keys = [match_keys[m % 2] for m in range(16)]
    batches = [_lines(1000), _lines(250), _lines(4096)]
    routed = [
        b for task in batches for b in _skeleton_route(route_keys, bytes_per_post, iter([task]))
    ]
    assert _bytes(routed) == pytest.approx(5346 * bytes_per_post, abs=16 * 3)
    assert sum(pc.sum(b.column("posts")).as_py() for b in routed) == 5346
    matched = [
        b
        for part in _by_key(routed).values()
        for b in _skeleton_match(dispatch_keys, 0.25, iter(part))
    ]
    assert _bytes(matched) == pytest.approx(_bytes(routed) * 0.25, abs=4)
    counted = [
        _skeleton_dispatch(iter(part)).__next__().column("posts")[0].as_py()
        for part in _by_key(matched).values()
    ]
    assert sum(counted) == 5346
