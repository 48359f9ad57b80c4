"""``s3tm kafka start|stop|status``: a single-node Kafka broker (KRaft) on loopback, from the
jars ``make setup`` resolved, with the posts' topic; what ``s3tm produce`` writes to and
``s3tm stream run --source kafka`` reads. Its config, data and log live in ``--dir``."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from s3tm.cli.options import add_command
from s3tm.cli.text import plain

# the broker's port without importing it (command registration stays light)
DEFAULT_PORT = 9092


@dataclass(frozen=True, kw_only=True)
class KafkaOptions:
    dir: Path | None = None
    """the broker's folder: config, data, log (default $S3TM_KAFKA_DIR or .kafka)"""
    port: int = DEFAULT_PORT
    """the client port on 127.0.0.1 (0: one the broker picks, printed and kept for restarts;
    the KRaft controller always binds a port of its own choosing)"""


@dataclass(frozen=True, kw_only=True)
class KafkaStart(KafkaOptions):
    """start the broker in the background and create the topic"""

    topic: str = "posts"
    """the topic to create"""
    partitions: int = 4
    """the topic's partitions"""


@dataclass(frozen=True, kw_only=True)
class KafkaStop(KafkaOptions):
    """stop the broker"""


@dataclass(frozen=True, kw_only=True)
class KafkaStatus(KafkaOptions):
    """say whether the broker runs, and where"""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "kafka", help="a local Kafka broker (KRaft) for the stream", description=plain(__doc__)
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    add_command(actions, "start", KafkaStart, _run, prog="s3tm kafka")
    add_command(actions, "stop", KafkaStop, _run, prog="s3tm kafka")
    add_command(actions, "status", KafkaStatus, _run, prog="s3tm kafka")


def _run(args: KafkaOptions) -> int:
    import logging

    logging.getLogger("kafka").setLevel(logging.WARNING)  # the client's connection chatter
    from devtools.local.kafka_broker import BrokerSettings, KafkaBroker
    from spark_jobs.settings import settings

    folder = args.dir or settings().kafka_dir
    broker = KafkaBroker(BrokerSettings(folder=folder, port=args.port))
    if isinstance(args, KafkaStart):
        was = broker.status().running
        status = broker.start()
        created = broker.create_topic(args.topic, args.partitions)
        print(
            f"kafka: {'already running' if was else 'started'} at {status.bootstrap} "
            f"(pid {status.pid}; log {status.log}); topic {args.topic} "
            f"{'created' if created else 'exists'} with {args.partitions} partitions",
            flush=True,
        )
        print(
            f"next: s3tm produce --corpus FILE --bootstrap {status.bootstrap} --topic {args.topic}"
            f"\n      s3tm stream run --source kafka --kafka-bootstrap {status.bootstrap}"
            f" --kafka-topic {args.topic}"
        )
        return 0
    if isinstance(args, KafkaStop):
        stopped = broker.stop()
        print(f"kafka: {'stopped' if stopped else 'not running'} ({broker.folder})")
        return 0
    status = broker.status()
    if status.running:
        print(f"kafka: running at {status.bootstrap} (pid {status.pid}; log {status.log})")
        return 0
    print(f"kafka: not running ({broker.folder})")
    return 3  # like `systemctl status`: not running is not success
