"""``bench subscriptions``: every step of the platform measured per size, the stream's
figures and the changes' cost (a small run on generated posts in the spark tier); what the
command refuses, it refuses before any work."""

from __future__ import annotations

import csv
import subprocess
import sys
import types
from typing import Any

import pytest

from benchmarks import subscriptions
from benchmarks.subscriptions import StepFigures
from core.corpus.synthetic import SyntheticCorpusSpec
from core.errors import InvalidArgumentError
from spark_jobs.lake.corpus_files import write_demo_corpus
from spark_jobs.stream.batch_log import BatchFigures, CommittedBatch, SubscriptionMemory

REMAP_STEPS = ("graph", "learn", "place", "validate", "evaluate", "publish")
STEPS = ("register", "graph", "learn", "place", "validate", "evaluate", "publish", "stream")


def _config(tmp_path, **changes) -> subscriptions.SubscriptionsBenchConfig:
    corpus = tmp_path / "posts.jsonl.gz"
    if not corpus.exists():
        write_demo_corpus(corpus, SyntheticCorpusSpec(n_posts=4_000, seed=3), days=3)
    values = {
        "sizes": (1_000,),
        "nodes": 4,
        "batch_posts": 120,
        "changes": 200,
        "corpus": corpus,
        "master": "local[2]",
        "out": tmp_path / "out",
    }
    return subscriptions.SubscriptionsBenchConfig(**{**values, **changes})


@pytest.mark.spark
def test_every_step_is_measured_per_size_and_the_changes_reach_the_stream(tmp_path, capsys):
    rows = subscriptions.run(_config(tmp_path))
    assert [r["subscriptions"] for r in rows] == [1_000]
    for row in rows:
        assert all(row[f"{step} s"] >= 0 for step in STEPS)
        # the remap's steps ran as processes of their own: each its driver's and JVM's peak
        remap = {step: row[f"{step} driver MiB"] for step in REMAP_STEPS}
        assert row["remap driver peak MiB"] == max(remap.values())
        assert remap[row["remap peak step"]] == row["remap driver peak MiB"]
        # a Python driver with pyspark and numpy imported holds more than 50 MiB
        assert min(remap.values()) > 50 and row["remap JVM peak MiB"] > 50
        # the steady batches' posts went through within the stream step's wall time
        steady = subscriptions.STREAM_BATCHES - 1 - len(subscriptions.CHANGED_BATCHES)
        assert row["posts/s"] * row["stream s"] >= steady * row["posts/batch"] == steady * 120
        assert row["matches/post"] >= 0  # whole posts rarely match
        # the changes went through the registry while the stream ran, and reached the
        # batch after them: the broadcast carries them beside the base
        assert row["change rounds"] == 3
        changes_s = row["changes register s"] + row["changes cancel s"] + row["changes task s"]
        assert changes_s <= row["stream s"]
        assert 0 < row["changes broadcast MB"] <= row["broadcast MB"]
        # the changes' work includes the tasks' part of it, a share of a steady batch
        worst, median = (row[f"changes work % of batch{k}"] for k in (", worst round", ""))
        assert worst >= median and worst >= 0.95 * 100 * row["changes task s"] / row["batch s"]
        assert row["changes % of batch (wall), worst round"] >= row["changes % of batch (wall)"]
    with (tmp_path / "out" / "subscriptions.csv").open() as table:
        assert [int(r["subscriptions"]) for r in csv.DictReader(table)] == [1_000]
    printed = capsys.readouterr().out
    assert "the platform by subscriptions" in printed and "changes sync s" in printed


@pytest.mark.spark
def test_topic_subscriptions_without_the_stream_measure_the_remap_and_its_gate(tmp_path, capsys):
    """``--workload topic --no-stream``: the remap's steps and the gate's verdict on the
    figure it read (hash routing is the floor: published only x1.02 above it), no stream
    columns, the table in its own file."""
    from core.remap_options import DEFAULT_MARGIN

    rows = subscriptions.run(_config(tmp_path, workload="topic", stream=False))
    (row,) = rows
    assert row["workload"] == "topic" and row["subscriptions"] == 1_000
    assert all(f"{step} s" in row for step in STEPS if step != "stream")
    assert "stream s" not in row and "posts/s" not in row
    gain = row["x hash (counted work)"]
    assert (row["published"] == 1) == (gain >= 1 + DEFAULT_MARGIN), row
    with (tmp_path / "out" / "subscriptions-topic.csv").open() as table:
        assert [r["workload"] for r in csv.DictReader(table)] == ["topic"]
    printed = capsys.readouterr().out
    assert "LDA, 100 topics x 5 words" in printed and "no stream: --no-stream" in printed


