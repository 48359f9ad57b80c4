"""``s3tm``: the command line of the S3-TM platform."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from core.errors import S3TMError


def build_parser() -> argparse.ArgumentParser:
    from s3tm.bench import cli as bench_cli
    from s3tm.cli import airflow, commands, demo, maintain, produce, sql
    from s3tm.experiments import cli as experiment_cli

    parser = argparse.ArgumentParser(prog="s3tm", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("-q", "--quiet", action="store_true", help="warnings only")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo.register(sub)
    airflow.register(sub)
    maintain.register(sub)
    produce.register(sub)
    sql.register(sub)
    commands.register(sub)
    bench_cli.register(sub)
    experiment_cli.register(sub)
    # The CLI is the one place the layers meet: the Spark jobs add their commands here.
    from s3tm.cli import jobs as spark_cli

    spark_cli.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the process exit code (2 for a usage or input error)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO
    logging.basicConfig(
        level=level,
        format="%(asctime)s %(levelname)s %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )
    try:
        return int(args.handler(args))
    except S3TMError as err:
        print(f"s3tm {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
