"""Hash routing as a learner: every learnable token goes to its stable hash."""

from __future__ import annotations

import numpy as np

from core.learn.problem import LearningProblem
from core.routing.hashing import hash_matchers


def learn_hash(problem: LearningProblem, n_matchers: int) -> np.ndarray:
    """``(n_tokens,)`` int32 matcher per token, -1 for tokens not learned."""
    tokens = problem.learnable_tokens()
    keys = problem.token_keys()
    token_matcher = np.full(problem.n_tokens, -1, dtype=np.int32)
    token_matcher[tokens] = hash_matchers((keys[t] for t in tokens), n_matchers)
    return token_matcher
