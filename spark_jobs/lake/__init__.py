"""The lake: Spark session, Delta I/O, routing store, subscription registry, validation."""
