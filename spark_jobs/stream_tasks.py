"""The two ``mapInArrow`` bodies of a streaming micro-batch, run in the Python workers.

1. :func:`route_posts`: raw posts -> one row per (post, matcher it is multicast to), keyed
   so that ``repartition(N, pkey)`` puts matcher m's rows in partition m; bad records become
   quarantine notes instead.
2. :func:`match_posts`: one matcher's rows -> (post_id, sub_id, matcher_id) matches.

Notes (JSON in the ``note`` column: quarantined records, and each task's figures) travel
along with the data through the shuffle to the driver, so a micro-batch is ONE Spark job.
The snapshot comes in a broadcast; tries and encoders live in :data:`CACHE` across tasks
(Python workers are reused), rebuilt per routing version, updated per epoch.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.stream.snapshot import MatcherSnapshot
from core.stream.worker import MatcherCache, batch_seed, gather, route

ROUTED_SCHEMA = "pkey int, post_id string, word_ids array<int>, note string"
MATCHED_SCHEMA = "post_id string, sub_id long, matcher_id int, note string"
_ROUTED_ARROW = pa.schema(
    [
        ("pkey", pa.int32()),
        ("post_id", pa.string()),
        ("word_ids", pa.list_(pa.int32())),
        ("note", pa.string()),
    ]
)
_MATCHED_ARROW = pa.schema(
    [
        ("post_id", pa.string()),
        ("sub_id", pa.int64()),
        ("matcher_id", pa.int32()),
        ("note", pa.string()),
    ]
)

CACHE = MatcherCache()
_SNAPSHOT: dict[str, Any] = {"key": None, "value": None}


def _snapshot(broadcast: Any, key: tuple[int, int]) -> MatcherSnapshot:
    # A broadcast is deserialised once per worker and key, not once per task.
    if _SNAPSHOT["key"] != key:
        _SNAPSHOT["value"] = broadcast.value
        _SNAPSHOT["key"] = key
    snapshot: MatcherSnapshot = _SNAPSHOT["value"]
    return snapshot


def _notes(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.RecordBatch:
    notes = pa.array([json.dumps(r) for r in rows], pa.string())
    columns = [
        notes if field.name == "note" else pa.nulls(len(rows), field.type) for field in schema
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _quarantine(batch: pa.RecordBatch, max_text_chars: int) -> tuple[pa.Array, pa.Array]:
    """(ok mask, reason per row) for raw posts (post_id, text, corrupt_record, source_file)."""
    post_id, text, corrupt = (batch.column(n) for n in ("post_id", "text", "corrupt_record"))
    trimmed = pc.utf8_length(pc.utf8_trim_whitespace(pc.fill_null(text, "")))
    reasons = [
        (pc.is_valid(corrupt), "malformed JSON record"),
        (pc.or_(pc.is_null(post_id), pc.equal(pc.fill_null(post_id, ""), "")), "missing id"),
        (pc.is_null(text), "missing text"),
        (pc.equal(trimmed, 0), "empty text"),
        (pc.greater(pc.utf8_length(pc.fill_null(text, "")), max_text_chars), "oversized text"),
    ]
    reason = pa.nulls(batch.num_rows, pa.string())
    for test, label in reversed(reasons):  # the first failing rule names the reason
        reason = pc.if_else(pc.fill_null(test, False), label, reason)
    return pc.is_null(reason), reason


def route_posts(
    broadcast: Any, key: tuple[int, int], pkeys: np.ndarray, max_text_chars: int
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow body: (post_id, text, corrupt_record, source_file) -> ROUTED_SCHEMA."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        snapshot = _snapshot(broadcast, key)
        figures: dict[str, Any] = {
            "kind": "route",
            "posts": 0,
            "pairs": 0,
            "quarantined": 0,
            "seconds": 0.0,
        }
        for batch in batches:
            started = time.perf_counter()
            ok, reason = _quarantine(batch, max_text_chars)
            bad = batch.filter(pc.invert(ok))
            if bad.num_rows:
                figures["quarantined"] += bad.num_rows
                raw = pc.coalesce(bad.column("corrupt_record"), bad.column("text"))
                yield _notes(
                    [
                        {
                            "kind": "quarantine",
                            "reason": r,
                            "post_id": p,
                            "source_file": f,
                            "raw": (x or "")[: 2 * max_text_chars],
                        }
                        for r, p, f, x in zip(
                            reason.filter(pc.invert(ok)).to_pylist(),
                            bad.column("post_id").to_pylist(),
                            bad.column("source_file").to_pylist(),
                            raw.to_pylist(),
                            strict=True,
                        )
                    ],
                    _ROUTED_ARROW,
                )
            good = batch.filter(ok)
            if good.num_rows == 0:
                continue
            post_ids = good.column("post_id")
            indptr, word_ids = CACHE.encoder(snapshot).encode(good.column("text").to_pylist())
            seed = batch_seed(snapshot, post_ids[0].as_py())
            pair_post, pair_matcher = route(snapshot, indptr, word_ids, seed=seed)
            offsets, values = gather(indptr, word_ids, pair_post)
            figures["posts"] += good.num_rows
            figures["pairs"] += int(pair_post.shape[0])
            figures["seconds"] += time.perf_counter() - started
            if pair_post.size:
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.array(pkeys[pair_matcher], pa.int32()),
                        post_ids.take(pa.array(pair_post)),
                        pa.ListArray.from_arrays(pa.array(offsets), pa.array(values)),
                        pa.nulls(pair_post.shape[0], pa.string()),
                    ],
                    schema=_ROUTED_ARROW,
                )
        yield _notes([figures], _ROUTED_ARROW)

    return run


def match_posts(
    broadcast: Any, key: tuple[int, int], matcher_of_pkey: dict[int, int]
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow body: ROUTED_SCHEMA rows of (usually) one matcher -> MATCHED_SCHEMA."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        snapshot = _snapshot(broadcast, key)
        figures: dict[str, Any] = {
            "kind": "match",
            "rows": 0,
            "matches": 0,
            "seconds": 0.0,
            "matchers": [],
        }
        seen: set[int] = set()
        for batch in batches:
            started = time.perf_counter()
            is_note = pc.is_valid(batch.column("note"))
            notes = batch.filter(is_note)
            if notes.num_rows:  # pass the route stage's notes through
                yield _notes(
                    [json.loads(n) for n in notes.column("note").to_pylist()], _MATCHED_ARROW
                )
            data = batch.filter(pc.invert(is_note))
            for pkey in pc.unique(data.column("pkey")).to_pylist():
                matcher = matcher_of_pkey[pkey]
                seen.add(matcher)
                rows = data.filter(pc.equal(data.column("pkey"), pkey))
                lists = rows.column("word_ids")
                offsets = np.asarray(lists.offsets, dtype=np.int64)
                found = CACHE.match(
                    snapshot,
                    matcher,
                    offsets - offsets[0],
                    np.asarray(lists.flatten(), dtype=np.int32),
                )
                figures["rows"] += rows.num_rows
                figures["matches"] += found.n_matches
                if found.n_matches:
                    post_index = np.repeat(np.arange(rows.num_rows), np.diff(found.indptr))
                    yield pa.RecordBatch.from_arrays(
                        [
                            rows.column("post_id").take(pa.array(post_index)),
                            pa.array(found.sub_ids, pa.int64()),
                            pa.array(np.full(found.n_matches, matcher, dtype=np.int32)),
                            pa.nulls(found.n_matches, pa.string()),
                        ],
                        schema=_MATCHED_ARROW,
                    )
            figures["seconds"] += time.perf_counter() - started
        figures["matchers"] = sorted(seen)
        yield _notes([figures], _MATCHED_ARROW)

    return run
