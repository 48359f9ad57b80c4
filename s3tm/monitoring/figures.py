"""The platform's figures as Prometheus metrics, computed from the lakehouse tables.

Pure pyarrow: each function takes a table as read (``stream.batches``, ``stream.health``,
``stream.monitor``, ``routing.versions``, ``silver.posts_quarantine``) and returns
:class:`Metric` values. The exporter (``s3tm.monitoring.exporter``) reads the tables and
serves these; nothing here talks to Spark, Delta or the network.

Conventions (https://prometheus.io/docs/practices/naming/): ``s3tm_`` prefix, counters end
in ``_total``, times in seconds, timestamps as Unix seconds (``..._timestamp_seconds``: an
age is ``time() - x`` in PromQL), no label with an unbounded set of values (a stream's
``query_id`` is one per checkpoint; no post, subscription or batch ids).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from core.stream.latency import PROMETHEUS_BOUNDS

MetricKind = Literal["counter", "gauge", "histogram"]


@dataclass(frozen=True)
class Metric:
    """One metric family: its name (a counter's without ``_total``, as prometheus_client
    wants it), kind, help text, label names and one value per label tuple."""

    name: str
    kind: MetricKind
    help: str
    labels: tuple[str, ...] = ()
    samples: dict[tuple[str, ...], float] = field(default_factory=dict)
    # a histogram's, per label tuple: (cumulative count per ``le`` bound, +Inf last; sum)
    buckets: dict[tuple[str, ...], tuple[list[tuple[str, float]], float]] = field(
        default_factory=dict
    )

    @property
    def exposed_name(self) -> str:
        """The sample name Prometheus stores (a counter's with ``_total``)."""
        return f"{self.name}_total" if self.kind == "counter" else self.name


def _seconds(value: dt.datetime | None) -> float | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.timestamp()


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


# -- stream.batches ---------------------------------------------------------------------------

# committed batches' columns summed into counters: (column, metric, help)
_BATCH_COUNTERS = (
    ("one", "s3tm_stream_batches", "micro-batches committed"),
    ("posts", "s3tm_stream_posts", "posts routed and matched (well-formed records read)"),
    ("records", "s3tm_stream_records", "records read: posts and quarantined records"),
    ("quarantined", "s3tm_stream_quarantined_records", "records quarantined by the stream"),
    ("dropped_posts", "s3tm_stream_posts_dropped", "posts dropped by load shedding"),
    ("capped_posts", "s3tm_stream_posts_capped", "posts kept from some of their matchers"),
    ("routed_pairs", "s3tm_stream_routed_pairs", "(post, matcher) pairs routed"),
    ("shed_pairs", "s3tm_stream_shed_pairs", "(post, matcher) pairs not forwarded (shedding)"),
    ("matches", "s3tm_stream_matches", "(post, subscription) matches written"),
    ("deliveries", "s3tm_stream_deliveries", "(post, subscriber) deliveries written"),
    ("seconds_total", "s3tm_stream_batch_seconds", "seconds spent in committed batches"),
)


def stream_batch_metrics(batches: pa.Table | None) -> list[Metric]:
    """Counters over committed batches, and each query's latest batch and plan."""
    counters = [Metric(m, "counter", h, ("query_id",)) for _, m, h in _BATCH_COUNTERS]
    latest_committed = {
        "s3tm_stream_last_batch_timestamp_seconds": "when the latest batch committed",
        "s3tm_stream_last_batch_id": "the latest committed batch id",
        "s3tm_stream_batch_duration_seconds": "the latest committed batch's seconds",
        "s3tm_stream_routing_version": "the routing version of the latest committed batch",
        "s3tm_stream_subscriptions": "subscriptions placed when the latest batch ran",
    }
    latest_planned = {
        "s3tm_stream_trigger_seconds": "the trigger interval of the latest planned batch",
        "s3tm_stream_backlog_posts": "posts landed and not yet processed when the latest batch "
        "was planned (files waiting, or Kafka consumer lag)",
        "s3tm_stream_shedding_level": "the load-shedding level of the latest planned batch "
        "(0: off)",
    }
    gauges = {
        name: Metric(name, "gauge", text, ("query_id",))
        for name, text in {**latest_committed, **latest_planned}.items()
    }
    latency = Metric(
        "s3tm_stream_delivery_latency_seconds",
        "histogram",
        "seconds from a post's arrival (Kafka record time, landed file time) to the commit "
        "of its deliveries, over every delivery",
        ("query_id",),
    )
    out = [*counters, *gauges.values(), latency]
    if batches is None or batches.num_rows == 0:
        return out
    rows = batches.to_pylist()
    committed = [r for r in rows if r["stage"] == "committed"]
    planned = [r for r in rows if r["stage"] == "planned"]
    latency.buckets.update(_latency_histograms(committed))
    by_name = {m.name: m for m in counters}
    for row in committed:
        key = (row["query_id"],)
        values = {
            "one": 1,
            "records": (row["posts"] or 0) + (row["quarantined"] or 0),
            **row,
        }
        for column, name, _ in _BATCH_COUNTERS:
            samples = by_name[name].samples
            samples[key] = samples.get(key, 0.0) + float(values.get(column) or 0)
    for row in _latest(committed):
        key = (row["query_id"],)
        for name, value in (
            ("s3tm_stream_last_batch_timestamp_seconds", _seconds(row["recorded_at"])),
            ("s3tm_stream_last_batch_id", row["batch_id"]),
            ("s3tm_stream_batch_duration_seconds", row["seconds_total"]),
            ("s3tm_stream_routing_version", row["routing_version"]),
            ("s3tm_stream_subscriptions", row["subscriptions"]),
        ):
            if value is not None:
                gauges[name].samples[key] = float(value)
    for row in _latest(planned):
        key = (row["query_id"],)
        for name, value in (
            ("s3tm_stream_trigger_seconds", row.get("trigger_seconds")),
            ("s3tm_stream_backlog_posts", row["backlog_posts"]),
            ("s3tm_stream_shedding_level", row["shedding_level"] or 0),
        ):
            if value is not None:
                gauges[name].samples[key] = float(value)
    return out


def _latency_histograms(
    committed: list[dict[str, Any]],
) -> dict[tuple[str, ...], tuple[list[tuple[str, float]], float]]:
    """Per query, the committed batches' latency buckets summed, made cumulative."""
    counts: dict[tuple[str, ...], list[int]] = {}
    sums: dict[tuple[str, ...], float] = {}
    for row in committed:
        buckets = row.get("latency_buckets")
        if not buckets or len(buckets) != len(PROMETHEUS_BOUNDS) + 1:
            continue  # no delivery with an arrival time, or written before latency was kept
        key: tuple[str, ...] = (str(row["query_id"]),)
        total = counts.setdefault(key, [0] * len(buckets))
        counts[key] = [a + int(b) for a, b in zip(total, buckets, strict=True)]
        sums[key] = sums.get(key, 0.0) + float(row.get("latency_sum") or 0.0)
    # spelled as Prometheus' own clients spell a bound: 1.0, 0.25
    bounds = [*(repr(float(b)) for b in PROMETHEUS_BOUNDS), "+Inf"]
    out: dict[tuple[str, ...], tuple[list[tuple[str, float]], float]] = {}
    for query, per_bucket in counts.items():
        running, cumulative = 0, []
        for bound, count in zip(bounds, per_bucket, strict=True):
            running += count
            cumulative.append((bound, float(running)))
        out[query] = (cumulative, sums[query])
    return out


def _latest(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per query id, the row of its highest batch id (the latest recorded on a tie)."""
    best: dict[str, dict[str, Any]] = {}
    for row in rows:
        held = best.get(row["query_id"])
        if held is None or (row["batch_id"], row["recorded_at"]) >= (
            held["batch_id"],
            held["recorded_at"],
        ):
            best[row["query_id"]] = row
    return list(best.values())


# -- stream.health ----------------------------------------------------------------------------


def stream_health_metrics(health: pa.Table | None) -> list[Metric]:
    """The latest batch's routing health per query: the live measure the monitor reads."""
    gauges = {
        "s3tm_stream_relative_throughput": (
            "relative_throughput",
            "the published version's throughput over hash routing's on the latest batch "
            "(Eq. 6, the monitor's measure)",
        ),
        "s3tm_stream_work_throughput": (
            "work_throughput",
            "posts per unit of the busiest matcher's counted work on the latest batch",
        ),
        "s3tm_stream_spread": ("spread", "matchers a post reaches on average, latest batch"),
        "s3tm_stream_imbalance": ("imbalance", "busiest matcher's load over the mean"),
        "s3tm_stream_hot_words": ("hot_words", "words over the split threshold in the window"),
    }
    out = {n: Metric(n, "gauge", text, ("query_id",)) for n, (_, text) in gauges.items()}
    if health is None or health.num_rows == 0:
        return list(out.values())
    for row in _latest(health.to_pylist()):
        for name, (column, _) in gauges.items():
            value = row.get(column)
            if column == "hot_words":
                value = len(value or [])
            if value is not None:
                out[name].samples[(row["query_id"],)] = float(value)
    return list(out.values())


# -- routing.versions -------------------------------------------------------------------------

STATUSES = ("candidate", "validated", "published", "retired", "rejected")


def routing_metrics(versions: pa.Table | None) -> list[Metric]:
    """The published version, its age and reference figures; the latest remap's outcome."""
    by_status = Metric(
        "s3tm_routing_versions", "gauge", "routing versions by lifecycle status", ("status",)
    )
    published = Metric("s3tm_routing_published_version", "gauge", "the published version")
    published_at = Metric(
        "s3tm_routing_published_timestamp_seconds",
        "gauge",
        "when the published version was published",
    )
    reference = Metric(
        "s3tm_routing_published_relative_throughput",
        "gauge",
        "the published version's throughput over hash routing's when it was evaluated "
        "(basis: model, Eq. 6; work, counted matcher work)",
        ("basis",),
    )
    last = Metric("s3tm_remap_last_version", "gauge", "the latest routing version a remap made")
    last_at = Metric(
        "s3tm_remap_last_timestamp_seconds", "gauge", "when the latest remap made its version"
    )
    last_published = Metric(
        "s3tm_remap_last_published",
        "gauge",
        "1 when the latest remap's version was published (or is), 0 when kept or rejected",
    )
    candidate = Metric(
        "s3tm_remap_last_relative_throughput",
        "gauge",
        "the latest remap's candidate throughput over hash routing's (basis: model, work), "
        "or over the published version's (basis: model_vs_published, work_vs_published)",
        ("basis",),
    )
    moved = Metric(
        "s3tm_remap_last_moved_subscriptions",
        "gauge",
        "subscriptions the latest remap's placement moved from the published version",
    )
    out = [by_status, published, published_at, reference, last, last_at, last_published]
    out += [candidate, moved]
    rows = versions.to_pylist() if versions is not None else []
    _count(by_status, STATUSES, [r["status"] if r["status"] in STATUSES else "other" for r in rows])
    if not rows:
        return out
    live = [r for r in rows if r["status"] == "published"]
    if live:
        row = max(live, key=lambda r: r["routing_version"])
        published.samples[()] = float(row["routing_version"])
        stamp = _seconds(row["published_at"]) or _seconds(row["created_at"])
        if stamp is not None:
            published_at.samples[()] = stamp
        evaluation = _metrics_json(row).get("evaluation", {})
        for basis, key in (
            ("model", "relative_model_throughput_vs_hash"),
            ("work", "relative_work_throughput_vs_hash"),
        ):
            value = _number(evaluation.get(key))
            if value is not None:
                reference.samples[(basis,)] = value
    newest = max(rows, key=lambda r: r["routing_version"])
    last.samples[()] = float(newest["routing_version"])
    stamp = _seconds(newest["created_at"])
    if stamp is not None:
        last_at.samples[()] = stamp
    last_published.samples[()] = float(
        newest["status"] == "published" or newest["published_at"] is not None
    )
    figures = _metrics_json(newest)
    evaluation = figures.get("evaluation", {})
    for basis, key in (
        ("model", "relative_model_throughput_vs_hash"),
        ("work", "relative_work_throughput_vs_hash"),
        ("model_vs_published", "relative_model_throughput_vs_published"),
        ("work_vs_published", "relative_work_throughput_vs_published"),
    ):
        value = _number(evaluation.get(key))
        if value is not None:
            candidate.samples[(basis,)] = value
    placed = figures.get("placement", {})
    if placed.get("moved_subscriptions") is not None:
        moved.samples[()] = float(placed["moved_subscriptions"])
    return out


def _metrics_json(row: dict[str, Any]) -> dict[str, Any]:
    try:
        value = json.loads(row.get("metrics") or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


# -- stream.monitor ---------------------------------------------------------------------------

DECISIONS = ("healthy", "remap", "no data")


def monitor_metrics(checks: pa.Table | None) -> list[Metric]:
    """The monitor's checks by decision, and the latest check's live and reference figures."""
    total = Metric(
        "s3tm_monitor_checks", "counter", "s3tm_monitor checks by decision", ("decision",)
    )
    last_check = Metric(
        "s3tm_monitor_last_check_timestamp_seconds", "gauge", "when the monitor last checked"
    )
    last_remap = Metric(
        "s3tm_monitor_last_remap_request_timestamp_seconds",
        "gauge",
        "when the monitor last asked for a remap",
    )
    live = Metric(
        "s3tm_monitor_live_relative_throughput",
        "gauge",
        "the live throughput over hash routing's the latest check read",
    )
    reference = Metric(
        "s3tm_monitor_reference_relative_throughput",
        "gauge",
        "the published version's throughput over hash routing's at publish time, as the "
        "latest check compared it",
    )
    out = [total, last_check, last_remap, live, reference]
    rows = checks.to_pylist() if checks is not None else []
    _count(total, DECISIONS, [r["decision"] for r in rows])
    if not rows:
        return out
    newest = max(rows, key=lambda r: r["checked_at"])
    last_check.samples[()] = _seconds(newest["checked_at"]) or 0.0
    remaps = [r["checked_at"] for r in rows if r["decision"] == "remap"]
    if remaps:
        last_remap.samples[()] = _seconds(max(remaps)) or 0.0
    for metric, column in (
        (live, "live_relative_throughput"),
        (reference, "reference_relative_throughput"),
    ):
        value = _number(newest.get(column))
        if value is not None:
            metric.samples[()] = value
    return out


def _count(metric: Metric, known: Iterable[str], values: Iterable[str]) -> None:
    """One sample per label value: how often it occurs (0 for the known ones absent)."""
    for value in known:
        metric.samples[(value,)] = 0.0
    for value in values:
        metric.samples[(value,)] = metric.samples.get((value,), 0.0) + 1


# -- silver.posts_quarantine ------------------------------------------------------------------


def quarantine_metrics(quarantine: pa.Table | None) -> list[Metric]:
    """Quarantined records by the stage that judged them (ingest, stream)."""
    total = Metric(
        "s3tm_quarantined_records",
        "counter",
        "records quarantined, by the stage that judged them",
        ("stage",),
    )
    if quarantine is None or quarantine.num_rows == 0:
        return [total]
    counts = pc.value_counts(quarantine.column("stage").combine_chunks())
    for item in counts.to_pylist():
        total.samples[(str(item["values"]),)] = float(item["counts"])
    return [total]
