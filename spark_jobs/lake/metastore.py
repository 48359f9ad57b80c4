"""A Hive Metastore server for the lakehouse's tables, for a team that runs none
(``s3tm metastore``: compose's ``metastore`` service, the tests' catalog).

The Thrift server of the Hive jars pyspark ships, so that server and Spark's client agree,
with the S3A jars of ``docker/jars/pom.xml`` beside them: registering an ``s3a://`` table
makes the server look at its location, with the same S3 variables every Spark session reads
(``spark_jobs.lake.session.s3a_settings``). Its metadata sits in an embedded Derby database
under a folder (a volume): enough for one platform; a team with a metastore of its own
points ``S3TM_CATALOG_URI`` at that instead. It listens on every interface of its host
(Hive 2.3's server has no bind address): run it where only the platform reaches it.
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from core.errors import InvalidArgumentError
from spark_jobs.lake import jars

DEFAULT_PORT = 9083  # the port every metastore client assumes
HIVE_SERVER = "org.apache.hadoop.hive.metastore.HiveMetaStore"


@dataclass(frozen=True)
class MetastoreConfig:
    """a Hive Metastore server for the lakehouse's tables (S3TM_CATALOG_URI)

    Where it keeps its database, its port and its heap."""

    folder: Path
    """its Derby database (db/), a scratch warehouse, its logs"""
    port: int = DEFAULT_PORT
    """the Thrift port (clients: thrift://HOST:PORT)"""
    heap: str = "512m"
    """the JVM's maximum heap"""


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if java is None or not Path(java).is_file():
        raise InvalidArgumentError("no java on PATH or in JAVA_HOME: the metastore is a JVM")
    return java


def _classpath() -> str:
    import pyspark

    folders = [Path(pyspark.__file__).parent / "jars"]
    if os.environ.get("SPARK_HOME"):  # the image: Spark's jars hold the S3A ones too
        folders.append(Path(os.environ["SPARK_HOME"]) / "jars")
    unique = dict.fromkeys(folder.resolve() for folder in folders if folder.is_dir())
    entries = [f"{folder}/*" for folder in unique]
    return os.pathsep.join([*entries, *jars.classpath(jars.SPARK)])


def command(config: MetastoreConfig, environ: Mapping[str, str]) -> list[str]:
    """The server's command line: Hadoop's settings (S3A's endpoint and credential chain)
    passed as ``--hiveconf``, which the server applies to the configuration it opens
    file systems with."""
    from spark_jobs.lake.session import s3a_settings

    if not 0 < config.port < 65536:
        raise InvalidArgumentError(f"--port must be a TCP port, not {config.port}")
    folder = config.folder.resolve()
    hadoop = {
        key.removeprefix("spark.hadoop."): value for key, value in s3a_settings(environ).items()
    }
    return [
        _java(),
        f"-Xmx{config.heap}",
        "-cp",
        _classpath(),
        # Hive's log4j2 async loggers need a jar pyspark does not ship
        "-Dhive.async.log.enabled=false",
        f"-Dderby.stream.error.file={folder / 'derby.log'}",
        f"-Djavax.jdo.option.ConnectionURL=jdbc:derby:;databaseName={folder / 'db'};create=true",
        # a database's folder when a client names none (the platform's tables name theirs)
        f"-Dhive.metastore.warehouse.dir={folder / 'warehouse'}",
        "-Ddatanucleus.schema.autoCreateAll=true",
        "-Dhive.metastore.schema.verification=false",
        HIVE_SERVER,
        "-p",
        str(config.port),
        *[arg for key, value in sorted(hadoop.items()) for arg in ("--hiveconf", f"{key}={value}")],
    ]


def listening(host: str, port: int) -> bool:
    """Whether something accepts connections on ``host:port``."""
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex((host, port)) == 0


def serve(config: MetastoreConfig) -> int:
    """Become the server (``exec``): the container's or supervisor's signals reach the JVM
    itself. Returns only when it could not start."""
    config.folder.mkdir(parents=True, exist_ok=True)
    argv = command(config, os.environ)
    print(f"s3tm metastore: thrift://0.0.0.0:{config.port}, database {config.folder}", flush=True)
    os.execv(argv[0], argv)
    return 1  # pragma: no cover - execv does not return
