"""S3-TM core: pure algorithms (no Spark, no Airflow).

Data flow inside ``core``: ``text`` (normalisation) -> ``corpus`` (CSR arrays, readers,
synthetic corpora) -> ``learn`` (hash, SALB, hot-word splitting) -> ``routing`` (routing
tables, the router, metrics) -> ``matching`` (tries), ``placement`` (LASP) -> ``stream``
(the streaming matcher's per-task pieces). Nothing here imports Spark, Airflow, Delta or the
layers above (``spark_jobs``, ``s3tm``); ``tests/test_layers.py`` proves it.
"""

__version__ = "0.1.0"
