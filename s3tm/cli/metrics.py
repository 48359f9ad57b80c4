"""``s3tm metrics serve|show``: the platform's figures in Prometheus' format, read from the
lakehouse tables (``stream.batches``, ``stream.health``, ``stream.monitor``,
``routing.versions``, ``silver.posts_quarantine``). ``serve`` answers Prometheus' scrapes
on 127.0.0.1 unless ``--host`` says otherwise; ``show`` prints one scrape and exits."""

from __future__ import annotations

import argparse
import signal
import threading

from s3tm.cli.text import plain

DEFAULT_PORT = 9108  # the exporter port Prometheus' wiki lists for s3tm


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "metrics",
        help="the platform's figures for Prometheus (an exporter over the lakehouse)",
        description=plain(__doc__),
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, text in (
        ("serve", "serve /metrics until stopped (SIGINT or SIGTERM)"),
        ("show", "print the metrics once"),
    ):
        a = actions.add_parser(action, help=text, description=text)
        a.add_argument(
            "--lakehouse",
            default=None,
            help="lakehouse root, a folder or s3:// URI (default $S3TM_LAKEHOUSE or ./lakehouse)",
        )
        if action == "serve":
            a.add_argument(
                "--host",
                default="127.0.0.1",
                help="the address to listen on (default 127.0.0.1; 0.0.0.0 opens it to the "
                "network: see docs/OPERATIONS.md on who may scrape it)",
            )
            a.add_argument(
                "--port",
                type=int,
                default=DEFAULT_PORT,
                help="default 9108; 0: a free port the exporter binds (printed)",
            )
        a.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from s3tm.monitoring.exporter import exposition, serve
    from spark_jobs.lake.delta_io import Lakehouse

    lakehouse = Lakehouse(None, args.lakehouse, engine="rs")
    if not lakehouse.remote and not lakehouse.root.is_dir():
        print(
            f"s3tm metrics: no lakehouse at {lakehouse.root} yet: its metrics appear once "
            "the stream or a remap writes there",
            flush=True,
        )
    if args.action == "show":
        print(exposition(lakehouse), end="")
        return 0
    serving = serve(lakehouse, args.host, args.port)
    done = threading.Event()
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: done.set())
    print(
        f"s3tm metrics: serving http://{args.host}:{serving.port}/metrics from "
        f"{lakehouse.location} (SIGINT or SIGTERM stops)",
        flush=True,
    )
    done.wait()
    serving.stop()
    print("s3tm metrics: stopped", flush=True)
    return 0