def test_sizes_below_the_changes_are_refused_before_any_work(tmp_path):
    with pytest.raises(InvalidArgumentError, match="at least 300: each of the 3 rounds"):
        subscriptions.run(_config(tmp_path, sizes=(299,), changes=200))


def test_the_command_says_when_the_real_tweets_are_not_there(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "s3tm.cli.main", "bench", "subscriptions", "--corpus",
         str(tmp_path / "absent.jsonl.gz")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert "real timed tweets are not there" in done.stderr


@pytest.mark.parametrize("cores", [2, 8, 32, 128])
def test_the_projection_is_amdahls_law_at_its_bounds(cores):
    serial, per_post = 0.3, 20e-6
    p = subscriptions.project(serial, per_post, cores)

    def batch_seconds(posts: int, on: int) -> float:
        return serial + per_post * posts / on

    def efficiency(posts: int) -> float:
        return batch_seconds(posts, 1) / (cores * batch_seconds(posts, cores))

    # the largest batch fits the trigger, one more post does not
    assert batch_seconds(p.max_posts, cores) <= 5.0 < batch_seconds(p.max_posts + 2, cores)
    assert p.min_posts is not None and p.min_posts <= p.max_posts
    assert efficiency(p.min_posts) >= 0.8 - 1e-9
    if p.min_posts > 1:
        assert efficiency(p.min_posts - 1) < 0.8
    assert p.efficiency == pytest.approx(efficiency(p.max_posts), abs=1e-3)
    assert p.posts_per_s == int(p.max_posts / batch_seconds(p.max_posts, cores))


def test_a_serial_part_past_the_trigger_share_rules_the_efficiency_out():
    # E >= 0.8 within 5 s needs the serial part under c / (c - 1) seconds
    assert subscriptions.project(1.2, 20e-6, 32).posts_per_s is None
    assert subscriptions.project(0.9, 20e-6, 32).posts_per_s is not None
    with pytest.raises(InvalidArgumentError):
        subscriptions.project(0.1, 0.0, 8)


def test_the_work_imbalance_is_the_busiest_matcher_over_the_mean():
    assert subscriptions._imbalance([1, 1, 2]) == 1.5
    assert subscriptions._imbalance([3, 3]) == 1.0
    assert subscriptions._imbalance([]) is None and subscriptions._imbalance([0, 0]) is None


def _batch(batch_id: int, *, total: float, sync: float, change: float) -> CommittedBatch:
    figures = BatchFigures(
        subscriptions=1_000, posts=100 + batch_id, routed_pairs=300, capped_posts=0,
        dropped_posts=0, shed_pairs=0, shed_pairs_by_matcher=None, matches=10 * batch_id,
        deliveries=0, written_bytes=0, routed_bytes=0, matched_bytes=0, quarantined=0,
        seconds_sync=sync, seconds_route=0.25, seconds_match=0.5, seconds_dispatch=0.125,
        seconds_spark=1.0, seconds_commit=0.0625, seconds_total=total,
    )  # fmt: skip
    memory = SubscriptionMemory(
        n_matchers=4, base_bytes=2_000_000 * (batch_id + 1), changes_bytes=30_000 * batch_id,
        broadcast_bytes=50_000 + batch_id, workers=2, worker_matchers_max=2,
        worker_bytes_max=7_000_000, change_seconds=change,
    )  # fmt: skip
    return CommittedBatch(batch_id, 2, False, [], figures, memory)


def test_each_figure_of_a_row_is_computed_from_the_batches_as_documented(tmp_path) -> None:
    """``_row`` on batches small enough to know every answer: the stream's figures over the
    steady batches (not the first, not those that met changes), the changes' figures from
    the changed batches and the rounds, the peaks from the remap's own processes."""
    steps: Any = types.SimpleNamespace(
        done=[
            StepFigures("register", 1.5, 90.0, 400.0, None),
            *(
                StepFigures(step, 2.0 + k, 100.0 + 50 * k, 500.0 + k, 60.0, own_process=True)
                for k, step in enumerate(REMAP_STEPS)
            ),
            StepFigures("stream", 30.0, 120.0, 900.0, 80.0),
        ]
    )
    # batch 0 warms up; 3, 5 and 7 meet the changes; 1, 2, 4, 6 and 8 are steady
    totals = {0: 9.0, 1: 2.0, 2: 2.0, 3: 3.0, 4: 4.0, 5: 2.5, 6: 2.0, 7: 2.0, 8: 2.0}
    syncs = {3: 0.4, 5: 0.3, 7: 0.1}
    changes = {3: 0.2, 4: 0.1, 5: 0.05, 7: 0.3, 8: 0.1}
    batches = [
        _batch(b, total=totals[b], sync=syncs.get(b, 0.2), change=changes.get(b, 0.0))
        for b in range(subscriptions.STREAM_BATCHES)
    ]
    rounds = [
        {"register_s": 0.5, "cancel_s": 0.25, "follower_s": 0.1},
        {"register_s": 0.7, "cancel_s": 0.35, "follower_s": 0.3},
        {"register_s": 0.6, "cancel_s": 0.45, "follower_s": 0.2},
    ]
    evaluation: Any = {
        "relative_work_throughput_vs_hash": 1.23456,
        "candidate": {"matcher_work": [3, 1, 1, 1]},
        "hash": {"matcher_work": [2, 2, 2, 2]},
    }
    summary: Any = {"published": 2}
    row = subscriptions._row(1_000, _config(tmp_path), steps, batches, rounds, evaluation, summary)
    steady = [1, 2, 4, 6, 8]
    posts = sum(100 + b for b in steady)  # 521
    matches = sum(10 * b for b in steady)  # 210
    seconds = sum(totals[b] for b in steady)  # 12.0
    assert row["posts/s"] == round(posts / seconds) == 43
    assert row["matches/post"] == round(matches / posts, 1) == 0.4
    assert row["matches/s"] == round(matches / seconds) == 18
    assert row["match task us/match"] == round(1e6 * 0.5 * 5 / matches, 3)
    assert row["route task us/post"] == round(1e6 * 0.25 * 5 / posts, 2)
    assert row["task us/post"] == round(1e6 * (0.25 + 0.5 + 0.125) * 5 / posts, 2)
    assert row["batch s"] == 2.0 and row["plan+sync s/batch"] == 0.2
    assert row["serial s/batch"] == 0.263  # 0.2 + 0.0625, the median of equal batches
    # memory as the last batch held it; the changes' broadcast as the first changed batch's
    assert row["base MB"] == 18.0 and row["broadcast MB"] == 0.05
    assert row["worker held MB"] == 7.0 and row["changes broadcast MB"] == 0.09
    assert row["change rounds"] == 3
    assert (row["changes register s"], row["changes cancel s"]) == (0.6, 0.35)
    assert row["changes follower s"] == 0.2 and row["changes sync s"] == 0.3
    # the tasks' change seconds summed from a changed batch to the next one: 0.3, 0.05, 0.4
    assert row["changes task s"] == 0.3
    # over the steady median batch (2.0 s) and sync (0.2 s): (0.2 + 0.3), (0.1 + 0.05),
    # (0 + 0.4) seconds of work; 1.0, 0.5 and 0.0 seconds of wall
    assert row["changes work % of batch"] == 20.0
    assert row["changes work % of batch, worst round"] == 25.0
    assert row["changes % of batch (wall)"] == 25.0
    assert row["changes % of batch (wall), worst round"] == 50.0
    assert row["sync % of batch"] == 5.0
    # the remap's steps ran as processes of their own; register and the stream did not
    assert row["remap driver peak MiB"] == 100.0 + 50 * (len(REMAP_STEPS) - 1)
    assert row["remap peak step"] == REMAP_STEPS[-1]
    assert row["remap JVM peak MiB"] == 500.0 + len(REMAP_STEPS) - 1
    assert row["register s"] == 1.5 and row["stream s"] == 30.0
    assert row["worker peak MiB"] == 80.0
    assert row["x hash (counted work)"] == 1.235
    assert (row["work imbalance"], row["hash work imbalance"]) == (2.0, 1.0)
    assert row["published"] == 2
