"""Airflow Assets of the lakehouse tables: declared once, used as outlets and schedules.

Only the URIs live here without Airflow; :func:`asset` builds the ``airflow.sdk.Asset``
(imported lazily, so Spark workers never need Airflow).
"""

from __future__ import annotations

from typing import Any

from schemas.tables import TABLES

ASSET_URI_PREFIX = "s3tm://lakehouse/"


def asset_uri(name: str) -> str:
    if name not in TABLES:
        raise KeyError(f"unknown table {name!r}")
    return ASSET_URI_PREFIX + name


def asset(name: str) -> Any:
    """The Airflow Asset of table ``name``."""
    from airflow.sdk import Asset

    return Asset(name=name, uri=asset_uri(name), group="s3tm")
