"""SQL over the lakehouse: ``s3tm sql`` (DuckDB over delta-rs' Arrow datasets, no JVM) and
``s3tm sql-server`` (Spark Connect over the same tables, for JDBC-less tools and notebooks)."""
