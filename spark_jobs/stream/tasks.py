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
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from core.corpus.json_lines import judge_lines
from core.monitor.health import RoutingHealth
from core.monitor.sketch import WordSketch
from core.sampling.hash_fraction import spark_xxhash64
from core.shedding.drop import LENGTH_BINS, drop_lines, length_histogram
from core.shedding.plan import ShedPlan
from core.shedding.yield_stats import YieldObservation
from core.stream.dispatch import (
    concat_matched,
    dispatch_tables,
    matched_sub_ids,
    storage_schema,
    subscribers_of,
)
from core.stream.matcher_yield import matcher_yield
from core.stream.notes import DispatchNote, MatchNote, RouteNote, TaskNote
from core.stream.payload import group_words, matcher_inputs, partition_payloads
from core.stream.snapshot import MatcherSnapshot, SnapshotKey
from core.stream.word_health import WordKeys
from core.stream.worker import (
    MatcherCache,
    ShedBatch,
    batch_seed,
    line_seed,
    route_and_shed,
)
from spark_jobs import code_point_cache, failpoints
from spark_jobs.lake.storage import filesystem, is_remote, join
from spark_jobs.settings import settings
from spark_jobs.stream.health import SKETCH_SPEC
from spark_jobs.stream.matcher_bases import FileBases

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
    task_started, cpu_started = time.perf_counter(), time.process_time()
    changes_before = worker_cache().change_seconds
    snapshot = _snapshot(broadcast, key)
    n = snapshot.n_matchers
    figures: RouteNote = {
        "kind": "route",
        "posts": 0,
        "pairs": 0,
        "routed_pairs": 0,
        "quarantined": 0,
        "bytes": 0,
        "payload_bytes": 0,  # shuffled to the match tasks
        "capped_posts": 0,
        "dropped_posts": 0,
        "dropped_value": 0.0,  # the estimated matches of the dropped posts
        "kept_value": 0.0,  # ... and of the posts kept beside them
        "shed_by_matcher": [0] * n,
        "spread_counts": [0] * (n + 1),
        "seconds": 0.0,
    }
    shed_by_matcher = np.zeros(n, dtype=np.int64)
    spread_counts = np.zeros(n + 1, dtype=np.int64)
    length_counts = np.zeros(LENGTH_BINS, dtype=np.int64)
    # routing health: the version's loads beside hash routing's, and the words' sketch
    health = RoutingHealth.empty(n)
    sketch = WordSketch(SKETCH_SPEC)
    sketch_seconds = 0.0
    word_counts: np.ndarray | None = None  # the task's word occurrences, sketched at its end
    for batch in batches:
        started = time.perf_counter()
        lengths = np.asarray(pc.fill_null(pc.binary_length(batch.column("line")), 0))
        figures["bytes"] += int(lengths.sum())
        length_counts += length_histogram(lengths)
        # a drop level goes first, on the raw bytes: a dropped post costs no parsing
        first = batch.column("line")[0].as_py() if batch.num_rows else None
        dropped = drop_lines(plan, batch.column("line"), line_seed(snapshot, first))
        sampled_lines = dropped.sampled
        if dropped.dropped:  # counted in the notices, as every shed post is
            figures["dropped_posts"] += dropped.dropped
            figures["dropped_value"] += dropped.dropped_value
            figures["kept_value"] += dropped.kept_value
            batch = batch.filter(pa.array(dropped.keep))
            sampled_lines = sampled_lines[dropped.keep]
        judged = judge_lines(batch.column("line"))
        ok = judged.accepted
        if not pc.all(ok).as_py():
            rejected = pc.invert(ok)
            lines = batch.column("line").filter(rejected)
            figures["quarantined"] += len(lines)
            yield _notes(
                [
                    {
                        "kind": "quarantine",
                        "reason": r,
                        "post_id": p,
                        "source_file": f,
                        "raw": (x or b"")[: 2 * max_text_chars].decode("utf-8", "replace"),
                    }
                    for r, p, f, x in zip(
                        judged.reason.filter(rejected).to_pylist(),
                        judged.post_id.filter(rejected).to_pylist(),
                        batch.column("source_file").filter(rejected).to_pylist(),
                        lines.to_pylist(),
                        strict=True,
                    )
                ],
                _ROUTED_ARROW,
            )
        good = pa.RecordBatch.from_arrays(
            [judged.post_id.filter(ok), judged.text.filter(ok)], names=["post_id", "text"]
        )
        if good.num_rows == 0:
            continue
        seed = batch_seed(snapshot, good.column("post_id")[0].as_py())
        sampled = sampled_lines[np.asarray(ok, dtype=np.bool_)]
        post_ids = good.column("post_id")
        indptr, word_ids = worker_cache().encoder(snapshot).encode(good.column("text"))
        shed = route_and_shed(snapshot, plan, indptr, word_ids, seed=seed, sampled=sampled)
        health = health.merge(WORD_KEYS.health(snapshot, indptr, word_ids, shed.routed))
        sketched = time.perf_counter()
        block_counts = np.bincount(word_ids, minlength=snapshot.n_words)
        if word_counts is None:
            word_counts = block_counts
        else:
            word_counts += block_counts
        sketch_seconds += time.perf_counter() - sketched
        pair_post = shed.pair_post
        figures["posts"] += good.num_rows
        figures["pairs"] += int(pair_post.shape[0])
        figures["routed_pairs"] += int(pair_post.shape[0] + shed.shed_by_matcher.sum())
        figures["capped_posts"] += shed.capped_posts
        shed_by_matcher += shed.shed_by_matcher
        spread_counts += shed.spread_counts
        if pair_post.size:
            # every match of a post meets in one dispatch task (dedupe, deliveries)
            dpart = (spark_xxhash64(0, post_ids).view(np.uint64) % np.uint64(n_dispatch)).astype(
                np.int32
            )
            routed = _by_partition(snapshot, post_ids, dpart, shed, indptr, word_ids, pkeys)
            figures["payload_bytes"] += pc.sum(pc.binary_length(routed.column("payload"))).as_py()
            yield routed
        figures["seconds"] += time.perf_counter() - started
    if word_counts is not None:
        sketched = time.perf_counter()
        WORD_KEYS.count_words(snapshot, word_counts, sketch)
        sketch_seconds += time.perf_counter() - sketched
    figures["shed_by_matcher"] = shed_by_matcher.tolist()
    figures["spread_counts"] = spread_counts.tolist()
    figures["length_counts"] = length_counts.tolist()
    figures["health"] = health.as_row()
    figures["sketch"] = sketch.to_text()
    figures["sketch_bytes"] = sketch.nbytes
    figures["sketch_seconds"] = sketch_seconds
    figures["task_seconds"] = time.perf_counter() - task_started
    figures["cpu_seconds"] = time.process_time() - cpu_started
    figures["pid"] = os.getpid()
    figures["change_seconds"] = worker_cache().change_seconds - changes_before
    yield _notes([figures], _ROUTED_ARROW)


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
    task_started, cpu_started = time.perf_counter(), time.process_time()
    changes_before = worker_cache().change_seconds
    snapshot = _snapshot(broadcast, key)
    worker_cache().hold = hold
    figures: MatchNote = {
        "kind": "match",
        "rows": 0,
        "matches": 0,
        "payload_bytes": 0,  # shuffled to the dispatch tasks
        "seconds": 0.0,
    }
    seen: set[int] = set()
    work: dict[int, int] = {}
    found: dict[int, list[pa.RecordBatch]] = {}
    observed: list[YieldObservation] = []
    for batch in batches:
        started = time.perf_counter()
        is_note = pc.is_valid(batch.column("note"))
        notes = batch.filter(is_note)
        if notes.num_rows:  # pass the route stage's notes through
            yield _notes([json.loads(n) for n in notes.column("note").to_pylist()], _MATCHED_ARROW)
        data = batch.filter(pc.invert(is_note))
        kept = worker_cache().matcher_words(snapshot)
        for payload in _buffers(data.column("payload")):
            posts = from_ipc(payload)
            post_id = posts.column("post_id").combine_chunks()
            dparts = np.asarray(posts.column("dpart").combine_chunks())
            levels = np.asarray(posts.column("shedding_level").combine_chunks(), dtype=np.int32)
            sampled_posts = np.asarray(posts.column("sampled").combine_chunks(), dtype=np.bool_)
            for part in matcher_inputs(posts, kept):
                matcher, offsets, flat = part.matcher, part.offsets, part.word_ids
                seen.add(matcher)
                result = worker_cache().match(snapshot, matcher, offsets, flat)
                figures["rows"] += part.rows.shape[0]
                figures["matches"] += result.n_matches
                # counted work, the publish gate's measure: the index's lookups + matches
                work[matcher] = work.get(matcher, 0) + result.operations + result.n_matches
                if learn_yield:
                    observed.append(
                        matcher_yield(
                            worker_cache().held(snapshot, matcher),
                            snapshot,
                            matcher,
                            offsets,
                            flat,
                            sampled_posts[part.rows],
                            result,
                        )
                    )
                if not result.n_matches:
                    continue
                # one row per post with matches here: the post id once, its sub ids as a list
                counts = np.diff(result.indptr)
                hit = np.flatnonzero(counts)
                offsets_hit = np.zeros(hit.shape[0] + 1, dtype=np.int32)
                np.cumsum(counts[hit], out=offsets_hit[1:])
                hit_rows = part.rows[hit]
                sub_ids, schema = matched_sub_ids(result.sub_ids)
                codes = worker_cache().subscriber_codes(snapshot, matcher, result.sub_ids)
                list_offsets = pa.array(offsets_hit)
                matched = pa.RecordBatch.from_arrays(
                    [
                        post_id.take(pa.array(hit_rows)),
                        pa.array(np.full(hit.shape[0], matcher, dtype=np.int32)),
                        pa.array(levels[hit_rows]),
                        pa.ListArray.from_arrays(list_offsets, sub_ids),
                        pa.ListArray.from_arrays(list_offsets, pa.array(codes)),
                    ],
                    schema=schema,
                )
                dpart = dparts[hit_rows]
                for d in np.unique(dpart).tolist():
                    found.setdefault(d, []).append(matched.filter(pa.array(dpart == d)))
        figures["seconds"] += time.perf_counter() - started
    started = time.perf_counter()
    if found:
        parts = sorted(found)
        packed = [
            to_ipc(
                concat_matched([pa.Table.from_batches([b]) for b in found[d]])
                .combine_chunks()
                .to_batches()[0]
            )
            for d in parts
        ]
        figures["payload_bytes"] = sum(len(p) for p in packed)
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(dkeys[parts], pa.int32()),
                pa.array(packed, pa.binary()),
                pa.nulls(len(parts), pa.string()),
            ],
            schema=_MATCHED_ARROW,
        )
    figures["seconds"] += time.perf_counter() - started
    figures["matchers"] = sorted(seen)
    figures["work"] = {str(m): w for m, w in sorted(work.items())}
    if observed:
        merged = YieldObservation.merge(observed)
        figures["yield_counts"] = {
            "slots": merged.slots.tolist(),
            "matches": merged.matches.astype(np.int64).tolist(),
            "posts": merged.posts.astype(np.int64).tolist(),
        }
    figures["task_seconds"] = time.perf_counter() - task_started
    figures["cpu_seconds"] = time.process_time() - cpu_started
    figures["pid"] = os.getpid()
    figures["worker_trie_builds"] = worker_cache().rebuilds  # since this worker started
    # what this worker holds of the subscriptions: the bases of the matchers it ran
    figures["worker_base_reads"] = worker_cache().base_reads
    figures["worker_base_bytes"] = worker_cache().base_bytes
    figures["worker_held_bytes"] = worker_cache().held_bytes
    figures["worker_held_matchers"] = len(worker_cache().held_matchers)
    figures["change_seconds"] = worker_cache().change_seconds - changes_before
    yield _notes([figures], _MATCHED_ARROW)


