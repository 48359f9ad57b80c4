"""``s3tm sql-server``: a SQL endpoint over the lakehouse for other tools (Spark Connect).

A long-running Spark application with the Spark Connect service (shipped in pyspark's own
jars) on ``--host``:``--port`` (default 127.0.0.1:15002). Every lakehouse table is in its
catalog under its own name (``spark_jobs.sql.catalog``), refreshed every
``--refresh-seconds`` when a table has a new Delta version. Clients:

    from pyspark.sql import SparkSession
    spark = SparkSession.builder.remote("sc://127.0.0.1:15002").getOrCreate()
    spark.sql("SELECT routing_version, status FROM routing.versions").show()

or ``pyspark --remote sc://127.0.0.1:15002``. Stop it with Ctrl-C or SIGTERM.

Access control is Spark Connect's own: with ``SPARK_CONNECT_AUTHENTICATE_TOKEN`` set in its
environment the server refuses every request that does not carry that token (clients:
``sc://localhost:15002/;token=...``, or the same variable in their environment). Listening
beyond loopback (``--host``) requires the token; past localhost pyspark sends a token over
TLS only, so a TLS-terminating proxy goes in front of the server (docs/OPERATIONS.md).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.errors import InputDataError, InvalidArgumentError
from spark_jobs import common
from spark_jobs.runtime.ports import require_free_port
from spark_jobs.sql.catalog import CatalogTable, LakehouseCatalog

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spark_jobs.lake.delta_io import Lakehouse
    from spark_jobs.options import SessionOptions

log = logging.getLogger(__name__)

DEFAULT_PORT = 15002
# the variable Spark Connect's clients and this server read the shared token from (not an
# option: a command line is visible to every user of the machine)
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"


@dataclass(frozen=True)
class ServerConfig:
    """Where Spark Connect listens, and how fresh the tables it serves are."""

    host: str = "127.0.0.1"
    """address to listen on"""
    port: int = DEFAULT_PORT
    """Spark Connect port (0: a free one the server binds and prints)"""
    refresh_seconds: float = 10.0
    """how often new table versions are picked up"""


def connect_conf(host: str, port: int, token: str | None = None) -> dict[str, str]:
    """The session settings that start the Spark Connect service inside the application
    (with ``token``: every request must carry it; Spark's UI redacts the setting)."""
    conf = {
        "spark.plugins": "org.apache.spark.sql.connect.SparkConnectPlugin",
        "spark.connect.grpc.binding.address": host,
        "spark.connect.grpc.binding.port": str(port),
        # every timestamp of the lakehouse is UTC; dates of them are UTC dates, as in s3tm sql
        "spark.sql.session.timeZone": "UTC",
    }
    if token:
        conf["spark.connect.authenticate.token"] = token
    return conf


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_access(host: str, token: str | None) -> None:
    """Beyond loopback only with a token: an open SQL endpoint reads every table."""
    if not is_loopback(host) and not token:
        raise InvalidArgumentError(
            f"--host {host} opens the SQL endpoint beyond this machine: set {TOKEN_ENV} "
            "(clients send it) and put a TLS proxy in front (docs/OPERATIONS.md, SQL over "
            "the lakehouse)"
        )


def bound_port(spark: SparkSession) -> int:
    """The port the Connect service listens on (the one it chose, for ``--port 0``)."""
    jvm = spark.sparkContext._jvm
    if jvm is None:
        raise InputDataError("the SQL server's Spark session has no JVM")
    service = getattr(jvm.org.apache.spark.sql.connect.service, "SparkConnectService$")
    return int(getattr(service, "MODULE$").localPort())


def serve(
    catalog: LakehouseCatalog,
    refresh_seconds: float,
    stop: threading.Event,
    ready: Callable[[list[CatalogTable]], None] | None = None,
) -> None:
    """Register the tables, then follow new versions until ``stop`` is set."""
    changed = catalog.refresh()
    log.info(
        "sql-server: %d tables: %s",
        len(catalog.tables),
        ", ".join(f"{t.name}@{t.version}" for t in catalog.tables.values()),
    )
    if ready is not None:
        ready(changed)
    while not stop.wait(refresh_seconds):
        try:
            for table in catalog.refresh():
                log.info("sql-server: %s now at version %s", table.name, table.version)
        except Exception:  # a transient read error must not stop the endpoint
            log.exception("sql-server: refresh failed; serving the previous versions")


def run(config: ServerConfig, lakehouse: Lakehouse) -> int:
    if config.refresh_seconds <= 0:
        raise InvalidArgumentError("--refresh-seconds must be positive")
    if not lakehouse.remote and not lakehouse.root.is_dir():
        raise InputDataError(f"no lakehouse at {lakehouse.root} (`s3tm demo` builds one)")
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    catalog = LakehouseCatalog(lakehouse.spark, lakehouse)

    def announce(_: list[CatalogTable]) -> None:
        # the line a script waits for before it connects
        token = os.environ.get(TOKEN_ENV)
        access = f"; requests must carry the token of ${TOKEN_ENV}" if token else ""
        port = bound_port(lakehouse.spark)
        print(f"sql-server: listening on sc://{config.host}:{port}{access}", flush=True)

    serve(catalog, config.refresh_seconds, stop, ready=announce)
    log.info("sql-server: stopping")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit spark_jobs/sql/server.py``: the Connect service is started by the
    session settings, so they are set before the session exists."""
    from spark_jobs.options import parse_job

    config, session = parse_job(
        ServerConfig, argv, prog="spark_jobs/sql/server.py", description=__doc__ or ""
    )
    return run_server(config, session)


def run_server(config: ServerConfig, session: SessionOptions | None = None) -> int:
    """Check the port, build the session with the Connect service, serve."""
    from spark_jobs.lake.delta_io import Lakehouse
    from spark_jobs.lake.session import build_session
    from spark_jobs.options import SessionOptions

    session = session or SessionOptions()

    token = os.environ.get(TOKEN_ENV) or None
    try:
        check_access(config.host, token)
        require_free_port(
            config.host, config.port, "is a server already running? pick another --port"
        )
        spark = build_session(
            "s3tm-sql-server",
            master=session.master,
            conf=connect_conf(config.host, config.port, token),
        )
        started = time.perf_counter()
        code = run(config, Lakehouse(spark, session.lakehouse))
    except (InputDataError, InvalidArgumentError) as err:
        print(f"s3tm sql-server: error: {err}", file=sys.stderr, flush=True)
        return 2
    log.info("sql-server ran %.0fs", time.perf_counter() - started)
    return code


if __name__ == "__main__":
    common.exit_process(main())
