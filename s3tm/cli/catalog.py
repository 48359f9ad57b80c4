"""``s3tm metastore``: a Hive Metastore server for the lakehouse's tables, for a team that
runs none (compose's ``metastore`` service). Point ``S3TM_CATALOG_URI`` at
``thrift://HOST:PORT`` and every Spark job registers the tables it wrote there; a team
with a metastore of its own points the variable at that one instead."""

from __future__ import annotations

import argparse

from s3tm.cli.options import add_command
from spark_jobs.lake.metastore import MetastoreConfig


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    add_command(sub, "metastore", MetastoreConfig, _serve, prog="s3tm")


def _serve(config: MetastoreConfig) -> int:
    from spark_jobs.lake.metastore import serve

    return serve(config)