def statistics_columns(schema: pa.Schema) -> list[str]:
    """The output columns whose Parquet min/max a reader can skip row groups by: not the
    subscriber (every file holds a batch's posts for all subscribers, so its min/max skips
    nothing, and pyarrow's min/max of that dictionary column costs a third of the write)
    nor the id lists."""
    return [f.name for f in schema if f.name != "subscriber" and not pa.types.is_list(f.type)]


def dictionary_columns(schema: pa.Schema) -> list[str]:
    """The output columns worth a Parquet dictionary: all but the post id. A batch's post
    ids are nearly all distinct (about four rows each), so their dictionary page overflows
    and costs four times the time of plain pages and twice the bytes (5M rows: 500 ms and
    24.6 MB against 117 ms and 12 MB), the largest part of a dispatch task's writes."""
    return [f.name for f in schema if f.name != "post_id"]


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
    from pyspark import TaskContext

    from schemas import table

    task_started = time.perf_counter()
    snapshot = _snapshot(broadcast, key)
    payloads: list[bytes] = []
    for batch in batches:
        is_note = pc.is_valid(batch.column("note"))
        notes = batch.filter(is_note)
        if notes.num_rows:  # pass the earlier stages' notes through
            yield notes.select(["note"])
        payloads += _buffers(batch.filter(pc.invert(is_note)).column("payload"))
    started = time.perf_counter()
    matched = concat_matched([from_ipc(p) for p in payloads])
    matches, deliveries = dispatch_tables(
        matched,
        subscribers_of(matched, snapshot.subscriber_names),
        snapshot.routing_version,
        batch_id,
        now,
        match_rows="matches" in staging,  # else the deliveries hold them
    )
    context = TaskContext.get()
    part = context.partitionId() if context is not None else 0
    written_bytes = {name: 0 for name in staging}
    for name, data in (("matches", matches), ("deliveries", deliveries)):
        if data is not None and data.num_rows:
            # a fixed name per partition: a retried task overwrites, never duplicates
            rows = data.cast(storage_schema(table(name).schema))
            options = {
                "write_statistics": statistics_columns(rows.schema),
                "use_dictionary": dictionary_columns(rows.schema),
            }
            target = join(staging[name], f"part-{part:05d}.parquet")
            if is_remote(target):  # an object-store PUT is atomic: no partial file is seen
                store, object_key = filesystem(target)
                pq.write_table(rows, object_key, filesystem=store, **options)
                written_bytes[name] += store.get_file_info(object_key).size or 0
                continue
            local = Path(target)
            local.parent.mkdir(parents=True, exist_ok=True)
            temporary = local.with_name(f".{local.name}.{os.getpid()}.tmp")
            pq.write_table(rows, temporary, **options)
            os.replace(temporary, local)
            written_bytes[name] += local.stat().st_size
    failpoints.crash_from_task(crash, "dispatch")
    figures: DispatchNote = {
        "kind": "dispatch",
        "rows": matched.num_rows,
        # each (post, subscription) once, whether written as rows or in the deliveries
        "matches": int(pc.sum(pc.list_value_length(deliveries.column("sub_ids"))).as_py() or 0),
        "deliveries": deliveries.num_rows,
        "written_bytes": written_bytes,  # Parquet bytes per output table
        "seconds": time.perf_counter() - started,
        "task_seconds": time.perf_counter() - task_started,
    }
    yield _notes([figures], _DISPATCHED_ARROW)
