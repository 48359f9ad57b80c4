"""Airflow on this machine: ``s3tm airflow`` (``standalone``: its processes on the
project's settings), the end-to-end demo through it (``demo``) and the REST client both
demos drive it with (``api``)."""
