"""The JVM jars of ``docker/jars/pom.xml`` on this machine.

``make setup`` has Maven resolve the pom's two profiles (jars stay in Maven's local cache)
and writes their classpaths to ``.jars/spark.classpath`` (Delta, S3A, the Kafka source) and
``.jars/kafka-broker.classpath`` (the KRaft broker of ``s3tm kafka``). Every Spark session the
project starts puts the first on its driver and executor classpath; nothing is downloaded
at run time. In the platform image the same jars sit in ``$SPARK_HOME/jars`` instead and
no classpath file exists. Cheap to import (DAG files use it): no Spark.
"""

from __future__ import annotations

import os
from pathlib import Path

from core.errors import InvalidArgumentError
from spark_jobs.settings import env_name, settings

JARS_DIR_ENV = env_name("jars_dir")
REPO = Path(__file__).resolve().parents[2]
SPARK, KAFKA_BROKER = "spark", "kafka-broker"


def jars_dir() -> Path:
    """Where ``make setup`` wrote the classpath files (``$S3TM_JARS_DIR``, else ``.jars``)."""
    return settings().jars_dir


def classpath(profile: str = SPARK) -> list[str]:
    """The jar files of a profile of the pom, [] when set-up has not resolved it here.

    Raises:
        InvalidArgumentError: the list names jars that are gone (Maven's cache was cleaned):
            say how to get them back rather than fail later with a missing class.
    """
    listing = jars_dir() / f"{profile}.classpath"
    if not listing.is_file():
        return []
    entries = [e for e in listing.read_text().strip().split(os.pathsep) if e]
    missing = [e for e in entries if not Path(e).is_file()]
    if missing:
        raise InvalidArgumentError(
            f"{listing} names {len(missing)} jars that are gone (first: {missing[0]}); "
            "run `make setup` again to resolve docker/jars/pom.xml"
        )
    return entries


def spark_classpath_conf() -> dict[str, str]:
    """Spark settings that put the resolved jars on the driver's and the executors' classpath
    ({} when there are none here, e.g. in the image, whose Spark holds them already).

    ``extraClassPath``, not ``spark.jars``: the jars are read where they lie, not copied into
    every executor's work folder (the AWS SDK bundle alone is 600 MB)."""
    entries = classpath(SPARK)
    if not entries:
        return {}
    joined = os.pathsep.join(entries)
    return {"spark.driver.extraClassPath": joined, "spark.executor.extraClassPath": joined}


def has_jar(prefix: str) -> bool:
    """Whether a jar named ``<prefix>*.jar`` reaches Spark: resolved here, or in the Spark
    distribution (pyspark's, or ``$SPARK_HOME``'s)."""
    import pyspark

    if any(Path(e).name.startswith(prefix) for e in classpath(SPARK)):
        return True
    folders = [Path(pyspark.__file__).parent / "jars"]
    if os.environ.get("SPARK_HOME"):
        folders.append(Path(os.environ["SPARK_HOME"]) / "jars")
    return any(any(folder.glob(f"{prefix}*.jar")) for folder in folders)
