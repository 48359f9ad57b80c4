"""The steps a stream task runs, whichever shape the batch's job has: route a block of raw
lines, match one matcher's posts, write a batch's matches and deliveries.

The three-stage shape (:mod:`spark_jobs.stream.pipeline`) runs each step in a stage of its
own with a shuffle between; the fused shape runs all three in the task that read the lines.
Each step keeps its task's figures (the notes the driver sums), so the stages' shares are
measured the same way in both shapes.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from core.corpus.json_lines import JudgedLines, judge_lines
from core.monitor.health import RoutingHealth
from core.monitor.sketch import WordSketch
from core.shedding.drop import LENGTH_BINS, drop_lines, length_histogram
from core.shedding.plan import ShedPlan
from core.shedding.yield_stats import YieldObservation
from core.stream.dispatch import (
    concat_matched,
    dispatch_tables,
    matched_sub_ids,
    now_micros,
    storage_schema,
    subscribers_of,
)
from core.stream.latency import age_histogram
from core.stream.matcher_yield import matcher_yield
from core.stream.notes import DispatchNote, MatchNote, QuarantineNote, RouteNote
from core.stream.payload import ARRIVED_TYPE, MatcherInput
from core.stream.snapshot import MatcherSnapshot
from core.stream.word_health import WordKeys
from core.stream.worker import MatcherCache, ShedBatch, batch_seed, line_seed, route_and_shed
from spark_jobs.lake.storage import filesystem, is_remote, join
from spark_jobs.stream.health import SKETCH_SPEC


@dataclass(frozen=True)
class RoutedBlock:
    """A block's accepted posts, encoded and routed (after the plan's shedding)."""

    post_ids: pa.Array
    indptr: np.ndarray
    word_ids: np.ndarray
    shed: ShedBatch
    arrived: pa.Array  # each post's arrival (timestamps, null where the source gave none)


def arrivals(batch: pa.RecordBatch, accepted: pa.Array) -> pa.Array:
    """The accepted posts' arrival times: the source's ``arrived_at`` column (null where
    a batch has none, as the warm-up's sample lines)."""
    if "arrived_at" not in batch.schema.names:
        return pa.nulls(int(pc.sum(accepted).as_py() or 0), ARRIVED_TYPE)
    return batch.column("arrived_at").filter(accepted).cast(ARRIVED_TYPE)


class RouteStep:
    """Judge, encode and route raw lines block by block, keeping the task's route figures,
    routing health and word sketch."""

    def __init__(
        self,
        snapshot: MatcherSnapshot,
        plan: ShedPlan,
        cache: MatcherCache,
        word_keys: WordKeys,
        max_text_chars: int,
    ) -> None:
        self.snapshot, self.plan, self.cache = snapshot, plan, cache
        self.word_keys, self.max_text_chars = word_keys, max_text_chars
        self.started, self.cpu_started = time.perf_counter(), time.process_time()
        self.changes_before = cache.change_seconds
        n = snapshot.n_matchers
        self.figures: RouteNote = {
            "kind": "route",
            "posts": 0,
            "pairs": 0,
            "routed_pairs": 0,
            "quarantined": 0,
            "bytes": 0,
            "payload_bytes": 0,  # shuffled to the match tasks (none when fused)
            "capped_posts": 0,
            "dropped_posts": 0,
            "dropped_value": 0.0,  # the estimated matches of the dropped posts
            "kept_value": 0.0,  # ... and of the posts kept beside them
            "shed_by_matcher": [0] * n,
            "spread_counts": [0] * (n + 1),
            "seconds": 0.0,
        }
        self.shed_by_matcher = np.zeros(n, dtype=np.int64)
        self.spread_counts = np.zeros(n + 1, dtype=np.int64)
        self.length_counts = np.zeros(LENGTH_BINS, dtype=np.int64)
        # routing health: the version's loads beside hash routing's, and the words' sketch
        self.health = RoutingHealth.empty(n)
        self.sketch = WordSketch(SKETCH_SPEC)
        self.sketch_seconds = 0.0
        self.word_counts: np.ndarray | None = None  # sketched at the task's end

    def block(self, batch: pa.RecordBatch) -> tuple[list[QuarantineNote], RoutedBlock | None]:
        """One Arrow block of (line, source_file): its rejected records as notes, and its
        accepted posts routed (None when none is left)."""
        figures, plan, snapshot = self.figures, self.plan, self.snapshot
        lengths = np.asarray(pc.fill_null(pc.binary_length(batch.column("line")), 0))
        figures["bytes"] += int(lengths.sum())
        self.length_counts += length_histogram(lengths)
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
        quarantined = [] if pc.all(ok).as_py() else self._rejected(batch, judged, pc.invert(ok))
        post_ids = judged.post_id.filter(ok)
        if len(post_ids) == 0:
            return quarantined, None
        seed = batch_seed(snapshot, post_ids[0].as_py())
        sampled = sampled_lines[np.asarray(ok, dtype=np.bool_)]
        indptr, word_ids = self.cache.encoder(snapshot).encode(judged.text.filter(ok))
        shed = route_and_shed(snapshot, plan, indptr, word_ids, seed=seed, sampled=sampled)
        self.health = self.health.merge(
            self.word_keys.health(snapshot, indptr, word_ids, shed.routed)
        )
        counted = time.perf_counter()
        block_counts = np.bincount(word_ids, minlength=snapshot.n_words)
        if self.word_counts is None:
            self.word_counts = block_counts
        else:
            self.word_counts += block_counts
        self.sketch_seconds += time.perf_counter() - counted
        figures["posts"] += len(post_ids)
        figures["pairs"] += int(shed.pair_post.shape[0])
        figures["routed_pairs"] += int(shed.pair_post.shape[0] + shed.shed_by_matcher.sum())
        figures["capped_posts"] += shed.capped_posts
        self.shed_by_matcher += shed.shed_by_matcher
        self.spread_counts += shed.spread_counts
        return quarantined, RoutedBlock(post_ids, indptr, word_ids, shed, arrivals(batch, ok))

    def _rejected(
        self, batch: pa.RecordBatch, judged: JudgedLines, rejected: pa.Array
    ) -> list[QuarantineNote]:
        lines = batch.column("line").filter(rejected)
        self.figures["quarantined"] += len(lines)
        limit = 2 * self.max_text_chars
        notes: list[QuarantineNote] = [
            {
                "kind": "quarantine",
                "reason": r,
                "post_id": p,
                "source_file": f,
                "raw": (x or b"")[:limit].decode("utf-8", "replace"),
            }
            for r, p, f, x in zip(
                judged.reason.filter(rejected).to_pylist(),
                judged.post_id.filter(rejected).to_pylist(),
                batch.column("source_file").filter(rejected).to_pylist(),
                lines.to_pylist(),
                strict=True,
            )
        ]
        return notes

    def note(self) -> RouteNote:
        """The task's route figures, its word sketch filled."""
        figures = self.figures
        if self.word_counts is not None:
            sketched = time.perf_counter()
            self.word_keys.count_words(self.snapshot, self.word_counts, self.sketch)
            self.sketch_seconds += time.perf_counter() - sketched
        figures["shed_by_matcher"] = self.shed_by_matcher.tolist()
        figures["spread_counts"] = self.spread_counts.tolist()
        figures["length_counts"] = self.length_counts.tolist()
        figures["health"] = self.health.as_row()
        figures["sketch"] = self.sketch.to_text()
        figures["sketch_bytes"] = self.sketch.nbytes
        figures["sketch_seconds"] = self.sketch_seconds
        figures["task_seconds"] = time.perf_counter() - self.started
        figures["cpu_seconds"] = time.process_time() - self.cpu_started
        figures["pid"] = os.getpid()
        figures["change_seconds"] = self.cache.change_seconds - self.changes_before
        return figures


@dataclass(frozen=True)
class MatchedPosts:
    """A matcher's posts with matches: ``rows`` index the posts it was given, ``batch``
    holds one MATCHED_ARROW row each (the post's sub ids matched there)."""

    rows: np.ndarray
    batch: pa.RecordBatch


@dataclass
class MatchStep:
    """Match posts on one matcher at a time, keeping the task's match figures: rows,
    matches, counted work and seconds per matcher, the yield counts when asked."""

    snapshot: MatcherSnapshot
    cache: MatcherCache
    learn_yield: bool
    started: float = field(default_factory=time.perf_counter)
    cpu_started: float = field(default_factory=time.process_time)
    figures: MatchNote = field(default_factory=lambda: _empty_match_note())
    work: dict[int, int] = field(default_factory=dict)
    matcher_seconds: dict[int, float] = field(default_factory=dict)
    observed: list[YieldObservation] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.changes_before = self.cache.change_seconds

    def matcher(
        self,
        part: MatcherInput,
        post_id: pa.Array,
        levels: np.ndarray,
        sampled: np.ndarray,
        arrived: pa.Array,
    ) -> MatchedPosts | None:
        """Matcher ``part.matcher``'s posts (``part.rows`` index ``post_id``, ``levels``,
        ``sampled`` and ``arrived``): one row per post with matches there, or None."""
        started = time.perf_counter()
        snapshot, cache, matcher = self.snapshot, self.cache, part.matcher
        result = cache.match(snapshot, matcher, part.offsets, part.word_ids)
        self.figures["rows"] += part.rows.shape[0]
        self.figures["matches"] += result.n_matches
        # counted work, the publish gate's measure: the index's lookups + matches
        self.work[matcher] = self.work.get(matcher, 0) + result.operations + result.n_matches
        if self.learn_yield:
            held = cache.held(snapshot, matcher)
            observed = matcher_yield(
                held, snapshot, matcher, part.offsets, part.word_ids, sampled[part.rows], result
            )
            self.observed.append(observed)
        matched = None
        if result.n_matches:
            # one row per post with matches here: the post id once, its sub ids as a list
            counts = np.diff(result.indptr)
            hit = np.flatnonzero(counts)
            offsets_hit = np.zeros(hit.shape[0] + 1, dtype=np.int32)
            np.cumsum(counts[hit], out=offsets_hit[1:])
            hit_rows = part.rows[hit]
            sub_ids, schema = matched_sub_ids(result.sub_ids)
            codes = cache.subscriber_codes(snapshot, matcher, result.sub_ids)
            list_offsets = pa.array(offsets_hit)
            rows = pa.RecordBatch.from_arrays(
                [
                    post_id.take(pa.array(hit_rows)),
                    pa.array(np.full(hit.shape[0], matcher, dtype=np.int32)),
                    pa.array(levels[hit_rows]),
                    pa.ListArray.from_arrays(list_offsets, sub_ids),
                    pa.ListArray.from_arrays(list_offsets, pa.array(codes)),
                    arrived.take(pa.array(hit_rows)),
                ],
                schema=schema,
            )
            matched = MatchedPosts(hit_rows, rows)
        seconds = time.perf_counter() - started
        self.matcher_seconds[matcher] = self.matcher_seconds.get(matcher, 0.0) + seconds
        return matched

    def note(self) -> MatchNote:
        """The task's match figures (``seconds`` is the caller's: it adds what it spent
        around the matchers, unpacking and packing)."""
        figures = self.figures
        figures["matchers"] = sorted(self.work)
        figures["work"] = {str(m): w for m, w in sorted(self.work.items())}
        # each matcher's own seconds: a cluster with a core per matcher waits for the
        # slowest (the critical path the mapping's balance shortens)
        figures["matcher_seconds"] = {
            str(m): round(s, 6) for m, s in sorted(self.matcher_seconds.items())
        }
        if self.observed:
            merged = YieldObservation.merge(self.observed)
            figures["yield_counts"] = {
                "slots": merged.slots.tolist(),
                "matches": merged.matches.astype(np.int64).tolist(),
                "posts": merged.posts.astype(np.int64).tolist(),
            }
        cache = self.cache
        figures["task_seconds"] = time.perf_counter() - self.started
        figures["cpu_seconds"] = time.process_time() - self.cpu_started
        figures["pid"] = os.getpid()
        figures["worker_trie_builds"] = cache.rebuilds  # since this worker started
        # what this worker holds of the subscriptions: the bases of the matchers it ran
        figures["worker_base_reads"] = cache.base_reads
        figures["worker_base_bytes"] = cache.base_bytes
        figures["worker_held_bytes"] = cache.held_bytes
        figures["worker_held_matchers"] = len(cache.held_matchers)
        figures["change_seconds"] = cache.change_seconds - self.changes_before
        return figures


def _empty_match_note() -> MatchNote:
    return {
        "kind": "match",
        "rows": 0,
        "matches": 0,
        "payload_bytes": 0,  # shuffled to the dispatch tasks (none when fused)
        "seconds": 0.0,
    }


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


def dispatch_step(
    snapshot: MatcherSnapshot,
    matched: list[pa.Table],
    batch_id: int,
    now: dt.datetime,
    staging: dict[str, str],
    part: int,
) -> DispatchNote:
    """A set of posts' matches (every match of each post among them) -> ``matches`` and
    ``deliveries`` Parquet files ``part-<part>`` in the tables' staging folders (committed
    by the driver in one Delta transaction each); the dispatch figures."""
    from schemas import table

    started = time.perf_counter()
    rows = concat_matched(matched)
    matches, deliveries = dispatch_tables(
        rows,
        subscribers_of(rows, snapshot.subscriber_names),
        snapshot.routing_version,
        batch_id,
        now,
        match_rows="matches" in staging,  # else the deliveries hold them
    )
    written_bytes = {name: 0 for name in staging}
    ages = delivery_ages(deliveries, now)
    for name, data in (("matches", matches), ("deliveries", deliveries)):
        if data is not None and data.num_rows:
            written_bytes[name] += _write_part(
                data.cast(storage_schema(table(name).schema)), staging[name], part
            )
    return {
        "kind": "dispatch",
        "rows": rows.num_rows,
        # each (post, subscription) once, whether written as rows or in the deliveries
        "matches": int(pc.sum(pc.list_value_length(deliveries.column("sub_ids"))).as_py() or 0),
        "deliveries": deliveries.num_rows,
        "written_bytes": written_bytes,  # Parquet bytes per output table
        # each delivery's post's age at the batch's start (core.stream.latency)
        "latency_ages": {str(b): c for b, c in ages.items()},
        "seconds": time.perf_counter() - started,
        "task_seconds": time.perf_counter() - started,
    }


def delivery_ages(deliveries: pa.Table, now: dt.datetime) -> dict[int, int]:
    """The age histogram (milliseconds at ``now``, the batch's start) of the deliveries'
    posts that carry an arrival."""
    column = deliveries.column("arrived_at").combine_chunks().cast(ARRIVED_TYPE)
    known = column.drop_null()
    if len(known) == 0:
        return {}
    micros = np.asarray(known.cast(pa.int64()), dtype=np.int64)
    return age_histogram((now_micros(now) - micros) / 1000.0)


def _write_part(rows: pa.Table, folder: str, part: int) -> int:
    """Write ``rows`` as ``<folder>/part-<part>.parquet``; its bytes. A fixed name per
    partition: a retried task overwrites, never duplicates."""
    options = {
        "write_statistics": statistics_columns(rows.schema),
        "use_dictionary": dictionary_columns(rows.schema),
    }
    target = join(folder, f"part-{part:05d}.parquet")
    if is_remote(target):  # an object-store PUT is atomic: no partial file is seen
        store, object_key = filesystem(target)
        pq.write_table(rows, object_key, filesystem=store, **options)
        return int(store.get_file_info(object_key).size or 0)
    local = Path(target)
    local.parent.mkdir(parents=True, exist_ok=True)
    temporary = local.with_name(f".{local.name}.{os.getpid()}.tmp")
    pq.write_table(rows, temporary, **options)
    os.replace(temporary, local)
    return local.stat().st_size
