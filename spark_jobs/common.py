"""What every job's ``main()`` shares: common arguments, the session, error handling."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from core.errors import S3TMError

log = logging.getLogger("s3tm.jobs")

JobBody = Callable[[argparse.Namespace, Any], int]


def add_common_arguments(parser: argparse.ArgumentParser, *, nested: bool = False) -> None:
    """``--lakehouse`` and ``--master``; ``nested`` for an action's own parser (accepted
    after the action too, without overriding a value given before it)."""
    default = argparse.SUPPRESS if nested else None
    parser.add_argument(
        "--lakehouse",
        default=default,
        help="lakehouse root (default: $S3TM_LAKEHOUSE or ./lakehouse)",
    )
    parser.add_argument(
        "--master", default=default, help="Spark master (default: local[*] or $S3TM_SPARK_MASTER)"
    )


def window_start(frame: Any, day_column: str, window_days: int) -> Any:
    """First day of the last ``window_days`` days present in ``frame`` (None: all days).

    Relative to the data, not the clock, so a backfill or a demo on old data has a window.
    """
    import datetime as dt

    from pyspark.sql import functions as F

    if window_days <= 0:
        return None
    last = frame.agg(F.max(day_column)).collect()[0][0]
    return None if last is None else last - dt.timedelta(days=window_days - 1)


def run_job(name: str, args: argparse.Namespace, body: JobBody) -> int:
    """Build the session and lakehouse, run ``body``, report time; 2 on a user error."""
    from spark_jobs.lake.delta_io import Lakehouse
    from spark_jobs.lake.session import build_session

    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO,
            stream=sys.stderr,
            format="%(asctime)s %(levelname)s %(message)s",
            datefmt="%H:%M:%S",
        )
    started = time.perf_counter()
    try:
        spark = build_session(f"s3tm-{name}", master=getattr(args, "master", None))
        lakehouse = Lakehouse(spark, getattr(args, "lakehouse", None))
        code = body(args, lakehouse)
    except S3TMError as err:
        print(f"s3tm {name}: error: {err}", file=sys.stderr)
        return 2
    log.info("%s finished in %.1fs", name, time.perf_counter() - started)
    return code


def job_main(
    name: str,
    description: str,
    add_arguments: Callable[[argparse.ArgumentParser], None],
    body: JobBody,
    argv: Sequence[str] | None,
) -> int:
    """The ``main(argv)`` of a job run by ``spark-submit spark_jobs/jobs/<job>.py``."""
    # The script spark-submit ran (spark_jobs/jobs/<job>.py, spark_jobs/stream/job.py).
    prog = os.path.relpath(sys.argv[0]) if sys.argv[0].endswith(".py") else f"s3tm {name}"
    parser = argparse.ArgumentParser(prog=prog, description=description)
    add_common_arguments(parser)
    add_arguments(parser)
    return run_job(name, parser.parse_args(argv), body)
