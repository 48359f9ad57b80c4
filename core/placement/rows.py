"""Placed subscriptions as arrays: what the stream's driver keeps per subscription.

Rows are appended (a subscription's sorted word ids and its matchers, as two CSRs) and
removed by a tombstone; a dense index maps a subscription id to its row. At 10M
subscriptions this is a few hundred MB of arrays where one Python object per subscription
took gigabytes, and a matcher's subscriptions are one sort away, not a loop over objects.
Dead rows are compacted away once they outnumber the live ones.

Subscription ids are the registry's: non-negative, allocated densely from 0 (the index is
an array over them).
"""

from __future__ import annotations

import numpy as np

from core.corpus.arrays import take_rows
from core.errors import InvalidArgumentError

# the dense id index may grow past the ids in use by this much, no more (ids are dense)
_INDEX_SLACK = 1 << 22


class _Buffer:
    """A growable 1-D array (amortised appends)."""

    def __init__(self, dtype: type[np.generic], values: np.ndarray | None = None) -> None:
        self.data = np.zeros(16, dtype=dtype) if values is None else values.astype(dtype)
        self.size = 0 if values is None else int(values.shape[0])

    def append(self, values: np.ndarray) -> None:
        need = self.size + values.shape[0]
        if need > self.data.shape[0]:
            grown = np.zeros(max(need, 2 * self.data.shape[0]), dtype=self.data.dtype)
            grown[: self.size] = self.data[: self.size]
            self.data = grown
        self.data[self.size : need] = values
        self.size = need

    @property
    def values(self) -> np.ndarray:
        return self.data[: self.size]


