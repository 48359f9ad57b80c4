"""``s3tm metrics serve|show``: the platform's figures in Prometheus' format, read from the
lakehouse tables (``stream.batches``, ``stream.health``, ``stream.monitor``,
``routing.versions``, ``silver.posts_quarantine``). ``serve`` answers Prometheus' scrapes
on 127.0.0.1 unless ``--host`` says otherwise; ``show`` prints one scrape and exits."""

from __future__ import annotations

import argparse
import signal
import threading
from dataclasses import dataclass

from s3tm.cli.options import add_command
from s3tm.cli.text import plain

DEFAULT_PORT = 9108  # the exporter port Prometheus' wiki lists for s3tm


@dataclass(frozen=True, kw_only=True)
class MetricsShow:
    """print the metrics once"""

    lakehouse: str | None = None
    """lakehouse root, a folder or s3:// URI (default $S3TM_LAKEHOUSE or ./lakehouse)"""


@dataclass(frozen=True, kw_only=True)
class MetricsServe(MetricsShow):
    """serve /metrics until stopped (SIGINT or SIGTERM)"""

    host: str = "127.0.0.1"
    """the address to listen on (0.0.0.0 opens it to the network: see docs/OPERATIONS.md on
    who may scrape it)"""
    port: int = DEFAULT_PORT
    """0: a free port the exporter binds (printed)"""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "metrics",
        help="the platform's figures for Prometheus (an exporter over the lakehouse)",
        description=plain(__doc__),
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    add_command(actions, "serve", MetricsServe, _run, prog="s3tm metrics")
    add_command(actions, "show", MetricsShow, _run, prog="s3tm metrics")


def _run(args: MetricsShow) -> int:
    from s3tm.monitoring.exporter import exposition, serve
    from spark_jobs.lake.delta_io import Lakehouse

    lakehouse = Lakehouse(None, args.lakehouse, engine="rs")
    if not lakehouse.remote and not lakehouse.root.is_dir():
        print(
            f"s3tm metrics: no lakehouse at {lakehouse.root} yet: its metrics appear once "
            "the stream or a remap writes there",
            flush=True,
        )
    if not isinstance(args, MetricsServe):
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
