"""The two ``mapInArrow`` bodies of a streaming micro-batch, run in the Python workers.

1. :func:`route_posts`: raw posts -> one payload per match partition a task's posts are
   multicast to, keyed so that ``repartition(M, pkey)`` puts matcher m's posts in match
   partition m mod M (M = N, or the task slots when fewer: a Python task costs 0.05-0.1 s
   to set up, more than a small matcher's work); a post travels once per partition, with
   the matchers it goes to there (``core.stream.payload``); bad records become quarantine
   notes.
2. :func:`match_posts`: a partition's payloads -> per post matched there, the ids of the
   subscriptions it matched (``MATCHED_ARROW``).

Notes (JSON in the ``note`` column: quarantined records, and each task's figures) travel
along with the data through the shuffle to the driver, so a micro-batch is ONE Spark job.
The snapshot comes in a broadcast (routing arrays, and the subscription changes since the
version's base); a match task reads its own matcher's base from the files the driver wrote
(:mod:`spark_jobs.stream.matcher_bases`). Subscriptions, indexes and encoders live in
:func:`worker_cache` across tasks (Python workers are reused), rebuilt per routing
version, updated per epoch.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.sampling.hash_fraction import spark_xxhash64
from core.shedding.plan import ShedPlan
from core.stream.dispatch import concat_matched
from core.stream.notes import TaskNote
from core.stream.payload import group_words, matcher_inputs, pair_inputs, partition_payloads
from core.stream.snapshot import MatcherSnapshot, SnapshotKey
from core.stream.word_health import WordKeys
from core.stream.worker import MatcherCache, ShedBatch
from spark_jobs import failpoints
from spark_jobs.runtime import code_point_cache
from spark_jobs.settings import settings
from spark_jobs.stream.matcher_bases import FileBases
from spark_jobs.stream.task_steps import MatchStep, RouteStep, dispatch_step

if TYPE_CHECKING:
    from pyspark import Broadcast

ROUTED_SCHEMA = "pkey int, payload binary, note string"
MATCHED_SCHEMA = "dkey int, payload binary, note string"
DISPATCHED_SCHEMA = "note string"
_ROUTED_ARROW = pa.schema(
    [
        ("pkey", pa.int32()),
        ("payload", pa.binary()),
        ("note", pa.string()),
    ]
)
_MATCHED_ARROW = pa.schema([("dkey", pa.int32()), ("payload", pa.binary()), ("note", pa.string())])
_DISPATCHED_ARROW = pa.schema([("note", pa.string())])


# Payloads are compressed (zstd, Arrow's IPC buffer compression): every byte shuffled costs
# the JVM a copy into rows, a shuffle write and read and a copy back into Arrow, more than
# zstd costs here. On the tweet batches: 159 -> 55 B a post routed, 109 -> 19 B matched.
_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="zstd")


def to_ipc(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema, options=_IPC_OPTIONS) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue())


def from_ipc(payload: bytes | pa.Buffer) -> pa.Table:
    return pa.ipc.open_stream(payload).read_all()


def _buffers(payloads: pa.Array | pa.ChunkedArray) -> list[pa.Buffer]:
    """A binary column's values as Arrow buffers: views, not copies into Python bytes."""
    return [value.as_buffer() for value in payloads]


@functools.cache
def worker_cache() -> MatcherCache:
    """This Python worker's matchers, made when its first task asks (the stream's index
    kind read from the worker's environment then), kept across its tasks."""
    # the worker's encoders read the tokeniser's table from its file (0.2-0.3 s a worker
    # to build it otherwise)
    code_point_cache.install()
    return MatcherCache(settings().matcher_index, bases=FileBases())


WORD_KEYS = WordKeys()  # the routing health's and the word sketch's keys
_SNAPSHOT: dict[str, Any] = {"key": None, "value": None}


