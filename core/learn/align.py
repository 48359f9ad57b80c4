"""Align a full remap's matcher ids with the published mapping's.

Why: a learner's matcher ids are arbitrary labels. Renaming them changes no post's spread
and no matcher's load (throughput is the same), but it decides which subscriptions move
when the new version replaces the published one (paper 004: moved state is a cost). A
full remap learned from scratch labels its groups in its own order; renamed so that each
new matcher takes the old matcher it shares the most subscription words with (an
assignment problem, solved exactly), it keeps in place what it can.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.errors import InvalidArgumentError


@dataclass(frozen=True)
class Alignment:
    """A renaming of matcher ids.

    Attributes:
        new_id: ``(N,)`` int32: matcher ``m`` of the learned mapping is ``new_id[m]``.
        kept_before: move cost of tokens left on their origin before renaming.
        kept: the same after renaming (never less: the identity is one of the options).
    """

    new_id: np.ndarray
    kept_before: int
    kept: int

    def apply(self, token_matcher: np.ndarray) -> np.ndarray:
        """``token_matcher`` renamed (tokens at -1 stay unmapped)."""
        token_matcher = np.asarray(token_matcher)
        return np.where(token_matcher >= 0, self.new_id[np.maximum(token_matcher, 0)], -1).astype(
            np.int32
        )


def align_matchers(
    token_matcher: np.ndarray,
    origin: np.ndarray,
    move_cost: np.ndarray,
    n_matchers: int,
) -> Alignment:
    """The renaming of ``token_matcher``'s ids that keeps the most move cost in place.

    Args:
        token_matcher: ``(n_tokens,)`` the learned matcher per token (-1: unmapped).
        origin: ``(n_tokens,)`` the published matcher per token (-1: a new token).
        move_cost: ``(n_tokens,)`` >= 0, what a token costs when it leaves its origin
            (subscriptions re-placed). All zero (no subscriptions): every token counts 1.
        n_matchers: N of both mappings.

    Raises:
        InvalidArgumentError: on mismatched shapes, ids outside -1..N-1 or a negative cost.
    """
    token_matcher = np.asarray(token_matcher, dtype=np.int64)
    origin = np.asarray(origin, dtype=np.int64)
    cost = np.asarray(move_cost, dtype=np.float64)
    if not (token_matcher.shape == origin.shape == cost.shape) or token_matcher.ndim != 1:
        raise InvalidArgumentError("token_matcher, origin and move_cost need one entry per token")
    if n_matchers < 1:
        raise InvalidArgumentError(f"n_matchers must be >= 1, got {n_matchers!r}")
    for name, ids in (("token_matcher", token_matcher), ("origin", origin)):
        if ids.size and (ids.min() < -1 or ids.max() >= n_matchers):
            raise InvalidArgumentError(f"{name} holds matchers outside -1..{n_matchers - 1}")
    if cost.size and not (np.all(np.isfinite(cost)) and cost.min() >= 0):
        raise InvalidArgumentError("move_cost must be finite and >= 0")
    both = (token_matcher >= 0) & (origin >= 0)
    if not cost[both].any():
        cost = np.ones_like(cost)
    overlap = np.zeros((n_matchers, n_matchers), dtype=np.float64)
    np.add.at(overlap, (token_matcher[both], origin[both]), cost[both])
    # imported here: scipy.optimize costs every process that imports the learners ~2 s
    from scipy.optimize import linear_sum_assignment

    rows, cols = linear_sum_assignment(overlap, maximize=True)
    new_id = np.empty(n_matchers, dtype=np.int32)
    new_id[rows] = cols
    return Alignment(
        new_id=new_id,
        kept_before=int(np.trace(overlap)),
        kept=int(overlap[rows, cols].sum()),
    )
