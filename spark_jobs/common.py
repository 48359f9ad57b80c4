"""What every job's ``main()`` shares: typed configs, the session, errors.

A job is a frozen config dataclass (its options, their defaults and help: the one
definition, from which :mod:`spark_jobs.options` derives the command line) and a body
``run(config, lakehouse)``. A job with actions (``routing list``, ``stream run``) has a
dataclass per action, their union its config. Options become the config at the command
line's edge: nothing below it sees a parser.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NoReturn, Protocol, TypeVar, cast

from core.errors import InputDataError, InvalidArgumentError, S3TMError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from spark_jobs.lake.delta_io import Lakehouse

log = logging.getLogger(__name__)


def quiet_chatty_loggers() -> None:
    """Great Expectations logs hundreds of INFO lines per validation (its registry, config
    saves): at WARNING, a job's own lines say what was validated."""
    logging.getLogger("great_expectations").setLevel(logging.WARNING)


ConfigT = TypeVar("ConfigT")
JobBody = Callable[[ConfigT, "Lakehouse"], int]


def window_start(
    frame: DataFrame, day_column: str, window_days: int, end: dt.date | None = None
) -> dt.date | None:
    """First day of the ``window_days`` days that end at ``end`` (a run bound to its data
    interval), else of the last ``window_days`` days present in ``frame`` (None: all days).

    Without ``end``, relative to the data, not the clock, so a demo on old data has a window.
    """
    from pyspark.sql import functions as F

    if window_days <= 0:
        return None
    if end is not None:
        return days_ending(end, window_days)
    last = frame.agg(F.max(day_column)).collect()[0][0]
    return None if last is None else days_ending(last, window_days)


def days_ending(last: dt.date, window_days: int) -> dt.date:
    """First day of the ``window_days`` days that end at ``last`` (inclusive)."""
    return last - dt.timedelta(days=window_days - 1)


def run_job(
    name: str,
    body: Callable[[Lakehouse], int],
    *,
    lakehouse: str | None = None,
    master: str | None = None,
    spark: bool = True,
) -> int:
    """Build the session and lakehouse, run ``body``, report time; 2 on a user error.
    ``spark=False``: no session, the lakehouse through delta-rs (read-only actions)."""
    from spark_jobs.lake.catalog import register_tables
    from spark_jobs.lake.delta_io import Lakehouse
    from spark_jobs.lake.session import build_session

    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO,
            stream=sys.stderr,
            format="%(asctime)s %(levelname)s %(message)s",
            datefmt="%H:%M:%S",
        )
        quiet_chatty_loggers()
    started = time.perf_counter()
    try:
        if not spark:
            return body(Lakehouse(None, lakehouse, engine="rs"))
        session = build_session(f"s3tm-{name}", master=master)
        store = Lakehouse(session, lakehouse)
        code = body(store)
        if code == 0:  # what the job wrote, by name in the catalog (when there is one)
            register_tables(session, store)
    except S3TMError as err:
        print(f"s3tm {name}: error: {err}", file=sys.stderr)
        return 2
    log.info("%s finished in %.1fs", name, time.perf_counter() - started)
    return code


def run_configured(
    name: str,
    configure: Callable[[], tuple[ConfigT, str | None, str | None]],
    body: JobBody[ConfigT],
    *,
    spark: bool | None = None,
) -> int:
    """Run a job on the (config, lakehouse, master) ``configure`` makes of its command
    line; 2 when the config refuses its values (the error said, as a bad option is).
    ``spark`` None: a session unless the config's class says ``needs_spark = False`` (a
    read-only action, answered from the driver-side tables through delta-rs)."""
    try:
        config, lakehouse, master = configure()
    except S3TMError as err:
        print(f"s3tm {name}: error: {err}", file=sys.stderr)
        return 2
    if spark is None:
        spark = bool(getattr(config, "needs_spark", True))
    return run_job(
        name, lambda lh: body(config, lh), lakehouse=lakehouse, master=master, spark=spark
    )


