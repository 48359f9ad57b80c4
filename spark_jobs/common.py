"""What every job's ``main()`` shares: common arguments, typed configs, the session, errors.

A job is a frozen config dataclass (its options, their defaults and help: the one
definition, from which :mod:`spark_jobs.options` derives the command line) and a body
``run(config, lakehouse)``. A job with actions (``routing list``, ``stream run``) declares
them with argparse, one subparser each (:func:`action_job_main`). Parsed options become the
config here, at the command line's edge: nothing below it sees an ``argparse`` object.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, NoReturn, Protocol, TypeVar

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
# a job's config: its dataclass (filled by :func:`config_from`), or a function building it
# from the parsed options (a command whose config nests another)
ConfigSpec = type[ConfigT] | Callable[[Mapping[str, object]], ConfigT]


def config_from(config_type: type[ConfigT], options: Mapping[str, object]) -> ConfigT:
    """The job config made of the parsed ``options`` its dataclass declares (the common
    ``--lakehouse``/``--master`` and the command's own name are not the job's)."""
    make: Callable[..., ConfigT] = config_type
    if not dataclasses.is_dataclass(config_type):
        raise TypeError(f"{config_type!r} is not a dataclass")
    names = {f.name for f in dataclasses.fields(config_type)}
    return make(**{k: v for k, v in options.items() if k in names})


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


def build_config(spec: ConfigSpec[ConfigT], options: Mapping[str, object]) -> ConfigT:
    if isinstance(spec, type):
        return config_from(spec, options)
    return spec(options)


def run_parsed(
    name: str,
    spec: ConfigSpec[ConfigT],
    body: JobBody[ConfigT],
    options: Mapping[str, object],
    *,
    spark: bool = True,
) -> int:
    """Run a job on parsed command-line ``options`` (``spark-submit`` or ``s3tm``)."""
    return run_configured(
        name,
        lambda: (
            build_config(spec, options),
            _optional_str(options.get("lakehouse")),
            _optional_str(options.get("master")),
        ),
        body,
        spark=spark,
    )


def run_configured(
    name: str,
    configure: Callable[[], tuple[ConfigT, str | None, str | None]],
    body: JobBody[ConfigT],
    *,
    spark: bool = True,
) -> int:
    """Run a job on the (config, lakehouse, master) ``configure`` makes of its command
    line; 2 when the config refuses its values (the error said, as a bad option is)."""
    try:
        config, lakehouse, master = configure()
    except S3TMError as err:
        print(f"s3tm {name}: error: {err}", file=sys.stderr)
        return 2
    return run_job(
        name, lambda lh: body(config, lh), lakehouse=lakehouse, master=master, spark=spark
    )


def _optional_str(value: object) -> str | None:
    return None if value is None else str(value)


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
    config_type: type[ConfigT],
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
        return config, session.lakehouse, session.master

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


def action_job_main(
    name: str,
    description: str,
    add_arguments: Callable[[argparse.ArgumentParser], None],
    spec: ConfigSpec[ConfigT],
    body: JobBody[ConfigT],
    argv: Sequence[str] | None,
) -> int:
    """The ``main(argv)`` of a job with actions (``routing list``, ``stream run``): their
    options declared with argparse, one subparser per action."""
    parser = argparse.ArgumentParser(prog=_prog(name), description=description)
    add_common_arguments(parser)
    add_arguments(parser)
    return run_parsed(name, spec, body, vars(parser.parse_args(argv)))


def add_kafka_arguments(parser: argparse.ArgumentParser) -> None:
    """``--kafka-bootstrap`` and ``--kafka-topic`` of the stream's argparse command (the
    ingest's are its config's fields, with the same defaults)."""
    from spark_jobs.kafka_security import deployment_bootstrap, deployment_topic

    parser.add_argument(
        "--kafka-bootstrap",
        default=deployment_bootstrap(),
        help="Kafka brokers, host:port[,...] (default: $KAFKA_BOOTSTRAP or localhost:9092)",
    )
    parser.add_argument(
        "--kafka-topic",
        default=deployment_topic(),
        help="the posts topic (default: $POSTS_TOPIC or posts)",
    )


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
