"""The application layer: the ``s3tm`` command, the demo, benchmarks and experiments.

It wires the layers below it together (``core`` algorithms, ``schemas``, the
``spark_jobs`` lake, batch jobs and stream) and nothing below imports it.
"""

__version__ = "0.1.0"
