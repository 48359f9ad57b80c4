"""pipeline: the whole chain in ONE Spark session (no JVM start per job):
ingest -> normalise -> graph -> learn -> place -> evaluate -> validate -> publish.

It prints the wall time and output of every step and the total. Airflow runs the same jobs
one spark-submit each; this command is for demos, benchmarks and a single machine.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from core.formatting import format_table
from core.learn import ALGORITHMS
from spark_jobs.common import job_main
from spark_jobs.jobs import evaluate, graph, ingest, learn, normalise, place, publish


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--landing", required=True, help="directory of JSON-lines files")
    parser.add_argument("--pattern", default="*.jsonl*")
    parser.add_argument(
        "--default-day", type=lambda s: __import__("datetime").date.fromisoformat(s), default=None
    )
    parser.add_argument("--batch-id", type=int, default=None)
    parser.add_argument("--sample-rate", type=float, default=1.0)
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--algorithm", choices=ALGORITHMS, default="salb2")
    parser.add_argument("--split", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--holdout-fraction", type=float, default=0.2)
    parser.add_argument(
        "--margin",
        type=float,
        default=None,
        help="publish only when the candidate beats the published by this",
    )
    parser.add_argument("--no-cooccurrence", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--report", help="write the step table as JSON here")


def run(args: argparse.Namespace, lakehouse: Any) -> int:
    steps: list[tuple[str, Callable[[], Any]]] = [
        (
            "ingest",
            lambda: ingest.run(
                argparse.Namespace(
                    landing=args.landing,
                    pattern=args.pattern,
                    batch_id=args.batch_id,
                    default_day=args.default_day,
                ),
                lakehouse,
            ),
        ),
        (
            "normalise",
            lambda: normalise.run(
                argparse.Namespace(sample_rate=args.sample_rate, seed=args.seed), lakehouse
            ),
        ),
        (
            "graph",
            lambda: graph.run(
                argparse.Namespace(start=None, end=None, no_cooccurrence=args.no_cooccurrence),
                lakehouse,
            ),
        ),
        (
            "learn",
            lambda: learn.run(
                argparse.Namespace(
                    nodes=args.nodes,
                    algorithm=args.algorithm,
                    split=args.split,
                    start=None,
                    end=None,
                    holdout_fraction=args.holdout_fraction,
                    subscribed="auto",
                    seed=args.seed,
                    live_hot_words=6.0,
                ),
                lakehouse,
            ),
        ),
        (
            "place",
            lambda: place.run(
                argparse.Namespace(version=None, unit_cost=False, seed=args.seed), lakehouse
            ),
        ),
        (
            "evaluate",
            lambda: evaluate.run(
                argparse.Namespace(version=None, day=None, seed=args.seed), lakehouse
            ),
        ),
        (
            "validate",
            lambda: publish.run(argparse.Namespace(action="validate", version=None), lakehouse),
        ),
        (
            "publish",
            lambda: publish.run(
                argparse.Namespace(
                    action="publish", version=None, margin=args.margin, skip_validation=False
                ),
                lakehouse,
            ),
        ),
    ]
    timings: list[list[object]] = []
    started = time.perf_counter()
    for name, step in steps:
        t0 = time.perf_counter()
        code = step()
        timings.append([name, time.perf_counter() - t0])
        if code:
            print(f"step {name} failed (exit {code}); later steps not run")
            return int(code)
    total = time.perf_counter() - started
    counts = [
        [name, lakehouse.read(name).count() if lakehouse.exists(name) else 0]
        for name in (
            "bronze.posts",
            "silver.posts",
            "silver.posts_quarantine",
            "gold.post_words",
            "gold.word_stats",
            "gold.cooccurrence",
            "subscriptions.registry",
            "routing.mappings",
            "routing.placements",
            "routing.versions",
        )
    ]
    print(format_table(["step", "wall s"], [*timings, ["total", total]]))
    print(format_table(["table", "rows"], counts))
    print(publish.render_versions(lakehouse))
    if args.report:
        Path(args.report).write_text(
            json.dumps({"steps": timings, "total_s": total, "rows": counts}, indent=2)
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return job_main("pipeline", __doc__ or "", add_arguments, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
