"""The streaming matcher reading a real Kafka broker (KRaft, from the resolved jars):
`s3tm produce` -> topic -> `stream run --source kafka` equals brute force; bad records are
quarantined with their topic, partition and offset; killed at every kill point and
restarted, or with the broker restarted under it, nothing is lost or duplicated."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

from spark_jobs.stream.matcher import start
from tests.spark_jobs.stream import harness
from tests.spark_jobs.stream.test_stream_chaos import (
    FILES,
    HALVES,
    chaos_scene,
    kill_at_every_point_then_check,
)


def _topic(broker, partitions: int) -> str:
    name = f"posts-{uuid.uuid4().hex[:8]}"
    assert broker.create_topic(name, partitions)
    return name


def _produce(broker, topic: str, landing: harness.Landing, env) -> None:
    """Every landed file into the topic through the CLI (keys: post ids)."""
    for path in sorted(landing.root.glob("posts-*.jsonl")):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "s3tm.cli.main",
                "produce",
                "--corpus",
                str(path),
                "--bootstrap",
                broker.bootstrap,
                "--topic",
                topic,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-2000:]


def _kafka_config(tmp_path, landing, broker, topic, **extra):
    return harness.stream_config(
        tmp_path,
        landing,
        source="kafka",
        kafka_bootstrap=broker.bootstrap,
        kafka_topic=topic,
        max_files_per_trigger=0,
        **extra,
    )


def _record_at(broker, topic: str, partition: int, offset: int) -> bytes:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=[broker.bootstrap], consumer_timeout_ms=10_000)
    try:
        where = TopicPartition(topic, partition)
        consumer.assign([where])
        consumer.seek(where, offset)
        record = next(iter(consumer))
        assert (record.partition, record.offset) == (partition, offset)
        return bytes(record.value)
    finally:
        consumer.close()


def test_produce_to_kafka_then_stream_equals_brute_force_with_offsets_in_the_quarantine(
    lakehouse, scene, tmp_path, kafka_broker, spark_process_env
):
    landing = scene
    harness.publish_learned(lakehouse, landing, 4, "salb", split=True)
    bad = ["{not json", json.dumps({"id": "e1", "text": "   "}), json.dumps({"text": "no id"})]
    posts = landing.write(500, bad=bad) + landing.write(400)
    topic = _topic(kafka_broker, 3)
    _produce(kafka_broker, topic, landing, spark_process_env)
    assert sum(kafka_broker.end_offsets(topic).values()) == len(posts) + len(bad)

    config = _kafka_config(tmp_path, landing, kafka_broker, topic)
    harness.run_to_end(lakehouse, config)
    harness.assert_exact(lakehouse, landing, posts, at_least=400)
    quarantine = lakehouse.read_arrow("silver.posts_quarantine").to_pylist()
    assert sorted(r["reason"].split(" (")[0] for r in quarantine) == [
        "empty text",
        "invalid JSON",
        "no 'id' field",
    ]
    for row in quarantine:  # topic:partition:offset finds the very record
        name, partition, offset = row["source_file"].rsplit(":", 2)
        assert name == topic
        raw = _record_at(kafka_broker, topic, int(partition), int(offset))
        assert raw.decode() in bad and raw.decode().startswith(row["raw"][:5])


def test_a_new_checkpoint_starts_at_the_time_it_is_given(
    lakehouse, scene, tmp_path, kafka_broker, spark_process_env, monkeypatch
):
    """--starting-offsets with a time: a new checkpoint reads each partition from its
    first record at or after it (the posts produced before are never matched); the
    deployment's Kafka client settings (S3TM_KAFKA_OPTIONS) reach Spark's reader, which
    refuses one it manages itself, naming it."""
    import datetime as dt
    import time

    landing = scene
    harness.publish_learned(lakehouse, landing, 4, "salb", split=True)
    topic = _topic(kafka_broker, 3)
    landing.write(400)
    _produce(kafka_broker, topic, landing, spark_process_env)
    time.sleep(1.5)  # record times are the producer's, in milliseconds
    since = dt.datetime.now(dt.UTC)
    time.sleep(0.5)
    later = landing.write(400)
    for path in sorted(landing.root.glob("posts-*.jsonl"))[:-1]:
        path.unlink()  # produce only the later file
    _produce(kafka_broker, topic, landing, spark_process_env)
    assert sum(kafka_broker.end_offsets(topic).values()) == 800

    config = _kafka_config(tmp_path, landing, kafka_broker, topic,
                           starting_offsets=since.isoformat())  # fmt: skip
    monkeypatch.setenv("S3TM_KAFKA_OPTIONS", '{"client.id": "s3tm-stream-test"}')
    harness.run_to_end(lakehouse, config)
    harness.assert_exact(lakehouse, landing, later, at_least=300)

    monkeypatch.setenv("S3TM_KAFKA_OPTIONS", '{"auto.offset.reset": "none"}')
    other = _kafka_config(tmp_path / "other", landing, kafka_broker, topic)
    with pytest.raises(Exception, match=r"auto\.offset\.reset"):
        harness.run_to_end(lakehouse, other)


@pytest.mark.parametrize("part", HALVES)
def test_kafka_stream_killed_at_every_point_restarts_exactly(
    lakehouse, tmp_path, kafka_broker, spark_process_env, part
):
    batches, per_batch = FILES, 121
    landing, posts = chaos_scene(lakehouse, tmp_path, batches, per_batch)
    topic = _topic(kafka_broker, 2)
    _produce(kafka_broker, topic, landing, spark_process_env)
    source = [
        "--source",
        "kafka",
        "--kafka-bootstrap",
        kafka_broker.bootstrap,
        "--kafka-topic",
        topic,
        "--max-offsets-per-trigger",
        str(per_batch),
    ]
    kill_at_every_point_then_check(
        lakehouse, landing, posts, tmp_path / "checkpoint", batches, part, source=source
    )


def test_a_broker_restart_under_a_running_stream_loses_nothing(
    lakehouse, scene, tmp_path, kafka_broker, spark_process_env
):
    landing = scene
    harness.publish_learned(lakehouse, landing, 4, "salb", split=True)
    topic = _topic(kafka_broker, 2)
    posts = landing.write(300)
    _produce(kafka_broker, topic, landing, spark_process_env)
    config = _kafka_config(tmp_path, landing, kafka_broker, topic, available_now=False)
    query, handler = start(lakehouse.spark, lakehouse, config)
    try:
        harness.run_all(query)
        kafka_broker.kill()  # a crash, not a clean shutdown
        kafka_broker.start()
        for path in landing.root.glob("posts-*.jsonl"):  # the next file only
            path.rename(path.with_suffix(".sent"))
        posts += landing.write(300)
        _produce(kafka_broker, topic, landing, spark_process_env)
        harness.run_all(query)
        assert query.isActive, query.exception()
    finally:
        query.stop()
    harness.assert_exact(lakehouse, landing, posts, at_least=300)
    assert len(handler.figures) >= 2


def test_the_controller_reads_the_consumer_lag_and_raises_the_level(
    lakehouse, scene, tmp_path, kafka_broker, spark_process_env
):
    """Under a backlog on the topic (records a batch does not take), the shedding plan's
    backlog is the consumer lag the Kafka source reports, and the level goes up."""
    from tests.spark_jobs.stream.test_stream_shedding import _committed, _subset_of_brute_force

    landing = scene
    harness.publish_learned(lakehouse, landing, 6, "hash", split=False)
    posts = [p for _ in range(6) for p in landing.write(200)]
    topic = _topic(kafka_broker, 2)
    _produce(kafka_broker, topic, landing, spark_process_env)
    config = _kafka_config(
        tmp_path,
        landing,
        kafka_broker,
        topic,
        available_now=False,
        max_offsets_per_trigger=200,
        shedding="subscription",
        latency_budget=0.001,  # a millisecond of work: the lag is overload
    )
    harness.run_to_end(lakehouse, config)
    batches = _committed(lakehouse)
    assert len(batches) >= 6  # 200 records a batch at most, split over the partitions
    lags = [r["backlog_posts"] for r in batches]
    assert all(lag is not None for lag in lags[1:]), lags
    assert lags[1] >= 600, lags  # 1,200 records, 200 a batch: most still waiting
    assert max(r["shedding_level"] for r in batches) > 0
    _subset_of_brute_force(lakehouse, landing, posts)
    harness.check_deliveries(lakehouse)


def test_without_the_kafka_jar_the_source_says_how_to_get_it(tmp_path, spark_process_env):
    """A Spark without spark-sql-kafka (no resolved jars): a clear error, not a stack trace."""
    script = (
        "from spark_jobs.lake.session import build_session\n"
        "from spark_jobs.stream.config import StreamConfig\n"
        "from spark_jobs.stream.pipeline import source\n"
        "spark = build_session('no-kafka', master='local[1]')\n"
        "try:\n"
        "    source(spark, StreamConfig(source='kafka', kafka_bootstrap='127.0.0.1:9'))\n"
        "except Exception as err:\n"
        "    print(type(err).__name__, err)\n"
    )
    env = {**spark_process_env, "S3TM_JARS_DIR": str(tmp_path / "none")}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "InputDataError" in done.stdout and "make setup" in done.stdout, done.stdout


@pytest.fixture(autouse=True)
def _quiet_kafka_client():
    import logging

    logging.getLogger("kafka").setLevel(logging.WARNING)
