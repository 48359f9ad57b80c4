"""``salb2``: SALB, then restreaming refinement (kernel in ``_salb2_kernels``).

Why: with Alg. 1's utility as printed (the standard deviation of the loads) SALB balances
well but does not lower the spread: each token is placed once, in frequency order, when few
of the tokens it co-occurs with are placed yet, and METIS-based gFCL beats it at N = 16-64
on tweet-based subscriptions (docs/RESULTS.md). ``salb2`` keeps SALB's mapping as the start
and restreams the tokens over it: each token moves to the matcher that already routes most
of its posts, weighted by that matcher's free capacity (linear deterministic greedy), never
past a capacity of ``(1 + slack)`` times the mean load. The slack anneals: loose passes
first (groups of co-occurring tokens gather), then passes at the final slack (overfull
matchers shed tokens). Throughput ~ |P| / max load (Eq. 6) improves through both factors:
fewer matchers per post, loads still level. On the real tweets an annealed schedule beat a
flat one at N = 2, 16 and 64 (the commit's notes; ``s3tm experiment scalability``).

Learning stays fast: the passes are bounded by an edge budget (a pass costs about two of
SALB's greedy passes), so big corpora get fewer passes, and the result depends on the input
only (no wall-clock bound, so a re-run or a cluster run learns the same mapping).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from core.errors import InvalidArgumentError
from core.learn._salb2_kernels import restream
from core.learn.problem import LearningProblem
from core.learn.salb import learn_salb

DEFAULT_SLACK = 0.05
FIRST_SLACK = 0.3
MAX_PASSES = 8
# edges x passes per refinement: 8 passes up to 1M edges (~100k tweets), 1 pass at 8M
# edges (1M tweets), so 1M posts at N = 256 stay within about 2x of SALB's own time
EDGE_PASS_BUDGET = 8_000_000


@dataclass(frozen=True)
class Salb2Result:
    """What ``salb2`` decided.

    Attributes:
        token_matcher: ``(n_tokens,)`` int32 matcher per token, -1 for tokens not learned.
        loads: ``(N,)`` int64 posts routed to each matcher on the training posts.
        salb_loads: the same under SALB's mapping (the start).
        slacks: each refinement pass's slack.
        moves: tokens moved in each refinement pass that ran.
        refined: whether the refined mapping was kept: it is unless its busiest matcher
            carries more training posts than SALB's (then SALB's mapping is returned; the
            throughput model is |P| / max load, so the refinement never makes it worse).
    """

    token_matcher: np.ndarray
    loads: np.ndarray
    salb_loads: np.ndarray
    slacks: tuple[float, ...]
    moves: tuple[int, ...]
    refined: bool


def refinement_passes(n_edges: int, budget: int = EDGE_PASS_BUDGET) -> int:
    """Passes for a problem with ``n_edges`` token/post edges: within the budget, 1..8."""
    return max(1, min(MAX_PASSES, budget // max(1, n_edges)))


def slack_schedule(passes: int, slack: float = DEFAULT_SLACK) -> np.ndarray:
    """Per-pass slacks: from ``FIRST_SLACK`` down in equal steps, the last quarter of the
    passes (at least one) at ``slack``. One pass: just ``slack``."""
    tail = max(1, passes // 4)
    head = passes - tail
    start = max(FIRST_SLACK, slack)
    steps = [start - (start - slack) * k / head for k in range(head)]
    return np.array(steps + [slack] * tail, dtype=np.float64)[:passes]


def learn_salb2(
    problem: LearningProblem,
    n_matchers: int,
    *,
    slack: float = DEFAULT_SLACK,
    passes: int | None = None,
) -> Salb2Result:
    """Map every learnable token to a matcher: SALB, then restreaming.

    Args:
        problem: the learning input (see :func:`core.learn.problem.build_problem`).
        n_matchers: N >= 1.
        slack: the final passes' capacity is ``ceil((1 + slack) * total load / N)``.
        passes: refinement passes (None: :func:`refinement_passes` of the problem's edges).

    Raises:
        InvalidArgumentError: for N < 1, a negative slack or passes < 0.
    """
    if not math.isfinite(slack) or slack < 0:
        raise InvalidArgumentError(f"slack must be a finite number >= 0, got {slack!r}")
    if passes is not None and passes < 0:
        raise InvalidArgumentError(f"passes must be >= 0, got {passes!r}")
    salb = learn_salb(problem, n_matchers, keep_state=True)
    state = salb.state
    assert state is not None  # keep_state=True
    n_edges = int(problem.token_indptr[-1])
    passes = refinement_passes(n_edges) if passes is None else int(passes)
    slacks = slack_schedule(passes, slack)
    token_matcher = salb.token_matcher.copy()
    moves = np.zeros(0, dtype=np.int64)
    if passes and n_matchers > 1 and salb.order.size:
        moves, _ = restream(
            problem.token_indptr,
            state.edge_row,
            salb.order,
            token_matcher,
            slacks,
            state.rows,
            state.loads,
            np.full(problem.n_tokens, -1, dtype=np.int32),  # a full remap: no origins
            np.zeros(problem.n_tokens, dtype=np.int64),
            0.0,
            -1,
        )
    refined = bool(state.loads.max() <= salb.loads.max())
    return Salb2Result(
        token_matcher=token_matcher if refined else salb.token_matcher,
        loads=state.loads if refined else salb.loads,
        salb_loads=salb.loads,
        slacks=tuple(float(x) for x in slacks),
        moves=tuple(int(m) for m in moves),
        refined=refined,
    )
