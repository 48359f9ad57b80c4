"""Rows of the driver-side tables as Python sees them (``Lakehouse.read_arrow(...)
.to_pylist()``): typed views of the Arrow schemas in :mod:`schemas.tables`, which stay the
one definition (a test checks that the keys and the columns agree)."""

from __future__ import annotations

import datetime as dt
from typing import TypedDict

from core.learn.remap_params import RemapChoice


class CandidateRow(TypedDict):
    """A ``routing.versions`` row before its version number is allocated; ``params``,
    ``inputs``, ``metrics`` and ``validation`` are JSON texts."""

    algorithm: str
    n_matchers: int
    params: str
    inputs: str
    subscribed_words: list[str] | None
    metrics: str | None
    validation: str | None
    status: str
    created_at: dt.datetime
    published_at: dt.datetime | None
    retired_at: dt.datetime | None


class VersionRow(CandidateRow):
    """A row of ``routing.versions``."""

    routing_version: int


class VersionChanges(TypedDict, total=False):
    """The columns of a ``routing.versions`` row an update sets."""

    metrics: str | None
    validation: str | None
    status: str
    published_at: dt.datetime | None
    retired_at: dt.datetime | None


class VersionParams(RemapChoice, total=False):
    """The JSON of ``routing.versions.params``: how the version was learned (the learn
    job's options and, from :class:`RemapChoice`, which remap ran and why)."""

    label: str
    split: bool
    seed: int
    holdout_fraction: float
    hot_words: int
    live_hot_words: dict[str, int]


class SubscriptionRow(TypedDict):
    """A row of ``subscriptions.registry`` (``words``: normalised, sorted)."""

    sub_id: int
    subscriber: str
    phrase: str
    words: list[str]
    created_at: dt.datetime
    cancelled_at: dt.datetime | None


ROW_TYPES: dict[str, type] = {
    "routing.versions": VersionRow,
    "subscriptions.registry": SubscriptionRow,
}
