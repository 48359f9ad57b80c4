"""The registry read as columns (what place, evaluate, learn and validate use) equals the
registry read as rows, and a driver-side write keeps its row groups small enough that a
read of a few ids skips the rest (delta-rs only: no JVM)."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from spark_jobs.lake import delta_store
from spark_jobs.lake.delta_io import Lakehouse
from spark_jobs.lake.subscription_store import (
    active_corpus,
    add_subscriptions,
    cancel_subscriptions,
    registry,
)


def active_subscription_columns(lake: Lakehouse):
    """The reference: the whole registry read at once, active rows in sub id order."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = lake.read_arrow(
        "subscriptions.registry",
        columns=["sub_id", "words"],
        where=pc.field("cancelled_at").is_null(),
    )
    order = np.argsort(np.asarray(rows["sub_id"]), kind="stable")
    rows = rows.take(pa.array(order))
    return np.asarray(rows["sub_id"], dtype=np.int64), rows["words"]


@pytest.fixture
def lake(tmp_path, monkeypatch: pytest.MonkeyPatch) -> Lakehouse:
    monkeypatch.setattr(delta_store, "ROW_GROUP_ROWS", 100)
    lake = Lakehouse(None, str(tmp_path / "lakehouse"))
    add_subscriptions(lake, [f"white house {k}" for k in range(150)], "alice")
    add_subscriptions(lake, [f"election night {k}" for k in range(100)], "bob")
    cancel_subscriptions(lake, [3, 150, 151, 249])
    return lake


def test_the_active_subscriptions_as_columns_equal_them_as_rows(lake: Lakehouse) -> None:
    rows = [r for r in registry(lake) if r["cancelled_at"] is None]
    sub_ids, words = active_subscription_columns(lake)
    assert sub_ids.tolist() == [r["sub_id"] for r in rows]
    assert words.to_pylist() == [list(r["words"]) for r in rows]
    corpus = active_corpus(lake)
    assert corpus.post_ids is not None and corpus.post_ids.tolist() == sub_ids.tolist()
    assert [sorted(corpus.post_words(k)) for k in range(corpus.n_posts)] == [
        sorted(r["words"]) for r in rows
    ]


@pytest.mark.parametrize("batch", [1, 7, 1_000])
def test_the_corpus_read_in_batches_equals_the_registry(
    lake: Lakehouse, batch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read a few rows at a time, each batch's words encoded on its own and renumbered into
    one vocabulary: the same subscriptions, in sub id order, as read at once."""
    from core.corpus.arrays import corpus_from_arrow_lists
    from spark_jobs.lake import subscription_store

    monkeypatch.setattr(subscription_store, "REGISTRY_BATCH", batch)
    sub_ids, words = active_subscription_columns(lake)
    whole = corpus_from_arrow_lists(words)
    batched = active_corpus(lake)
    assert batched.post_ids is not None and batched.post_ids.tolist() == sub_ids.tolist()
    assert batched.n_posts == whole.n_posts == len(sub_ids)
    assert [sorted(batched.post_words(k)) for k in range(batched.n_posts)] == [
        sorted(whole.post_words(k)) for k in range(whole.n_posts)
    ]
    assert sorted(batched.vocabulary.tolist()) == sorted(whole.vocabulary.tolist())


def test_a_driver_side_write_has_row_groups_of_at_most_the_set_rows(lake: Lakehouse) -> None:
    files = lake.delta_table("subscriptions.registry").file_uris()
    assert files
    for uri in files:
        meta = pq.ParquetFile(lake.fs_path(uri), filesystem=lake.fs).metadata
        sizes = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
        assert max(sizes) <= 100
        assert sum(sizes) == 250  # the cancellation rewrote the whole registry
