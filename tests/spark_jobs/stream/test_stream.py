"""The streaming matcher on real, small, bounded Spark streams.

The reference is brute force: a post matches a subscription when the subscription's words
are a subset of the post's normalised words. ``matches`` must equal it exactly (no missing,
no extra, no duplicate rows) through version switches, crashes and subscription changes;
``deliveries`` must be the same matches grouped per subscriber, once each.
"""

from __future__ import annotations

import json
from argparse import Namespace
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pytest

from core.corpus.synthetic import SyntheticCorpusSpec, generate_corpus, render_post_text
from core.learn import learn_mapping
from core.text import normalize
from spark_jobs.jobs.place import place_version
from spark_jobs.jobs.publish import publish
from spark_jobs.lake.matches import derived_matches
from spark_jobs.lake.routing_store import register_table
from spark_jobs.lake.subscription_store import (
    add_subscriptions,
    cancel_subscriptions,
    register_word_sets,
    registry,
)
from spark_jobs.stream import job as stream


class Landing:
    """Posts written to a landing directory one file at a time, remembered for the reference."""

    def __init__(self, root: Path, seed: int = 0) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.rng = np.random.default_rng(seed)
        self.corpus = generate_corpus(
            SyntheticCorpusSpec(
                n_posts=4000, n_words=400, n_topics=10, words_per_topic=30, seed=seed
            )
        )
        self.next_post = 0
        self.files = 0
        self.words: dict[str, set[str]] = {}  # post id -> normalised words

    def write(
        self, n_posts: int, *, bad: list[str] | None = None, texts: tuple[str, ...] = ()
    ) -> list[str]:
        lines, ids = [], []
        for k, text in enumerate(texts):
            post_id = f"t{self.files:04d}-{k}"
            lines.append(json.dumps({"id": post_id, "text": text}))
            self.words[post_id] = set(normalize(text))
            ids.append(post_id)
        for _ in range(n_posts):
            p = self.next_post % self.corpus.n_posts
            post_id = f"p{self.next_post:06d}"
            self.next_post += 1
            words = self.corpus.vocabulary[
                self.corpus.indices[self.corpus.indptr[p] : self.corpus.indptr[p + 1]]
            ]
            text = render_post_text(list(words), self.rng)
            lines.append(json.dumps({"id": post_id, "text": text}))
            self.words[post_id] = set(normalize(text))
            ids.append(post_id)
        lines += bad or []
        # write then rename, as a producer must, so the source never sees half a file
        tmp = self.root / f".part-{self.files:04d}"
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
        tmp.rename(self.root / f"posts-{self.files:04d}.jsonl")
        self.files += 1
        return ids


def _subscription_sets(landing: Landing, n: int, seed: int) -> list[list[str]]:
    """Tweet-based word sets (1-3 words of a post), so many of them match."""
    rng = np.random.default_rng(seed)
    corpus = landing.corpus
    out = []
    for _ in range(n):
        p = int(rng.integers(corpus.n_posts))
        words = corpus.vocabulary[corpus.indices[corpus.indptr[p] : corpus.indptr[p + 1]]]
        k = int(rng.integers(1, min(3, len(words)) + 1))
        out.append(sorted({normalize(w)[0] for w in rng.choice(words, k, replace=False)}))
    return out


def _publish_learned(
    lakehouse, landing: Landing, n_matchers: int, algorithm: str, split: bool
) -> int:
    learned = learn_mapping(landing.corpus, n_matchers, algorithm, split=split, seed=1)
    version = register_table(lakehouse, learned.table, algorithm=algorithm)
    place_version(lakehouse, version, unit_cost=True)
    assert publish(lakehouse, version, skip_validation=True)["changed"]
    return version


def _args(tmp_path: Path, landing: Landing, **extra) -> Namespace:
    values = {
        "source": "files",
        "landing": str(landing.root),
        "checkpoint": str(tmp_path / "checkpoint"),
        "query_name": "test_matcher",
        "max_files_per_trigger": 1,
        "trigger_seconds": 0.0,
        "available_now": False,
        "seed": 0,
    }
    values.update(extra)
    return Namespace(**values)


def _expected(landing: Landing, post_ids, subs: dict[int, set[str]]) -> Counter:
    return Counter(
        (post, sub)
        for post in post_ids
        for sub, words in subs.items()
        if words <= landing.words[post]
    )