def exit_process(code: int) -> NoReturn:
    """End a command's process with ``code`` once its output is flushed, without the
    interpreter's teardown. pyarrow's S3 client and delta-rs' Rust runtime are torn down
    there, beside threads still holding them, in an order that now and then crashes a
    process after its last line of work (a stream run on S3 exited -11 after "stream
    finished"; apache/arrow#38352, delta-rs#2184): a finished command must exit with its
    own code. For ``__main__`` and console entry points only (``main()`` returns)."""
    logging.shutdown()  # flushes and closes every handler
    for stream in (sys.stdout, sys.stderr):
        # closed by the caller: nothing left to write
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def _prog(name: str) -> str:
    # the script spark-submit ran (spark_jobs/jobs/<job>.py, spark_jobs/stream/job.py)
    return os.path.relpath(sys.argv[0]) if sys.argv[0].endswith(".py") else f"s3tm {name}"


def job_main(
    name: str,
    description: str,
    config_type: object,
    body: JobBody[ConfigT],
    argv: Sequence[str] | None,
    *,
    prog: str | None = None,
) -> int:
    """The ``main(argv)`` of a job run by ``spark-submit spark_jobs/jobs/<job>.py`` (or
    ``s3tm <command>``, its ``prog``): its options are its config's fields
    (:mod:`spark_jobs.options`)."""
    from spark_jobs.options import parse_job

    def configure() -> tuple[ConfigT, str | None, str | None]:
        config, session = parse_job(
            config_type, argv, prog=prog or _prog(name), description=description
        )
        # the parsed config is of ``config_type``: the body's (tyro checked it)
        return cast("ConfigT", config), session.lakehouse, session.master

    return run_configured(name, configure, body)


class JobMain(Protocol):
    def __call__(self, argv: Sequence[str] | None = None) -> int: ...


def job_entry(
    name: str, description: str | None, config_type: type[ConfigT], body: JobBody[ConfigT]
) -> JobMain:
    """A job module's ``main(argv=None)``: :func:`job_main` of its config and body."""

    def main(argv: Sequence[str] | None = None) -> int:
        return job_main(name, description or "", config_type, body, argv)

    return main


KAFKA_START = ("earliest", "latest")


def kafka_start_options(start: str) -> dict[str, str]:
    """Spark's Kafka source options for where a new checkpoint starts reading: ``earliest``,
    ``latest``, or an ISO-8601 time (each partition from its first record at or after it;
    one without a zone is UTC). A checkpoint that exists resumes from its own offsets.

    Raises:
        InvalidArgumentError: for anything else.
    """
    import datetime as dt

    if start in KAFKA_START:
        return {"startingOffsets": start}
    try:
        when = dt.datetime.fromisoformat(start)
    except ValueError:
        raise InvalidArgumentError(
            f"--starting-offsets {start!r}: earliest, latest or an ISO-8601 time "
            "(2026-12-07T10:00:00Z)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    # a record's time is the producer's or the broker's, in milliseconds
    return {"startingTimestamp": str(int(when.timestamp() * 1000))}


def kafka_client_options() -> dict[str, str]:
    """The deployment's own Kafka client settings (``S3TM_KAFKA_OPTIONS``), as Spark's
    Kafka source and sink take them: ``kafka.``-prefixed."""
    from spark_jobs.settings import settings

    return {f"kafka.{key}": str(value) for key, value in settings().kafka_options.items()}


def kafka_jar_missing(err: Exception, hint: str = "") -> InputDataError | None:
    """The clear error for Spark's "no data source kafka" (None: ``err`` is another one):
    the Kafka reader is spark-sql-kafka-0-10, a jar `make setup` resolves."""
    text = str(err).lower()
    if "kafka" not in text or "data source" not in text:
        return None
    return InputDataError(
        "reading Kafka needs Spark's spark-sql-kafka-0-10 jar, which this Spark lacks: run "
        f"`make setup` (it resolves docker/jars/pom.xml){hint}"
    )
