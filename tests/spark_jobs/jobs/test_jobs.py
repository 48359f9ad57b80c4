"""The Spark jobs on small generated data: each transform against a direct computation,
the quarantine, idempotent re-runs, and the chain up to publish, margin and rollback."""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import Row

from core.corpus.synthetic import SyntheticCorpusSpec
from core.errors import InputDataError, InvalidArgumentError
from core.stream.costs import DEFAULT_COSTS, posts_per_second
from core.text import normalize
from schemas import table
from spark_jobs.jobs import evaluate, graph, learn, normalise, place, publish
from spark_jobs.lake.corpus_files import write_demo_corpus
from spark_jobs.lake.routing_store import published_version, versions
from spark_jobs.lake.subscription_store import (
    active_subscriptions,
    add_subscriptions,
    cancel_subscriptions,
)
from tests.spark_jobs.jobs.chain import run_chain
from tests.support.holdout import held_out_words
from tests.support.ingest import ingest_landing

TEXTS = [
    "Running to the White House!! http://t.co/x @user #news",
    "I don't like Obama's 2013 policies &amp; it's café time",
    "connected connecting connection",
    "the and of",  # only stop words: quarantined by normalise
    "Ünïcode wörds and numbers 42",
]


def test_normalise_agrees_with_core_word_for_word(spark):
    now = dt.datetime(2026, 1, 1)
    bronze = spark.createDataFrame(
        [
            {
                "post_id": f"p{i}",
                "text": t,
                "source": None,
                "created_at": None,
                "event_day": dt.date(2026, 1, 1),
                "ingest_batch": "1",
                "source_file": "f",
                "line_number": i,
                "ingested_at": now,
            }
            for i, t in enumerate(TEXTS)
        ],
        table("bronze.posts").spark_schema(),
    )
    silver, empty = normalise.normalise(
        bronze, spark.createDataFrame([], "post_id string"), rate=1.0, seed=0, batch="b", now=now
    )
    got = {r.post_id: r.words for r in silver.collect()}
    expected = {f"p{i}": normalize(t) for i, t in enumerate(TEXTS) if normalize(t)}
    assert got == expected
    assert [(r.post_id, r.reason) for r in empty.collect()] == [
        ("p3", "no words after normalisation")
    ]
    assert all(r.n_words == len(r.words) for r in silver.collect())


def test_sampling_is_deterministic_and_close_to_the_rate(spark):
    ids = spark.createDataFrame([Row(post_id=f"post-{i}") for i in range(4000)])
    a = {r.post_id for r in ids.where(normalise.sample_filter(0.25, 3)).collect()}
    b = {r.post_id for r in ids.where(normalise.sample_filter(0.25, 3)).collect()}
    assert a == b and 800 < len(a) < 1200
    with pytest.raises(InvalidArgumentError, match="sample rate"):
        normalise.sample_filter(0.0, 1)


def _held_out_brute_force(lakehouse) -> tuple[int, int]:
    """The held-out posts and the distinct (post, subscription) pairs among them by set
    containment."""
    posts = held_out_words(lakehouse.read("silver.posts").select("post_id", "words").toArrow())
    subs = [set(r["words"]) for r in active_subscriptions(lakehouse)]
    return len(posts), sum(sub <= post for post in posts for sub in subs)


def _landing(tmp_path: Path, posts: int = 1500) -> Path:
    landing = tmp_path / "landing"
    write_demo_corpus(
        landing / "demo.jsonl.gz", SyntheticCorpusSpec(n_posts=posts, n_words=2000, seed=4), days=3
    )
    (landing / "bad.jsonl").write_bytes(
        b'{"id":"b1","text":"hello world"}\n{broken\n{"id":"b1","text":"again"}\n'
        b'{"id":"b2","text":"  "}\n\xff\xfe\n{"id":"b3","text":"x","created_at":"soon"}\n'
        b'{"id":"b4","text":"white house","created_at":"Wed Oct 10 20:19:24 +0000 2018"}\n'
    )
    return landing


