"""``s3tm sql`` on a team's catalog (``S3TM_CATALOG_URI``): Spark SQL on the Hive
Metastore every Spark job registers its tables in, so a query reads what a team's other
tools read by the same names. Delta serves each table's latest version; an earlier one is
``SELECT ... FROM routing.versions VERSION AS OF 3`` (or ``TIMESTAMP AS OF '...'``)."""

from __future__ import annotations

import pyarrow as pa

from core.errors import InputDataError


class CatalogSQL:
    """A Spark session on the catalog; :attr:`tables` are the names registered there."""

    def __init__(self, uri: str) -> None:
        from spark_jobs.lake.session import build_session

        self.uri = uri
        # build_session puts every session on the catalog S3TM_CATALOG_URI names
        self.spark = build_session("s3tm-sql")
        self.tables = sorted(
            f"{row.namespace}.{row.tableName}" if row.namespace != "default" else row.tableName
            for database in self.spark.sql("SHOW DATABASES").collect()
            for row in self.spark.sql(f"SHOW TABLES IN `{database[0]}`").collect()
            if not row.isTemporary
        )

    def query(self, sql: str) -> pa.Table:
        """Run one Spark SQL statement; its result as an Arrow table.

        Raises:
            InputDataError: bad SQL, an unknown table or column (Spark's first line).
        """
        from pyspark.errors import PySparkException

        try:
            return self.spark.sql(sql.strip().rstrip(";")).toArrow()
        except PySparkException as err:
            text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            if "TABLE_OR_VIEW_NOT_FOUND" in text:
                text += f" (tables in {self.uri}: {', '.join(self.tables) or 'none yet'})"
            raise InputDataError(text) from None
