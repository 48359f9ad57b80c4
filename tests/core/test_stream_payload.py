"""The route -> match payload: a post once per match partition, and each matcher's posts and
words unpacked exactly as if every (post, matcher) pair had travelled on its own."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import InvalidArgumentError
from core.stream.payload import group_words, matcher_inputs, partition_payloads, posts_schema
from core.stream.worker import gather_for_matchers
from tests.hypothesis_tiers import examples


def _kept(uses: list[list[bool]]) -> np.ndarray:
    n_matchers = len(uses[0])
    kept = np.zeros((len(uses), (n_matchers + 7) // 8), dtype=np.uint8)
    for w, row in enumerate(uses):
        for m, used in enumerate(row):
            if used:
                kept[w, m // 8] |= 1 << (m % 8)
    return kept


@settings(max_examples=examples(100), deadline=None)
@given(st.data())
def test_each_matcher_gets_the_posts_and_words_of_its_own_pairs(data) -> None:
    n_words = data.draw(st.integers(1, 12))
    n_matchers = data.draw(st.integers(1, 20))
    n_groups = data.draw(st.integers(1, n_matchers))
    groups = np.array(
        data.draw(st.lists(st.integers(0, n_groups - 1), min_size=n_matchers, max_size=n_matchers))
    )
    posts = data.draw(
        st.lists(st.lists(st.integers(0, n_words - 1), max_size=6), min_size=1, max_size=12)
    )
    # each post's distinct matchers (routing's pairs: post order, a matcher once per post)
    routes = [
        data.draw(st.lists(st.integers(0, n_matchers - 1), unique=True, max_size=n_matchers))
        for _ in posts
    ]
    uses = data.draw(
        st.lists(
            st.lists(st.booleans(), min_size=n_matchers, max_size=n_matchers),
            min_size=n_words,
            max_size=n_words,
        )
    )
    kept = _kept(uses)
    indptr = np.zeros(len(posts) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(p) for p in posts])
    word_ids = np.array([w for p in posts for w in p], dtype=np.int32)
    pair_post = np.array([p for p, ms in enumerate(routes) for _ in ms], dtype=np.int64)
    pair_matcher = np.array([m for ms in routes for m in ms], dtype=np.int64)
    post_ids = pa.array([f"p{i}" for i in range(len(posts))], pa.string())
    level = np.arange(len(posts), dtype=np.int8) % 3
    sampled = np.arange(len(posts)) % 2 == 0

    parts = partition_payloads(
        post_ids,
        np.arange(len(posts), dtype=np.int32) % 3,
        level,
        sampled,
        indptr,
        word_ids,
        pair_post,
        pair_matcher,
        groups,
        group_words(kept, groups),
        n_matchers,
    )

    got: dict[int, list[tuple[str, list[int], int, bool]]] = {}
    for group, rows in parts:
        assert rows.schema == posts_schema(n_matchers)
        # each post once per partition, with the partition's matchers only
        assert len(set(rows.column("post_id").to_pylist())) == rows.num_rows
        assert all(groups[m] == group for ms in rows.column("matchers").to_pylist() for m in ms)
        round_trip = pa.Table.from_batches([rows])  # as the match task reads it
        for part in matcher_inputs(round_trip, kept):
            ids = rows.column("post_id").to_pylist()
            words = [
                part.word_ids[part.offsets[i] : part.offsets[i + 1]].tolist()
                for i in range(part.rows.shape[0])
            ]
            got.setdefault(part.matcher, []).extend(
                (ids[r], w, int(level[int(ids[r][1:])]), bool(sampled[int(ids[r][1:])]))
                for r, w in zip(part.rows.tolist(), words, strict=True)
            )
    # the reference: one pair at a time, each matcher's pairs in post order
    want: dict[int, list[tuple[str, list[int], int, bool]]] = {}
    offsets, values = gather_for_matchers(indptr, word_ids, pair_post, pair_matcher, kept)
    for i, (p, m) in enumerate(zip(pair_post.tolist(), pair_matcher.tolist(), strict=True)):
        words = values[offsets[i] : offsets[i + 1]].tolist()
        want.setdefault(m, []).append((f"p{p}", words, int(level[p]), bool(sampled[p])))
    assert got == want


ARRIVED = dt.datetime(2026, 12, 7, 10, 0, tzinfo=dt.UTC)


def test_a_partition_payload_keeps_the_posts_columns() -> None:
    kept = np.full((3, 1), 0b11, dtype=np.uint8)
    groups = np.array([0, 0])
    parts = partition_payloads(
        pa.array(["a", "b"]),
        np.array([4, 5], dtype=np.int32),
        np.array([0, 7], dtype=np.int8),
        np.array([True, False]),
        np.array([0, 2, 3], dtype=np.int64),
        np.array([0, 2, 1], dtype=np.int32),
        np.array([0, 0, 1]),
        np.array([1, 0, 1]),
        groups,
        group_words(kept, groups),
        2,
        pa.array([ARRIVED, None], pa.timestamp("us", tz="UTC")),
    )
    assert len(parts) == 1
    rows = parts[0][1].to_pydict()
    assert rows == {
        "post_id": ["a", "b"],
        "dpart": [4, 5],
        "word_ids": [[0, 2], [1]],
        "matchers": [[1, 0], [1]],
        "shedding_level": [0, 7],
        "sampled": [True, False],
        "arrived_at": [ARRIVED, None],
    }


def test_partition_payloads_refuse_pairs_out_of_post_order() -> None:
    kept = np.ones((1, 1), dtype=np.uint8)
    with pytest.raises(InvalidArgumentError, match="post order"):
        partition_payloads(
            pa.array(["a", "b"]),
            np.zeros(2, dtype=np.int32),
            np.zeros(2, dtype=np.int8),
            np.ones(2, dtype=np.bool_),
            np.array([0, 1, 2], dtype=np.int64),
            np.array([0, 0], dtype=np.int32),
            np.array([1, 0]),
            np.array([0, 0]),
            np.array([0]),
            kept,
            1,
        )


def test_group_words_folds_the_matchers_bits() -> None:
    # word 0: matchers 0 and 9; word 1: matcher 3; word 2: none
    kept = np.zeros((3, 2), dtype=np.uint8)
    kept[0, 0] |= 1
    kept[0, 1] |= 1 << 1
    kept[1, 0] |= 1 << 3
    groups = np.array([0, 1, 2, 1, 0, 1, 2, 0, 1, 2])  # matcher 9 -> group 2
    folded = group_words(kept, groups)
    bits = np.unpackbits(folded, axis=1, bitorder="little")[:, :3].astype(bool)
    assert bits.tolist() == [[True, False, True], [False, True, False], [False, False, False]]
    with pytest.raises(InvalidArgumentError, match="one group"):
        group_words(kept, np.zeros(17, dtype=np.int64))