def test_ingest_quarantines_with_reasons_and_reruns_add_nothing(lakehouse, tmp_path, capsys):
    landing = _landing(tmp_path, posts=300)
    assert ingest_landing(lakehouse, landing, 1) == 0
    bronze = lakehouse.read("bronze.posts")
    assert bronze.count() == 302
    quarantine = {
        (r.reason.split(" (")[0], r.line_number)
        for r in lakehouse.read("silver.posts_quarantine").collect()
    }
    assert quarantine == {
        ("invalid JSON", 2),
        ("duplicate id", 3),
        ("empty text", 4),
        ("not UTF-8", 5),
        ("unparseable created_at", 6),
    }
    twitter = bronze.where("post_id = 'b4'").collect()[0]
    assert twitter.created_at == dt.datetime(2018, 10, 10, 20, 19, 24)
    assert twitter.event_day == dt.date(2018, 10, 10)
    no_time = bronze.where("post_id = 'b1'").collect()[0]
    assert no_time.event_day == dt.date(2026, 2, 1) and no_time.line_number == 1
    capsys.readouterr()
    committed = lakehouse.version("bronze.posts")
    assert ingest_landing(lakehouse, landing, 2) == 0  # same files, new batch: skipped
    assert ingest_landing(lakehouse, landing, 1) == 0  # same batch again: skipped
    assert lakehouse.read("bronze.posts").count() == 302
    assert lakehouse.read("silver.posts_quarantine").count() == 5
    assert lakehouse.version("bronze.posts") == committed  # no commit at all


def test_graph_tables_equal_a_direct_count(spark, lakehouse):
    day = dt.date(2026, 1, 5)
    posts = [["a", "b", "c"], ["a", "c"], ["b"], ["a", "b", "c", "d"], [], ["b", "d"]]
    silver = spark.createDataFrame(
        [
            {
                "post_id": f"p{i}",
                "words": w,
                "n_words": len(w),
                "event_day": day,
                "created_at": None,
                "sample_rate": 1.0,
            }
            for i, w in enumerate(posts)
        ],
        table("silver.posts").spark_schema(),
    )
    edges = sorted((r.post_id, r.word) for r in graph.post_words(silver).collect())
    assert edges == sorted((f"p{i}", w) for i, ws in enumerate(posts) for w in ws)
    stats = {
        r.word: (r.post_frequency, r.cofrequency_sum) for r in graph.word_stats(silver).collect()
    }
    freq = Counter(w for ws in posts for w in ws)
    cofreq = Counter()
    for ws in posts:
        for x, _y in itertools.permutations(ws, 2):
            cofreq[x] += 1
    assert stats == {w: (freq[w], cofreq[w]) for w in freq}
    pairs = {(r.word_a, r.word_b): r["count"] for r in graph.cooccurrence(silver).collect()}
    expected = Counter(p for ws in posts for p in itertools.combinations(sorted(ws), 2))
    assert pairs == dict(expected)


def test_chain_publishes_then_margin_and_rollback(lakehouse, tmp_path, capsys):
    landing = _landing(tmp_path)
    # Subscriptions first, so learning uses their words and placement has work to do.
    assert ingest_landing(lakehouse, landing, 1) == 0
    assert normalise.run(normalise.NormaliseConfig(sample_rate=1.0, seed=0), lakehouse) == 0
    words = lakehouse.read("silver.posts").limit(40).collect()
    ids = add_subscriptions(lakehouse, [" ".join(r.words[:2]) for r in words], "alice")
    assert len(active_subscriptions(lakehouse)) == 40
    assert run_chain(lakehouse, landing, batch=2) == 0
    first = published_version(lakehouse)
    assert first == 1
    meta = versions(lakehouse)[0]
    evaluation = json.loads(meta["metrics"])["evaluation"]
    held_posts, held_matches = _held_out_brute_force(lakehouse)
    assert (evaluation["posts"], evaluation["candidate"]["matches"]) == (held_posts, held_matches)
    assert json.loads(meta["validation"])["success"]
    assert meta["subscribed_words"] == sorted({w for r in words for w in r.words[:2]})
    placements = lakehouse.read("routing.placements").where("routing_version = 1")
    assert {r.sub_id for r in placements.collect()} == set(ids)
    # A hash candidate must beat SALB by 5%: it does not, so version 1 stays published.
    assert (
        learn.run(
            learn.LearnConfig(
                nodes=8,
                algorithm="hash",
                split=False,
                start=None,
                end=None,
                holdout_fraction=0.2,
                subscribed="auto",
                seed=0,
            ),
            lakehouse,
        )
        == 0
    )
    assert place.run(place.PlaceConfig(version=None, unit_cost=True, seed=0), lakehouse) == 0
    assert evaluate.run(evaluate.EvaluateConfig(version=None, day=None, seed=0), lakehouse) == 0
    assert publish.validate_version(lakehouse, 2)["success"]
    outcome = publish.publish(lakehouse, 2, margin=0.05)
    assert outcome["changed"] is False and "below the required" in outcome["reason"]
    # with subscriptions both versions were replayed: the gate went by the stream's cost
    # model over their counts, and counted work and the posts-only model stand beside it
    second = json.loads(versions(lakehouse)[1]["metrics"])["evaluation"]
    assert outcome["basis"] == "stream model"
    assert second["relative_stream_throughput_vs_published"] < 1.05
    # the figures the gate read: the stream's predicted posts/s of each mapping, from its
    # copies and counted work per matcher (no stream ran here: the model's defaults)
    candidate, published = second["candidate"], second["published"]
    assert second["stream_costs"]["source"] == "defaults"
    for measured in (candidate, published):
        assert measured["stream_posts_per_s"] == pytest.approx(
            posts_per_second(
                DEFAULT_COSTS,
                second["posts"],
                measured["matches"],
                measured["matcher_copies"],
                measured["matcher_work"],
            )
        )
        assert sum(measured["matcher_copies"]) == pytest.approx(
            measured["model"]["spread"] * second["posts"]
        )
    assert second["relative_stream_throughput_vs_published"] == pytest.approx(
        candidate["stream_posts_per_s"] / published["stream_posts_per_s"]
    )
    assert candidate["work_throughput"] == pytest.approx(
        second["posts"] / max(candidate["matcher_work"])
    )
    assert second["relative_model_throughput_vs_published"] == pytest.approx(
        candidate["model"]["throughput"] / published["model"]["throughput"]
    )
    assert published_version(lakehouse) == 1
    # Without a margin it can be published, and rolled back atomically.
    assert publish.publish(lakehouse, 2)["changed"]
    assert [v["status"] for v in versions(lakehouse)] == ["retired", "published"]
    assert publish.publish(lakehouse, 1)["changed"]
    assert [v["status"] for v in versions(lakehouse)] == ["published", "retired"]
    assert cancel_subscriptions(lakehouse, ids[:10]) == 10
    assert len(active_subscriptions(lakehouse)) == 30
    with pytest.raises(InputDataError, match="unknown subscription"):
        cancel_subscriptions(lakehouse, [9999])


