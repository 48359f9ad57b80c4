"""Faster start-up of the suite's Spark JVMs: a class-data-sharing archive and the quick JIT.

The suite starts a Spark driver JVM some two hundred times (spark-submit in Airflow tasks,
``s3tm`` commands, the kill-point runs, each worker's session), and on 2 cores start-up is
most of what those tests cost: loading and verifying Spark's classes from their jars, and
compiling the code that runs once. Two JVM options cut it (measured on the 2-core machine,
a session plus its first Python job: 10 s -> 5 s):

- an AppCDS archive (JDK's ``-XX:ArchiveClassesAtExit``) of the classes a small job loads,
  written once per machine under ``.jars/test-jvm/`` and mapped by every later driver. It is
  keyed by everything it depends on (Java, pyspark, the resolved jars): the JVM checks the
  classpath itself and quietly runs without it on a mismatch.
- ``-XX:TieredStopAtLevel=1``: the client compiler only. The suite's jobs are small and
  short, so the optimising compiler's work would not pay back.
- ``-XX:+UseSerialGC``: a 1 GB heap on 2 cores needs no concurrent collector threads (G1,
  the JVM's choice here, spends CPU on them beside the other worker's JVMs).
- ``spark.sql.codegen.wholeStage=false`` (a ``-Dspark.*`` property: SparkConf reads those
  as defaults, so anything a job, spark-submit or a test sets wins): on a few thousand rows
  compiling each query's generated Java with Janino costs more than it saves.

A small job's driver (``tests/jvm_startup.py``'s workload): 16.9 -> 13.3 s of CPU with the
last two (a cgroup's ``cpuacct.usage``, 2 runs each, 2026-12-01).

They go to the drivers through ``SPARK_SUBMIT_OPTS`` (read by spark-submit's launcher for the
driver only), and from the drivers to the executors a standalone cluster starts for them
(``spark.executor.extraJavaOptions``: the JVM options, the same archive): a small job on a
one-worker cluster, master, worker, driver and executor, 35.0 -> 25.3-29.3 s of CPU. The
cluster's master and workers are untouched. Tests only: what a job does is the same with or
without them.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
QUICK_JIT = "-XX:TieredStopAtLevel=1"
# CPU, not the speed of a long job: see the module's doc
JVM_OPTIONS = (QUICK_JIT, "-XX:+UseSerialGC")
SPARK_DEFAULTS = ("-Dspark.sql.codegen.wholeStage=false",)

# The archive's workload: what most tests' drivers load (a session with the project's
# settings, Delta write and read, a shuffle, JSON, a Python mapInArrow).
_WORKLOAD = """
import sys, tempfile
from spark_jobs.lake.session import build_session
spark = build_session("s3tm-test-jvm-archive", master="local[2]")
folder = tempfile.mkdtemp()
df = spark.range(0, 2000).selectExpr("id", "id % 7 AS k", "cast(id AS string) AS s")
df.groupBy("k").count().collect()
df.write.mode("overwrite").json(folder + "/json")
spark.read.json(folder + "/json").count()
df.mapInArrow(lambda batches: batches, df.schema).count()
try:
    df.write.format("delta").save(folder + "/delta")
    spark.read.format("delta").load(folder + "/delta").count()
except Exception as error:  # no Delta jars here: the archive covers the rest
    print(f"no Delta in the archive: {error}"[:200], file=sys.stderr)
spark.stop()
"""


def _key() -> str:
    """What the archive depends on: the JVM, Spark's jars and the resolved classpath."""
    import pyspark

    from spark_jobs.lake import jars

    java = subprocess.run(
        ["java", "-version"], capture_output=True, text=True, check=False
    ).stderr.strip()
    listing = jars.jars_dir() / "spark.classpath"
    parts = [
        java,
        pyspark.__version__,
        str(Path(pyspark.__file__).parent),
        listing.read_text() if listing.is_file() else "",
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def archive_path() -> Path:
    from spark_jobs.lake import jars

    return jars.jars_dir() / "test-jvm" / f"spark-{_key()}.jsa"


def ensure_archive() -> Path | None:
    """The archive, written first if this machine has none (about 20 s); None if the JVM
    could not write one (the suite then runs without: slower, not different)."""
    path = archive_path()
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.partial")
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "S3TM_DRIVER_MEMORY": "1g",
        "SPARK_SUBMIT_OPTS": f"-XX:ArchiveClassesAtExit={partial} -Xlog:cds=off "
        "-Xlog:cds+dynamic=off",
    }
    print(f"writing the test JVMs' class archive {path} (once per machine)", file=sys.stderr)
    done = subprocess.run(
        [sys.executable, "-c", _WORKLOAD],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0 or not partial.is_file():
        print(f"no class archive (exit {done.returncode}): {done.stderr[-1500:]}", file=sys.stderr)
        partial.unlink(missing_ok=True)
        return None
    partial.replace(path)  # atomic: a concurrent run sees the whole archive or none
    return path


def driver_options(archive: Path | None) -> str:
    """``SPARK_SUBMIT_OPTS`` for the suite's drivers, and through them for the executors a
    standalone cluster starts for their applications (``spark.executor.extraJavaOptions``
    as a ``-D`` default: quoted, the launcher keeps it one option)."""
    jvm = list(JVM_OPTIONS)
    if archive is not None:
        # an executor's classpath is the driver's (the same jars, then Spark's): it maps
        # the same archive
        jvm += [f"-XX:SharedArchiveFile={archive}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
    executors = f'"-Dspark.executor.extraJavaOptions={" ".join(jvm)}"'
    return " ".join([*jvm, *SPARK_DEFAULTS, executors])
