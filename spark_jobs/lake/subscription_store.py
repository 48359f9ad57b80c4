"""The ``subscriptions.registry`` table: read, register, cancel (driver-side, one Delta
commit each; a cancelled subscription keeps its row with ``cancelled_at``).

Words are normalised by ``core.text.normalize`` and stored sorted and distinct. Used by the
``subscribe`` job, the remap jobs (learn, place, evaluate, validation) and the stream.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.corpus.arrays import Corpus, corpus_from_arrays, corpus_from_arrow_lists, take_rows
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


def active_subscription_batches(
    lakehouse: DeltaStore, batch_rows: int
) -> Iterator[tuple[np.ndarray, pa.Array]]:
    """The active subscriptions' ids (int64) and word lists, ``batch_rows`` at a time (in
    the registry's file order): a pass over millions in bounded memory."""
    if not lakehouse.exists("subscriptions.registry"):
        return
    snapshot = lakehouse.snapshot("subscriptions.registry")
    for batch in snapshot.dataset.to_batches(
        columns=["sub_id", "words"],
        filter=pc.field("cancelled_at").is_null(),
        batch_size=batch_rows,
    ):
        if batch.num_rows:
            yield np.asarray(batch["sub_id"], dtype=np.int64), batch["words"]


# registry rows read at a time by the passes over every active subscription: 10M
# subscriptions' word lists read at once took 3 GiB of the driver
REGISTRY_BATCH = 500_000


def active_corpus(lakehouse: DeltaStore) -> Corpus:
    """The active subscriptions as a corpus whose rows are in sub id order and whose
    ``post_ids`` are the sub ids (int64). The registry is read in batches and each batch's
    words are encoded as it arrives: no batch's strings outlive it (10M subscriptions: the
    corpus' 0.5 GiB of arrays, not the 3 GiB of their word lists)."""
    ids_parts: list[np.ndarray] = []
    length_parts: list[np.ndarray] = []
    code_parts: list[np.ndarray] = []
    dictionaries: list[pa.Array] = []
    for ids, words in active_subscription_batches(lakehouse, REGISTRY_BATCH):
        flat = pc.list_flatten(words)
        if flat.null_count:
            raise InputDataError("a registered subscription holds a null word")
        encoded = pc.dictionary_encode(flat)
        ids_parts.append(ids)
        length_parts.append(
            np.asarray(pc.fill_null(pc.list_value_length(words), 0), dtype=np.int64)
        )
        code_parts.append(np.asarray(encoded.indices, dtype=np.int32))
        dictionaries.append(encoded.dictionary)
    if not ids_parts:
        return replace(corpus_from_arrow_lists(pa.array([], pa.list_(pa.string()))),
                       post_ids=np.zeros(0, dtype=np.int64))  # fmt: skip
    # one vocabulary, words by first appearance; each batch's codes renumbered into it
    vocabulary = pc.unique(pa.chunked_array(dictionaries))
    codes = np.concatenate(
        [
            np.asarray(pc.index_in(d, value_set=vocabulary), dtype=np.int32)[c]
            for d, c in zip(dictionaries, code_parts, strict=True)
        ]
    )
    del code_parts
    sub_ids = np.concatenate(ids_parts)
    indptr = np.zeros(sub_ids.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.concatenate(length_parts), out=indptr[1:])
    order = np.argsort(sub_ids, kind="stable")  # files come in any order
    if np.any(order != np.arange(order.shape[0])):
        indptr, codes = take_rows(indptr, codes, order)
        sub_ids = sub_ids[order]
    corpus = corpus_from_arrays(vocabulary.to_pylist(), indptr, codes)
    return replace(corpus, post_ids=sub_ids)


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
        start = _max_sub_id(lakehouse) + 1
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


def _max_sub_id(lakehouse: DeltaStore) -> int:
    """The largest registered id (0: none), read as one column, not a row per subscription."""
    if not lakehouse.exists("subscriptions.registry"):
        return 0
    ids = lakehouse.read_arrow("subscriptions.registry")["sub_id"]
    top = pc.max(ids).as_py() if len(ids) else None
    return int(top) if top is not None else 0


def _cancel(lakehouse: DeltaStore, sub_ids: Sequence[int]) -> int:
    # columns, not a Python row per subscription: the registry holds millions
    rows = lakehouse.read_arrow("subscriptions.registry")
    asked = np.unique(np.asarray(list(sub_ids), dtype=np.int64))
    ids = np.asarray(rows["sub_id"], dtype=np.int64)
    unknown = asked[~np.isin(asked, ids)]
    if unknown.size:
        raise InputDataError(f"unknown subscription ids {unknown[:5].tolist()}")
    hit = np.isin(ids, asked) & np.asarray(pc.is_null(rows["cancelled_at"]), dtype=bool)
    changed = int(hit.sum())
    if changed == 0:
        return 0
    cancelled_at = pc.if_else(
        pa.array(hit),
        pa.scalar(now_utc(), rows.schema.field("cancelled_at").type),
        rows["cancelled_at"],
    )
    rows = rows.set_column(
        rows.schema.get_field_index("cancelled_at"), rows.schema.field("cancelled_at"), cancelled_at
    )
    lakehouse.write_arrow(
        rows.sort_by("sub_id").cast(table("subscriptions.registry").schema),
        "subscriptions.registry",
        mode="overwrite",
    )
    return changed
