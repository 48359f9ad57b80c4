"""The lakehouse's tables in Spark's catalog, and the SQL server (Spark Connect) over them."""
