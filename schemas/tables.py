"""Every Delta table of the lakehouse (docs/ARCHITECTURE.md), defined once.

A :class:`TableSpec` holds the pyarrow schema (the single source of truth); Spark's
``StructType`` and delta-rs' schema are derived from it. Locations are relative to the
lakehouse root: ``<root>/<layer>/<name>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

_UTC = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True)
class TableSpec:
    """A table: name (``layer.table``), key columns, partition columns, arrow schema."""

    name: str
    schema: pa.Schema
    key: tuple[str, ...]
    partition_by: tuple[str, ...] = ()
    description: str = ""

    @property
    def relative_path(self) -> Path:
        return Path(*self.name.split(".", 1))

    def location(self, lakehouse: str | Path) -> Path:
        return Path(lakehouse) / self.relative_path

    @property
    def columns(self) -> list[str]:
        return list(self.schema.names)

    def spark_schema(self) -> Any:
        """The schema as a Spark ``StructType`` (imports pyspark lazily)."""
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(self.schema)

    def delta_schema(self) -> Any:
        """The schema as a delta-rs ``Schema``."""
        import deltalake

        return deltalake.Schema.from_arrow(self.schema)


def _f(name: str, kind: pa.DataType, nullable: bool = True) -> pa.Field:
    return pa.field(name, kind, nullable=nullable)


BRONZE_POSTS = TableSpec(
    "bronze.posts",
    pa.schema(
        [
            _f("post_id", pa.string(), False),
            _f("text", pa.string(), False),
            _f("source", pa.string()),
            _f("created_at", _UTC),
            _f("event_day", pa.date32(), False),
            _f("ingest_batch", pa.string(), False),
            _f("source_file", pa.string(), False),
            _f("line_number", pa.int64(), False),
            _f("ingested_at", _UTC, False),
        ]
    ),
    key=("post_id",),
    partition_by=("event_day",),
    description="raw posts as landed, one row per accepted record",
)

KAFKA_OFFSETS = TableSpec(
    "bronze.kafka_offsets",
    pa.schema(
        [
            _f("topic", pa.string(), False),
            _f("partition", pa.int32(), False),
            _f("start_offset", pa.int64(), False),
            _f("end_offset", pa.int64(), False),
            _f("ingest_batch", pa.string(), False),
            _f("planned_at", _UTC, False),
        ]
    ),
    key=("topic", "partition", "ingest_batch"),
    description="the Kafka offsets [start_offset, end_offset) each ingest batch read into "
    "bronze.posts, recorded before it read them",
)

SILVER_POSTS = TableSpec(
    "silver.posts",
    pa.schema(
        [
            _f("post_id", pa.string(), False),
            _f("words", pa.list_(pa.string()), False),
            _f("n_words", pa.int32(), False),
            _f("event_day", pa.date32(), False),
            _f("created_at", _UTC),
            _f("sample_rate", pa.float64(), False),
        ]
    ),
    key=("post_id",),
    partition_by=("event_day",),
    description="normalised distinct words per post (core.text.normalize), sampled",
)

POSTS_QUARANTINE = TableSpec(
    "silver.posts_quarantine",
    pa.schema(
        [
            _f("stage", pa.string(), False),
            _f("reason", pa.string(), False),
            _f("post_id", pa.string()),
            _f("source_file", pa.string()),
            _f("line_number", pa.int64()),
            _f("raw", pa.string()),
            _f("ingest_batch", pa.string(), False),
            _f("quarantined_at", _UTC, False),
        ]
    ),
    key=(),
    description="rejected records with the reason; nothing is dropped silently",
)

WORD_STATS = TableSpec(
    "gold.word_stats",
    pa.schema(
        [
            _f("day", pa.date32(), False),
            _f("word", pa.string(), False),
            _f("post_frequency", pa.int64(), False),
            _f("cofrequency_sum", pa.int64(), False),
        ]
    ),
    key=("day", "word"),
    partition_by=("day",),
    description="f(w) and f_n(w) per day (paper Sect. 3.2)",
)

POST_WORDS = TableSpec(
    "gold.post_words",
    pa.schema(
        [
            _f("day", pa.date32(), False),
            _f("post_id", pa.string(), False),
            _f("word", pa.string(), False),
        ]
    ),
    key=("day", "post_id", "word"),
    partition_by=("day",),
    description="edges of the word-to-post bipartite graph",
)

COOCCURRENCE = TableSpec(
    "gold.cooccurrence",
    pa.schema(
        [
            _f("day", pa.date32(), False),
            _f("word_a", pa.string(), False),
            _f("word_b", pa.string(), False),
            _f("count", pa.int64(), False),
        ]
    ),
    key=("day", "word_a", "word_b"),
    partition_by=("day",),
    description="co-occurrence counts, word_a < word_b (word-network baselines)",
)

SUBSCRIPTIONS = TableSpec(
    "subscriptions.registry",
    pa.schema(
        [
            _f("sub_id", pa.int64(), False),
            _f("subscriber", pa.string(), False),
            _f("phrase", pa.string(), False),
            _f("words", pa.list_(pa.string()), False),
            _f("created_at", _UTC, False),
            _f("cancelled_at", _UTC),
        ]
    ),
    key=("sub_id",),
    description="word-set subscriptions (normalised, sorted words); cancelled ones kept",
)

MAPPINGS = TableSpec(
    "routing.mappings",
    pa.schema(
        [
            _f("routing_version", pa.int64(), False),
            _f("word", pa.string(), False),
            _f("part", pa.int32(), False),
            _f("matcher_id", pa.int32(), False),
        ]
    ),
    key=("routing_version", "word", "part"),
    partition_by=("routing_version",),
    description="matcher of each word, or of each version `part` of a split hot word",
)

PLACEMENTS = TableSpec(
    "routing.placements",
    pa.schema(
        [
            _f("routing_version", pa.int64(), False),
            _f("sub_id", pa.int64(), False),
            _f("matcher_id", pa.int32(), False),
            _f("placed_at", _UTC, False),
        ]
    ),
    key=("routing_version", "sub_id", "matcher_id"),
    partition_by=("routing_version",),
    description="matcher(s) of each subscription under a routing version",
)

VERSIONS = TableSpec(
    "routing.versions",
    pa.schema(
        [
            _f("routing_version", pa.int64(), False),
            _f("algorithm", pa.string(), False),
            _f("n_matchers", pa.int32(), False),
            _f("params", pa.string(), False),  # JSON
            _f("inputs", pa.string(), False),  # JSON: input table versions, window
            _f("subscribed_words", pa.list_(pa.string())),  # null: every word routes
            _f("metrics", pa.string()),  # JSON
            _f("validation", pa.string()),  # JSON
            _f("status", pa.string(), False),  # candidate|validated|published|retired|rejected
            _f("created_at", _UTC, False),
            _f("published_at", _UTC),
            _f("retired_at", _UTC),
        ]
    ),
    key=("routing_version",),
    description="routing versions and their lifecycle; one published at a time",
)

MATCHES = TableSpec(
    "matches",
    pa.schema(
        [
            _f("post_id", pa.string(), False),
            _f("sub_id", pa.int64(), False),
            _f("subscriber", pa.string(), False),
            _f("routing_version", pa.int64(), False),
            _f("matcher_id", pa.int32(), False),
            _f("matched_at", _UTC, False),
            _f("batch_id", pa.int64(), False),
        ]
    ),
    key=("post_id", "sub_id"),
    description="each (post, subscription) match once, with the version and matcher",
)

DELIVERIES = TableSpec(
    "deliveries",
    pa.schema(
        [
            _f("post_id", pa.string(), False),
            _f("subscriber", pa.string(), False),
            _f("sub_ids", pa.list_(pa.int64()), False),
            _f("routing_version", pa.int64(), False),
            _f("delivered_at", _UTC, False),
            _f("batch_id", pa.int64(), False),
            # the post's load-shedding level when a spread cap kept it from some of its
            # matchers (it may have missed matches), else 0; null in rows written before
            _f("shedding_level", pa.int32()),
            # the matcher that found each of sub_ids (same order): with it a delivery holds
            # its ``matches`` rows, so the stream may skip writing them (--no-matches-table);
            # null in rows written before
            _f("matcher_ids", pa.list_(pa.int32())),
            # when the post arrived (the Kafka record's timestamp, or the landed file's
            # time): delivered_at's batch committed after it; null where no source time
            _f("arrived_at", _UTC),
        ]
    ),
    key=("post_id", "subscriber"),
    description="a matched post once per subscriber, with the ids of the subscriptions it matched",
)

STREAM_BATCHES = TableSpec(
    "stream.batches",
    pa.schema(
        [
            _f("query_id", pa.string(), False),
            _f("batch_id", pa.int64(), False),
            _f("stage", pa.string(), False),  # planned | committed
            _f("routing_version", pa.int64(), False),
            _f("registry_version", pa.int64()),
            _f("epoch", pa.int64(), False),
            _f("subscriptions", pa.int64()),
            _f("posts", pa.int64()),
            _f("routed_pairs", pa.int64()),
            _f("matches", pa.int64()),
            _f("deliveries", pa.int64()),
            _f("quarantined", pa.int64()),
            _f("seconds_sync", pa.float64()),
            _f("seconds_route", pa.float64()),
            _f("seconds_match", pa.float64()),
            _f("seconds_dispatch", pa.float64()),
            _f("seconds_spark", pa.float64()),
            _f("seconds_commit", pa.float64()),
            _f("seconds_total", pa.float64()),
            _f("recorded_at", _UTC, False),
            # load shedding: the plan (utility, level, cap m, backlog it was decided on) and,
            # once written, the limit notices: posts capped, pairs not forwarded (per matcher)
            _f("shedding", pa.string()),
            _f("shedding_level", pa.int32()),
            _f("max_spread", pa.float64()),
            _f("backlog_posts", pa.int64()),
            _f("capped_posts", pa.int64()),
            _f("dropped_posts", pa.int64()),
            _f("shed_pairs", pa.int64()),
            _f("shed_pairs_by_matcher", pa.list_(pa.int64())),
            _f("written_bytes", pa.int64()),  # Parquet bytes of the batch's output tables
            # the query's trigger interval (null: available-now or as fast as it can): a
            # batch longer than it means the stream falls behind
            _f("trigger_seconds", pa.float64()),
            # the busiest matcher's matching seconds: what a core per matcher waits for
            _f("seconds_match_slowest", pa.float64()),
            # seconds from a post's arrival to its deliveries' commit, over the batch's
            # deliveries: quantiles, and Prometheus histogram buckets (not cumulative,
            # core.stream.latency.PROMETHEUS_BOUNDS then +Inf) with their sum
            _f("latency_p50", pa.float64()),
            _f("latency_p95", pa.float64()),
            _f("latency_p99", pa.float64()),
            _f("latency_buckets", pa.list_(pa.int64())),
            _f("latency_sum", pa.float64()),
        ]
    ),
    key=("query_id", "batch_id", "stage"),
    description=(
        "the streaming matcher's micro-batches: the plan (routing version and registry "
        "snapshot, written first so a replayed batch repeats it) and, once written, its figures"
    ),
)

_HOT_WORD = pa.struct(
    [
        _f("word", pa.string()),
        _f("share", pa.float64()),  # of all subscribed-word occurrences (sketch estimate)
        _f("versions", pa.int32()),  # the routing version's versions of the word
        _f("mapped", pa.bool_()),  # whether the routing version knew the word
    ]
)

STREAM_HEALTH = TableSpec(
    "stream.health",
    pa.schema(
        [
            _f("query_id", pa.string(), False),
            _f("batch_id", pa.int64(), False),
            _f("routing_version", pa.int64(), False),
            _f("n_matchers", pa.int32(), False),
            _f("recorded_at", _UTC, False),
            # the batch's posts routed by the published version (before shedding) ...
            _f("posts", pa.int64()),
            _f("routed_posts", pa.int64()),
            _f("pairs", pa.int64()),
            _f("loads", pa.list_(pa.int64())),
            _f("spread", pa.float64()),
            _f("imbalance", pa.float64()),
            _f("throughput", pa.float64()),  # Eq. 6, C = 1: posts / max load
            # ... and by hash routing, the same posts and subscribed words
            _f("hash_routed_posts", pa.int64()),
            _f("hash_pairs", pa.int64()),
            _f("hash_loads", pa.list_(pa.int64())),
            _f("hash_spread", pa.float64()),
            _f("hash_imbalance", pa.float64()),
            _f("relative_throughput", pa.float64()),
            # hot words of the sliding window's word sketch
            _f("window_batches", pa.int32()),
            _f("window_occurrences", pa.int64()),
            _f("split_threshold", pa.float64()),
            _f("hot_words", pa.list_(_HOT_WORD)),
            _f("sketch_bytes", pa.int64()),  # the largest route task's sketch
            _f("sketch_seconds", pa.float64()),  # route tasks' time in the sketch
            _f("route_seconds", pa.float64()),  # route tasks' total time
            # counted matcher work (lookups + matches) per matcher: the publish gate's measure
            _f("work", pa.list_(pa.int64())),
            _f("work_throughput", pa.float64()),  # posts / the busiest matcher's work
        ]
    ),
    key=("query_id", "batch_id"),
    description=(
        "what the published routing version achieves on each micro-batch's live posts, "
        "beside hash routing, and the hot words its word sketch sees"
    ),
)

MONITOR_CHECKS = TableSpec(
    "stream.monitor",
    pa.schema(
        [
            _f("checked_at", _UTC, False),
            _f("run_id", pa.string()),
            _f("routing_version", pa.int64()),
            _f("since", _UTC),  # the period the check read
            _f("health_batches", pa.int64()),
            _f("posts", pa.int64()),
            _f("live_relative_throughput", pa.float64()),
            _f("reference_relative_throughput", pa.float64()),  # at publish time
            _f("max_drop", pa.float64()),
            _f("hot_words", pa.list_(_HOT_WORD)),
            _f("decision", pa.string(), False),  # healthy | remap | no data
            _f("conditions", pa.list_(pa.string())),
            # throughput by counted matcher work: over the period, over the first period
            _f("live_work_throughput", pa.float64()),
            _f("reference_work_throughput", pa.float64()),
            # the posts/s the stream's cost model predicts (the gate's measure, which decides)
            _f("live_stream_posts_per_s", pa.float64()),
            _f("reference_stream_posts_per_s", pa.float64()),
        ]
    ),
    key=("checked_at",),
    description="s3tm_monitor's checks: the figures it read and whether it asked for a remap",
)

TABLES: dict[str, TableSpec] = {
    spec.name: spec
    for spec in (
        BRONZE_POSTS,
        KAFKA_OFFSETS,
        SILVER_POSTS,
        POSTS_QUARANTINE,
        WORD_STATS,
        POST_WORDS,
        COOCCURRENCE,
        SUBSCRIPTIONS,
        MAPPINGS,
        PLACEMENTS,
        VERSIONS,
        MATCHES,
        DELIVERIES,
        STREAM_BATCHES,
        STREAM_HEALTH,
        MONITOR_CHECKS,
    )
}


def table(name: str) -> TableSpec:
    """The spec of table ``name``.

    Raises:
        KeyError: naming the known tables.
    """
    try:
        return TABLES[name]
    except KeyError:
        raise KeyError(f"unknown table {name!r}; known: {sorted(TABLES)}") from None
