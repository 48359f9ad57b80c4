"""``s3tm``: the command line of the S3-TM platform.

Commands are registered lazily: the group of the command being run is imported in full (its
arguments, help and handler), every other command gets a name-and-help placeholder, so a
read-only command answers without importing the learners, Spark or Airflow. ``s3tm --help``
lists them all.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

from core.errors import S3TMError
from s3tm.cli.text import plain
from spark_jobs.common import exit_process, quiet_chatty_loggers

# the module that registers each command group, with the commands and help it registers
# (tests/s3tm/test_cli.py checks this against what the modules register)
COMMAND_GROUPS: dict[str, dict[str, str]] = {
    "s3tm.cli.maintain": {
        "maintain": "compact, apply retention, checkpoint and vacuum the Delta tables"
    },
    "s3tm.cli.produce": {"produce": "replay a corpus into Kafka"},
    "s3tm.cli.metrics": {
        "metrics": "the platform's figures for Prometheus (an exporter over the lakehouse)"
    },
    "s3tm.cli.sql": {
        "sql": "SQL over the lakehouse's Delta tables (time travel with --as-of)",
        "sql-server": "[spark] a SQL endpoint (Spark Connect) over the lakehouse's tables",
    },
    "s3tm.cli.catalog": {
        "metastore": "a Hive Metastore server for the lakehouse's tables (S3TM_CATALOG_URI)"
    },
    "s3tm.cli.commands": {
        "demo-corpus": "write a seeded synthetic corpus (JSON lines)",
        "learn": "learn a word -> matcher mapping from a corpus",
        "evaluate": "spread, loads, imbalance, throughput vs hash",
    },
    # from a checkout only (CHECKOUT_PACKAGES): beside the package, in no wheel or image
    "devtools.cli.demo": {"demo": "generate a corpus, learn hash/SALB/SALB+split/salb2, compare"},
    "devtools.cli.airflow": {
        "airflow": "start the Airflow UI with the project's DAGs on the demo's lakehouse"
    },
    "devtools.cli.kafka": {"kafka": "a local Kafka broker (KRaft) for the stream"},
    "benchmarks.cli": {"bench": "benchmarks: print measured figures, write CSV/PNG (checkout)"},
    "benchmarks.experiments.cli": {
        "experiment": "the paper's experiments: table, CSV and PNG (checkout)"
    },
    # The CLI is the one place the layers meet: the Spark jobs add their commands here.
    "s3tm.cli.jobs": {},  # filled from s3tm.cli.jobs.JOBS (a light module)
}


# the checkout's own packages: its dev tools and benchmarks, which `make setup` puts on
# the virtualenv's path (a .pth file); an installed wheel has neither
CHECKOUT_PACKAGES = ("devtools", "benchmarks")


def _import_group(module_name: str) -> ModuleType:
    """The module registering a command group, or for a checkout's group where none is,
    an error that says where it is."""
    top = module_name.split(".")[0]
    if top in CHECKOUT_PACKAGES and importlib.util.find_spec(top) is None:
        raise S3TMError(
            "this command runs from a checkout of the repository (devtools/ and benchmarks/ "
            "are not part of the installed package or the image): git clone the project "
            "and run `make setup` there"
        )
    return importlib.import_module(module_name)


def _groups() -> dict[str, dict[str, str]]:
    from s3tm.cli.jobs import JOBS

    groups = dict(COMMAND_GROUPS)
    groups["s3tm.cli.jobs"] = {name: f"[spark] {text}" for name, (_, _, text) in JOBS.items()}
    return groups


def _command_of(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs (its first word that is not an option), if any."""
    for word in argv:
        if not word.startswith("-"):
            return word
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``s3tm`` parser; with ``command``, only that command's group is loaded in full."""
    parser = argparse.ArgumentParser(prog="s3tm", description=plain(__doc__.split("\n\n")[0]))
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("-q", "--quiet", action="store_true", help="warnings only")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    groups = _groups()
    known = {name for commands in groups.values() for name in commands}
    for module_name, commands in groups.items():
        if command is None or command in commands or command not in known:
            try:
                module = _import_group(module_name)
            except S3TMError:
                if command in commands:
                    raise  # the command asked for is not here: say where it is
                for name, text in commands.items():
                    sub.add_parser(name, help=text)
                continue
            module.register(sub)
        else:
            for name, text in commands.items():
                sub.add_parser(name, help=text)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the process exit code (2 for a usage or input error)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser(_command_of(arguments))
    except S3TMError as err:
        print(f"s3tm {_command_of(arguments)}: error: {err}", file=sys.stderr)
        return 2
    args = parser.parse_args(arguments)
    level = logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO
    logging.basicConfig(
        level=level,
        format="%(asctime)s %(levelname)s %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )
    if not args.verbose:
        quiet_chatty_loggers()
    try:
        return int(args.handler(args))
    except S3TMError as err:
        print(f"s3tm {args.command}: error: {err}", file=sys.stderr)
        return 2


def run() -> NoReturn:
    """The ``s3tm`` console command: :func:`main`, then the process ends with its code
    (``spark_jobs.common.exit_process``: no interpreter teardown after the work)."""
    exit_process(main())


if __name__ == "__main__":
    run()
