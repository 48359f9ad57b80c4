"""The Python step of the monitor DAG: read ``stream.health``, decide, record the check.

The measure is the publish gate's: the posts/s the stream's cost model predicts
(:mod:`core.stream.costs`, fitted on this lakehouse's batches when they allow it) from the
live period's posts, matches and each matcher's copies and counted work, against the same
figure over the version's first ``period_hours`` of live posts; throughput by counted
matcher work is recorded beside it (:mod:`core.monitor.decide`).

Small Delta tables, read and written with delta-rs on the Airflow worker (no Spark)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.monitor.decide import decide
from core.monitor.health import RoutingHealth, work_throughput
from core.stream.costs import DEFAULT_COSTS, StreamCosts, posts_per_second
from schemas import table
from spark_jobs.lake.delta_io import Lakehouse
from spark_jobs.lake.routing_store import (
    get_version,
    is_hash_routing,
    now_utc,
    routing_in_force,
)
from spark_jobs.lake.stream_costs import costs_of, tables_fit


def _publish_time_relative_throughput(lakehouse: Lakehouse, version: int) -> float | None:
    """The version's model relative throughput against hash, measured when it was
    evaluated for publishing (``routing.versions.metrics``)."""
    metrics = json.loads(get_version(lakehouse, version)["metrics"] or "{}")
    value = metrics.get("evaluation", {}).get("relative_model_throughput_vs_hash")
    return float(value) if value is not None else None


def period_work_throughput(rows: list[dict[str, Any]]) -> float | None:
    """Posts per unit of the busiest matcher's counted work (lookups + matches) over health
    rows; None when the rows count no work (written before the stream counted it)."""
    counted = [r for r in rows if r.get("work")]
    if not counted or len(counted) < len(rows):
        return None
    width = max(len(r["work"]) for r in counted)
    work = [0] * width
    for row in counted:
        for m, w in enumerate(row["work"]):
            work[m] += int(w)
    return work_throughput(sum(int(r.get("posts") or 0) for r in counted), work)


def period_stream_throughput(
    rows: list[dict[str, Any]], matches: dict[tuple[str, int], int], costs: StreamCosts
) -> float | None:
    """Posts/s the stream model predicts over health rows on a core per matcher: their
    posts, the matches their batches made (``stream.batches``), and per matcher the posts
    routed to it (copies) and its counted work. None when a row lacks one of them."""
    usable = [
        r for r in rows
        if r.get("work") and r.get("loads") and (r["query_id"], r["batch_id"]) in matches
    ]  # fmt: skip
    if not usable or len(usable) < len(rows):
        return None
    width = max(max(len(r["work"]), len(r["loads"])) for r in usable)
    copies, work = np.zeros(width), np.zeros(width)
    for row in usable:
        copies[: len(row["loads"])] += np.asarray(row["loads"], dtype=np.float64)
        work[: len(row["work"])] += np.asarray(row["work"], dtype=np.float64)
    posts = sum(int(r.get("posts") or 0) for r in usable)
    if posts <= 0:
        return None
    made = sum(matches[(r["query_id"], r["batch_id"])] for r in usable)
    return posts_per_second(costs, posts, made, copies, work)


def _batch_matches(batches: pa.Table) -> dict[tuple[str, int], int]:
    """Matches of each committed micro-batch of ``stream.batches``, by (query, batch)."""
    rows = batches.select(["query_id", "batch_id", "stage", "matches"]).to_pylist()
    return {
        (r["query_id"], r["batch_id"]): int(r["matches"] or 0)
        for r in rows
        if r["stage"] == "committed"
    }


def _first_period(rows: list[dict[str, Any]], hours: float) -> list[dict[str, Any]]:
    """The version's rows within ``hours`` of its first live row (its reference period)."""
    if not rows:
        return []
    end = rows[0]["recorded_at"] + dt.timedelta(hours=hours)
    return [r for r in rows if r["recorded_at"] < end]


