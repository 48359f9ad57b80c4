"""S3-TM core: pure algorithms (no Spark, no Airflow).

Data flow inside ``core``: ``text`` (normalisation) -> ``corpus`` (CSR arrays, readers,
synthetic corpora) -> ``learn`` (hash, SALB, hot-word splitting) -> ``routing`` (routing
tables, the router, metrics). ``bench`` and ``cli`` sit on top.
"""

__version__ = "0.1.0"
