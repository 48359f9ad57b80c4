"""The monitor closes the loop: a healthy stream asks for nothing; an injected burst makes
``s3tm_monitor`` emit the ``remap_request`` asset event that schedules ``s3tm_remap``,
whose new version splits the burst word and recovers the live relative throughput.

Airflow runs the DAGs the loop is about with ``airflow dags test`` (SQLite): the monitor,
and the remap its event asks for. What only sets the scene runs on the test worker's Spark
session (the first version: the remap chain in one session, as ``s3tm pipeline`` runs it;
the ingest of the burst's posts; the stream between them, ``--available-now``, writing
``stream.health``): ``airflow dags test`` of both DAGs is ``test_dags.py``'s. The
scheduler's part (turning a queued asset event into a run) is checked in Airflow's
database: the event and its ``asset_dag_run_queue`` row for ``s3tm_remap``."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from spark_jobs.lake.delta_io import Lakehouse

AIRFLOW = Path(sys.executable).with_name("airflow")


NODES = 16  # s3tm_remap's default


def _write(lines: list[str], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines), encoding="utf-8")


def _stream(lakehouse: Lakehouse, landing: Path, checkpoint: Path) -> None:
    """What has landed, through the published version, then stop (``--available-now``)."""
    from spark_jobs.stream.config import StreamConfig
    from spark_jobs.stream.matcher import start

    config = StreamConfig(
        landing=str(landing),
        checkpoint=str(checkpoint),
        available_now=True,
        health_window=3,
    )
    query, _ = start(lakehouse.spark, lakehouse, config)
    try:
        query.awaitTermination(900)
        assert not query.isActive, "the --available-now stream did not finish in 900 s"
        assert query.exception() is None, query.exception()
    finally:
        query.stop()


def _ingest(lakehouse: Lakehouse, landing: Path, batch_id: int) -> None:
    """``s3tm_ingest``'s two steps (ingest, normalise) on what has landed."""
    from spark_jobs.jobs import ingest, normalise

    assert ingest.run(ingest.IngestConfig(landing=str(landing), batch_id=batch_id), lakehouse) == 0
    assert normalise.run(normalise.NormaliseConfig(), lakehouse) == 0


