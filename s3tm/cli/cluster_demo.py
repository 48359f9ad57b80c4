"""``s3tm cluster-demo``: the production topology on one machine (see
``s3tm.local.cluster_demo``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from s3tm.cli.text import plain

HELP = "the compose topology as local processes: Kafka, S3, Spark cluster, Airflow on PostgreSQL"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from s3tm.local import cluster_demo

    p = sub.add_parser("cluster-demo", help=HELP, description=plain(cluster_demo.__doc__ or ""))
    defaults = cluster_demo.ClusterDemoConfig(out=Path("cluster-demo-output"))
    p.add_argument("--out", type=Path, default=defaults.out, help="folder of logs and state")
    p.add_argument("--posts", type=int, default=defaults.posts, help="posts in the corpus")
    p.add_argument(
        "--matchers", type=int, default=defaults.matchers, help="N (the topic's partitions)"
    )
    p.add_argument(
        "--subscriptions", type=int, default=defaults.subscriptions, help="registered first"
    )
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from s3tm.local import cluster_demo

    return cluster_demo.run(
        cluster_demo.ClusterDemoConfig(
            out=args.out,
            posts=args.posts,
            matchers=args.matchers,
            subscriptions=args.subscriptions,
        )
    )
