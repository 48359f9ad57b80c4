"""Where a new stream checkpoint starts reading Kafka, and the deployment's own Kafka
client settings, as Spark's Kafka source options (spark_jobs/common.py; the real broker's
side: tests/spark_jobs/stream/test_stream_kafka.py)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("start", "options"),
    [
        ("earliest", {"startingOffsets": "earliest"}),
        ("latest", {"startingOffsets": "latest"}),
        ("2026-12-07T10:00:00Z", {"startingTimestamp": "1796637600000"}),
        ("2026-12-07T10:00:00", {"startingTimestamp": "1796637600000"}),  # no zone: UTC
        ("2026-12-07T11:00:00+01:00", {"startingTimestamp": "1796637600000"}),
    ],
)
def test_a_new_checkpoints_start_is_spark_kafka_option(start, options) -> None:
    from spark_jobs.common import kafka_start_options

    assert kafka_start_options(start) == options


def test_a_start_that_is_neither_a_word_nor_a_time_is_refused() -> None:
    from core.errors import InvalidArgumentError
    from spark_jobs.common import kafka_start_options

    with pytest.raises(InvalidArgumentError, match="earliest, latest or an ISO-8601"):
        kafka_start_options("yesterday")


def test_the_deployments_kafka_settings_become_sparks_kafka_options(monkeypatch) -> None:
    from spark_jobs.common import kafka_client_options

    monkeypatch.delenv("S3TM_KAFKA_OPTIONS", raising=False)
    assert kafka_client_options() == {}
    monkeypatch.setenv("S3TM_KAFKA_OPTIONS", '{"client.id": "s3tm", "fetch.max.bytes": "1048576"}')
    assert kafka_client_options() == {
        "kafka.client.id": "s3tm",
        "kafka.fetch.max.bytes": "1048576",
    }
