"""Airflow Assets of the lakehouse tables: declared once, used as outlets and schedules.

Only the URIs live here without Airflow; :func:`asset` builds the ``airflow.sdk.Asset``
(imported lazily, so Spark workers never need Airflow).
"""

from __future__ import annotations

from typing import Any

from schemas.tables import TABLES

ASSET_URI_PREFIX = "s3tm://lakehouse/"
# Signals: assets that stand for a request, not a table (their events carry the why)
SIGNALS = {"remap_request": "s3tm://signals/remap-request"}


def asset_uri(name: str) -> str:
    if name not in TABLES:
        raise KeyError(f"unknown table {name!r}")
    return ASSET_URI_PREFIX + name


def asset(name: str) -> Any:
    """The Airflow Asset of table ``name``."""
    from airflow.sdk import Asset

    return Asset(name=name, uri=asset_uri(name), group="s3tm")


def signal(name: str) -> Any:
    """The Airflow Asset of signal ``name`` (see :data:`SIGNALS`)."""
    from airflow.sdk import Asset

    if name not in SIGNALS:
        raise KeyError(f"unknown signal {name!r}; known: {sorted(SIGNALS)}")
    return Asset(name=name, uri=SIGNALS[name], group="s3tm-signals")
