"""The one SparkSession builder every job uses.

Embedded default: ``local[*]`` with settings for a small machine; any master by argument or
``S3TM_SPARK_MASTER``. On a cluster the settings the application was given (spark-submit,
``spark-defaults.conf``, the Spark operator, Airflow's connection) stand: this module only
fills in what is missing. The jars ``make setup`` resolved (Delta, S3A,
the Kafka source: ``jars``) go on the classpath; Delta's session extension is configured
when its jar is there, else Delta I/O goes through delta-rs (see ``delta_io``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from spark_jobs.lake import jars
from spark_jobs.lake.catalog import catalog_conf
from spark_jobs.settings import settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# What a job gets where nobody set it: whatever spark-submit, spark-defaults.conf, the Spark
# operator or Airflow's spark_default connection set wins (shuffle partitions = N on the
# matcher). The sizing is for small data: Spark's own 200 shuffle partitions made each remap
# step on a small cluster 3-10x slower (the cluster demo: normalise 349 s).
DEFAULTS: dict[str, str] = {
    "spark.sql.shuffle.partitions": "8",
    "spark.default.parallelism": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.adaptive.enabled": "true",
    # Delta-rs commits the files Spark writes: no _SUCCESS markers or summary files.
    "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
    "spark.hadoop.parquet.summary.metadata.level": "NONE",
    "spark.sql.sources.partitionColumnTypeInference.enabled": "true",
}


def local_defaults() -> dict[str, str]:
    """The defaults, with the driver's memory and the UI from the environment's settings."""
    platform = settings()
    return {
        **DEFAULTS,
        "spark.driver.memory": platform.driver_memory,
        "spark.ui.enabled": str(platform.spark_ui).lower(),
    }


def properties_file(environ: Mapping[str, str]) -> dict[str, str]:
    """``spark-defaults.conf`` of ``SPARK_CONF_DIR`` (else ``$SPARK_HOME/conf``): what the
    spark-submit that PySpark starts for this process reads, and an argument from here
    would override."""
    folder = environ.get("SPARK_CONF_DIR") or (
        f"{environ['SPARK_HOME']}/conf" if environ.get("SPARK_HOME") else None
    )
    if folder is None or not os.path.isfile(os.path.join(folder, "spark-defaults.conf")):
        return {}
    settings: dict[str, str] = {}
    with open(os.path.join(folder, "spark-defaults.conf"), encoding="utf-8") as lines:
        for line in lines:
            parts = line.strip().split(None, 1)
            if len(parts) == 2 and not parts[0].startswith("#"):
                settings[parts[0]] = parts[1].strip()
    return settings


def given_settings(environ: Mapping[str, str]) -> dict[str, str]:
    """Settings the application was given by someone other than this code.

    Under spark-submit (Airflow's operator, the Spark operator, a user) the JVM is up
    already and holds them (``--conf``, ``--master``, ``--properties-file``,
    ``spark-defaults.conf``, the connection's extras); with an active SparkContext, its
    settings; else the ``spark-defaults.conf`` the launched spark-submit will read."""
    from pyspark import SparkConf, SparkContext

    active = SparkContext._active_spark_context
    if active is not None:
        return dict(active.getConf().getAll())
    if "PYSPARK_GATEWAY_PORT" in environ:
        SparkContext._ensure_initialized()  # connects to spark-submit's JVM: nothing starts
        return dict(SparkConf().getAll())
    return properties_file(environ)


# A local master's driver listens on loopback only: by default Spark binds its RPC, block
# manager and UI ports to the machine's network address, unauthenticated. A cluster's driver
# must be reachable by its executors: there the deployment's network and settings decide.
LOOPBACK = "127.0.0.1"
LOCAL_DRIVER: dict[str, str] = {
    "spark.driver.host": LOOPBACK,
    "spark.driver.bindAddress": LOOPBACK,
}


def is_local_master(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def console_progress() -> str:
    """Spark's stage progress bar on a terminal (a long ingest or chain run by hand shows
    how far it is), never in logs (Airflow tasks, tests, pipes)."""
    return "true" if sys.stderr.isatty() else "false"


DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # a table's state is rebuilt from its log by a Spark job with this many partitions
    # (default 50: fifty tasks for a log of a few files, at every snapshot)
    "spark.databricks.delta.snapshotPartitions": "2",
}


# Where S3A takes credentials, in order: the environment's keys (a Secret, compose's .env),
# the pod's web identity token (IRSA), the container's or the instance's role (EKS Pod
# Identity, an instance profile): what delta-rs, pyarrow and boto3 find by default. Not the
# SDK's DefaultCredentialsProvider: its create() is one instance per process, which the
# first S3A file system to close would close for every other. The deployment files
# (docker/spark-defaults.conf, infra/k8s) name the same chain (tests/deploy check).
S3A_CREDENTIALS_PROVIDERS = (
    "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider",
    "software.amazon.awssdk.auth.credentials.WebIdentityTokenFileCredentialsProvider",
    "org.apache.hadoop.fs.s3a.auth.IAMInstanceCredentialsProvider",
)


def s3a_settings(environ: Mapping[str, str]) -> dict[str, str]:
    """S3A (an ``s3a://`` lakehouse, landing or checkpoint) reads the same variables as
    delta-rs and pyarrow: the keys (``S3A_CREDENTIALS_PROVIDERS`` first), the region, and an
    endpoint for MinIO or another S3-compatible store (AWS itself when unset), addressed by
    path (``http://host:port/bucket/key``: no per-bucket DNS names)."""
    settings = {"spark.hadoop.fs.s3a.aws.credentials.provider": ",".join(S3A_CREDENTIALS_PROVIDERS)}
    region = environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION")
    if region:
        settings["spark.hadoop.fs.s3a.endpoint.region"] = region
    if environ.get("AWS_ENDPOINT_URL"):
        settings["spark.hadoop.fs.s3a.endpoint"] = environ["AWS_ENDPOINT_URL"]
        settings["spark.hadoop.fs.s3a.path.style.access"] = "true"
    return settings


def delta_jars_present() -> bool:
    """Whether Delta's JVM jars reach Spark here (never downloaded)."""
    return jars.has_jar("delta-spark_")


def build_session(
    app_name: str, *, master: str | None = None, conf: Mapping[str, str] | None = None
) -> SparkSession:
    """Create (or return the active) SparkSession for a job.

    Args:
        app_name: shown in the Spark UI and logs.
        master: any Spark master URL; default ``S3TM_SPARK_MASTER``, else the master
            spark-submit was given, else ``local[*]``.
        conf: extra settings, applied last.
    """
    from pyspark.sql import SparkSession

    # Executors must run the same interpreter (the one with ``core`` installed).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    platform = settings()
    chosen = master or platform.spark_master
    given = given_settings(os.environ)
    builder = SparkSession.builder.appName(app_name)
    # Under spark-submit (it starts Python with a gateway port), the master it was given
    # (Airflow's ``spark_default``) stands: setting one here would quietly override it.
    if chosen or "PYSPARK_GATEWAY_PORT" not in os.environ:
        builder = builder.master(chosen or "local[*]")
    master = chosen or given.get("spark.master") or "local[*]"
    defaults = {
        **local_defaults(),
        "spark.ui.showConsoleProgress": console_progress(),
        **jars.spark_classpath_conf(),
    }
    if is_local_master(master):
        defaults.update(LOCAL_DRIVER)
        # the JVM this process launches binds its other servers (the UI) there too
        if "PYSPARK_GATEWAY_PORT" not in os.environ:
            os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    # Delta's SQL and format("delta") whenever its jars are here, whichever engine commits
    if delta_jars_present():
        defaults.update(DELTA_CONF)
    defaults.update(s3a_settings(os.environ))
    if platform.catalog_uri:  # the tables by name, in a team's Hive Metastore
        defaults.update(catalog_conf(platform.catalog_uri))
    # what spark-submit, spark-defaults.conf, the operator or the connection gave wins;
    # the caller's own ``conf`` (a test's, a benchmark's) wins over everything
    chosen_conf = {k: v for k, v in defaults.items() if k not in given}
    chosen_conf.update(conf or {})
    for key, value in chosen_conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(platform.spark_log_level)
    return session
