"""The batch jobs: ingest -> normalise -> graph -> learn -> place -> evaluate -> publish
(and subscribe, and the whole chain as ``pipeline``); each ``spark-submit``-able."""
