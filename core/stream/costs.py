"""A cost model of the streaming matcher, fitted to the stream's own batches, and what it
predicts for a routing version: the stream's posts/s on a cluster with a core per matcher.

Counted work (the busiest matcher's lookups plus matches) judges only the match stage, and
only its busiest matcher. The stream pays elsewhere too, and a mapping moves some of it:

- route: a cost per post read (judge, encode, route) and per routed copy (each matcher a
  post reaches: its words gathered, its payload built);
- match: per copy a matcher receives, and per unit of counted work (a lookup, a match);
- dispatch: per post and per match (dedupe, deliveries, Parquet).

Each stage's task seconds are fitted as a non-negative combination of those counts over
the steady batches (``fit``). For a mapping, with N matchers each on a core of its own
(C = N), a batch takes

    (route + dispatch) / C + max over matchers of (copies_m x per copy + work_m x per work)

seconds: the spread enters through the copies, the balance through the busiest matcher.
The gate compares the predicted posts/s of two mappings on the same held-out posts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls

from core.errors import InputDataError, InvalidArgumentError


@dataclass(frozen=True)
class StreamCosts:
    """Seconds per unit of each count (fitted on one machine's batches).

    Attributes:
        per_post: route and dispatch per post read.
        per_copy_route: route per (post, matcher) copy.
        per_copy_match: match per copy a matcher receives.
        per_work: match per unit of counted work (an index lookup or a match emitted).
        per_match: dispatch per (post, subscription) match.
        source: where the figures come from (``fitted on N batches``, or the defaults').
    """

    per_post: float
    per_copy_route: float
    per_copy_match: float
    per_work: float
    per_match: float
    source: str = "defaults"

    def as_dict(self) -> dict[str, float | str]:
        return {
            "per_post": self.per_post,
            "per_copy_route": self.per_copy_route,
            "per_copy_match": self.per_copy_match,
            "per_work": self.per_work,
            "per_match": self.per_match,
            "source": self.source,
        }


# Fitted by `s3tm bench stream --workloads tweet,topic --routing hash,salb2 --runs 2` (its
# "cost model" lines, docs/bench/stream_costs.csv: median error 2.6%, largest 8.7%) on the
# 2-core AMD EPYC VM, 2026-12-07: used until a stream has run long enough here to fit its
# own (MIN_BATCHES steady batches of two routing versions).
DEFAULT_COSTS = StreamCosts(
    per_post=2.97e-6,
    per_copy_route=0.0,
    per_copy_match=0.158e-6,
    per_work=0.0347e-6,
    per_match=0.321e-6,
)
MIN_BATCHES = 6  # steady batches a fit needs (each stage has two unknowns)


@dataclass(frozen=True)
class BatchCounts:
    """One steady batch's counts and task seconds (``stream.batches`` and
    ``stream.health``): posts, routed copies, counted work, matches; per-stage seconds."""

    posts: int
    copies: int
    work: int
    matches: int
    route_seconds: float
    match_seconds: float
    dispatch_seconds: float


@dataclass(frozen=True)
class CostFit:
    """A fit and how well it predicts the batches it came from: the median and largest
    relative error of the predicted task seconds (route + match + dispatch)."""

    costs: StreamCosts
    batches: int
    median_error: float
    max_error: float


def fit(batches: Sequence[BatchCounts]) -> CostFit:
    """Non-negative least squares per stage over ``batches``.

    Raises:
        InputDataError: fewer than MIN_BATCHES batches.
    """
    if len(batches) < MIN_BATCHES:
        raise InputDataError(f"a cost fit needs {MIN_BATCHES} steady batches, got {len(batches)}")
    posts = np.array([b.posts for b in batches], dtype=np.float64)
    copies = np.array([b.copies for b in batches], dtype=np.float64)
    work = np.array([b.work for b in batches], dtype=np.float64)
    matches = np.array([b.matches for b in batches], dtype=np.float64)
    route, _ = nnls(np.column_stack([posts, copies]), [b.route_seconds for b in batches])
    match, _ = nnls(np.column_stack([copies, work]), [b.match_seconds for b in batches])
    dispatch, _ = nnls(np.column_stack([posts, matches]), [b.dispatch_seconds for b in batches])
    costs = StreamCosts(
        per_post=float(route[0] + dispatch[0]),
        per_copy_route=float(route[1]),
        per_copy_match=float(match[0]),
        per_work=float(match[1]),
        per_match=float(dispatch[1]),
        source=f"fitted on {len(batches)} batches",
    )
    errors = np.array([relative_error(costs, b) for b in batches])
    return CostFit(costs, len(batches), float(np.median(errors)), float(errors.max()))


def task_seconds(costs: StreamCosts, batch: BatchCounts) -> float:
    """The predicted task seconds of a batch (route + match + dispatch)."""
    return (
        costs.per_post * batch.posts
        + (costs.per_copy_route + costs.per_copy_match) * batch.copies
        + costs.per_work * batch.work
        + costs.per_match * batch.matches
    )


def relative_error(costs: StreamCosts, batch: BatchCounts) -> float:
    measured = batch.route_seconds + batch.match_seconds + batch.dispatch_seconds
    if measured <= 0:
        raise InvalidArgumentError("a batch must have taken some time")
    return abs(task_seconds(costs, batch) - measured) / measured


def posts_per_second(
    costs: StreamCosts,
    posts: int,
    matches: int,
    matcher_copies: Sequence[int] | np.ndarray,
    matcher_work: Sequence[int] | np.ndarray,
) -> float:
    """Predicted posts/s of a mapping on a cluster with a core per matcher: ``posts``
    held-out posts, the ``matches`` they make, and per matcher the copies it receives and
    its counted work (the evaluation's replay)."""
    copies = np.asarray(matcher_copies, dtype=np.float64)
    work = np.asarray(matcher_work, dtype=np.float64)
    if copies.shape != work.shape or copies.size == 0 or posts <= 0:
        raise InvalidArgumentError("one copy count and one work count per matcher, and posts")
    cores = copies.shape[0]
    spread_work = (
        costs.per_post * posts + costs.per_copy_route * copies.sum() + costs.per_match * matches
    )
    busiest = float(np.max(costs.per_copy_match * copies + costs.per_work * work))
    seconds = spread_work / cores + busiest
    return posts / seconds if seconds > 0 else float("inf")
