"""The monitor's check on a lakehouse (delta-rs, no Spark): it judges the published version
by the stream's cost model against the version's first live period, as the gate judges;
without the model's counts (no committed batches), by counted matcher work; the posts-only
model is recorded beside both."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from s3tm.orchestration.tasks.monitor import check_routing_health, period_work_throughput
from schemas import table
from spark_jobs.lake.delta_io import Lakehouse
from spark_jobs.lake.routing_store import add_version

T0 = dt.datetime(2026, 1, 5, tzinfo=dt.UTC)


def _health(batch: int, at: dt.datetime, work: list[int], loads: list[int]) -> dict:
    return {
        "query_id": "q", "batch_id": batch, "routing_version": 1, "n_matchers": 2,
        "recorded_at": at, "posts": 100, "routed_posts": 100, "pairs": sum(loads),
        "loads": loads, "hash_routed_posts": 100, "hash_pairs": 180, "hash_loads": [90, 90],
        "hot_words": [], "work": work, "work_throughput": 100 / max(work),
    }  # fmt: skip


def _published(lakehouse: Lakehouse, metrics: str = "{}") -> None:
    """Routing version 1, salb2 over 2 matchers, published at T0 with ``metrics``."""
    add_version(lakehouse, {
        "routing_version": 1, "algorithm": "salb2", "n_matchers": 2, "params": "{}",
        "inputs": "{}", "subscribed_words": None, "metrics": metrics, "validation": None,
        "status": "published", "created_at": T0, "published_at": T0, "retired_at": None,
    })  # fmt: skip


def test_the_monitor_asks_for_a_remap_when_counted_work_drops(tmp_path) -> None:
    lakehouse = Lakehouse(None, tmp_path / "lake", engine="rs")
    _published(lakehouse, '{"evaluation": {"relative_model_throughput_vs_hash": 1.2}}')
    rows = [
        # its first live hour: balanced work
        _health(0, T0, [500, 500], [60, 60]),
        _health(1, T0 + dt.timedelta(minutes=30), [500, 500], [60, 60]),
        # a day later: the posts-only model looks better (lower max load), but one matcher
        # now does most of the lookups and matches
        _health(2, T0 + dt.timedelta(days=1), [900, 200], [50, 50]),
    ]
    lakehouse.write_arrow(
        pa.Table.from_pylist(rows, schema=table("stream.health").schema), "stream.health"
    )
    assert period_work_throughput(rows[:2]) == 200 / 1000
    check = check_routing_health(
        str(tmp_path / "lake"), now=T0 + dt.timedelta(days=1, minutes=10), run_id="t"
    )
    assert check["decision"] == "remap"
    assert any("matcher work" in c for c in check["conditions"])
    assert check["live_work_throughput"] == 100 / 900
    assert check["reference_work_throughput"] == 200 / 1000
    assert check["live_relative_throughput"] > 1.2  # the model alone would have said healthy
    recorded = lakehouse.read_arrow("stream.monitor").to_pylist()
    assert recorded[-1]["live_work_throughput"] == 100 / 900


def test_the_monitor_judges_by_the_stream_model_where_counted_work_sees_no_change(
    tmp_path,
) -> None:
    """The busiest matcher's counted work stays the same, but each post now reaches four
    times the matchers: counted work says healthy, the stream's cost model (each copy is
    routed and matched) sees the posts/s fall by more than max_drop and asks for a remap,
    and records both figures."""
    from core.stream.costs import DEFAULT_COSTS, posts_per_second
    from s3tm.orchestration.tasks.monitor import period_stream_throughput

    lakehouse = Lakehouse(None, tmp_path / "lake", engine="rs")
    _published(lakehouse)
    rows = [
        _health(0, T0, [500, 500], [60, 60]),
        _health(1, T0 + dt.timedelta(minutes=30), [500, 500], [60, 60]),
        _health(2, T0 + dt.timedelta(days=1), [500, 500], [400, 400]),
    ]
    lakehouse.write_arrow(
        pa.Table.from_pylist(rows, schema=table("stream.health").schema), "stream.health"
    )
    batches = [
        {"query_id": "q", "batch_id": r["batch_id"], "stage": "committed",
         "routing_version": 1, "epoch": 0, "posts": 100, "matches": 300,
         "recorded_at": r["recorded_at"]}
        for r in rows
    ]  # fmt: skip
    lakehouse.write_arrow(
        pa.Table.from_pylist(batches, schema=table("stream.batches").schema), "stream.batches"
    )
    matches = {("q", b): 300 for b in range(3)}
    first = period_stream_throughput(rows[:2], matches, DEFAULT_COSTS)
    assert first == posts_per_second(DEFAULT_COSTS, 200, 600, [120, 120], [1000, 1000])
    check = check_routing_health(
        str(tmp_path / "lake"), now=T0 + dt.timedelta(days=1, minutes=10), run_id="t"
    )
    assert check["live_work_throughput"] == check["reference_work_throughput"]
    assert check["decision"] == "remap"
    assert any("stream model" in c for c in check["conditions"]), check["conditions"]
    live = posts_per_second(DEFAULT_COSTS, 100, 300, [400, 400], [500, 500])
    assert check["live_stream_posts_per_s"] == live
    assert check["reference_stream_posts_per_s"] == first
    recorded = lakehouse.read_arrow("stream.monitor").to_pylist()
    assert recorded[-1]["live_stream_posts_per_s"] == live
    # a row whose batch is not committed: the model has no matches for it, and says nothing
    assert period_stream_throughput(rows, {("q", 0): 300}, DEFAULT_COSTS) is None


def test_under_hash_routing_the_monitor_asks_only_when_hash_degrades(tmp_path) -> None:
    """The gate kept the remap's candidate out (it lost to hash): the stream routes by hash
    (routing version -N) and the monitor checks hash routing. A hot word asks for nothing
    (the remap that would split it is the one that lost), so a lakehouse where hash keeps
    winning is not remapped every check; a throughput drop still asks."""
    import json

    root = str(tmp_path / "lake")
    lakehouse = Lakehouse(None, root, engine="rs")
    # posts are ingested, nothing is judged yet: ask for the first remap
    _silver(lakehouse)
    assert check_routing_health(root, now=T0, run_id="fresh")["conditions"] == [
        "no_version: posts are ingested but no routing version is in force"
    ]
    gate = {"against": "hash", "basis": "counted work", "gain": 0.87, "required": 1.02,
            "decided_at": T0.isoformat()}  # fmt: skip
    add_version(lakehouse, {
        "routing_version": 1, "algorithm": "salb2", "n_matchers": 2, "params": "{}",
        "inputs": "{}", "subscribed_words": None,
        "metrics": json.dumps({"evaluation": {"relative_work_throughput_vs_hash": 0.87},
                               "publish_gate": gate}),
        "validation": None, "status": "validated", "created_at": T0, "published_at": None,
        "retired_at": None,
    })  # fmt: skip
    # hash routing in force, no live batch yet: no data, not a remap
    assert check_routing_health(root, now=T0, run_id="idle")["decision"] == "no data"
    burst = [{"word": "news", "share": 0.4, "versions": 1, "mapped": False}]
    rows = [
        {**_health(0, T0, [500, 500], [60, 60]), "routing_version": -2, "hot_words": burst},
        {**_health(1, T0 + dt.timedelta(minutes=30), [500, 500], [60, 60]),
         "routing_version": -2, "hot_words": burst, "split_threshold": 0.25},
    ]  # fmt: skip
    lakehouse.write_arrow(
        pa.Table.from_pylist(rows, schema=table("stream.health").schema), "stream.health"
    )
    check = check_routing_health(root, now=T0 + dt.timedelta(minutes=40), run_id="hot")
    assert check["routing_version"] == -2 and check["decision"] == "healthy", check
    assert check["hot_words"] == burst  # recorded, not asked for
    later = {**_health(2, T0 + dt.timedelta(days=1), [900, 200], [50, 50]), "routing_version": -2}
    lakehouse.write_arrow(
        pa.Table.from_pylist([later], schema=table("stream.health").schema), "stream.health"
    )
    dropped = check_routing_health(root, now=T0 + dt.timedelta(days=1, minutes=10), run_id="d")
    assert dropped["decision"] == "remap"
    assert [c.split(":")[0] for c in dropped["conditions"]] == ["throughput_drop"]


def _silver(lakehouse: Lakehouse) -> None:
    """One ingested post (the monitor asks whether there is anything to learn from)."""
    schema = table("silver.posts").schema
    row: dict[str, object] = {f.name: None for f in schema}
    row.update({"post_id": "p1", "words": ["a"], "n_words": 1, "event_day": T0.date(),
                "sample_rate": 1.0})  # fmt: skip
    lakehouse.write_arrow(pa.Table.from_pylist([row], schema=schema), "silver.posts")