def test_jobs_fail_clearly_without_inputs(lakehouse, tmp_path):
    with pytest.raises(InputDataError, match="landing directory not found"):
        ingest_landing(lakehouse, tmp_path / "nope", 1)
    with pytest.raises(InvalidArgumentError, match="run ingest first"):
        normalise.run(normalise.NormaliseConfig(sample_rate=1.0, seed=0), lakehouse)
    with pytest.raises(InputDataError, match="run the graph job first"):
        learn.learn_version(
            lakehouse,
            learn.LearnConfig(nodes=4, algorithm="salb", holdout_fraction=0.2, subscribed="all"),
        )
    with pytest.raises(InputDataError, match="no validated"):
        publish.publish(lakehouse, None)


def test_generate_topic_subscriptions_with_spark_lda(spark, lakehouse):
    from spark_jobs.jobs import subscriptions

    rows = []
    topics = [["alpha", "beta", "gamma", "delta"], ["red", "green", "blue", "black"]]
    for i in range(300):
        words = sorted(set(topics[i % 2][: 2 + i % 3]))
        rows.append(
            {
                "post_id": f"p{i}",
                "words": words,
                "n_words": len(words),
                "event_day": dt.date(2026, 1, 1),
                "created_at": None,
                "sample_rate": 1.0,
            }
        )
    lakehouse.write(
        spark.createDataFrame(rows, table("silver.posts").spark_schema()), "silver.posts"
    )
    code = subscriptions.run(
        subscriptions.SubscribeTopics(
            count=50,
            topics=2,
            words_per_topic=3,
            max_iter=5,
            subscribers=5,
            seed=1,
        ),
        lakehouse,
    )
    assert code == 0
    active = active_subscriptions(lakehouse)
    assert len(active) == 50
    vocabulary = {w for t in topics for w in t}
    assert all(1 <= len(r["words"]) <= 3 and set(r["words"]) <= vocabulary for r in active)
    assert all(r["words"] == sorted(r["words"]) for r in active)
    assert len({r["subscriber"] for r in active}) <= 5


