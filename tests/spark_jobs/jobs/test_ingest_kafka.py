"""``ingest --source kafka``: the posts topic into ``bronze.posts`` between the offsets the
last batch recorded and the topic's end, exactly once: reruns, new records, a batch killed
after its plan or after its quarantine commit, sampling by post id, bad records quarantined
with topic:partition:offset."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from core.errors import InputDataError, InvalidArgumentError
from spark_jobs.jobs import ingest, ingest_kafka
from spark_jobs.jobs.ingest_kafka import OffsetRange, plan_ranges

ROOT = Path(__file__).resolve().parents[3]

# -- planning (pure) ---------------------------------------------------------------------


def test_a_plan_continues_where_the_recorded_batches_ended():
    recorded = [OffsetRange("posts", 0, 0, 5, 1), OffsetRange("posts", 0, 5, 9, 2)]
    recorded.append(OffsetRange("other", 1, 0, 50, 2))  # another topic: not this one's
    ranges = plan_ranges(recorded, {0: 0, 1: 3}, {0: 12, 1: 7}, topic="posts", batch_id=3)
    assert ranges == [OffsetRange("posts", 0, 9, 12, 3), OffsetRange("posts", 1, 3, 7, 3)]


def test_a_plan_skips_what_retention_deleted_and_refuses_a_recreated_topic():
    recorded = [OffsetRange("posts", 0, 0, 5, 1)]
    assert plan_ranges(recorded, {0: 8}, {0: 10}, topic="posts", batch_id=2) == [
        OffsetRange("posts", 0, 8, 10, 2)
    ]
    with pytest.raises(InputDataError, match="recreated"):
        plan_ranges(recorded, {0: 0}, {0: 3}, topic="posts", batch_id=2)


def test_the_config_says_what_is_missing():
    with pytest.raises(InvalidArgumentError, match="--landing"):
        ingest.IngestConfig(source="files")
    with pytest.raises(InvalidArgumentError, match="sample rate"):
        ingest.IngestConfig(source="kafka", sample_rate=0.0)


# -- against a broker ----------------------------------------------------------------------


def _topic(broker, partitions: int = 3) -> str:
    name = f"posts-{uuid.uuid4().hex[:8]}"
    assert broker.create_topic(name, partitions)
    return name


def _send(broker, topic: str, values: list[bytes]) -> None:
    """Records round-robin over the partitions (no key), flushed."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=[broker.bootstrap])
    partitions = sorted(producer.partitions_for(topic))
    for k, value in enumerate(values):
        producer.send(topic, value=value, partition=partitions[k % len(partitions)])
    producer.flush()
    producer.close()


def _posts(first: int, count: int) -> list[bytes]:
    return [
        json.dumps({"id": f"p{n}", "text": f"word{n % 7} common post {n}"}).encode()
        for n in range(first, first + count)
    ]


BAD = [b"{not json", b"", json.dumps({"id": "x1"}).encode()]  # malformed, blank, no text


def _config(broker, topic: str, batch_id: int, rate: float = 1.0) -> ingest.IngestConfig:
    return ingest.IngestConfig(
        source="kafka",
        kafka_bootstrap=broker.bootstrap,
        kafka_topic=topic,
        batch_id=batch_id,
        sample_rate=rate,
    )


def _bronze_ids(lakehouse) -> list[str]:
    return sorted(r.post_id for r in lakehouse.read("bronze.posts").select("post_id").collect())


def test_batches_read_each_record_once_and_quarantine_bad_ones_with_their_offsets(
    kafka_broker, lakehouse
):
    topic = _topic(kafka_broker)
    _send(kafka_broker, topic, _posts(0, 30) + BAD)
    assert ingest.run(_config(kafka_broker, topic, 10), lakehouse) == 0
    assert _bronze_ids(lakehouse) == sorted(f"p{n}" for n in range(30))
    bad = lakehouse.read("silver.posts_quarantine").collect()
    reasons = sorted(r.reason for r in bad)
    assert reasons[0] == "blank line" and reasons[1].startswith("invalid JSON")
    assert reasons[2] == "no 'text' field"
    for row in bad:  # named by topic:partition:offset, the offset as line number
        name, partition, offset = row.source_file.rsplit(":", 2)
        assert (name, int(offset)) == (topic, row.line_number) and 0 <= int(partition) < 3

    # the same batch again (an Airflow retry), then a later one with nothing new: no row
    assert ingest.run(_config(kafka_broker, topic, 10), lakehouse) == 0
    assert ingest.run(_config(kafka_broker, topic, 11), lakehouse) == 0
    assert len(_bronze_ids(lakehouse)) == 30
    # new records: only they are read
    _send(kafka_broker, topic, _posts(30, 12))
    assert ingest.run(_config(kafka_broker, topic, 12), lakehouse) == 0
    assert _bronze_ids(lakehouse) == sorted(f"p{n}" for n in range(42))
    # the recorded ranges tile each partition from 0 to its end, without gap or overlap
    ranges = ingest_kafka.recorded_ranges(lakehouse)
    ends = kafka_broker.end_offsets(topic)
    for partition, end in ends.items():
        mine = sorted((r.start, r.end) for r in ranges if r.partition == partition)
        assert mine[0][0] == 0 and mine[-1][1] == end
        assert all(a[1] == b[0] for a, b in itertools.pairwise(mine))
    assert {r.batch_id for r in ranges} == {10, 11, 12}


