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
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

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


@dataclass
class BurstScene:
    """The loop's scene, built once for this file's three stages (each a test of its own,
    in order: the healthy check, the burst, the remap it asks for)."""

    tmp_path: Path
    lake: Lakehouse  # the worker's session
    store: Lakehouse  # delta-rs reads
    env: dict[str, str]
    burst: str
    sets: list[list[str]]
    first_half: list[str]
    second_half: list[str]
    first: int = 0  # the first published version (set once the scene published it)

    @property
    def ingest(self) -> Path:
        return self.tmp_path / "ingest"

    @property
    def live(self) -> Path:
        return self.tmp_path / "live"

    @property
    def checkpoint(self) -> Path:
        return self.tmp_path / "checkpoint"

    def airflow(self, *args: str) -> str:
        done = subprocess.run(
            [str(AIRFLOW), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=900,
            cwd=self.tmp_path,
        )
        out = f"exit={done.returncode}\n{done.stdout}\n{done.stderr}"
        assert done.returncode == 0, out[-4000:]
        return out


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory, spark, airflow_process_env) -> BurstScene:
    """Four days of posts, the fourth with a burst; subscriptions on the first three days'
    words and one on the word that will burst; the first version published (s3tm_remap's
    learner and N, ingest -> publish in the worker's session); Airflow's database, with
    s3tm_remap unpaused as `s3tm airflow` leaves it, so asset events queue its runs."""
    from core.corpus.synthetic import SyntheticCorpusSpec, burst_word, post_days
    from spark_jobs.jobs import pipeline
    from spark_jobs.lake.corpus_files import write_demo_corpus
    from spark_jobs.lake.routing_store import load_routing_table, published_version
    from spark_jobs.lake.subscription_store import register_word_sets

    tmp_path = tmp_path_factory.mktemp("monitor-loop")
    home, lakehouse = tmp_path / "home", tmp_path / "lakehouse"
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

    store = Lakehouse(None, lakehouse, engine="rs")
    rng = np.random.default_rng(3)
    pre = generated.select(day < 3)
    sets = []
    for p in rng.choice(pre.n_posts, 300, replace=False):
        words = pre.vocabulary[pre.indices[pre.indptr[p] : pre.indptr[p + 1]]]
        sets.append(sorted(set(rng.choice(words, min(2, len(words)), replace=False))))
    sets.append([burst])
    register_word_sets(store, [" ".join(s) for s in sets], sets, "desk")

    ingest = tmp_path / "ingest"
    env = airflow_process_env(home, S3TM_LAKEHOUSE=str(lakehouse), S3TM_LANDING=str(ingest))
    scene = BurstScene(
        tmp_path, Lakehouse(spark, lakehouse), store, env, burst, sets,
        on_burst_day[:2000], on_burst_day[2000:],
    )  # fmt: skip
    scene.airflow("db", "migrate")
    _write(before, ingest / "days-0-2.jsonl")
    chain = pipeline.PipelineConfig(
        landing=str(ingest), batch_id=1, nodes=NODES, algorithm="salb2", cooccurrence=False
    )
    assert pipeline.run(chain, scene.lake) == 0
    first = published_version(store)
    assert first is not None
    # subscribed but never seen: the version routes it by hash, one version
    assert load_routing_table(store, first).version_matchers(burst).shape[0] == 1
    scene.first = first
    scene.airflow("dags", "unpause", "s3tm_remap")
    _write(before, scene.live / "a-days-0-2.jsonl")  # what the stream sees first
    return scene


@pytest.fixture(scope="module")
def healthy_check(scene: BurstScene) -> list[dict]:
    """The stream on the first three days, then s3tm_monitor: its checks."""
    _stream(scene.lake, scene.live, scene.checkpoint)
    scene.airflow("dags", "test", "s3tm_monitor", "2026-01-04T03:00:00+00:00")
    return scene.store.read_arrow("stream.monitor").to_pylist()


@pytest.fixture(scope="module")
def burst_check(scene: BurstScene, healthy_check: list[dict]) -> tuple[list[dict], dict]:
    """The burst lands (and is ingested, as every post is), the stream reads it, then
    s3tm_monitor: its checks, and Airflow's asset events and queue."""
    _write(scene.first_half, scene.ingest / "day-3a.jsonl")
    _ingest(scene.lake, scene.ingest, batch_id=2)
    _write(scene.first_half, scene.live / "b-day-3a.jsonl")
    _stream(scene.lake, scene.live, scene.checkpoint)
    scene.airflow("dags", "test", "s3tm_monitor", "2026-01-04T13:00:00+00:00")
    checks = sorted(
        scene.store.read_arrow("stream.monitor").to_pylist(), key=lambda c: c["checked_at"]
    )
    return checks, _airflow_db(scene.env, _EVENTS)


