"""Table names, locations and schemas: one definition per table, used by Spark, pyarrow,
delta-rs and the expectation suites."""

from schemas.tables import TABLES, TableSpec, table

__all__ = ["TABLES", "TableSpec", "table"]
