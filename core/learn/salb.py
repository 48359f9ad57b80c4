"""SALB: spread-aware load balancing (paper 001, Alg. 1). Kernel in ``_salb_kernels``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.errors import InvalidArgumentError
from core.learn._salb_kernels import fill_edge_rows, salb_assign, unpack_rows
from core.learn.problem import LearningProblem

_INT64_MAX = np.iinfo(np.int64).max


@dataclass(frozen=True)
class SalbResult:
    """What SALB decided.

    Attributes:
        token_matcher: ``(n_tokens,)`` int32 matcher per token, -1 for tokens not learned.
        order: ``(n_steps,)`` int64 tokens in the order they were assigned (f desc).
        extra_load: ``(n_steps,)`` int64 posts newly routed by each step's choice.
        loads: ``(N,)`` int64 posts routed to each matcher on the training posts.
        state: with ``keep_state``, the training posts' routing (for a refinement).
    """

    token_matcher: np.ndarray
    order: np.ndarray
    extra_load: np.ndarray
    loads: np.ndarray
    state: RoutingState | None = None


@dataclass(frozen=True)
class RoutingState:
    """How the training posts are routed under a mapping, kept exact under token moves.

    Attributes:
        rows: int32; post p's row starts at ``2 * post_indptr[p] + p``: its number of
            distinct matchers c, then c (matcher, its tokens on that matcher) pairs.
        edge_row: per (token, post) edge, where its post's row starts.
        loads: ``(N,)`` int64 posts routed to each matcher.
    """

    rows: np.ndarray
    edge_row: np.ndarray
    loads: np.ndarray

    def slots(self, post_indptr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(slot_matcher, slot_tokens, post_slots)``: post p's distinct matchers are
        ``slot_matcher[post_indptr[p]:][:post_slots[p]]`` with ``slot_tokens`` on each."""
        return unpack_rows(self.rows, post_indptr)


def edge_rows(problem: LearningProblem) -> tuple[np.ndarray, int]:
    """Per (token, post) edge, where its post's row of the routing state starts, and the
    state's length (int32 offsets while they fit: half the memory at 10M posts)."""
    n_row_entries = 2 * int(problem.post_indptr[-1]) + problem.n_posts
    edge_row = np.empty(
        problem.token_posts.shape[0], dtype=np.int32 if n_row_entries < 2**31 else np.int64
    )
    fill_edge_rows(problem.token_posts, problem.post_indptr, edge_row)
    return edge_row, n_row_entries


def salb_order(problem: LearningProblem) -> np.ndarray:
    """Learnable tokens in descending frequency, ties by ascending token id."""
    tokens = problem.learnable_tokens()
    freq = problem.token_frequencies[tokens]
    return tokens[np.lexsort((tokens, -freq))].astype(np.int64)


def learn_salb(
    problem: LearningProblem, n_matchers: int, *, keep_state: bool = False
) -> SalbResult:
    """Map every learnable token to a matcher with SALB.

    Args:
        problem: the learning input (see :func:`core.learn.problem.build_problem`).
        n_matchers: N >= 1.
        keep_state: also return the training posts' routing state (12 bytes per edge).

    Raises:
        InvalidArgumentError: if N < 1, or the corpus is so large that the exact integer
            utility could overflow (learn on a sample: 1M posts is plenty, Sect. 6.1).
    """
    if not isinstance(n_matchers, int | np.integer) or n_matchers < 1:
        raise InvalidArgumentError(f"n_matchers must be a positive integer, got {n_matchers!r}")
    order = salb_order(problem)
    max_total = int(problem.token_frequencies[order].sum()) if order.size else 0
    if n_matchers * max_total * max_total >= _INT64_MAX:
        raise InvalidArgumentError(
            f"{max_total} subscribed word occurrences with N={n_matchers} overflow SALB's "
            "exact integer utility; learn on a sample of the posts"
        )
    edge_row, n_row_entries = edge_rows(problem)
    chosen, extra_load, loads, rows = salb_assign(
        problem.token_indptr, edge_row, n_row_entries, order, int(n_matchers)
    )
    token_matcher = np.full(problem.n_tokens, -1, dtype=np.int32)
    token_matcher[order] = chosen
    state = RoutingState(rows, edge_row, loads.copy()) if keep_state else None
    return SalbResult(token_matcher, order, extra_load, loads, state)