class PlacedRows:
    """Each placed subscription's word ids and matchers, by subscription id."""

    def __init__(self) -> None:
        self._sub = _Buffer(np.int64)
        self._alive = _Buffer(np.bool_)
        self._word_ptr = _Buffer(np.int64, np.zeros(1, dtype=np.int64))
        self._words = _Buffer(np.int32)
        self._matcher_ptr = _Buffer(np.int64, np.zeros(1, dtype=np.int64))
        self._matchers = _Buffer(np.int32)
        self._row_of = np.full(0, -1, dtype=np.int64)
        self._live = 0

    # -- lookups -----------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._live

    def rows_of(self, sub_ids: np.ndarray) -> np.ndarray:
        """The row of each id, -1 where it is not placed."""
        ids = np.asarray(sub_ids, dtype=np.int64)
        out = np.full(ids.shape[0], -1, dtype=np.int64)
        inside = (ids >= 0) & (ids < self._row_of.shape[0])
        out[inside] = self._row_of[ids[inside]]
        return out

    def contains(self, sub_id: int) -> bool:
        return 0 <= sub_id < self._row_of.shape[0] and bool(self._row_of[sub_id] >= 0)

    def sub_ids(self) -> np.ndarray:
        """The placed ids, in the order they were placed."""
        ids: np.ndarray = self._sub.values[self._alive.values]
        return ids.copy()

    def words(self, row: int) -> np.ndarray:
        ptr = self._word_ptr.values
        return self._words.values[ptr[row] : ptr[row + 1]]

    def matchers(self, row: int) -> np.ndarray:
        ptr = self._matcher_ptr.values
        return self._matchers.values[ptr[row] : ptr[row + 1]]

    def csr(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``rows``' (word indptr, word ids, matcher indptr, matcher ids)."""
        word_indptr, words = take_rows(self._word_ptr.values, self._words.values, rows)
        matcher_indptr, matchers = take_rows(self._matcher_ptr.values, self._matchers.values, rows)
        return word_indptr, words, matcher_indptr, matchers

    # -- changes -----------------------------------------------------------------------------
    def append(
        self,
        sub_ids: np.ndarray,
        word_indptr: np.ndarray,
        words: np.ndarray,
        matcher_indptr: np.ndarray,
        matchers: np.ndarray,
    ) -> np.ndarray:
        """Add subscriptions (new, distinct ids; CSRs of their word ids and matchers); returns
        their rows.

        Raises:
            InvalidArgumentError: for a negative id, or one so far past the others that the
                dense index would be mostly empty.
        """
        ids = np.asarray(sub_ids, dtype=np.int64)
        if ids.size == 0:
            return np.zeros(0, dtype=np.int64)
        if ids.min() < 0:
            raise InvalidArgumentError("subscription ids must be non-negative")
        top = int(ids.max()) + 1
        if top > self._row_of.shape[0]:
            if top > 4 * (self._sub.size + ids.shape[0]) + _INDEX_SLACK:
                raise InvalidArgumentError(
                    f"subscription id {top - 1} is far beyond the {self._sub.size + ids.size} "
                    "placed: ids are expected dense (the registry allocates them from 0)"
                )
            grown = np.full(max(top, 2 * self._row_of.shape[0]), -1, dtype=np.int64)
            grown[: self._row_of.shape[0]] = self._row_of
            self._row_of = grown
        first = self._sub.size
        rows = np.arange(first, first + ids.shape[0], dtype=np.int64)
        self._sub.append(ids)
        self._alive.append(np.ones(ids.shape[0], dtype=np.bool_))
        self._word_ptr.append(self._words.size + np.asarray(word_indptr[1:], dtype=np.int64))
        self._words.append(np.asarray(words, dtype=np.int32))
        self._matcher_ptr.append(
            self._matchers.size + np.asarray(matcher_indptr[1:], dtype=np.int64)
        )
        self._matchers.append(np.asarray(matchers, dtype=np.int32))
        self._row_of[ids] = rows
        self._live += ids.shape[0]
        return rows

    def remove(self, sub_ids: np.ndarray) -> np.ndarray:
        """Tombstone placed subscriptions; returns their rows (valid until the next change).

        Raises:
            InvalidArgumentError: for an id that is not placed.
        """
        ids = np.asarray(sub_ids, dtype=np.int64)
        rows = self.rows_of(ids)
        if (rows < 0).any():
            raise InvalidArgumentError(f"subscriptions {ids[rows < 0][:5].tolist()} are not placed")
        self._alive.values[rows] = False
        self._row_of[ids] = -1
        self._live -= ids.shape[0]
        return rows

    def compact_if_sparse(self) -> None:
        """Drop dead rows once they outnumber the live ones (rows keep their order)."""
        dead = self._sub.size - self._live
        if dead <= max(self._live, 1024):
            return
        keep = np.flatnonzero(self._alive.values)
        word_indptr, words, matcher_indptr, matchers = self.csr(keep)
        ids = self._sub.values[keep]
        self.__init__()  # type: ignore[misc]
        self.append(ids, word_indptr, words, matcher_indptr, matchers)

    # -- per matcher -------------------------------------------------------------------------
    def by_matcher(self, n_matchers: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per matcher: its subscriptions as ``(sub_ids int64, indptr int64, word_ids int32)``,
        in the order they were placed."""
        alive = np.flatnonzero(self._alive.values)
        ptr = self._matcher_ptr.values
        counts = ptr[alive + 1] - ptr[alive]
        pair_row = np.repeat(alive, counts)
        starts = np.repeat(ptr[alive], counts)
        pair_matcher = self._matchers.values[
            starts
            + np.arange(pair_row.shape[0], dtype=np.int64)
            - np.repeat(np.cumsum(counts) - counts, counts)
        ]
        order = np.lexsort((pair_row, pair_matcher))  # by matcher, then placement order
        pair_row, pair_matcher = pair_row[order], pair_matcher[order]
        bounds = np.searchsorted(pair_matcher, np.arange(n_matchers + 1))
        out = []
        for m in range(n_matchers):
            rows = pair_row[bounds[m] : bounds[m + 1]]
            indptr, words = take_rows(self._word_ptr.values, self._words.values, rows)
            out.append((self._sub.values[rows].copy(), indptr, words))
        return out
