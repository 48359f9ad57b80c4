"""Runs bound to their data interval: the graph and learn jobs read the window that ends at
``--end`` whatever newer days the lakehouse holds; re-running a past interval learns the
same mapping after newer versions were published; publish never puts a past interval's
version over a newer one; ingest quarantines posts dated after its cut-off."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np

from schemas import table
from spark_jobs.jobs import graph, ingest, learn, publish
from spark_jobs.lake.routing_store import load_routing_table, published_version, versions

DAYS = [dt.date(2026, 3, d) for d in range(1, 7)]
VOCABULARY = [f"w{i:02d}" for i in range(60)]


def _silver(spark, lakehouse) -> None:
    """40 posts a day on six days; each day favours its own words, so windows differ."""
    rng = np.random.default_rng(7)
    rows = []
    for n, day in enumerate(DAYS):
        weights = np.ones(len(VOCABULARY))
        weights[n * 10 : n * 10 + 10] = 8.0  # the day's own words
        weights /= weights.sum()
        for i in range(40):
            words = sorted(set(rng.choice(VOCABULARY, size=4, p=weights).tolist()))
            rows.append(
                {
                    "post_id": f"{day}-{i}",
                    "words": words,
                    "n_words": len(words),
                    "event_day": day,
                    "created_at": None,
                    "sample_rate": 1.0,
                }
            )
    schema = table("silver.posts").spark_schema()
    lakehouse.write(spark.createDataFrame(rows, schema), "silver.posts")


def _learn(lakehouse, capsys, **options) -> dict:
    config = learn.LearnConfig(
        nodes=4,
        algorithm="salb2",
        incremental=True,
        live_hot_words=0.0,
        subscribed="all",
        **options,
    )
    capsys.readouterr()
    assert learn.run(config, lakehouse) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def _mapping(lakehouse, version: int) -> tuple[list[str], list[int], list[int]]:
    routing = load_routing_table(lakehouse, version)
    return routing.words.tolist(), routing.part_indptr.tolist(), routing.part_matchers.tolist()


def test_a_past_interval_learns_its_own_window_and_never_replaces_a_newer_version(
    spark, lakehouse, capsys
):
    _silver(spark, lakehouse)
    # the graph job's window ends at --end, not at the newest day in silver
    assert graph.run(graph.GraphConfig(window_days=2, end=DAYS[2]), lakehouse) == 0
    days = {r.day for r in lakehouse.read("gold.post_words").select("day").distinct().collect()}
    assert days == {DAYS[1], DAYS[2]}
    assert graph.run(graph.GraphConfig(), lakehouse) == 0  # every day's edges

    # the nightly run for 2026-03-03 (its interval ends 03-04 02:00): days 03-02 and 03-03
    first = _learn(lakehouse, capsys, window_days=2, end=DAYS[2])
    assert (first["start"], first["end"]) == ("2026-03-02", "2026-03-03")
    assert first["training_posts"] < 80  # two days' posts, less the held-out ones
    assert first["remap_reason"] == "no published version learned on days before 2026-03-03"
    v1 = first["routing_version"]
    assert publish.publish(lakehouse, v1, skip_validation=True)["changed"]

    # a Trigger learns on the newest days, and records the last one it read
    newest = _learn(lakehouse, capsys, window_days=2, full_remap_gain=10.0)
    assert (newest["start"], newest["end"]) == ("2026-03-05", "2026-03-06")
    assert newest["remap"] == "incremental" and newest["from_version"] == v1
    assert publish.publish(lakehouse, newest["routing_version"], skip_validation=True)["changed"]

    # re-running 2026-03-03 after that: the same mapping as its first run, not a refinement
    # of (or renaming onto) the version learned on later days
    again = _learn(lakehouse, capsys, window_days=2, end=DAYS[2])
    assert (again["start"], again["end"]) == ("2026-03-02", "2026-03-03")
    assert _mapping(lakehouse, again["routing_version"]) == _mapping(lakehouse, v1)
    assert "aligned_to_version" not in again
    # ... and the gated publish records it but keeps the newer version in force
    kept = publish.publish(lakehouse, again["routing_version"], margin=0.0, skip_validation=True)
    assert kept["changed"] is False and kept["published"] == newest["routing_version"]
    assert (
        "learned on days up to 2026-03-03, before the published version's (2026-03-06)"
        in (kept["reason"])
    )
    assert published_version(lakehouse) == newest["routing_version"]

    # the next past day refines the version of the day before it (retired since), as the
    # nightly run did then
    next_day = _learn(lakehouse, capsys, window_days=2, end=DAYS[3], full_remap_gain=10.0)
    assert next_day["remap"] == "incremental" and next_day["from_version"] == v1
    statuses = {r["routing_version"]: r["status"] for r in versions(lakehouse)}
    assert statuses[v1] == "retired" and statuses[again["routing_version"]] == "candidate"


def test_a_post_dated_after_the_cut_off_is_quarantined_with_the_reason(lakehouse, tmp_path):
    landing = tmp_path / "landing"
    landing.mkdir()
    now = dt.datetime.now(dt.UTC)
    posts = [
        {"id": "past", "text": "an ordinary post", "created_at": "2026-03-01T10:00:00Z"},
        # a clock a minute ahead is within the skew; a day ahead is not
        {"id": "skewed", "text": "a fast clock", "created_at": now + dt.timedelta(minutes=1)},
        {"id": "future", "text": "from tomorrow", "created_at": now + dt.timedelta(days=1)},
    ]
    lines = [json.dumps(p, default=dt.datetime.isoformat) for p in posts]
    (landing / "a.jsonl").write_text("\n".join(lines) + "\n")
    config = ingest.IngestConfig(landing=str(landing), batch_id=1)
    assert ingest.run(config, lakehouse) == 0
    bronze = {r.post_id for r in lakehouse.read("bronze.posts").collect()}
    quarantined = {r.post_id: r.reason for r in lakehouse.read("silver.posts_quarantine").collect()}
    assert bronze == {"past", "skewed"}
    assert quarantined == {"future": ingest.FUTURE_REASON}
    # a cut-off named by the caller (a past interval's end) moves the line
    landing.joinpath("b.jsonl").write_text(
        json.dumps(
            {"id": "late", "text": "after the interval", "created_at": "2026-03-02T01:00:00Z"}
        )
        + "\n"
    )
    until = dt.datetime(2026, 3, 2, tzinfo=dt.UTC)
    config = ingest.IngestConfig(landing=str(landing), batch_id=2, dated_until=until)
    assert ingest.run(config, lakehouse) == 0
    reasons = {r.post_id: r.reason for r in lakehouse.read("silver.posts_quarantine").collect()}
    assert reasons["late"] == ingest.FUTURE_REASON


def test_the_dedupe_reads_the_batch_days_of_bronze_only(lakehouse, tmp_path):
    """A duplicate on the batch's days is quarantined; the ids it is checked against come
    from those days' partitions (two days either side), not from all of bronze."""
    landing = tmp_path / "landing"
    landing.mkdir()

    def post(post_id: str, day: int) -> str:
        text = f"post {post_id} words here"
        return json.dumps(
            {"id": post_id, "text": text, "created_at": f"2026-03-{day:02d}T09:00:00Z"}
        )

    (landing / "a.jsonl").write_text("\n".join(post(f"p{d}", d) for d in range(1, 21)) + "\n")
    assert ingest.run(ingest.IngestConfig(landing=str(landing), batch_id=1), lakehouse) == 0
    (landing / "b.jsonl").write_text(
        "\n".join([post("p10", 10), post("new", 10), post("p1", 10)]) + "\n"
    )
    assert ingest.run(ingest.IngestConfig(landing=str(landing), batch_id=2), lakehouse) == 0
    quarantined = {
        r.post_id: r.reason
        for r in lakehouse.read("silver.posts_quarantine").collect()
        if r.ingest_batch == "2"
    }
    assert quarantined == {"p10": "duplicate id (already ingested)"}
    # p1 sent again dated another day is outside the window: accepted (the bound's price)
    added = {r.post_id for r in lakehouse.read("bronze.posts").collect() if r.ingest_batch == "2"}
    assert added == {"new", "p1"}

    parsed = lakehouse.spark.createDataFrame(
        [(True, "x", "2026-03-10T09:00:00Z")], "ok boolean, post_id string, created_at string"
    )
    bronze = lakehouse.read("bronze.posts")
    checked = ingest.known_ids(bronze, parsed, default_day=DAYS[0], dedupe_days=2)
    everything = ingest.known_ids(bronze, parsed, default_day=DAYS[0], dedupe_days=-1)
    # the files the scan read (its partitions pruned before any file is opened), against
    # the files of bronze's log on each day
    from deltalake import DeltaTable

    log = DeltaTable(str(table("bronze.posts").location(lakehouse.location))).get_add_actions()
    file_days = [str(p["event_day"]) for p in log.column("partition").to_pylist()]
    in_window = [d for d in file_days if "2026-03-08" <= d <= "2026-03-12"]
    assert _files_read(checked) == len(in_window) < len(file_days)
    assert _files_read(everything) == len(file_days)


def _files_read(frame) -> int:
    frame.collect()
    plan = frame._jdf.queryExecution().executedPlan()
    leaves = plan.collectLeaves()
    total = 0
    for i in range(leaves.size()):
        metrics = leaves.apply(i).metrics()
        if metrics.contains("numFiles"):
            total += int(metrics.apply("numFiles").value())
    return total
