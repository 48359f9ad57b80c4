"""``s3tm produce``: replay a corpus into a Kafka topic at a steady rate (the posts the
streaming matcher reads with ``s3tm stream run --source kafka``). A broker that wants TLS
or SASL: the environment's ``KAFKA_SECURITY_PROTOCOL``, ``KAFKA_SASL_*`` and
``KAFKA_SSL_CA_FILE``, as the stream and the ingest read them."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from s3tm.cli.options import add_command


@dataclass(frozen=True, kw_only=True)
class ProduceOptions:
    """replay a corpus into Kafka"""

    corpus: Path
    """JSON-lines file (.gz or plain)"""
    bootstrap: str = "localhost:9092"
    """Kafka bootstrap servers"""
    topic: str = "posts"
    """Kafka topic to write the posts to"""
    rate: float = 0.0
    """posts per second (0: as fast as it goes)"""
    loop: int = 1
    """times to replay the file (0: forever)"""
    connect_timeout: float = 30.0
    """seconds to reach the brokers"""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    add_command(sub, "produce", ProduceOptions, _run, prog="s3tm")


def _run(args: ProduceOptions) -> int:
    import itertools

    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    from core.errors import InputDataError
    from s3tm.produce.replay import landing_records, replay
    from spark_jobs.kafka_security import KafkaSecurity

    if not args.corpus.is_file():
        raise InputDataError(f"corpus not found: {args.corpus}")
    rounds = itertools.count() if args.loop == 0 else range(args.loop)
    security = KafkaSecurity.from_env()
    try:
        producer = KafkaProducer(
            bootstrap_servers=args.bootstrap.split(","),
            acks="all",
            linger_ms=20,
            retries=10,
            bootstrap_timeout_ms=int(args.connect_timeout * 1000),
            **security.client_options(),
        )
    except KafkaError as err:
        raise InputDataError(f"cannot reach Kafka at {args.bootstrap}: {err}") from err

    def send(key: bytes | None, value: bytes) -> None:
        producer.send(args.topic, key=key, value=value)

    def progress(sent: int, seconds: float) -> None:
        print(f"produce: {sent:,} posts in {seconds:.0f}s", file=sys.stderr, flush=True)

    total = 0
    try:
        for _ in rounds:
            figures = replay(landing_records(args.corpus), send, rate=args.rate, progress=progress)
            total += figures.records
            print(
                f"produce: {figures.records:,} posts to {args.topic} at "
                f"{figures.rate:,.0f}/s ({total:,} in all)",
                flush=True,
            )
    finally:
        producer.flush()
        producer.close()
    return 0
