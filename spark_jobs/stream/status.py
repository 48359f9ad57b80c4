"""``s3tm stream status``: the last committed micro-batches, their limit notices (load
shedding) and their routing health, as the batch log and ``stream.health`` hold them."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spark_jobs.lake.delta_io import Lakehouse


# the batch table's columns: (header, the row's field)
BATCH_COLUMNS = (
    ("batch", "batch_id"),
    ("version", "routing_version"),
    ("posts", "posts"),
    ("matches", "matches"),
    ("seconds", "seconds_total"),
    ("slowest matcher s", "seconds_match_slowest"),
    ("latency p50 s", "latency_p50"),
    ("latency p99 s", "latency_p99"),
    ("shedding level", "shedding_level"),
    ("backlog", "backlog_posts"),
)


def batch_table(rows: Sequence[Mapping[str, object]]) -> str:
    """The committed batches as a table a person scans (``--json`` has every field)."""
    from core.formatting import format_table

    def cell(row: Mapping[str, object], field: str) -> object:
        value = row.get(field)
        return "-" if value is None else round(value, 2) if isinstance(value, float) else value

    return format_table(
        [h for h, _ in BATCH_COLUMNS], [[cell(r, f) for _, f in BATCH_COLUMNS] for r in rows]
    )


def print_status(lakehouse: Lakehouse, last: int, *, as_json: bool = False) -> None:
    """The last ``last`` committed batches (a table, or their rows as JSON), their limit
    notices and their routing health."""
    if not lakehouse.exists("stream.batches"):
        print("no micro-batch committed yet (stream.batches is empty): start `s3tm stream run`")
        return
    rows = lakehouse.read_arrow("stream.batches")
    done = sorted(
        (r for r in rows.to_pylist() if r["stage"] == "committed"),
        key=lambda r: r["recorded_at"],
    )[-last:]
    if as_json:
        for row in done:
            print(json.dumps({k: v for k, v in row.items() if k != "recorded_at"}, default=str))
    else:
        print(f"the last {len(done)} committed micro-batches (stream.batches):")
        print(batch_table(done))
    for row in done:
        if row.get("capped_posts") or row.get("dropped_posts"):
            by_matcher = row["shed_pairs_by_matcher"] or []
            print(
                f"limit notice: batch {row['batch_id']} (level {row['shedding_level']}, "
                f"m={row['max_spread']:g}, {row['shedding']}): {row['capped_posts']} of "
                f"{row['posts']} posts capped, {row['dropped_posts'] or 0} dropped, "
                f"{row['shed_pairs']} (post, matcher) pairs not forwarded; per matcher: "
                + ", ".join(f"{m}: {n}" for m, n in enumerate(by_matcher) if n)
            )
    if not lakehouse.exists("stream.health"):
        return
    wanted = {(r["query_id"], r["batch_id"]) for r in done}
    for row in sorted(
        lakehouse.read_arrow("stream.health").to_pylist(), key=lambda r: r["recorded_at"]
    ):
        if (row["query_id"], row["batch_id"]) not in wanted:
            continue
        hot = ", ".join(f"{h['word']} {h['share']:.1%}/{h['versions']}v" for h in row["hot_words"])
        work = [w for w in row.get("work") or [] if w is not None]
        counted = (
            f"matcher work: the busiest x{max(work) / (sum(work) / len(work)):.2f} of the mean, "
            f"{1000 * row['work_throughput']:.1f} posts per 1,000 of its lookups + matches; "
            if work and sum(work) and row.get("work_throughput")
            else ""
        )
        print(
            f"health: batch {row['batch_id']} v{row['routing_version']}: {counted}model: "
            f"x{row['relative_throughput'] or float('nan'):.2f} of hash, "
            f"spread {row['spread'] or float('nan'):.2f}, imbalance "
            f"{row['imbalance'] or float('nan'):.2f}; hot words: {hot or 'none'}"
        )
