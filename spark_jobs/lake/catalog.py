"""The lakehouse's tables in a team's catalog: a Hive Metastore (``S3TM_CATALOG_URI``).

Every Spark job registers the tables that exist, idempotently, as external Delta tables at
their location: database = the table's layer (``routing``, ``silver``, ...; ``default``
for ``matches`` and ``deliveries``), so ``SELECT * FROM routing.versions`` works in any
Spark, Trino or BI tool on that metastore. The Delta log stays the truth: the catalog holds
a name and a location, never a schema to keep in step. Why a Hive Metastore: its Thrift
API is what Spark, Trino, Flink and most BI tools speak, and Spark ships its client (and
the server, which the tests and compose run from the same jars).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from core.errors import InputDataError
from schemas.tables import TABLES
from spark_jobs.lake import storage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spark_jobs.lake.delta_store import DeltaStore

log = logging.getLogger(__name__)

# where the databases' own folders are, in the lakehouse: the metastore makes a database's
# folder when it registers it (Spark's default, ./spark-warehouse of whatever process asks,
# is a folder on the metastore's machine it may not write)
CATALOG_DIR = "_catalog"

# Spark settings of a session on the catalog (static: set before the session starts)
HIVE_CATALOG = "spark.sql.catalogImplementation"
METASTORE_URIS = "spark.hadoop.hive.metastore.uris"


def catalog_conf(uri: str) -> dict[str, str]:
    """The Spark settings that put a session on the Hive Metastore at ``uri``."""
    return {HIVE_CATALOG: "hive", METASTORE_URIS: uri}


def qualified_name(table: str) -> tuple[str, str]:
    """(database, table) of a lakehouse table in the catalog."""
    database, _, name = table.rpartition(".")
    return database or "default", name


def _registered_location(spark: SparkSession, database: str, name: str) -> str | None:
    """Where the catalog says ``database.name`` is (None: not registered): the metastore's
    own record, through Spark's external catalog. Not ``DESCRIBE TABLE``, which loads each
    Delta table's snapshot (a Spark job reading its log) only to print its location."""
    catalog = spark._jsparkSession.sharedState().externalCatalog()
    if not catalog.tableExists(database, name):
        return None
    return str(catalog.getTable(database, name).location().toString())


def _canonical(location: str) -> str:
    """A location as the metastore or Spark may spell it: ``file:/x``, ``file:///x`` and
    ``/x`` are one path."""
    if location.startswith("file:"):
        location = "/" + location[len("file:") :].lstrip("/")
    return location.rstrip("/")


def register_tables(spark: SparkSession, lakehouse: DeltaStore) -> list[str]:
    """Register every existing table of ``lakehouse`` in the session's catalog; returns
    the names registered now (a table already there at the same location is left alone).

    Raises:
        InputDataError: a table of that name is registered at another location (another
            lakehouse's): the catalog is not changed behind its owner's back.
    """
    if spark.conf.get(HIVE_CATALOG, "in-memory") != "hive":
        return []
    from pyspark.errors import PySparkException

    try:
        return _register(spark, lakehouse)
    except PySparkException as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputDataError(
            f"registering the tables in the catalog ({spark.conf.get(METASTORE_URIS, '?')}) "
            f"failed, the tables are written: {first}"
        ) from err


def _register(spark: SparkSession, lakehouse: DeltaStore) -> list[str]:
    registered = []
    for table in sorted(TABLES):
        if not lakehouse.exists(table):
            continue
        database, name = qualified_name(table)
        location = storage.spark_uri(lakehouse.path(table))
        found = _registered_location(spark, database, name)
        if found is not None:
            if _canonical(found) != _canonical(location):
                raise InputDataError(
                    f"the catalog's {database}.{name} is at {found}, not at this "
                    f"lakehouse's {location}: drop it there, or use another metastore"
                )
            continue
        folder = storage.spark_uri(storage.join(lakehouse.location, CATALOG_DIR, f"{database}.db"))
        spark.sql(f"CREATE DATABASE IF NOT EXISTS `{database}` LOCATION '{folder}'")
        spark.sql(
            f"CREATE TABLE IF NOT EXISTS `{database}`.`{name}` USING DELTA LOCATION '{location}'"
        )
        registered.append(f"{database}.{name}")
    if registered:
        log.info("registered in the catalog: %s", ", ".join(registered))
    return registered