def test_window_days_keeps_the_last_days_present(spark, lakehouse, capsys):
    days = [dt.date(2026, 3, d) for d in (1, 2, 5)]
    rows = [
        {
            "post_id": f"p{i}-{d}",
            "words": ["alpha", f"w{i}"],
            "n_words": 2,
            "event_day": d,
            "created_at": None,
            "sample_rate": 1.0,
        }
        for d in days
        for i in range(30)
    ]
    lakehouse.write(
        spark.createDataFrame(rows, table("silver.posts").spark_schema()), "silver.posts"
    )
    assert graph.run(graph.GraphConfig(window_days=2, cooccurrence=False), lakehouse) == 0
    kept = {r.day for r in lakehouse.read("gold.post_words").select("day").distinct().collect()}
    assert kept == {dt.date(2026, 3, 5)}  # the last 2 calendar days present: 4th and 5th
    assert graph.run(graph.GraphConfig(window_days=0, cooccurrence=False), lakehouse) == 0
    capsys.readouterr()
    assert (
        learn.run(
            learn.LearnConfig(
                nodes=2,
                algorithm="salb",
                split=False,
                start=None,
                end=None,
                window_days=4,
                holdout_fraction=0.0,
                subscribed="all",
                seed=0,
            ),
            lakehouse,
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["start"] == "2026-03-02" and summary["training_posts"] == 60


def _learn_incremental(lakehouse, nodes=8, **overrides):
    arguments = {
        "nodes": nodes,
        "algorithm": "salb2",
        "holdout_fraction": 0.2,
        "incremental": True,
        "max_moved": 0.1,
        "full_remap_gain": 10.0,  # a full remap never wins here unless forced
        "live_hot_words": 0.0,
        **overrides,
    }
    return learn.learn_version(lakehouse, learn.LearnConfig(**arguments))


def test_incremental_remap_refines_the_published_version(lakehouse, tmp_path):
    landing = _landing(tmp_path)
    assert ingest_landing(lakehouse, landing, 1) == 0
    assert normalise.run(normalise.NormaliseConfig(sample_rate=1.0, seed=0), lakehouse) == 0
    words = lakehouse.read("silver.posts").limit(60).collect()
    add_subscriptions(lakehouse, [" ".join(r.words[:2]) for r in words], "alice")
    assert graph.run(
        graph.GraphConfig(cooccurrence=False), lakehouse
    ) == 0  # fmt: skip
    # nothing published yet: the incremental remap falls back to a full one, and says why
    first = _learn_incremental(lakehouse)
    assert (first["remap"], first["remap_reason"]) == ("full", "no published version")
    assert place.run(place.PlaceConfig(version=None, unit_cost=True, seed=0), lakehouse) == 0
    assert publish.publish(lakehouse, first["routing_version"], skip_validation=True)["changed"]
    # a second window (here: the same posts) refines version 1 within the budget
    second = _learn_incremental(lakehouse)
    assert second["remap"] == "incremental" and second["from_version"] == 1
    assert second["move_budget"] == 6  # 10% of 60 subscriptions
    # judged on the window's held-out posts, which neither remap learned from
    assert second["remap_judged_on"] == "held-out posts"
    assert second["judged_posts"] == _held_out_brute_force(lakehouse)[0]
    full_judged, judged = second["full_judged_throughput"], second["incremental_judged_throughput"]
    # posts over the busiest matcher's: at least 1, as a matcher meets each post at most once
    assert min(full_judged, judged) >= 1.0
    assert second["full_remap_gain"] == pytest.approx(full_judged / judged - 1.0, abs=1e-3)
    assert second["moved_subscription_words"] <= 6
    _, _, placed = place.place_version(lakehouse, second["routing_version"], unit_cost=True)
    assert placed["previous_version"] == 1
    assert placed["moved_subscriptions"] <= 6
    metrics = json.loads(versions(lakehouse)[-1]["metrics"])
    assert metrics["placement"]["moved_subscriptions"] == placed["moved_subscriptions"]
    params = json.loads(versions(lakehouse)[-1]["params"])
    assert params["remap"] == "incremental" and params["label"] == "salb2"
    # a full remap (another seed: other matcher ids) is renamed onto version 1's ids
    full = _learn_incremental(lakehouse, incremental=False, seed=3)
    assert full["remap"] == "full" and full["aligned_to_version"] == 1
    assert full["aligned_kept_subscription_words"] >= full["unaligned_kept_subscription_words"]
    assert json.loads(versions(lakehouse)[-1]["params"])["aligned_to_version"] == 1
    # a changed N cannot start from version 1; a full remap that gains enough wins
    changed = _learn_incremental(lakehouse, nodes=4)
    assert (changed["remap"], changed["remap_reason"]) == ("full", "N changed (8 -> 4)")
    forced = _learn_incremental(lakehouse, full_remap_gain=0.0, max_moved=0.0)
    assert forced["remap"] == ("full" if forced["full_remap_gain"] > 0 else "incremental")
    # a window without held-out posts is judged on its training posts, and says so
    unjudged = _learn_incremental(lakehouse, holdout_fraction=0.0)
    assert unjudged["remap_judged_on"] == "training posts (no held-out post)"
    with pytest.raises(InvalidArgumentError, match="salb2"):
        _learn_incremental(lakehouse, algorithm="gFCL", split=False)
