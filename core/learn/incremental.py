"""Incremental remap (paper 004's lesson: moving state costs): refine the published mapping.

A full remap may move every word, and so every subscription, to another matcher; the
streaming matchers then rebuild their tries and the subscriptions' state moves with them.
An incremental remap starts from the published mapping, places the tokens it does not
know (new words, new versions of split words), and restreams with ``salb2``'s rule, each
token's published matcher as its origin: a move away from it must beat the subscriptions it
re-places (``penalty`` per subscription), and all moves together re-place at most
``budget`` subscriptions. Overfull matchers (drift made a word hotter) still shed tokens,
as far as the budget allows. As in ``salb2``, tokens seen in fewer than
``MIN_RESTREAM_FREQUENCY`` posts do not move (they keep their published matcher); new ones
are placed whatever their frequency.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from core.errors import InvalidArgumentError
from core.learn._salb2_kernels import restream, route_tokens
from core.learn.problem import LearningProblem
from core.learn.salb import edge_rows, salb_order
from core.learn.salb2 import (
    DEFAULT_SLACK,
    MIN_RESTREAM_FREQUENCY,
    refinement_passes,
    restreamable,
    token_weights,
)
from core.routing.hashing import hash_matchers
from core.routing.table import RoutingTable


@dataclass(frozen=True)
class IncrementalResult:
    """What an incremental remap decided.

    Attributes:
        token_matcher: ``(n_tokens,)`` int32 matcher per token, -1 for tokens not learned.
        origin: ``(n_tokens,)`` int32, each token's matcher in the published table (-1:
            a token the table does not have).
        loads: ``(N,)`` int64 posts routed to each matcher on the training posts.
        start_loads: the same under the published mapping, new tokens placed.
        moved_tokens: tokens that end away from their origin.
        moved_cost: the move cost of those tokens (subscriptions re-placed, counted per word).
        budget: the most move cost allowed.
        moves: tokens moved in each pass.
    """

    token_matcher: np.ndarray
    origin: np.ndarray
    loads: np.ndarray
    start_loads: np.ndarray
    moved_tokens: int
    moved_cost: int
    budget: int
    moves: tuple[int, ...]


def project_table(table: RoutingTable, problem: LearningProblem) -> np.ndarray:
    """Each token's matcher under ``table``: part p of a word with k >= p versions there
    keeps that version's matcher; a word the table does not list routes by hash (its
    fall-back); a version beyond the table's k is new (-1)."""
    origin = np.full(problem.n_tokens, -1, dtype=np.int32)
    words = problem.vocabulary[problem.token_word]
    index = table.word_index
    missing = [w not in index for w in words.tolist()]
    hashed = hash_matchers(words[np.array(missing, dtype=bool)].tolist(), table.n_matchers)
    k = 0
    for token, word in enumerate(words.tolist()):
        i = index.get(word)
        part = int(problem.token_part[token])
        if i is None:
            origin[token] = hashed[k] if part == 0 else -1
            k += 1
        elif part < table.part_indptr[i + 1] - table.part_indptr[i]:
            origin[token] = table.part_matchers[table.part_indptr[i] + part]
    return origin


def learn_incremental(
    problem: LearningProblem,
    n_matchers: int,
    origin: np.ndarray,
    move_cost: np.ndarray,
    *,
    budget: int,
    penalty: float,
    slack: float = DEFAULT_SLACK,
    passes: int | None = None,
    token_weight: np.ndarray | None = None,
) -> IncrementalResult:
    """Refine the published mapping ``origin`` on ``problem``'s posts.

    Args:
        problem: the learning input of the new window.
        n_matchers: N, the published mapping's.
        origin: ``(n_tokens,)`` int32 published matcher per token (:func:`project_table`).
        move_cost: ``(n_tokens,)`` subscriptions re-placed when the token leaves its origin.
        budget: the most move cost in all (>= 0).
        penalty: score lost per subscription re-placed (>= 0).
        slack: capacity = ceil((1 + slack) x total load / N) in every pass.
        passes: restreaming passes (None: by the edge budget, as ``salb2``; at least 1, so
            new tokens are placed).
        token_weight: ``(n_tokens,)`` load beside the posts, as ``salb2``'s (None: none).

    Raises:
        InvalidArgumentError: on mismatched shapes, an origin outside 0..N-1, or a negative
            budget, penalty or slack.
    """
    origin = np.asarray(origin, dtype=np.int32)
    move_cost = np.asarray(move_cost, dtype=np.int64)
    if origin.shape != (problem.n_tokens,) or move_cost.shape != (problem.n_tokens,):
        raise InvalidArgumentError("origin and move_cost need one entry per token")
    weight = token_weights(problem, token_weight)
    if origin.size and (origin.min() < -1 or origin.max() >= n_matchers):
        raise InvalidArgumentError(f"origin holds matchers outside 0..{n_matchers - 1}")
    for name, value in (("budget", budget), ("penalty", penalty), ("slack", slack)):
        if not math.isfinite(value) or value < 0:
            raise InvalidArgumentError(f"{name} must be a finite number >= 0, got {value!r}")
    order = salb_order(problem)
    learnable = np.zeros(problem.n_tokens, dtype=bool)
    learnable[order] = True
    token_matcher = np.where(learnable, origin, -1).astype(np.int32)
    passes = refinement_passes(int(problem.token_indptr[-1])) if passes is None else passes
    # rare tokens stay where they are; every token without a matcher yet must be placed
    order = order[restreamable(problem, order, MIN_RESTREAM_FREQUENCY) | (token_matcher[order] < 0)]
    edge_row, n_row_entries = edge_rows(problem)
    rows, loads = route_tokens(
        problem.token_indptr, edge_row, n_row_entries, token_matcher, n_matchers
    )
    start_loads = loads.copy()
    placed = token_matcher >= 0
    extra = np.bincount(token_matcher[placed], weights=weight[placed], minlength=n_matchers)
    moves, spent = restream(
        problem.token_indptr,
        edge_row,
        order,
        token_matcher,
        np.full(max(1, int(passes)), slack, dtype=np.float64),
        rows,
        loads,
        origin,
        move_cost,
        float(penalty),
        int(budget),
        weight,
        extra,
    )
    away = learnable & (origin >= 0) & (token_matcher != origin)
    return IncrementalResult(
        token_matcher=token_matcher,
        origin=origin,
        loads=loads,
        start_loads=start_loads,
        moved_tokens=int(away.sum()),
        moved_cost=int(spent),
        budget=int(budget),
        moves=tuple(int(m) for m in moves),
    )