def _active(lakehouse) -> dict[int, set[str]]:
    rows = lakehouse.read_arrow("subscriptions.registry").to_pylist()
    return {r["sub_id"]: set(r["words"]) for r in rows if r["cancelled_at"] is None}


def _matches(lakehouse) -> Counter:
    rows = lakehouse.read_arrow("matches")
    return Counter(zip(rows["post_id"].to_pylist(), rows["sub_id"].to_pylist(), strict=True))


def _check_deliveries(lakehouse) -> None:
    """Deliveries = matches grouped per (post, subscriber), each pair once."""
    matches = lakehouse.read_arrow("matches").to_pylist()
    expected: dict[tuple[str, str], list[int]] = {}
    for row in matches:
        expected.setdefault((row["post_id"], row["subscriber"]), []).append(row["sub_id"])
    rows = lakehouse.read_arrow("deliveries").to_pylist()
    got = Counter((r["post_id"], r["subscriber"]) for r in rows)
    assert all(c == 1 for c in got.values()), "a post delivered twice to a subscriber"
    assert {(r["post_id"], r["subscriber"]): r["sub_ids"] for r in rows} == {
        k: sorted(v) for k, v in expected.items()
    }


def _run(query) -> None:
    query.processAllAvailable()


def test_stream_matches_equal_brute_force_and_switch_over(lakehouse, scene, tmp_path):
    landing = scene
    first = _publish_learned(lakehouse, landing, 4, "salb", split=True)
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
    query, handler = stream.start(lakehouse.spark, lakehouse, _args(tmp_path, landing))
    try:
        _run(query)
        # a new version with another N and algorithm, published while the stream runs
        second = _publish_learned(lakehouse, landing, 7, "hash", split=False)
        posts += landing.write(600)
        _run(query)
    finally:
        query.stop()
    subs = _active(lakehouse)
    expected = _expected(landing, posts, subs)
    assert sum(expected.values()) > 500  # the test has teeth
    assert _matches(lakehouse) == expected
    _check_deliveries(lakehouse)
    # the deliveries hold every match row, matcher included
    assert _match_rows(derived_matches(lakehouse)) == _match_rows(lakehouse.read_arrow("matches"))
    # the tables read the same through Spark (Parquet written by the dispatch tasks)
    assert lakehouse.read("matches").count() == sum(expected.values())
    assert lakehouse.read("deliveries").count() == lakehouse.read_arrow("deliveries").num_rows
    versions = {f["routing_version"] for f in handler.figures}
    assert versions == {first, second}
    # each version was warmed once, before its first batch (at start; at the switch)
    assert [w["routing_version"] for w in handler.warmups] == [first, second]
    assert all(w["workers"] >= 1 and w["texts"] == 0 for w in handler.warmups)
    _assert_no_stray_staging(lakehouse)
    matches = lakehouse.read_arrow("matches")
    by_batch = {f["batch_id"]: f["routing_version"] for f in handler.figures}
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
    _publish_learned(lakehouse, landing, 4, "salb", split=True)
    bronze_texts = [f"warm up text number {i} about white houses" for i in range(50)]
    lakehouse.write_arrow(
        _bronze(bronze_texts), "bronze.posts"
    )  # recent posts: the token table's sample
    posts = landing.write(300)
    query, handler = stream.start(lakehouse.spark, lakehouse, _args(tmp_path, landing))
    try:
        _run(query)
        second = _publish_learned(lakehouse, landing, 6, "salb", split=False)
        handler.prefetch()  # what the end of a batch does when a version is published
        assert handler.state.routing_version == second
        assert [w["routing_version"] for w in handler.warmups][-1] == second
        assert handler.warmups[-1]["texts"] == len(bronze_texts)
        warmed = len(handler.warmups)
        posts += landing.write(300)
        _run(query)
        assert len(handler.warmups) == warmed  # the switch found it warm
        # a warm-up that fails is reported, never fatal: the batch then builds lazily
        original_lines = stream.stream_tasks.sample_lines
        stream.stream_tasks.sample_lines = _refuse
        try:
            third = _publish_learned(lakehouse, landing, 5, "salb", split=True)
            handler.prefetch()
        finally:
            stream.stream_tasks.sample_lines = original_lines
        assert handler.state.routing_version == third
        assert "injected" in handler.warmups[-1]["failed"]
        posts += landing.write(300)
        _run(query)
        # a prefetch that fails costs only the warm start: the next batch loads for itself
        original = stream.published_version
        stream.published_version = lambda lake: 10_000  # no such version
        try:
            handler.prefetch()
        finally:
            stream.published_version = original
        assert handler.state.routing_version is None
        posts += landing.write(300)
        _run(query)
    finally:
        query.stop()
    assert {f["routing_version"] for f in list(handler.figures)[-2:]} == {third}
    assert _matches(lakehouse) == _expected(landing, posts, _active(lakehouse))
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
    version = _publish_learned(lakehouse, landing, 4, "salb", split=True)
    posts = landing.write(600)
    args = _args(tmp_path, landing, matches_table=False)
    query, handler = stream.start(lakehouse.spark, lakehouse, args)
    try:
        _run(query)
    finally:
        query.stop()
    assert not lakehouse.exists("matches")  # deliveries only
    expected = _expected(landing, posts, _active(lakehouse))
    assert sum(expected.values()) > 200  # the test has teeth
    derived = derived_matches(lakehouse)
    assert (
        Counter(zip(derived["post_id"].to_pylist(), derived["sub_id"].to_pylist(), strict=True))
        == expected
    )
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
    assert sum(f["matches"] for f in handler.figures) == derived.num_rows
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


