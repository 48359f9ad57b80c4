"""PySpark, split by concern (the layer above ``core`` and ``schemas``):

- ``lake``: the Spark session builder, the one Delta I/O module (two engines), the routing
  store, the subscription registry and the Great Expectations validation;
- ``jobs``: the batch jobs, one module each, ``spark-submit spark_jobs/jobs/<job>.py``: a
  thin ``main()`` around pure DataFrame -> DataFrame transforms;
- ``stream``: the streaming matcher (``stream/job.py`` the driver, ``stream/tasks.py`` the
  route / match / dispatch task bodies).

``common`` holds what every job's ``main()`` shares. Nothing here imports the application
layer (``s3tm``) or ``dags``.
"""
