"""Word-network partitioning baselines (paper 001, Sect. 3.2) with METIS (pymetis).

The word network has an edge between two (learnable) tokens that co-occur in a post,
weighted by their co-occurrence count. Variants:

- gC: unweighted cut, unit vertex weights;
- gFC: co-frequency-weighted cut, unit vertex weights;
- gFCL: co-frequency cut, vertex weight f(w);
- gNFCL: co-frequency cut, vertex weight l(w) = f(w) / (1 + f_n(w) / f(w)), f_n the sum of
  the word's co-occurrence counts.

Counts stand in for the paper's frequencies (both divide by |P|, which METIS does not see).
The co-occurrence matrix is X^T X of the binary post x token matrix (scipy).
"""

from __future__ import annotations

import logging
import time
from typing import Literal

import numpy as np
import scipy.sparse as sp

from core.errors import InvalidArgumentError
from core.learn.problem import LearningProblem
from core.remap_options import WORDNET_VARIANTS

log = logging.getLogger(__name__)

WordNetVariant = Literal["gC", "gFC", "gFCL", "gNFCL"]
_MAX_WEIGHT = 2**30  # METIS idx_t is 32-bit in pymetis' build: keep sums representable


def cooccurrence(problem: LearningProblem, tokens: np.ndarray) -> sp.csr_matrix:
    """Symmetric co-occurrence counts among ``tokens`` (diagonal = f), in ``tokens`` order."""
    column = np.full(problem.n_tokens, -1, dtype=np.int64)
    column[tokens] = np.arange(tokens.size)
    cols = column[problem.post_tokens]
    rows = np.repeat(np.arange(problem.n_posts), np.diff(problem.post_indptr))
    keep = cols >= 0
    x = sp.csr_matrix(
        (np.ones(int(keep.sum()), dtype=np.int64), (rows[keep], cols[keep])),
        shape=(problem.n_posts, tokens.size),
    )
    return (x.T @ x).tocsr()


def _scale(weights: np.ndarray) -> np.ndarray:
    """Positive int weights whose total fits METIS' 32-bit sums."""
    w = np.maximum(np.asarray(weights, dtype=np.float64), 0.0)
    total = w.sum()
    if total > _MAX_WEIGHT:
        w = w * (_MAX_WEIGHT / total)
    return np.maximum(1, np.rint(w)).astype(np.int64)


def learn_wordnet(
    problem: LearningProblem, n_matchers: int, variant: WordNetVariant | str, *, seed: int = 0
) -> np.ndarray:
    """``(n_tokens,)`` int32 matcher per token (-1 for tokens not learned) via METIS.

    Raises:
        InvalidArgumentError: for an unknown variant or N < 1.
    """
    import pymetis

    if variant not in WORDNET_VARIANTS:
        raise InvalidArgumentError(f"variant must be one of {WORDNET_VARIANTS}, got {variant!r}")
    if not isinstance(n_matchers, int | np.integer) or n_matchers < 1:
        raise InvalidArgumentError(f"n_matchers must be a positive integer, got {n_matchers!r}")
    tokens = problem.learnable_tokens()
    token_matcher = np.full(problem.n_tokens, -1, dtype=np.int32)
    if tokens.size == 0:
        return token_matcher
    if n_matchers == 1 or tokens.size <= n_matchers:
        token_matcher[tokens] = np.arange(tokens.size) % n_matchers
        return token_matcher
    started = time.perf_counter()
    co = cooccurrence(problem, tokens)
    freq = co.diagonal().astype(np.float64)
    co.setdiag(0)
    co.eliminate_zeros()
    co_sum = np.asarray(co.sum(axis=1)).ravel().astype(np.float64)
    eweights = None if variant == "gC" else _scale(co.data)
    if variant in ("gC", "gFC"):
        vweights = None
    elif variant == "gFCL":
        vweights = _scale(freq)
    else:
        vweights = _scale(freq / (1.0 + co_sum / freq))
    options = pymetis.Options(seed=seed)
    _, parts = pymetis.part_graph(
        int(n_matchers),
        pymetis.CSRAdjacency(co.indptr.astype(np.int64), co.indices.astype(np.int64)),
        vweights=None if vweights is None else vweights.tolist(),
        eweights=None if eweights is None else eweights.tolist(),
        options=options,
    )
    token_matcher[tokens] = np.asarray(parts, dtype=np.int32)
    log.info(
        "%s N=%d: METIS on %d words, %d edges in %.1fs",
        variant,
        n_matchers,
        tokens.size,
        co.nnz // 2,
        time.perf_counter() - started,
    )
    return token_matcher