def _run_stream_process(
    lakehouse, landing: Landing, checkpoint: Path, crash: str | None, extra: list[str] = ()
):
    import os
    import subprocess
    import sys

    env = dict(os.environ)
    env.pop("S3TM_CRASH", None)
    if crash:
        env["S3TM_CRASH"] = crash
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "spark_jobs.stream.job",
            "--lakehouse",
            str(lakehouse.root),
            "--master",
            "local[2]",
            "run",
            "--landing",
            str(landing.root),
            "--checkpoint",
            str(checkpoint),
            "--max-files-per-trigger",
            "1",
            "--available-now",
            *extra,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_stream_killed_mid_batch_restarts_exactly(lakehouse, scene, tmp_path):
    landing = scene
    _publish_learned(lakehouse, landing, 4, "salb", split=True)
    before = _active(lakehouse)
    posts = [landing.write(300) for _ in range(3)]
    checkpoint = tmp_path / "checkpoint"
    # killed in batch 1 after `matches` is committed and before `deliveries` is
    crashed = _run_stream_process(lakehouse, landing, checkpoint, crash="after-matches:1")
    assert crashed.returncode == 137, crashed.stderr[-2000:]
    assert set(lakehouse.read_arrow("matches")["batch_id"].to_pylist()) == {0, 1}
    assert set(lakehouse.read_arrow("deliveries")["batch_id"].to_pylist()) == {0}
    # the registry changes before the restart: the replayed batch 1 keeps its plan
    new_ids = add_subscriptions(lakehouse, [landing.corpus.vocabulary[0]], "late")
    after = _active(lakehouse)
    restarted = _run_stream_process(lakehouse, landing, checkpoint, crash=None)
    assert restarted.returncode == 0, restarted.stderr[-2000:]
    expected = _expected(landing, posts[0] + posts[1], before) + _expected(landing, posts[2], after)
    assert any(sub in new_ids for _, sub in expected)
    assert _matches(lakehouse) == expected
    _check_deliveries(lakehouse)


def test_subscriptions_added_and_cancelled_mid_stream(lakehouse, scene, tmp_path):
    landing = scene
    version = _publish_learned(lakehouse, landing, 4, "salb", split=True)
    query, handler = stream.start(lakehouse.spark, lakehouse, _args(tmp_path, landing))
    expected: Counter = Counter()
    try:
        posts = landing.write(400)
        _run(query)
        expected += _expected(landing, posts, _active(lakehouse))
        # track-style: one subscriber, comma-separated phrases ORed; one word is new to
        # the routing version (routes by hash), the cancelled ones stop matching
        vocab = landing.corpus.vocabulary
        added = add_subscriptions(
            lakehouse, [f"{vocab[3]} {vocab[40]}", "zzqx", vocab[7]], "tracker"
        )
        cancelled = sorted(_active(lakehouse))[:100]
        cancel_subscriptions(lakehouse, cancelled)
        posts = landing.write(400, texts=(f"ZZQX! {vocab[3]} and {vocab[40]}",))
        _run(query)
        active = _active(lakehouse)
        assert set(added) <= set(active) and not set(cancelled) & set(active)
        after_change = _expected(landing, posts, active)
        expected += after_change
    finally:
        query.stop()
    assert _matches(lakehouse) == expected
    _check_deliveries(lakehouse)
    got = _matches(lakehouse)
    assert {sub for _, sub in got} >= set(added)
    # the new subscriptions were placed (LASP) into the published version
    placements = lakehouse.read_arrow("routing.placements").to_pylist()
    placed = {r["sub_id"] for r in placements if r["routing_version"] == version}
    assert set(added) <= placed
    assert handler.figures[-1]["subscriptions"] == len(active)


