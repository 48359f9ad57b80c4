"""A Hive Metastore on loopback: the Thrift server of the Hive jars pyspark ships (the
client Spark uses, so client and server agree), on an embedded Derby database under a
folder; what a team's catalog is to the platform (``S3TM_CATALOG_URI``)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyspark

from core.errors import S3TMError
from s3tm.local.processes import stop_group

JARS = Path(pyspark.__file__).parent / "jars"
START_TIMEOUT_S = 120.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def hive_metastore(folder: Path) -> Iterator[str]:
    """A running metastore; yields its ``thrift://127.0.0.1:PORT``. Its log: ``folder/
    metastore.log``."""
    java = (
        str(Path(os.environ["JAVA_HOME"]) / "bin" / "java")
        if "JAVA_HOME" in os.environ
        else shutil.which("java")
    )
    if java is None:
        raise S3TMError("no java on PATH or JAVA_HOME: the metastore is a JVM")
    folder.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    log = (folder / "metastore.log").open("wb")
    process = subprocess.Popen(
        [
            java,
            "-Xmx512m",
            "-cp",
            f"{JARS}/*",
            # the log4j2 async loggers Hive turns on need a jar pyspark does not ship
            "-Dhive.async.log.enabled=false",
            "-Djavax.jdo.option.ConnectionURL=jdbc:derby:;"
            f"databaseName={folder / 'db'};create=true",
            f"-Dhive.metastore.warehouse.dir={folder / 'warehouse'}",
            "-Ddatanucleus.schema.autoCreateAll=true",
            "-Dhive.metastore.schema.verification=false",
            "-Dderby.stream.error.file=" + str(folder / "derby.log"),
            "org.apache.hadoop.hive.metastore.HiveMetaStore",
            "-p",
            str(port),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _listening(port):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = (folder / "metastore.log").read_text(errors="replace")[-3000:]
                raise S3TMError(f"the metastore did not start on port {port}:\n{tail}")
            time.sleep(0.5)
        yield f"thrift://127.0.0.1:{port}"
    finally:
        stop_group(process, timeout_s=30)  # started in a session of its own
        log.close()
