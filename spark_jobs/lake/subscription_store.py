"""The ``subscriptions.registry`` table: read, register, cancel (driver-side, one Delta
commit each; a cancelled subscription keeps its row with ``cancelled_at``).

Words are normalised by ``core.text.normalize`` and stored sorted and distinct. Used by the
``subscribe`` job, the remap jobs (learn, place, evaluate, validation) and the stream.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import pyarrow as pa

from core.errors import InputDataError, InvalidArgumentError
from core.text import normalize
from schemas import table
from schemas.rows import SubscriptionRow
from spark_jobs.lake.routing_store import now_utc

if TYPE_CHECKING:
    from spark_jobs.lake.delta_store import DeltaStore


def registry(lakehouse: DeltaStore) -> list[SubscriptionRow]:
    """Every registered subscription, by sub id."""
    rows = cast(list[SubscriptionRow], lakehouse.read_arrow("subscriptions.registry").to_pylist())
    return sorted(rows, key=lambda r: r["sub_id"])


def active_subscriptions(lakehouse: DeltaStore) -> list[SubscriptionRow]:
    """Subscriptions not cancelled, by sub id."""
    return [r for r in registry(lakehouse) if r["cancelled_at"] is None]


def add_subscriptions(lakehouse: DeltaStore, phrases: Sequence[str], subscriber: str) -> list[int]:
    """Register phrases (each normalised to a word set); returns their new sub ids.

    Raises:
        InvalidArgumentError: if a phrase has no word left after normalisation.
    """
    word_sets = [normalize(p) for p in phrases]
    empty = [p for p, w in zip(phrases, word_sets, strict=True) if not w]
    if empty:
        raise InvalidArgumentError(f"no word left after normalisation in {empty[:3]}")
    return register_word_sets(lakehouse, phrases, word_sets, subscriber)


def track_phrases(track: str) -> list[str]:
    """Twitter-``track``-style phrases: comma-separated phrases are ORed (one subscription
    each), the words of a phrase ANDed.

    Raises:
        InvalidArgumentError: when no phrase is given.
    """
    phrases = [p.strip() for p in track.split(",") if p.strip()]
    if not phrases:
        raise InvalidArgumentError(f"no phrase in {track!r}")
    return phrases


def register_word_sets(
    lakehouse: DeltaStore,
    phrases: Sequence[str],
    word_sets: Sequence[Sequence[str]],
    subscriber: str | Sequence[str],
) -> list[int]:
    """Register already-normalised word sets (stored sorted and distinct) in one commit;
    ``subscriber`` names the owner of all of them, or of each one."""
    owners = [subscriber] * len(phrases) if isinstance(subscriber, str) else list(subscriber)
    if len(owners) != len(phrases) or not all(owners):
        raise InvalidArgumentError("a subscriber name is required for every subscription")
    word_sets = [sorted(set(w)) for w in word_sets]
    if any(not w for w in word_sets):
        raise InvalidArgumentError("every subscription needs at least one word")
    with lakehouse.locked("subscriptions.registry"):  # ids are allocated once
        start = max((r["sub_id"] for r in registry(lakehouse)), default=0) + 1
        ids = list(range(start, start + len(phrases)))
        _append_registry(lakehouse, ids, owners, phrases, word_sets)
    return ids


def _append_registry(
    lakehouse: DeltaStore,
    ids: Sequence[int],
    owners: Sequence[str],
    phrases: Sequence[str],
    word_sets: Sequence[Sequence[str]],
) -> None:
    now = now_utc()
    data = pa.Table.from_pylist(
        [
            {
                "sub_id": i,
                "subscriber": o,
                "phrase": p,
                "words": w,
                "created_at": now,
                "cancelled_at": None,
            }
            for i, o, p, w in zip(ids, owners, phrases, word_sets, strict=True)
        ],
        schema=table("subscriptions.registry").schema,
    )
    lakehouse.write_arrow(data, "subscriptions.registry")


def cancel_subscriptions(lakehouse: DeltaStore, sub_ids: Sequence[int]) -> int:
    """Mark subscriptions cancelled (one commit); returns how many were active."""
    with lakehouse.locked("subscriptions.registry"):  # a rewrite: no registration lost
        return _cancel(lakehouse, sub_ids)


def _cancel(lakehouse: DeltaStore, sub_ids: Sequence[int]) -> int:
    rows = registry(lakehouse)
    known = {r["sub_id"] for r in rows}
    unknown = sorted(set(sub_ids) - known)
    if unknown:
        raise InputDataError(f"unknown subscription ids {unknown[:5]}")
    now, changed = now_utc(), 0
    for row in rows:
        if row["sub_id"] in sub_ids and row["cancelled_at"] is None:
            row["cancelled_at"] = now
            changed += 1
    lakehouse.write_arrow(
        pa.Table.from_pylist(rows, schema=table("subscriptions.registry").schema),
        "subscriptions.registry",
        mode="overwrite",
    )
    return changed
