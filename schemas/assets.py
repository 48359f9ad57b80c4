"""Airflow Assets of the lakehouse tables: declared once, used as inlets, outlets and
schedules.

A table's Asset URI is where the table is (``file:///…/silver/posts``, or
``s3://bucket/prefix/silver/posts`` on object storage): the name OpenLineage gives the
same table in the events of Airflow's tasks and of the Spark jobs' listener, so lineage
joins across both. Only the URIs live here without Airflow; :func:`asset` builds the
``airflow.sdk.Asset`` (imported lazily, so Spark workers never need Airflow).
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

from schemas.tables import TABLES

# Signals: assets that stand for a request, not a table (their events carry the why)
SIGNALS = {"remap_request": "s3tm://signals/remap-request"}
# object-store schemes a lakehouse root may have (s3a: Hadoop's spelling of the same bucket)
_OBJECT_STORE = ("s3", "s3a")


def asset_uri(name: str, lakehouse: str) -> str:
    """The URI of table ``name`` in the lakehouse at ``lakehouse`` (a local path, or
    ``s3://bucket/prefix``)."""
    if name not in TABLES:
        raise KeyError(f"unknown table {name!r}")
    relative = TABLES[name].relative_path.as_posix()
    parsed = urlsplit(lakehouse)
    if parsed.scheme in _OBJECT_STORE:
        if not parsed.netloc:
            raise ValueError(f"lakehouse URI {lakehouse!r} names no bucket")
        prefix = parsed.path.strip("/")
        return f"s3://{parsed.netloc}/{prefix + '/' if prefix else ''}{relative}"
    path = parsed.path if parsed.scheme == "file" else lakehouse
    return "file://" + os.path.join(os.path.abspath(path), relative)


def asset(name: str, lakehouse: str) -> Any:
    """The Airflow Asset of table ``name`` in the deployment's lakehouse."""
    from airflow.sdk import Asset

    return Asset(name=name, uri=asset_uri(name, lakehouse), group="s3tm")


def signal(name: str) -> Any:
    """The Airflow Asset of signal ``name`` (see :data:`SIGNALS`)."""
    from airflow.sdk import Asset

    if name not in SIGNALS:
        raise KeyError(f"unknown signal {name!r}; known: {sorted(SIGNALS)}")
    return Asset(name=name, uri=SIGNALS[name], group="s3tm-signals")