def test_sampling_keeps_the_posts_normalise_keeps_at_that_rate(kafka_broker, lakehouse):
    from pyspark.sql import functions as F

    from spark_jobs.jobs import normalise

    topic = _topic(kafka_broker, 2)
    _send(kafka_broker, topic, _posts(0, 400) + BAD)
    assert ingest.run(_config(kafka_broker, topic, 1, rate=0.25), lakehouse) == 0
    everyone = lakehouse.spark.createDataFrame([(f"p{n}",) for n in range(400)], "post_id string")
    expected = sorted(
        r.post_id for r in everyone.where(normalise.sample_filter(0.25, seed=0)).collect()
    )
    assert _bronze_ids(lakehouse) == expected and 60 < len(expected) < 140
    # every bad record is quarantined whatever the rate
    assert lakehouse.read("silver.posts_quarantine").count() == len(BAD)
    # normalise at the same rate keeps every sampled post: the rate is not applied twice
    assert normalise.run(normalise.NormaliseConfig(sample_rate=0.25), lakehouse) == 0
    silver = lakehouse.read("silver.posts").agg(F.count("*")).collect()[0][0]
    assert silver == len(expected)


def _ingest_process(lakehouse_root: Path, broker, topic: str, batch_id: int, crash: str = ""):
    env = {**os.environ, "S3TM_SPARK_LOG_LEVEL": "ERROR"}
    env.pop("S3TM_CRASH", None)
    if crash:
        env["S3TM_CRASH"] = crash
    argv = [
        sys.executable, "-m", "s3tm.cli.main", "ingest", "--source", "kafka",
        "--lakehouse", str(lakehouse_root), "--kafka-bootstrap", broker.bootstrap,
        "--kafka-topic", topic, "--batch-id", str(batch_id), "--master", "local[1]",
    ]  # fmt: skip
    return subprocess.run(
        argv,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.parametrize("point", ["ingest:after-plan", "ingest:after-quarantine"])
def test_a_killed_batch_is_finished_on_its_own_range_by_the_next_run(
    kafka_broker, spark, tmp_path, capsys, point
):
    """Killed after recording its offsets (and after the quarantine commit): the next run,
    with a later batch id and more records on the topic, first finishes the killed batch on
    the range it recorded, then reads the rest; each record lands once. The killed run is
    a child process (``s3tm ingest``); the next one runs the same job on this worker's
    session."""
    from spark_jobs.lake.delta_io import Lakehouse

    topic = _topic(kafka_broker, 2)
    root = tmp_path / "lakehouse"
    _send(kafka_broker, topic, _posts(0, 20) + BAD)
    killed = _ingest_process(root, kafka_broker, topic, 100, crash=point)
    assert killed.returncode == 137, killed.stderr[-2000:]
    _send(kafka_broker, topic, _posts(20, 10))
    lakehouse = Lakehouse(spark, str(root))
    capsys.readouterr()
    assert ingest.run(_config(kafka_broker, topic, 101), lakehouse) == 0
    printed = capsys.readouterr().out
    batches = [json.loads(line) for line in printed.splitlines() if line.startswith("{")]
    assert [(b["batch"], b["records"]) for b in batches] == [("100", 23), ("101", 10)]

    assert _bronze_ids(lakehouse) == sorted(f"p{n}" for n in range(30))
    quarantined = lakehouse.read("silver.posts_quarantine").collect()
    assert len(quarantined) == len(BAD)  # not twice after the kill after its commit
    assert {r.ingest_batch for r in quarantined} == {"100"}
