"""The Spark jobs as ``s3tm`` commands (same arguments as ``spark-submit spark_jobs/jobs/<job>.py``
and ``spark-submit spark_jobs/stream/job.py``)."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import Any

from s3tm.cli.text import plain

# command -> (module under spark_jobs, its config (a dataclass, or a union of one per
# action), help)
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
        "StreamCommand",
        "the streaming matcher: route, match, dispatch (run | status)",
    ),
}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the Spark jobs' commands. Their options derive from each job's config
    (spark_jobs.options): what follows the command goes to tyro whole, ``--help``
    included, and the job's module is imported only when its command runs."""
    for command, (_, _, text) in JOBS.items():
        parser = sub.add_parser(command, help=f"[spark] {text}", add_help=False, prefix_chars="\0")
        parser.add_argument(
            "options", nargs=argparse.REMAINDER, help=f"the options: s3tm {command} --help"
        )
        parser.set_defaults(handler=_config_handler(command))


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