def _snapshot(broadcast: Broadcast[MatcherSnapshot], key: SnapshotKey) -> MatcherSnapshot:
    # A broadcast is deserialised once per worker and key, not once per task.
    if _SNAPSHOT["key"] != key:
        _SNAPSHOT["value"] = broadcast.value
        _SNAPSHOT["key"] = key
    snapshot: MatcherSnapshot = _SNAPSHOT["value"]
    return snapshot


def _notes(rows: Sequence[TaskNote], schema: pa.Schema) -> pa.RecordBatch:
    notes = pa.array([json.dumps(r) for r in rows], pa.string())
    columns = [
        notes if field.name == "note" else pa.nulls(len(rows), field.type) for field in schema
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _by_partition(
    snapshot: MatcherSnapshot,
    post_ids: pa.Array,
    dpart: np.ndarray,
    shed: ShedBatch,
    indptr: np.ndarray,
    word_ids: np.ndarray,
    pkeys: np.ndarray,
    arrived: pa.Array | None = None,
) -> pa.RecordBatch:
    """One row per match partition the block's posts reach: its posts packed as an Arrow
    IPC payload (``core.stream.payload``: each post once, with its matchers there).

    Rows of Python objects cost the JVM per row and per field when they are shuffled;
    a few packed payloads per task cost almost nothing, and a post sent once per partition
    instead of once per matcher halves the bytes shuffled when matchers share tasks.
    """
    group_key, groups, kept_by_group = _partition_words(snapshot, pkeys)
    parts = partition_payloads(
        post_ids,
        dpart,
        shed.post_level,
        shed.sampled,
        indptr,
        word_ids,
        shed.pair_post,
        shed.pair_matcher,
        groups,
        kept_by_group,
        snapshot.n_matchers,
        arrived,
    )
    return pa.RecordBatch.from_arrays(
        [
            pa.array([int(group_key[g]) for g, _ in parts], pa.int32()),
            pa.array([to_ipc(rows) for _, rows in parts], pa.binary()),
            pa.nulls(len(parts), pa.string()),
        ],
        schema=_ROUTED_ARROW,
    )


_GROUPS: dict[tuple[SnapshotKey, bytes], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def _partition_words(
    snapshot: MatcherSnapshot, pkeys: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(each group's partition key, the group of each matcher, the words each group's
    matchers use), once per snapshot: matchers with the same partition key share a match
    task, so a group."""
    key = (snapshot.key, np.asarray(pkeys, dtype=np.int32).tobytes())
    if key not in _GROUPS:
        _GROUPS.clear()
        group_key, groups = np.unique(pkeys, return_inverse=True)
        groups = groups.astype(np.int64)
        kept = group_words(worker_cache().matcher_words(snapshot), groups)
        _GROUPS[key] = (group_key, groups, kept)
    return _GROUPS[key]


def route_posts(
    broadcast: Broadcast[MatcherSnapshot],
    key: SnapshotKey,
    pkeys: np.ndarray,
    max_text_chars: int,
    n_dispatch: int,
    plan: ShedPlan,
    batches: Iterator[pa.RecordBatch],
    *,
    crash: str | None = None,
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body (bound with ``functools.partial`` up to ``batches``): raw (line,
    source_file) -> ROUTED_SCHEMA, each post's spread capped as the batch's shedding
    ``plan`` says. ``crash``: a kill point of the crash tests (``failpoints``), None in
    production."""
    failpoints.crash_from_task(crash, "route")
    snapshot = _snapshot(broadcast, key)
    step = RouteStep(snapshot, plan, worker_cache(), WORD_KEYS, max_text_chars)
    for batch in batches:
        started = time.perf_counter()
        quarantined, block = step.block(batch)
        if quarantined:
            yield _notes(quarantined, _ROUTED_ARROW)
        if block is not None and block.shed.pair_post.size:
            # every match of a post meets in one dispatch task (dedupe, deliveries)
            routed = _by_partition(
                snapshot,
                block.post_ids,
                dispatch_parts(block.post_ids, n_dispatch),
                block.shed,
                block.indptr,
                block.word_ids,
                pkeys,
                block.arrived,
            )
            step.figures["payload_bytes"] += pc.sum(
                pc.binary_length(routed.column("payload"))
            ).as_py()
            yield routed
        step.figures["seconds"] += time.perf_counter() - started
    yield _notes([step.note()], _ROUTED_ARROW)


def dispatch_parts(post_ids: pa.Array, n_dispatch: int) -> np.ndarray:
    """Each post's dispatch partition: Spark's xxhash64 of its id mod ``n_dispatch``."""
    hashed = spark_xxhash64(0, post_ids).view(np.uint64) % np.uint64(n_dispatch)
    return hashed.astype(np.int32)


def match_posts(
    broadcast: Broadcast[MatcherSnapshot],
    key: SnapshotKey,
    dkeys: np.ndarray,
    learn_yield: bool,
    batches: Iterator[pa.RecordBatch],
    *,
    hold: int | None = None,
    crash: str | None = None,
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body (bound up to ``batches``): ROUTED_SCHEMA payloads of one or more
    matchers -> MATCHED_SCHEMA: per dispatch partition, one payload of MATCHED_ARROW rows (a
    post's matches here). ``hold``: how many matchers a Python worker keeps (its share of
    N; None: all)."""
    failpoints.crash_from_task(crash, "match")
    snapshot = _snapshot(broadcast, key)
    worker_cache().hold = hold
    step = MatchStep(snapshot, worker_cache(), learn_yield)
    found: dict[int, list[pa.RecordBatch]] = {}
    for batch in batches:
        started = time.perf_counter()
        is_note = pc.is_valid(batch.column("note"))
        notes = batch.filter(is_note)
        if notes.num_rows:  # pass the route stage's notes through
            yield _notes([json.loads(n) for n in notes.column("note").to_pylist()], _MATCHED_ARROW)
        data = batch.filter(pc.invert(is_note))
        kept = worker_cache().matcher_words(snapshot)
        for payload in _buffers(data.column("payload")):
            _match_payload(step, from_ipc(payload), kept, found)
        step.figures["seconds"] += time.perf_counter() - started
    started = time.perf_counter()
    if found:
        yield _by_dispatch_part(step, found, dkeys)
    step.figures["seconds"] += time.perf_counter() - started
    yield _notes([step.note()], _MATCHED_ARROW)


def _match_payload(
    step: MatchStep,
    posts: pa.Table,
    kept: np.ndarray,
    found: dict[int, list[pa.RecordBatch]],
) -> None:
    """Match one routed payload on each matcher it holds posts of, adding each matcher's
    matches to ``found`` by the dispatch partition of their posts."""
    post_id = posts.column("post_id").combine_chunks()
    dparts = np.asarray(posts.column("dpart").combine_chunks())
    levels = np.asarray(posts.column("shedding_level").combine_chunks(), dtype=np.int32)
    sampled = np.asarray(posts.column("sampled").combine_chunks(), dtype=np.bool_)
    arrived = posts.column("arrived_at").combine_chunks()
    for part in matcher_inputs(posts, kept):
        matched = step.matcher(part, post_id, levels, sampled, arrived)
        if matched is None:
            continue
        dpart = dparts[matched.rows]
        for d in np.unique(dpart).tolist():
            found.setdefault(d, []).append(matched.batch.filter(pa.array(dpart == d)))


def _by_dispatch_part(
    step: MatchStep, found: dict[int, list[pa.RecordBatch]], dkeys: np.ndarray
) -> pa.RecordBatch:
    """One MATCHED_ARROW row per dispatch partition: its matches as one IPC payload."""
    parts = sorted(found)
    packed = [
        to_ipc(
            concat_matched([pa.Table.from_batches([b]) for b in found[d]])
            .combine_chunks()
            .to_batches()[0]
        )
        for d in parts
    ]
    step.figures["payload_bytes"] = sum(len(p) for p in packed)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(dkeys[parts], pa.int32()),
            pa.array(packed, pa.binary()),
            pa.nulls(len(parts), pa.string()),
        ],
        schema=_MATCHED_ARROW,
    )


def dispatch_matches(
    broadcast: Broadcast[MatcherSnapshot],
    key: SnapshotKey,
    batch_id: int,
    now: dt.datetime,
    staging: dict[str, str],
    batches: Iterator[pa.RecordBatch],
    *,
    crash: str | None = None,
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body (bound up to ``batches``): MATCHED_SCHEMA payloads of a set of posts
    -> ``matches`` and ``deliveries`` Parquet files in the tables' staging folders
    (committed by the driver in one Delta transaction each); only notes go back to the
    driver."""
    task_started = time.perf_counter()
    snapshot = _snapshot(broadcast, key)
    payloads: list[pa.Buffer] = []
    for batch in batches:
        is_note = pc.is_valid(batch.column("note"))
        notes = batch.filter(is_note)
        if notes.num_rows:  # pass the earlier stages' notes through
            yield notes.select(["note"])
        payloads += _buffers(batch.filter(pc.invert(is_note)).column("payload"))
    figures = dispatch_step(
        snapshot, [from_ipc(p) for p in payloads], batch_id, now, staging, _partition_id()
    )
    failpoints.crash_from_task(crash, "dispatch")
    figures["task_seconds"] = time.perf_counter() - task_started
    yield _notes([figures], _DISPATCHED_ARROW)


def fused_posts(
    broadcast: Broadcast[MatcherSnapshot],
    key: SnapshotKey,
    max_text_chars: int,
    plan: ShedPlan,
    batch_id: int,
    now: dt.datetime,
    staging: dict[str, str],
    batches: Iterator[pa.RecordBatch],
    *,
    crash: str | None = None,
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body of the fused shape (bound up to ``batches``): raw (line,
    source_file) -> route, match on every matcher a post reaches, dispatch, in the task
    that read the lines; only notes go back to the driver (a route, a match and a dispatch
    note, as the three-stage shape sends). Every match of a post is found in its own task,
    so nothing is shuffled; the worker must hold every matcher it meets (a local master's
    workers do)."""
    failpoints.crash_from_task(crash, "route")
    snapshot = _snapshot(broadcast, key)
    cache = worker_cache()
    cache.hold = None
    route = RouteStep(snapshot, plan, cache, WORD_KEYS, max_text_chars)
    match = MatchStep(snapshot, cache, plan.learns_yield)
    kept = cache.matcher_words(snapshot)
    found: list[pa.Table] = []
    for batch in batches:
        started = time.perf_counter()
        quarantined, block = route.block(batch)
        if quarantined:
            yield _notes(quarantined, _DISPATCHED_ARROW)
        routed = time.perf_counter()
        route.figures["seconds"] += routed - started
        if block is None or not block.shed.pair_post.size:
            continue
        shed = block.shed
        failpoints.crash_from_task(crash, "match")
        levels = shed.post_level.astype(np.int32)
        pairs = pair_inputs(block.indptr, block.word_ids, shed.pair_post, shed.pair_matcher, kept)
        for part in pairs:
            matched = match.matcher(part, block.post_ids, levels, shed.sampled, block.arrived)
            if matched is not None:
                found.append(pa.Table.from_batches([matched.batch]))
        match.figures["seconds"] += time.perf_counter() - routed
    dispatched = dispatch_step(snapshot, found, batch_id, now, staging, _partition_id())
    failpoints.crash_from_task(crash, "dispatch")
    yield _notes([route.note(), match.note(), dispatched], _DISPATCHED_ARROW)


def _partition_id() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context is not None else 0
