"""``s3tm kafka start|stop|status``: a single-node Kafka broker (KRaft) on loopback, from the
jars ``make setup`` resolved, with the posts' topic; what ``s3tm produce`` writes to and
``s3tm stream run --source kafka`` reads. Its config, data and log live in ``--dir``."""

from __future__ import annotations

import argparse
from pathlib import Path

from s3tm.cli.text import plain

# the broker's port without importing it (command registration stays light)
DEFAULT_PORT = 9092


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "kafka", help="a local Kafka broker (KRaft) for the stream", description=plain(__doc__)
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, text in (
        ("start", "start the broker in the background and create the topic"),
        ("stop", "stop the broker"),
        ("status", "say whether the broker runs, and where"),
    ):
        a = actions.add_parser(action, help=text, description=text)
        a.add_argument(
            "--dir",
            type=Path,
            help="the broker's folder: config, data, log (default $S3TM_KAFKA_DIR or .kafka)",
        )
        a.add_argument(
            "--port",
            type=int,
            default=DEFAULT_PORT,
            help="the client port on 127.0.0.1 (0: one the broker picks, printed and kept "
            "for restarts; the KRaft controller always binds a port of its own choosing)",
        )
        if action == "start":
            a.add_argument("--topic", default="posts", help="the topic to create")
            a.add_argument(
                "--partitions", type=int, default=4, help="the topic's partitions (default 4)"
            )
        a.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    import logging

    logging.getLogger("kafka").setLevel(logging.WARNING)  # the client's connection chatter
    from s3tm.local.kafka_broker import BrokerSettings, KafkaBroker
    from spark_jobs.settings import settings

    folder = args.dir or settings().kafka_dir
    broker = KafkaBroker(BrokerSettings(folder=folder, port=args.port))
    if args.action == "start":
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
    if args.action == "stop":
        stopped = broker.stop()
        print(f"kafka: {'stopped' if stopped else 'not running'} ({broker.folder})")
        return 0
    status = broker.status()
    if status.running:
        print(f"kafka: running at {status.bootstrap} (pid {status.pid}; log {status.log})")
        return 0
    print(f"kafka: not running ({broker.folder})")
    return 3  # like `systemctl status`: not running is not success