def check_routing_health(
    root: str,
    *,
    period_hours: float = 1.0,
    max_drop: float = 0.10,
    run_id: str = "manual",
    now: dt.datetime | None = None,
) -> dict[str, Any]:
    """Check the routing in force (the published version, or hash routing while the gate
    keeps candidates out) over the last ``period_hours`` of ``stream.health`` and
    append the check to ``stream.monitor``.

    Returns:
        ``decision`` (healthy | remap | no data), ``conditions`` and the figures read.
    """
    lakehouse = Lakehouse(None, root, engine="rs")
    checked_at = now or now_utc()
    since = checked_at - dt.timedelta(hours=period_hours)
    version = routing_in_force(lakehouse)  # a version, hash routing (-N), or None
    by_hash = version is not None and is_hash_routing(version)
    has_posts = lakehouse.exists("silver.posts") and lakehouse.row_count("silver.posts") > 0
    rows: list[dict[str, Any]] = []
    first: list[dict[str, Any]] = []
    if version is not None and lakehouse.exists("stream.health"):
        health = lakehouse.read_arrow("stream.health")
        every = sorted(
            health.filter(pc.equal(health["routing_version"], version)).to_pylist(),
            key=lambda r: r["recorded_at"],
        )
        rows = [r for r in every if r["recorded_at"] >= since]
        first = _first_period(every, period_hours)
    live = RoutingHealth.from_rows(rows) if rows else None
    latest = rows[-1] if rows else {}
    reference = (
        _publish_time_relative_throughput(lakehouse, version)
        if version is not None and not by_hash
        else None
    )
    # stream.batches read once: each batch's matches, and with the health rows the cost
    # model's fit to this lakehouse's batches (the gate's)
    matches: dict[tuple[str, int], int] = {}
    costs = DEFAULT_COSTS
    if rows and lakehouse.exists("stream.batches"):
        batches = lakehouse.read_arrow("stream.batches")
        matches = _batch_matches(batches)
        costs = costs_of(tables_fit(batches, health))
    check = decide(
        has_version=version is not None,
        has_posts=has_posts,
        live=live,
        reference=reference,
        hot_words=latest.get("hot_words") or [],
        split_threshold=latest.get("split_threshold"),
        max_drop=max_drop,
        live_work=period_work_throughput(rows) if rows else None,
        reference_work=period_work_throughput(first) if first else None,
        live_stream=period_stream_throughput(rows, matches, costs) if rows else None,
        reference_stream=period_stream_throughput(first, matches, costs) if first else None,
        hash_routing=by_hash,
    )
    record = {
        "checked_at": checked_at,
        "run_id": run_id,
        "routing_version": version,
        "since": since,
        "health_batches": len(rows),
        "posts": live.posts if live else 0,
        "live_relative_throughput": check.live_relative_throughput,
        "reference_relative_throughput": reference,
        "live_work_throughput": check.live_work_throughput,
        "reference_work_throughput": check.reference_work_throughput,
        "live_stream_posts_per_s": check.live_stream_posts_per_s,
        "reference_stream_posts_per_s": check.reference_stream_posts_per_s,
        "max_drop": max_drop,
        "hot_words": latest.get("hot_words") or [],
        "decision": check.decision,
        "conditions": check.conditions,
    }
    lakehouse.write_arrow(
        pa.Table.from_pylist([record], schema=table("stream.monitor").schema), "stream.monitor"
    )
    return {
        **{k: v for k, v in record.items() if k not in ("checked_at", "since")},
        "checked_at": checked_at.isoformat(),
        "since": since.isoformat(),
    }


def remap_request(result: dict[str, Any], *, recent_window_days: int) -> dict[str, Any]:
    """The ``remap_request`` event's extra: why, and the remap's configuration (a
    degraded version or a burst: learn on the recent days only)."""
    extra: dict[str, Any] = {
        "conditions": result["conditions"],
        "routing_version": result["routing_version"],
        "checked_at": result["checked_at"],
    }
    drifted = any(c.startswith(("throughput_drop", "hot_word")) for c in result["conditions"])
    if drifted and recent_window_days > 0:
        extra["remap_conf"] = {"window_days": recent_window_days}
    return extra
