"""The streaming matcher on real, small, bounded Spark streams.

The reference is brute force: a post matches a subscription when the subscription's words
are a subset of the post's normalised words. ``matches`` must equal it exactly (no missing,
no extra, no duplicate rows) through version switches, crashes and subscription changes;
``deliveries`` must be the same matches grouped per subscriber, once each.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pyarrow.compute as pc
import pytest

from spark_jobs.lake.matches import derived_matches
from spark_jobs.lake.subscription_store import (
    add_subscriptions,
    cancel_subscriptions,
    register_word_sets,
    registry,
)
from spark_jobs.stream import job as stream
from spark_jobs.stream import matcher as stream_matcher
from spark_jobs.stream import warm_tasks
from spark_jobs.stream.config import StreamStatus
from spark_jobs.stream.matcher import start
from spark_jobs.stream.pipeline import task_slots
from tests.spark_jobs.stream.harness import (
    Landing,
    active_subscriptions,
    assert_exact,
    assert_matches_equal,
    check_deliveries,
    expected_matches,
    matches_of,
    publish_learned,
    publish_mid_stream,
    run_all,
    run_stream_process,
    stream_config,
    subscription_sets,
)


@pytest.mark.parametrize("shape", ["fused", "staged"])
def test_stream_matches_equal_brute_force_and_switch_over(lakehouse, scene, tmp_path, shape):
    """Both shapes of a batch's job: fused (a local master's default) and staged (a
    cluster's, forced here)."""
    landing = scene
    first = publish_learned(lakehouse, landing, 4, "salb", split=True)
    posts = landing.write(
        600,
        bad=[
            "{not json",
            json.dumps({"id": "e1", "text": "   "}),
            json.dumps({"id": "e2", "text": "\u3000\t"}),
            json.dumps({"id": "e3", "text": "x" * 10_001}),
            json.dumps({"text": "no id"}),
        ],
    )
    # a new version with another N and algorithm, published while the stream runs
    handler, second, after = publish_mid_stream(
        lakehouse, landing, stream_config(tmp_path, landing, job_shape=shape), 7, "hash",
        split=False,
        posts_after=600,
    )  # fmt: skip
    posts += after
    subs = active_subscriptions(lakehouse)
    expected = expected_matches(landing, posts, subs)
    assert sum(expected.values()) > 500  # the test has teeth
    assert_matches_equal(lakehouse, expected, landing)
    check_deliveries(lakehouse)
    # the deliveries hold every match row, matcher included
    assert _match_rows(derived_matches(lakehouse)) == _match_rows(lakehouse.read_arrow("matches"))
    # the tables read the same through Spark (Parquet written by the dispatch tasks)
    assert lakehouse.read("matches").count() == sum(expected.values())
    assert lakehouse.read("deliveries").count() == lakehouse.read_arrow("deliveries").num_rows
    versions = {f.routing_version for f in handler.figures}
    assert versions == {first, second}
    _assert_latency_measured(lakehouse, landing, handler)
    # the shape asked for ran: only the staged one shuffles payloads between its stages
    shuffled = {f.figures.routed_bytes > 0 for f in handler.figures if f.figures.routed_pairs}
    assert shuffled == {shape == "staged"}
    # each version was warmed once, before its first batch (at start; at the switch)
    assert [w.routing_version for w in handler.warmups] == [first, second]
    assert all(w.workers >= 1 and w.texts == 0 for w in handler.warmups)
    _assert_no_stray_staging(lakehouse)
    matches = lakehouse.read_arrow("matches")
    by_batch = {f.batch_id: f.routing_version for f in handler.figures}
    # one version per batch, and the matcher ids are that version's
    for batch, version in by_batch.items():
        rows = matches.filter(pc.equal(matches["batch_id"], batch))
        assert set(rows["routing_version"].to_pylist()) <= {version}
    quarantine = lakehouse.read_arrow("silver.posts_quarantine").to_pylist()
    assert sorted(r["reason"].split(" (")[0] for r in quarantine) == [
        "empty text",
        "empty text",
        "invalid JSON",
        "no 'id' field",
        "oversized text",
    ]
    assert all(r["source_file"].endswith("posts-0000.jsonl") for r in quarantine)
    assert {r["stage"] for r in quarantine} == {"stream"}


def _assert_latency_measured(lakehouse, landing: Landing, handler) -> None:
    """Each delivery carries its post's arrival (the landed file's modification time), and
    each batch's latency quantiles lie between the earliest and latest exact latencies of
    its deliveries (from arrival to the batch's commit record)."""
    deliveries = lakehouse.read_arrow("deliveries").to_pylist()
    for row in deliveries:
        landed = landing.file_of[row["post_id"]].stat().st_mtime
        assert abs(row["arrived_at"].timestamp() - landed) < 0.002
    committed = {
        r["batch_id"]: r
        for r in lakehouse.read_arrow("stream.batches").to_pylist()
        if r["stage"] == "committed"
    }
    for batch in handler.figures:
        mine = [r for r in deliveries if r["batch_id"] == batch.batch_id]
        row = committed[batch.batch_id]
        if not mine:
            assert row["latency_p50"] is None
            continue
        # exact latencies, bounded: the commit came after the stamp, before the record
        exact = [(row["recorded_at"] - r["arrived_at"]).total_seconds() for r in mine]
        low = min((r["delivered_at"] - r["arrived_at"]).total_seconds() for r in mine)
        assert low * 0.99 - 0.001 <= row["latency_p50"] <= row["latency_p99"]
        assert row["latency_p99"] <= max(exact) * 1.01 + 0.001
        assert sum(row["latency_buckets"]) == len(mine)


def _assert_no_stray_staging(lakehouse) -> None:
    """Every staging folder in the output tables is a committed one (a warm-up's are
    dropped; nothing else stays behind)."""
    for name in ("matches", "deliveries"):
        root = Path(lakehouse.path(name).removeprefix("file://"))
        committed = {
            part
            for uri in lakehouse.delta_table(name).file_uris()
            for part in Path(uri.removeprefix("file://")).relative_to(root).parts[:1]
        }
        on_disk = {p.name for p in root.iterdir() if p.name.startswith("s3tm_write=")}
        assert on_disk == committed, name


def test_a_version_published_between_batches_is_warmed_before_its_first_batch(
    lakehouse, scene, tmp_path
):
    landing = scene
    publish_learned(lakehouse, landing, 4, "salb", split=True)
    bronze_texts = [f"warm up text number {i} about white houses" for i in range(50)]
    lakehouse.write_arrow(
        _bronze(bronze_texts), "bronze.posts"
    )  # recent posts: the token table's sample
    posts = landing.write(300)
    query, handler = start(lakehouse.spark, lakehouse, stream_config(tmp_path, landing))
    try:
        run_all(query)
        second = publish_learned(lakehouse, landing, 6, "salb", split=False)
        handler.prefetch()  # what the end of a batch does when a version is published
        assert handler.state.routing_version == second
        assert [w.routing_version for w in handler.warmups][-1] == second
        assert handler.warmups[-1].texts == len(bronze_texts)
        warmed = len(handler.warmups)
        posts += landing.write(300)
        run_all(query)
        assert len(handler.warmups) == warmed  # the switch found it warm
        # a warm-up that fails is reported, never fatal: the batch then builds lazily
        original_lines = warm_tasks.sample_lines
        warm_tasks.sample_lines = _refuse
        try:
            third = publish_learned(lakehouse, landing, 5, "salb", split=True)
            handler.prefetch()
        finally:
            warm_tasks.sample_lines = original_lines
        assert handler.state.routing_version == third
        assert "injected" in (handler.warmups[-1].failed or "")
        posts += landing.write(300)
        run_all(query)
        # a prefetch that fails costs only the warm start: the next batch loads for itself
        original = stream_matcher.routing_in_force
        stream_matcher.routing_in_force = lambda lake: 10_000  # no such version
        try:
            handler.prefetch()
        finally:
            stream_matcher.routing_in_force = original
        assert handler.state.routing_version is None
        posts += landing.write(300)
        run_all(query)
    finally:
        query.stop()
    assert {f.routing_version for f in list(handler.figures)[-2:]} == {third}
    assert_matches_equal(
        lakehouse, expected_matches(landing, posts, active_subscriptions(lakehouse)), landing
    )
    _assert_no_stray_staging(lakehouse)


def _refuse(sample):
    raise RuntimeError("injected warm-up failure")


def _bronze(texts: list[str]):
    import datetime as dt

    import pyarrow as pa

    now = dt.datetime.now(dt.UTC)
    n = len(texts)
    return pa.table(
        {
            "post_id": [f"b{i}" for i in range(n)],
            "text": texts,
            "source": ["test"] * n,
            "created_at": pa.array([now] * n, pa.timestamp("us", tz="UTC")),
            "event_day": pa.array([now.date()] * n, pa.date32()),
            "ingest_batch": ["t"] * n,
            "source_file": ["t"] * n,
            "line_number": pa.array(range(n), pa.int64()),
            "ingested_at": pa.array([now] * n, pa.timestamp("us", tz="UTC")),
        }
    )


def _match_rows(rows) -> list[tuple]:
    columns = ("post_id", "sub_id", "subscriber", "matcher_id", "routing_version", "batch_id")
    return sorted(zip(*(rows[c].to_pylist() for c in columns), strict=True))


def test_stream_without_the_matches_table_derives_them_from_deliveries(lakehouse, scene, tmp_path):
    landing = scene
    version = publish_learned(lakehouse, landing, 4, "salb", split=True)
    posts = landing.write(600)
    args = stream_config(tmp_path, landing, matches_table=False)
    query, handler = start(lakehouse.spark, lakehouse, args)
    try:
        run_all(query)
    finally:
        query.stop()
    assert not lakehouse.exists("matches")  # deliveries only
    expected = expected_matches(landing, posts, active_subscriptions(lakehouse))
    assert sum(expected.values()) > 200  # the test has teeth
    derived = derived_matches(lakehouse)
    assert_matches_equal(lakehouse, expected, landing, rows=derived)
    assert set(derived["routing_version"].to_pylist()) == {version}
    placed = lakehouse.read_arrow("routing.placements").to_pylist()
    on = {(r["sub_id"], r["matcher_id"]) for r in placed if r["routing_version"] == version}
    # each match was found on a matcher its subscription is placed on
    assert all(
        (s, m) in on
        for s, m in zip(
            derived["sub_id"].to_pylist(), derived["matcher_id"].to_pylist(), strict=True
        )
    )
    assert sum(f.figures.matches for f in handler.figures) == derived.num_rows
    # row-group min/max where a reader can skip by them (post, batch), not per subscriber
    import pyarrow.parquet as pq

    files = sorted(Path(lakehouse.path("deliveries")).rglob("*.parquet"))
    assert files
    group = pq.ParquetFile(files[0]).metadata.row_group(0)
    stats = {
        group.column(i).path_in_schema
        for i in range(group.num_columns)
        if group.column(i).is_stats_set
    }
    assert {"post_id", "batch_id", "delivered_at"} <= stats
    assert "subscriber" not in stats and not any(c.startswith("sub_ids") for c in stats)
    # post ids (nearly all distinct) in plain pages; the repeated values in dictionaries
    encodings = {
        group.column(i).path_in_schema: set(group.column(i).encodings)
        for i in range(group.num_columns)
    }
    assert "PLAIN" in encodings["post_id"] and "RLE_DICTIONARY" not in encodings["post_id"]
    assert "RLE_DICTIONARY" in encodings["subscriber"]


def test_stream_killed_mid_batch_restarts_exactly(lakehouse, scene, tmp_path):
    landing = scene
    publish_learned(lakehouse, landing, 4, "salb", split=True)
    before = active_subscriptions(lakehouse)
    posts = [landing.write(300) for _ in range(3)]
    checkpoint = tmp_path / "checkpoint"
    # killed in batch 1 after `matches` is committed and before `deliveries` is
    crashed = run_stream_process(lakehouse, landing, checkpoint, crash="after-matches:1")
    assert crashed.returncode == 137, crashed.stderr[-2000:]
    assert set(lakehouse.read_arrow("matches")["batch_id"].to_pylist()) == {0, 1}
    assert set(lakehouse.read_arrow("deliveries")["batch_id"].to_pylist()) == {0}
    # the registry changes before the restart: the replayed batch 1 keeps its plan
    new_ids = add_subscriptions(lakehouse, [landing.corpus.vocabulary[0]], "late")
    after = active_subscriptions(lakehouse)
    restarted = run_stream_process(lakehouse, landing, checkpoint, crash=None)
    assert restarted.returncode == 0, restarted.stderr[-2000:]
    expected = expected_matches(landing, posts[0] + posts[1], before) + expected_matches(
        landing, posts[2], after
    )
    assert any(sub in new_ids for _, sub in expected)
    assert_matches_equal(lakehouse, expected, landing)
    check_deliveries(lakehouse)


def test_subscriptions_added_and_cancelled_mid_stream(lakehouse, scene, tmp_path):
    landing = scene
    version = publish_learned(lakehouse, landing, 4, "salb", split=True)
    query, handler = start(lakehouse.spark, lakehouse, stream_config(tmp_path, landing))
    expected: Counter = Counter()
    try:
        posts = landing.write(400)
        run_all(query)
        expected += expected_matches(landing, posts, active_subscriptions(lakehouse))
        # track-style: one subscriber, comma-separated phrases ORed; one word is new to
        # the routing version (routes by hash), the cancelled ones stop matching
        vocab = landing.corpus.vocabulary
        added = add_subscriptions(
            lakehouse, [f"{vocab[3]} {vocab[40]}", "zzqx", vocab[7]], "tracker"
        )
        cancelled = sorted(active_subscriptions(lakehouse))[:100]
        cancel_subscriptions(lakehouse, cancelled)
        # between batches the driver's follower brings the placement to the registry's
        # latest version (the next batch then finds it synced, and matches the same)
        latest = lakehouse.version("subscriptions.registry")
        # the follower counts a sync after the state it brought is visible: wait for both
        _wait_for(
            f"the follower to sync registry version {latest}",
            lambda: (
                handler.state.registry_version == latest
                and handler.follower is not None
                and handler.follower.synced >= 1
            ),
        )
        assert handler.follower is not None and handler.follower.synced >= 1
        epoch = handler.state.epoch
        posts = landing.write(400, texts=(f"ZZQX! {vocab[3]} and {vocab[40]}",))
        run_all(query)
        assert handler.state.epoch == epoch  # nothing left for the batch to sync
        active = active_subscriptions(lakehouse)
        assert set(added) <= set(active) and not set(cancelled) & set(active)
        after_change = expected_matches(landing, posts, active)
        expected += after_change
    finally:
        query.stop()
    assert_matches_equal(lakehouse, expected, landing)
    check_deliveries(lakehouse)
    got = matches_of(lakehouse)
    assert {sub for _, sub in got} >= set(added)
    # the new subscriptions were placed (LASP) into the published version
    placements = lakehouse.read_arrow("routing.placements").to_pylist()
    placed = {r["sub_id"] for r in placements if r["routing_version"] == version}
    assert set(added) <= placed
    assert handler.figures[-1].figures.subscriptions == len(active)


def _wait_for(what: str, ready, deadline_s: float = 60.0) -> None:
    deadline = time.monotonic() + deadline_s
    while not ready():
        assert time.monotonic() < deadline, f"waited {deadline_s} s for {what}"
        time.sleep(0.1)


def test_stream_status_prints_the_committed_batches(lakehouse, scene, tmp_path, capsys):
    landing = scene
    publish_learned(lakehouse, landing, 4, "salb", split=True)
    landing.write(200)
    landing.write(200)
    query, _ = start(
        lakehouse.spark, lakehouse, stream_config(tmp_path, landing, available_now=True)
    )
    query.awaitTermination()
    assert query.exception() is None
    capsys.readouterr()
    # a table a person scans: a line per batch under the header, every column filled
    assert stream.run(StreamStatus(last=5), lakehouse) == 0
    lines = capsys.readouterr().out.splitlines()
    assert not any(line.startswith("{") for line in lines)
    header = next(k for k, line in enumerate(lines) if line.startswith("batch "))
    for column in (
        "version", "posts", "matches", "seconds", "slowest matcher s", "latency p99 s",
        "shedding level", "backlog",
    ):  # fmt: skip
        assert column in lines[header]
    table = [line.split() for line in lines[header + 2 : header + 4]]
    assert [(r[0], r[2]) for r in table] == [("0", "200"), ("1", "200")]
    assert all("-" not in r[4:8] for r in table)  # the slowest matcher and latencies known
    # the rows behind it with --json
    assert stream.run(StreamStatus(last=5, as_json=True), lakehouse) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [json.loads(line) for line in lines if line.startswith("{")]
    health = [line for line in lines if line.startswith("health: ")]
    assert [h.split(":")[1].split()[1] for h in health] == ["0", "1"]
    assert all("matcher work: the busiest x" in h and "model: x" in h for h in health)
    assert all("hot words:" in h for h in health)
    # each matcher's counted work (index lookups + matches), as the publish gate counts it
    for row in lakehouse.read_arrow("stream.health").to_pylist():
        # a post routed to a matcher costs it one index lookup or more
        assert len(row["work"]) == len(row["loads"]) == 4 and sum(row["loads"]) == row["pairs"]
        assert all(work >= load for work, load in zip(row["work"], row["loads"], strict=True))
        assert row["work_throughput"] == pytest.approx(row["posts"] / max(row["work"]))
    assert [r["batch_id"] for r in rows] == [0, 1]
    assert [r["posts"] for r in rows] == [200, 200]
    assert {r["stage"] for r in rows} == {"committed"}


def test_stream_refuses_to_start_without_a_published_version(lakehouse, scene, tmp_path):
    from core.errors import InputDataError

    with pytest.raises(InputDataError, match="no routing version in force: run the remap DAG"):
        start(lakehouse.spark, lakehouse, stream_config(tmp_path, scene))


def test_the_stream_routes_by_hash_while_the_gate_keeps_candidates_out(lakehouse, scene, tmp_path):
    """The remap's first candidate lost to hash: nothing is published and the stream routes
    by hash over the candidate's N (routing version -N, every subscription placed by LASP
    and stored under it), exactly; a version published later takes over at a batch."""
    import json as json_module

    from core.learn import learn_mapping
    from spark_jobs.jobs.publish import publish
    from spark_jobs.lake.routing_store import (
        placement_arrays,
        register_table,
        update_versions,
    )

    landing = scene
    learned = learn_mapping(landing.corpus, 4, "salb", split=True, seed=1)
    loser = register_table(lakehouse, learned.table, algorithm="salb")
    evaluation = {"relative_work_throughput_vs_hash": 0.8}
    update_versions(lakehouse, {loser: {"metrics": json_module.dumps({"evaluation": evaluation})}})
    kept = publish(lakehouse, loser, margin=0.02, skip_validation=True)
    assert kept["published"] is None and "the stream routes by hash" in kept["reason"]
    posts = landing.write(400)
    handler, winner, after = publish_mid_stream(
        lakehouse, landing, stream_config(tmp_path, landing), 4, "salb", split=True,
        posts_after=400,
    )  # fmt: skip
    posts += after
    assert_exact(lakehouse, landing, posts, at_least=300)
    by_batch = [f.routing_version for f in handler.figures]
    assert by_batch[0] == -4 and by_batch[-1] == winner, by_batch
    assert set(by_batch) == {-4, winner}
    matches = lakehouse.read_arrow("matches")
    assert {-4, winner} == set(matches["routing_version"].to_pylist())
    # hash routing's placements are stored (a restart takes them over)
    placed, _, _ = placement_arrays(lakehouse, -4)
    assert set(placed.tolist()) == set(active_subscriptions(lakehouse))


def test_subscribe_add_splits_track_phrases(lakehouse, capsys):
    from spark_jobs.jobs import subscriptions

    command = subscriptions.SubscribeAdd(
        phrase="White House, obama ,, debates tonight", subscriber="alice"
    )
    assert subscriptions.run(command, lakehouse) == 0
    added = json.loads(capsys.readouterr().out)["added"]
    rows = {r["sub_id"]: r for r in registry(lakehouse)}
    assert [rows[s]["words"] for s in added] == [["hous", "white"], ["obama"], ["debat", "tonight"]]
    assert {rows[s]["subscriber"] for s in added} == {"alice"}


def test_task_slots_follow_the_master(spark):
    assert task_slots(spark) == 2  # the test session runs local[2]


def test_two_streams_in_one_spark_application_do_not_share_worker_caches(lakehouse, tmp_path):
    """Both start at routing version 1, epoch 1: the workers' cached tries and words of the
    first must not serve the second (its subscriptions differ)."""
    from spark_jobs.lake.delta_io import Lakehouse

    results = []
    for k, lake in enumerate((lakehouse, Lakehouse(lakehouse.spark, tmp_path / "second"))):
        landing = Landing(tmp_path / f"landing{k}", seed=k)
        sets = subscription_sets(landing, 150, seed=10 + k)
        register_word_sets(lake, [" ".join(s) for s in sets], sets, f"user{k}")
        assert publish_learned(lake, landing, 4, "salb", split=False) == 1
        posts = landing.write(300)
        query, _ = start(
            lake.spark, lake, stream_config(tmp_path / f"run{k}", landing, query_name=f"m{k}")
        )
        try:
            run_all(query)
        finally:
            query.stop()
        expected = expected_matches(landing, posts, active_subscriptions(lake))
        results.append((sum(expected.values()), matches_of(lake) == expected))
    assert all(n > 100 for n, _ in results)
    assert [same for _, same in results] == [True, True]


def test_a_batchs_job_is_fused_on_a_local_master_and_staged_on_a_cluster():
    from core.errors import InvalidArgumentError
    from spark_jobs.stream.pipeline import job_shape

    assert job_shape("auto", "local[2]") == job_shape("auto", "local[*]") == "fused"
    assert job_shape("auto", "spark://127.0.0.1:7077") == "staged"
    assert job_shape("auto", "k8s://https://10.0.0.1:443") == "staged"
    assert job_shape("staged", "local[2]") == "staged"  # asked for: the tests' other shape
    assert job_shape("fused", "spark://h:7077") == "fused"
    with pytest.raises(InvalidArgumentError, match="job shape"):
        job_shape("spread", "local[2]")


def test_match_tasks_are_one_per_matcher_on_a_cluster_and_at_most_the_slots_locally():
    from spark_jobs.stream.pipeline import match_tasks

    assert match_tasks("local[2]", 8, 2) == 2
    assert match_tasks("local[*]", 3, 16) == 3
    assert match_tasks("local", 4, 1) == 1
    assert match_tasks("spark://127.0.0.1:7077", 8, 2) == 8
    assert match_tasks("k8s://https://10.0.0.1:443", 6, 64) == 6