def test_a_healthy_stream_makes_the_monitor_ask_for_nothing(scene, healthy_check):
    assert [c["decision"] for c in healthy_check] == ["healthy"], healthy_check
    check = healthy_check[0]
    assert check["live_relative_throughput"] >= 0.9 * check["reference_relative_throughput"]
    assert _airflow_db(scene.env, _EVENTS) == {"events": [], "queued": []}


def test_a_burst_makes_the_monitor_emit_a_remap_request_for_the_scheduler(scene, burst_check):
    checks, db = burst_check
    assert checks[-1]["decision"] == "remap"
    assert any(c.startswith("hot_word") and scene.burst in c for c in checks[-1]["conditions"])
    assert len(db["events"]) == 1 and db["events"][0]["source_dag_id"] == "s3tm_monitor"
    assert any(scene.burst in c for c in db["events"][0]["extra"]["conditions"])
    assert db["queued"] == ["s3tm_remap"]  # the scheduler's next loop starts the remap


def test_the_requested_remap_splits_the_burst_and_health_recovers(scene, burst_check):
    from core.corpus.arrays import corpus_from_word_lists
    from core.learn import learn_mapping
    from core.monitor.health import RoutingHealth
    from core.routing.evaluate import evaluate_table
    from spark_jobs.lake.routing_store import load_routing_table, published_version

    _, db = burst_check
    # the remap the event schedules, run here by `dags test` with the configuration the
    # event carries (a scheduler-made run reads it from triggering_asset_events: the
    # learning_window task; see test_remap_reads_the_request_from_the_triggering_events)
    remap_conf = db["events"][0]["extra"]["remap_conf"]
    assert remap_conf == {"window_days": 1}
    scene.airflow(
        "dags", "test", "s3tm_remap", "2026-01-04T14:00:00+00:00", "--conf", json.dumps(remap_conf)
    )
    second = published_version(scene.store)
    assert second is not None and second > scene.first
    table = load_routing_table(scene.store, second)
    assert table.version_matchers(scene.burst).shape[0] > 1

    # after the switch, live health on later posts recovers to within 10% of a mapping
    # learned on the post-burst posts themselves
    _write(scene.second_half, scene.live / "c-day-3b.jsonl")
    _stream(scene.lake, scene.live, scene.checkpoint)
    rows = [
        r
        for r in scene.store.read_arrow("stream.health").to_pylist()
        if r["routing_version"] == second
    ]
    assert rows
    recovered = RoutingHealth.from_rows(rows).relative_throughput
    words = set().union(*map(set, scene.sets))

    def posts_of(chunk: list[str]):
        from core.text import normalize

        return corpus_from_word_lists(
            [sorted(set(normalize(json.loads(x)["text"])) & words) for x in chunk]
        )

    hindsight = learn_mapping(
        posts_of(scene.first_half), NODES, "salb", split=True, subscribed_words=words, seed=0
    ).table
    reference = evaluate_table(hindsight, posts_of(scene.second_half)).relative_throughput
    print(f"recovered live relative throughput {recovered:.3f}; hindsight {reference:.3f}")
    assert recovered >= 0.9 * reference


def test_remap_reads_the_request_from_the_triggering_events():
    from types import SimpleNamespace

    from s3tm.orchestration.tasks.monitor import remap_request
    from s3tm.orchestration.tasks.remap import learning_window_days, remap_triggers

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


def test_a_nightly_or_backfill_run_learns_on_the_days_before_its_interval_ends():
    import datetime as dt
    from types import SimpleNamespace

    from s3tm.orchestration.tasks.remap import learning_window

    end = dt.datetime(2026, 3, 4, 2, 0, tzinfo=dt.UTC)
    bound = {"days": 7, "end": "2026-03-03", "as_of": "2026-03-04T02:00:00+00:00"}
    assert learning_window(7, None, "scheduled", end) == bound
    assert learning_window(7, None, "backfill", end) == bound
    # an interval given in another zone is the same instant
    eastern = end.astimezone(dt.timezone(dt.timedelta(hours=-5)))
    assert learning_window(7, None, "backfill", eastern) == bound
    # Airflow's own DagRunType (a str enum) as the task's context gives it
    from airflow.utils.types import DagRunType

    assert learning_window(7, None, DagRunType.SCHEDULED, end) == bound
    # a Trigger and a monitor request learn on the newest days (the request's shorter window)
    latest = {"days": 7, "end": "None", "as_of": "None"}
    assert learning_window(7, None, "manual", end) == latest
    request = {"remap_request": [SimpleNamespace(extra={"remap_conf": {"window_days": 1}})]}
    assert learning_window(7, request, "asset_triggered", end) == {**latest, "days": 1}
    assert learning_window(7, None, "scheduled", None) == latest
