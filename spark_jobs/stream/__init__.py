"""The streaming matcher: ``job`` (the Structured Streaming driver) and ``tasks`` (the
route / match / dispatch bodies that run in the Python workers)."""
