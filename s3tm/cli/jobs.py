"""The Spark jobs as ``s3tm`` commands (same arguments as ``spark-submit spark_jobs/jobs/<job>.py``
and ``spark-submit spark_jobs/stream/job.py``)."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import Any

from s3tm.cli.text import plain
from spark_jobs.common import add_common_arguments, run_parsed

# command -> (module under spark_jobs, its config (a dataclass, or Class.factory), help)
JOBS = {
    "ingest": (
        "jobs.ingest",
        "IngestConfig",
        "landing JSON-lines files -> bronze.posts (+ quarantine)",
    ),
    "normalise": (
        "jobs.normalise",
        "NormaliseConfig",
        "bronze.posts -> silver.posts (normalised, sampled)",
    ),
    "graph": (
        "jobs.graph",
        "GraphConfig",
        "silver.posts -> gold.post_words, word_stats (+ cooccurrence)",
    ),
    "learn-version": ("jobs.learn", "LearnConfig", "gold.post_words -> candidate routing version"),
    "subscribe": (
        "jobs.subscriptions",
        "SubscriptionsCommand",
        "subscriptions.registry: add, cancel, load, topics",
    ),
    "place": ("jobs.place", "PlaceConfig", "LASP placement of active subscriptions for a version"),
    "evaluate-version": (
        "jobs.evaluate",
        "EvaluateConfig",
        "candidate vs published vs hash on held-out posts",
    ),
    "routing": (
        "jobs.publish",
        "RoutingCommand",
        "routing versions: list, validate, publish, rollback",
    ),
    "pipeline": ("jobs.pipeline", "PipelineConfig", "the whole chain in one Spark session"),
    "stream": (
        "stream.job",
        "StreamCommand.of",
        "the streaming matcher: route, match, dispatch (run | status)",
    ),
}


def register(sub: argparse._SubParsersAction, only: str | None = None) -> None:  # type: ignore[type-arg]
    """Add the Spark jobs' commands; with ``only``, the others as name-and-help placeholders
    (their modules are not imported)."""
    for command, (module_name, _, text) in JOBS.items():
        if only is not None and command != only:
            sub.add_parser(command, help=f"[spark] {text}")
            continue
        module = importlib.import_module(f"spark_jobs.{module_name}")
        if not hasattr(module, "add_arguments"):
            # options derived from the job's config (spark_jobs.options): what follows the
            # command goes to tyro whole, --help included
            parser = sub.add_parser(
                command, help=f"[spark] {text}", add_help=False, prefix_chars="\0"
            )
            parser.add_argument(
                "options", nargs=argparse.REMAINDER, help=f"the options: s3tm {command} --help"
            )
            parser.set_defaults(handler=_config_handler(command))
            continue
        parser = sub.add_parser(
            command,
            help=f"[spark] {text}",
            description=plain(module.__doc__),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        add_common_arguments(parser)
        module.add_arguments(parser)
        parser.set_defaults(handler=_handler(command))


def _job(command: str) -> tuple[Any, Any, str]:
    """The job's module, its config spec and its session's name (``ingest``, or ``stream``
    for ``stream.job``)."""
    module_name, config_name, _ = JOBS[command]
    module = importlib.import_module(f"spark_jobs.{module_name}")
    spec: Any = module
    for part in config_name.split("."):
        spec = getattr(spec, part)
    package, leaf = module_name.split(".")
    return module, spec, package if leaf == "job" else leaf


def _config_handler(command: str) -> Callable[[argparse.Namespace], int]:
    def handle(args: argparse.Namespace) -> int:
        from spark_jobs.common import job_main

        module, config_type, name = _job(command)
        description = plain(module.__doc__) or ""
        return job_main(
            name, description, config_type, module.run, args.options, prog=f"s3tm {command}"
        )

    return handle


def _handler(command: str) -> Callable[[argparse.Namespace], int]:
    def handle(args: argparse.Namespace) -> int:
        module, spec, name = _job(command)
        options = vars(args)
        # read-only actions (``routing list``, ``subscribe list``, ``stream status``) read
        # the driver-side tables through delta-rs: no JVM, an answer in about a second
        spark = options.get("action") not in getattr(module, "READ_ONLY_ACTIONS", ())
        return run_parsed(name, spec, module.run, options, spark=spark)

    return handle
