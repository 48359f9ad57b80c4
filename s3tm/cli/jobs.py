"""The Spark jobs as ``s3tm`` commands (same arguments as ``spark-submit spark_jobs/jobs/<job>.py``
and ``spark-submit spark_jobs/stream/job.py``)."""

from __future__ import annotations

import argparse
import importlib

from spark_jobs.common import add_common_arguments, run_job

JOBS = {
    "ingest": ("jobs.ingest", "landing JSON-lines files -> bronze.posts (+ quarantine)"),
    "normalise": ("jobs.normalise", "bronze.posts -> silver.posts (normalised, sampled)"),
    "graph": ("jobs.graph", "silver.posts -> gold.post_words, word_stats, cooccurrence"),
    "learn-version": ("jobs.learn", "gold.post_words -> candidate routing version"),
    "subscribe": ("jobs.subscriptions", "subscriptions.registry: add, cancel, load, topics"),
    "place": ("jobs.place", "LASP placement of active subscriptions for a version"),
    "evaluate-version": ("jobs.evaluate", "candidate vs published vs hash on held-out posts"),
    "routing": ("jobs.publish", "routing versions: list, validate, publish, rollback"),
    "pipeline": ("jobs.pipeline", "the whole chain in one Spark session"),
    "stream": ("stream.job", "the streaming matcher: route, match, dispatch (run | status)"),
}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    for command, (module_name, text) in JOBS.items():
        module = importlib.import_module(f"spark_jobs.{module_name}")
        parser = sub.add_parser(
            command,
            help=f"[spark] {text}",
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        add_common_arguments(parser)
        module.add_arguments(parser)
        parser.set_defaults(handler=_handler(module_name))


def _handler(module_name: str):  # type: ignore[no-untyped-def]
    def handle(args: argparse.Namespace) -> int:
        module = importlib.import_module(f"spark_jobs.{module_name}")
        # The session's app name: the job (``ingest``), or ``stream`` for ``stream.job``.
        package, leaf = module_name.split(".")
        return run_job(package if leaf == "job" else leaf, args, module.run)

    return handle
