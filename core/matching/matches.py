"""The result of matching a batch of posts."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Matches:
    """Matched subscription ids per post (CSR) and the operations the matcher performed.

    Attributes:
        indptr: ``(n_posts + 1,)`` int64.
        sub_ids: int64 subscription ids; post ``p`` matched ``sub_ids[indptr[p]:indptr[p+1]]``.
        operations: lookups (trie: hash probes; counting: counter increments).
    """

    indptr: np.ndarray
    sub_ids: np.ndarray
    operations: int

    @property
    def n_posts(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def n_matches(self) -> int:
        return int(self.sub_ids.shape[0])

    def of_post(self, post: int) -> list[int]:
        """Sorted subscription ids matched by one post."""
        return sorted(self.sub_ids[self.indptr[post] : self.indptr[post + 1]].tolist())

    def as_sets(self) -> list[set[int]]:
        return [set(self.of_post(p)) for p in range(self.n_posts)]
