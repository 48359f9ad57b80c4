"""Load shedding in the real streaming job: a forced cap records its limit notices and
marks the deliveries of capped posts; a replayed batch sheds exactly the same pairs; the
adaptive controller raises the level when the backlog exceeds the latency budget; kept
matches are always a subset of brute force."""

from __future__ import annotations

from collections import Counter

from spark_jobs.stream import job as stream
from spark_jobs.stream.config import StreamStatus
from spark_jobs.stream.matcher import start
from tests.spark_jobs.stream import harness


def _subset_of_brute_force(lakehouse, landing, posts) -> tuple[Counter, Counter]:
    expected = harness.expected_matches(landing, posts, harness.active_subscriptions(lakehouse))
    got = harness.matches_of(lakehouse)
    assert all(c == 1 for c in got.values()), "a match written twice"
    assert set(got) <= set(expected), "shedding produced a match brute force does not"
    return got, expected


def _committed(lakehouse) -> list[dict]:
    rows = lakehouse.read_arrow("stream.batches").to_pylist()
    return sorted((r for r in rows if r["stage"] == "committed"), key=lambda r: r["batch_id"])


def test_a_forced_cap_records_limit_notices(lakehouse, scene, tmp_path, capsys):
    landing = scene
    harness.publish_learned(lakehouse, landing, 6, "hash", split=False)  # wide spreads
    posts = landing.write(400) + landing.write(400)
    args = harness.stream_config(
        tmp_path,
        landing,
        available_now=True,
        shedding="subscription",
        max_spread=1.0,
    )
    query, _ = start(lakehouse.spark, lakehouse, args)
    query.awaitTermination()
    assert query.exception() is None
    got, expected = _subset_of_brute_force(lakehouse, landing, posts)
    assert 0 < sum(got.values()) < sum(expected.values())  # it shed, and it kept some
    harness.check_deliveries(lakehouse)
    batches = _committed(lakehouse)
    assert len(batches) == 2
    for row in batches:
        assert (row["shedding"], row["shedding_level"], row["max_spread"]) == ("subscription", 1, 1)
        # a capped post sheds one pair or more
        assert 0 < row["capped_posts"] <= row["shed_pairs"] == sum(row["shed_pairs_by_matcher"])
        assert len(row["shed_pairs_by_matcher"]) == 6
        # a cap of 1: every routed post keeps exactly one pair
        assert row["routed_pairs"] <= row["posts"]
    deliveries = lakehouse.read_arrow("deliveries").to_pylist()
    levels = Counter(r["shedding_level"] for r in deliveries)
    assert set(levels) <= {0, 1} and levels[1] > 0
    # a post delivered with level 0 lost no matcher: all its matches are there
    full = {r["post_id"] for r in deliveries if r["shedding_level"] == 0}
    for post in full:
        assert {s for (p, s) in got if p == post} == {s for (p, s) in expected if p == post}
    assert stream.run(StreamStatus(last=5), lakehouse) == 0
    out = capsys.readouterr().out
    assert "limit notice" in out and "pairs not forwarded" in out


def test_a_replayed_batch_sheds_the_same_pairs_and_drops_the_same_posts(lakehouse, scene, tmp_path):
    landing = scene
    harness.publish_learned(lakehouse, landing, 6, "hash", split=False)
    posts = [landing.write(300) for _ in range(3)]
    checkpoint = tmp_path / "checkpoint"
    # a cap and a drop level: 30% of the posts go, the least valuable by the learned yields
    extra = ["--shedding", "yield", "--max-spread", "1.5", "--drop-fraction", "0.3"]
    # killed in batch 1 after `matches` is committed and before `deliveries` is: the
    # restart replays batch 1, and its deliveries must be those of the committed matches
    # (a replay that dropped other posts would deliver other matches)
    killed = harness.run_stream_process(lakehouse, landing, checkpoint, "after-matches:1", extra)
    assert killed.returncode != 0
    final = harness.run_stream_process(lakehouse, landing, checkpoint, None, extra)
    assert final.returncode == 0, final.stderr[-2000:]
    got, expected = _subset_of_brute_force(lakehouse, landing, [p for f in posts for p in f])
    assert sum(got.values()) < sum(expected.values())
    harness.check_deliveries(lakehouse)
    saved = sorted((checkpoint / "s3tm_shedding").glob("yield-weights-*.npz"))
    assert [p.name for p in saved] == [f"yield-weights-{b}.npz" for b in range(3)]
    committed = _committed(lakehouse)
    assert [r["shedding_level"] for r in committed] == [2, 2, 2]
    for row in committed:  # round(0.3 x 300) of each block's posts, the exempt sample kept
        assert 0.2 * 300 < row["dropped_posts"] <= 0.3 * 300
        assert row["posts"] + row["dropped_posts"] + row["quarantined"] == 300


def test_the_controller_raises_the_level_under_a_backlog(lakehouse, scene, tmp_path):
    landing = scene
    harness.publish_learned(lakehouse, landing, 6, "hash", split=False)
    posts = [p for _ in range(6) for p in landing.write(200)]
    # a budget of a millisecond of work: once capacity is measured (after the warm-up
    # batches), the landed backlog is overload
    args = harness.stream_config(tmp_path, landing, shedding="subscription", latency_budget=0.001)
    harness.run_to_end(lakehouse, args)
    batches = _committed(lakehouse)
    assert len(batches) == 6
    levels = [r["shedding_level"] for r in batches]
    assert levels[:2] == [0, 0]  # no capacity measured yet (the first batch warms up)
    assert max(levels) > 0
    assert all(r["backlog_posts"] is not None for r in batches[1:])
    assert batches[3]["backlog_posts"] >= 200
    _subset_of_brute_force(lakehouse, landing, posts)
    harness.check_deliveries(lakehouse)
