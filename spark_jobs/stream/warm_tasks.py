"""The warm-up's ``mapInArrow`` bodies: sample lines for the stream's shape, and a task per
slot that readies its Python worker (indexes, token table, numba kernels) ahead of a
version's first batch. Run in the Python workers, beside :mod:`spark_jobs.stream.tasks`.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from core.shedding.drop import drop_lines
from core.shedding.plan import ShedPlan
from core.shedding.post_value import ValueTable
from core.stream.payload import matcher_inputs
from core.stream.snapshot import MatcherSnapshot, SnapshotKey
from core.stream.worker import route_and_shed
from spark_jobs.stream.tasks import (
    _DISPATCHED_ARROW,
    DISPATCHED_SCHEMA,
    WORD_KEYS,
    _buffers,
    _by_partition,
    _notes,
    _snapshot,
    from_ipc,
    worker_cache,
)

if TYPE_CHECKING:
    from pyspark import Broadcast

WARMED_SCHEMA = DISPATCHED_SCHEMA
LINES_SCHEMA = "line binary, source_file string"


def _warm_up_line(i: int, text: str) -> bytes:
    """A raw line as the stream's source gives it, for post ``i`` of the warm-up."""
    return json.dumps({"id": f"s3tm-warm-up-{i}", "text": text}).encode()


def sample_lines(
    sample: Broadcast[list[str]],
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow body: ids (``spark.range``) -> the stream source's rows, a JSON line per
    id with text ``sample.value[id % len]`` (a broadcast list of recent posts)."""
    return functools.partial(_sample_run, sample)


def _sample_run(
    sample: Broadcast[list[str]], batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    texts: list[str] = sample.value
    for batch in batches:
        ids = batch.column("id").to_pylist()
        lines = [_warm_up_line(i, texts[i % len(texts)]) for i in ids]
        yield pa.RecordBatch.from_arrays(
            [pa.array(lines, pa.binary()), pa.array(["s3tm-warm-up"] * len(ids), pa.string())],
            names=["line", "source_file"],
        )


def warm_workers(
    broadcast: Broadcast[MatcherSnapshot],
    key: SnapshotKey,
    texts: Broadcast[list[str]],
    *,
    every_matcher: bool,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow body run ahead of a version's first batch, one task per task slot: the
    Python worker starts, reads the broadcast snapshot, fills the encoder's token table
    from ``texts`` (a broadcast list of recent posts) and loads the kernels, so that the
    first batch does none of it. ``every_matcher`` (a local master, where any worker may
    serve any matcher): it builds every matcher's index too; on a cluster each match task
    reads its own matcher's base when it first meets it."""
    return functools.partial(_warm_run, broadcast, key, texts, every_matcher)


def _warm_run(
    broadcast: Broadcast[MatcherSnapshot],
    key: SnapshotKey,
    sample: Broadcast[list[str]],
    every_matcher: bool,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    started = time.perf_counter()
    for _ in batches:  # the task's input only says how many tasks run
        pass
    texts: list[str] = sample.value
    snapshot = _snapshot(broadcast, key)
    if every_matcher:
        worker_cache().prepare(snapshot, range(snapshot.n_matchers))
    indexed = time.perf_counter()
    encoder = worker_cache().encoder(snapshot)
    _run_the_kernels(snapshot, texts, *encoder.encode(pa.array(texts, pa.string())))
    yield _notes(
        [
            {
                "kind": "warm",
                "pid": os.getpid(),
                "matchers": snapshot.n_matchers,
                "texts": len(texts),
                "tokens": encoder.n_tokens,
                "index_seconds": indexed - started,
                "seconds": time.perf_counter() - started,
            }
        ],
        _DISPATCHED_ARROW,
    )


def _run_the_kernels(
    snapshot: MatcherSnapshot, texts: list[str], indptr: np.ndarray, word_ids: np.ndarray
) -> None:
    """One pass of the batch's kernels over ``texts`` (encoded: ``indptr``, ``word_ids``)."""
    # the routing and health kernels too (numba loads each on its first call), and a drop
    # level's (value scan, selection, spread cap): the first batch of an overload is
    # otherwise the one that loads them, and its time misleads the controller
    lines = pa.array(
        [_warm_up_line(i, t) for i, t in enumerate(texts)],
        pa.binary(),
    )
    n_slots = int(snapshot.part_matchers.shape[0])
    drop_plan = ShedPlan(
        utility="yield",
        level=1,
        max_spread=4.0,
        slot_weight=np.ones(n_slots),
        exempt_fraction=0.02,
        drop_fraction=0.5,
        drop_values=ValueTable.from_words(snapshot.words, np.ones(snapshot.n_words)),
    )
    drop_lines(drop_plan, lines, 0)
    route_and_shed(snapshot, drop_plan, indptr, word_ids)
    shed = route_and_shed(snapshot, ShedPlan(), indptr, word_ids)
    WORD_KEYS.health(snapshot, indptr, word_ids, shed.routed)
    posts = _by_partition(
        snapshot,
        pa.array([str(i) for i in range(len(texts))], pa.string()),
        np.zeros(len(texts), dtype=np.int32),
        shed,
        indptr,
        word_ids,
        np.arange(snapshot.n_matchers, dtype=np.int32),
    )
    for payload in _buffers(posts.column("payload")):
        for _ in matcher_inputs(from_ipc(payload), worker_cache().matcher_words(snapshot)):
            pass