def _airflow_db(env: dict[str, str], code: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


_EVENTS = """
import json
from airflow.utils.session import create_session
from airflow.models.asset import AssetEvent, AssetDagRunQueue, AssetModel
with create_session() as session:
    events = [
        {"uri": uri, "extra": e.extra, "source_dag_id": e.source_dag_id}
        for e, uri in session.query(AssetEvent, AssetModel.uri).join(
            AssetModel, AssetModel.id == AssetEvent.asset_id
        )
        if uri.startswith("s3tm://signals/")
    ]
    queued = sorted(q.target_dag_id for q in session.query(AssetDagRunQueue))
print(json.dumps({"events": events, "queued": queued}))
"""


def test_burst_triggers_a_remap_that_splits_it_and_health_recovers(
    tmp_path, spark, airflow_process_env
):
    from core.corpus.arrays import corpus_from_word_lists
    from core.corpus.synthetic import (
        SyntheticCorpusSpec,
        burst_word,
        post_days,
        write_demo_corpus,
    )
    from core.learn import learn_mapping
    from core.routing.evaluate import evaluate_table
    from spark_jobs.jobs import pipeline
    from spark_jobs.lake.routing_store import load_routing_table, published_version
    from spark_jobs.lake.subscription_store import register_word_sets

    home, lakehouse = tmp_path / "home", tmp_path / "lakehouse"
    ingest, live = tmp_path / "ingest", tmp_path / "live"
    spec = SyntheticCorpusSpec(
        n_posts=16000,
        n_words=1500,
        seed=9,
        days=4,
        topic_drift=0.2,
        burst_days=(3,),
        burst_share=0.5,
    )
    generated = write_demo_corpus(tmp_path / "all.jsonl.gz", spec)
    with gzip.open(tmp_path / "all.jsonl.gz", "rt", encoding="utf-8") as handle:
        lines = handle.readlines()
    day = post_days(spec)
    burst = burst_word(spec, 0)
    before = [line for line, d in zip(lines, day, strict=True) if d < 3]
    on_burst_day = [line for line, d in zip(lines, day, strict=True) if d == 3]
    first_half, second_half = on_burst_day[:2000], on_burst_day[2000:]

    env = airflow_process_env(home, S3TM_LAKEHOUSE=str(lakehouse), S3TM_LANDING=str(ingest))

    def airflow(*args: str) -> str:
        done = subprocess.run(
            [str(AIRFLOW), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            cwd=tmp_path,
        )
        out = f"exit={done.returncode}\n{done.stdout}\n{done.stderr}"
        assert done.returncode == 0, out[-4000:]
        return out

    store = Lakehouse(None, lakehouse, engine="rs")
    # subscriptions: words of posts before the burst, and one on the word that will burst
    rng = np.random.default_rng(3)
    pre = generated.select(day < 3)
    sets = []
    for p in rng.choice(pre.n_posts, 300, replace=False):
        words = pre.vocabulary[pre.indices[pre.indptr[p] : pre.indptr[p + 1]]]
        sets.append(sorted(set(rng.choice(words, min(2, len(words)), replace=False))))
    sets.append([burst])
    register_word_sets(store, [" ".join(s) for s in sets], sets, "desk")

    lake = Lakehouse(spark, lakehouse)
    airflow("db", "migrate")
    _write(before, ingest / "days-0-2.jsonl")
    # the first version: s3tm_remap's learner and N, ingest -> publish in one session
    chain = pipeline.PipelineConfig(
        landing=str(ingest), batch_id=1, nodes=NODES, algorithm="salb2", cooccurrence=False
    )
    assert pipeline.run(chain, lake) == 0
    first = published_version(store)
    assert first is not None
    # subscribed but never seen: the version routes it by hash, one version
    assert load_routing_table(store, first).version_matchers(burst).shape[0] == 1

    # deployed as `s3tm airflow` leaves it: unpaused, so asset events queue its runs
    airflow("dags", "unpause", "s3tm_remap")

    # a healthy stream: the monitor records it and asks for nothing
    _write(before, live / "a-days-0-2.jsonl")
    _stream(lake, live, tmp_path / "checkpoint")
    airflow("dags", "test", "s3tm_monitor", "2026-01-04T03:00:00+00:00")
    checks = store.read_arrow("stream.monitor").to_pylist()
    assert [c["decision"] for c in checks] == ["healthy"], checks
    assert checks[0]["live_relative_throughput"] >= 0.9 * checks[0]["reference_relative_throughput"]
    assert _airflow_db(env, _EVENTS) == {"events": [], "queued": []}

    # the burst lands (and is ingested, as every post is): the monitor asks for a remap
    _write(first_half, ingest / "day-3a.jsonl")
    _ingest(lake, ingest, batch_id=2)
    _write(first_half, live / "b-day-3a.jsonl")
    _stream(lake, live, tmp_path / "checkpoint")
    airflow("dags", "test", "s3tm_monitor", "2026-01-04T13:00:00+00:00")
    checks = sorted(store.read_arrow("stream.monitor").to_pylist(), key=lambda c: c["checked_at"])
    assert checks[-1]["decision"] == "remap"
    assert any(c.startswith("hot_word") and burst in c for c in checks[-1]["conditions"])
    db = _airflow_db(env, _EVENTS)
    assert len(db["events"]) == 1 and db["events"][0]["source_dag_id"] == "s3tm_monitor"
    assert any(burst in c for c in db["events"][0]["extra"]["conditions"])
    assert db["queued"] == ["s3tm_remap"]  # the scheduler's next loop starts the remap

    # the remap the event schedules, run here by `dags test` with the configuration the
    # event carries (a scheduler-made run reads it from triggering_asset_events: the
    # learning_window task; see test_remap_reads_the_request_from_the_triggering_events)
    remap_conf = db["events"][0]["extra"]["remap_conf"]
    assert remap_conf == {"window_days": 1}
    airflow(
        "dags", "test", "s3tm_remap", "2026-01-04T14:00:00+00:00", "--conf", json.dumps(remap_conf)
    )
    second = published_version(store)
    assert second is not None and second > first
    table = load_routing_table(store, second)
    assert table.version_matchers(burst).shape[0] > 1

    # after the switch, live health on later posts recovers to within 10% of a mapping
    # learned on the post-burst posts themselves
    _write(second_half, live / "c-day-3b.jsonl")
    _stream(lake, live, tmp_path / "checkpoint")
    rows = [
        r for r in store.read_arrow("stream.health").to_pylist() if r["routing_version"] == second
    ]
    assert rows
    from core.monitor.health import RoutingHealth

    recovered = RoutingHealth.from_rows(rows).relative_throughput
    words = set().union(*map(set, sets))

    def posts_of(chunk: list[str]):
        from core.text import normalize

        return corpus_from_word_lists(
            [sorted(set(normalize(json.loads(x)["text"])) & words) for x in chunk]
        )

    hindsight = learn_mapping(
        posts_of(first_half), NODES, "salb", split=True, subscribed_words=words, seed=0
    ).table
    reference = evaluate_table(hindsight, posts_of(second_half)).relative_throughput
    print(f"recovered live relative throughput {recovered:.3f}; hindsight {reference:.3f}")
    assert recovered >= 0.9 * reference


def test_remap_reads_the_request_from_the_triggering_events():
    from types import SimpleNamespace

    from s3tm.orchestration.monitor_tasks import remap_request
    from s3tm.orchestration.remap_tasks import learning_window_days, remap_triggers

    result = {
        "conditions": ["hot_word: 'news' carries 12.0% of word occurrences over 1 version(s)"],
        "routing_version": 3,
        "checked_at": "2026-01-04T13:00:00+00:00",
    }
    extra = remap_request(result, recent_window_days=1)
    assert extra["remap_conf"] == {"window_days": 1}
    events = {"remap_request": [SimpleNamespace(extra=extra, source_run_id="scheduled__x")]}
    assert learning_window_days(7, events) == 1
    assert learning_window_days(7, None) == 7  # the nightly run keeps its window
    assert remap_triggers(events) == [result["conditions"][0] + " (s3tm_monitor run scheduled__x)"]
    assert remap_triggers({}) == []
    # a fresh deployment's request (nothing published) keeps the remap's own window
    fresh = remap_request(
        {**result, "conditions": ["no_version: posts are ingested but none is published"]},
        recent_window_days=1,
    )
    assert "remap_conf" not in fresh
    assert learning_window_days(7, {"remap_request": [SimpleNamespace(extra=fresh)]}) == 7