def test_stream_status_prints_the_committed_batches(lakehouse, scene, tmp_path, capsys):
    landing = scene
    _publish_learned(lakehouse, landing, 4, "salb", split=True)
    landing.write(200)
    landing.write(200)
    query, _ = stream.start(
        lakehouse.spark, lakehouse, _args(tmp_path, landing, available_now=True)
    )
    query.awaitTermination()
    assert query.exception() is None
    capsys.readouterr()
    assert stream.run(Namespace(action="status", last=5), lakehouse) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [json.loads(line) for line in lines if line.startswith("{")]
    health = [line for line in lines if line.startswith("health: ")]
    assert [h.split(":")[1].split()[1] for h in health] == ["0", "1"]
    assert all("relative throughput x" in h and "hot words:" in h for h in health)
    assert [r["batch_id"] for r in rows] == [0, 1]
    assert [r["posts"] for r in rows] == [200, 200]
    assert {r["stage"] for r in rows} == {"committed"}


def test_stream_refuses_to_start_without_a_published_version(lakehouse, scene, tmp_path):
    from core.errors import InputDataError

    with pytest.raises(InputDataError, match="no published routing version"):
        stream.start(lakehouse.spark, lakehouse, _args(tmp_path, scene))


def test_subscribe_add_splits_track_phrases(lakehouse, capsys):
    from spark_jobs.jobs import subscriptions

    args = Namespace(
        action="add", phrase="White House, obama ,, debates tonight", subscriber="alice"
    )
    assert subscriptions.run(args, lakehouse) == 0
    added = json.loads(capsys.readouterr().out)["added"]
    rows = {r["sub_id"]: r for r in registry(lakehouse)}
    assert [rows[s]["words"] for s in added] == [["hous", "white"], ["obama"], ["debat", "tonight"]]
    assert {rows[s]["subscriber"] for s in added} == {"alice"}


def test_task_slots_follow_the_master(spark):
    assert stream.task_slots(spark) == 2  # the test session runs local[2]


def test_two_streams_in_one_spark_application_do_not_share_worker_caches(lakehouse, tmp_path):
    """Both start at routing version 1, epoch 1: the workers' cached tries and words of the
    first must not serve the second (its subscriptions differ)."""
    from spark_jobs.lake.delta_io import Lakehouse

    results = []
    for k, lake in enumerate((lakehouse, Lakehouse(lakehouse.spark, tmp_path / "second"))):
        landing = Landing(tmp_path / f"landing{k}", seed=k)
        sets = _subscription_sets(landing, 150, seed=10 + k)
        register_word_sets(lake, [" ".join(s) for s in sets], sets, f"user{k}")
        assert _publish_learned(lake, landing, 4, "salb", split=False) == 1
        posts = landing.write(300)
        query, _ = stream.start(
            lake.spark, lake, _args(tmp_path / f"run{k}", landing, query_name=f"m{k}")
        )
        try:
            _run(query)
        finally:
            query.stop()
        expected = _expected(landing, posts, _active(lake))
        results.append((sum(expected.values()), _matches(lake) == expected))
    assert all(n > 100 for n, _ in results)
    assert [same for _, same in results] == [True, True]


def test_kafka_source_without_its_jar_says_what_is_missing(spark):
    from core.errors import InputDataError

    try:  # an installation with the jar (the platform image) has nothing to report
        spark._jvm.java.lang.Class.forName("org.apache.spark.sql.kafka010.KafkaSourceProvider")
        pytest.skip("this Spark has the Kafka source")
    except Exception as err:
        if "Skipped" in type(err).__name__:
            raise
    args = Namespace(source="kafka", kafka_bootstrap="127.0.0.1:9", kafka_topic="posts")
    with pytest.raises(InputDataError, match="spark-sql-kafka-0-10"):
        stream.source(spark, args)
