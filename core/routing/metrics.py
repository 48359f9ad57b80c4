"""Routing quality metrics (paper 001, Sect. 3.1; docs/GLOSSARY.md).

Load L(i, M) counts posts routed to matcher i, a post once per matcher (Alg. 1 and Eq. 6
need posts, not words). Spread is the mean |K(P, M)| over all evaluated posts; throughput is
Eq. 6 with C = 1: |P| / max_i L(i, M).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from core.errors import InvalidArgumentError
from core.routing.router import RoutedPosts


@dataclass(frozen=True)
class RoutingMetrics:
    """Spread, loads, imbalance and model throughput of one mapping on one set of posts."""

    n_posts: int
    n_matchers: int
    spread: float
    spread_routed: float
    routed_fraction: float
    loads: tuple[int, ...]
    imbalance: float
    load_cv: float
    throughput: float

    def as_dict(self, *, with_loads: bool = True) -> dict[str, Any]:
        data = asdict(self)
        data["loads"] = list(self.loads)
        if not with_loads:
            data.pop("loads")
        return data


def metrics_from_loads(loads: np.ndarray, spreads: np.ndarray) -> RoutingMetrics:
    """Compute metrics from per-matcher loads and per-post spreads |K(P, M)|.

    Raises:
        InvalidArgumentError: on empty or negative inputs, or loads that disagree with
            the spreads (their sums must be equal).
    """
    loads = np.asarray(loads, dtype=np.int64)
    spreads = np.asarray(spreads, dtype=np.int64)
    if loads.ndim != 1 or loads.size == 0:
        raise InvalidArgumentError("loads must be a non-empty 1-D array")
    if spreads.ndim != 1 or spreads.size == 0:
        raise InvalidArgumentError("spreads must be a non-empty 1-D array (one per post)")
    if loads.min() < 0 or spreads.min() < 0:
        raise InvalidArgumentError("loads and spreads must be non-negative")
    if loads.sum() != spreads.sum():
        raise InvalidArgumentError(
            f"sum of loads ({loads.sum()}) must equal sum of spreads ({spreads.sum()})"
        )
    n_posts = int(spreads.size)
    routed = int(np.count_nonzero(spreads))
    mean_load = float(loads.mean())
    max_load = int(loads.max())
    return RoutingMetrics(
        n_posts=n_posts,
        n_matchers=int(loads.size),
        spread=float(spreads.sum()) / n_posts,
        spread_routed=float(spreads.sum()) / routed if routed else math.nan,
        routed_fraction=routed / n_posts,
        loads=tuple(int(x) for x in loads),
        imbalance=max_load / mean_load if mean_load > 0 else math.nan,
        load_cv=float(loads.std()) / mean_load if mean_load > 0 else math.nan,
        throughput=n_posts / max_load if max_load > 0 else math.nan,
    )


def routing_metrics(routed: RoutedPosts) -> RoutingMetrics:
    """Metrics of routed posts."""
    return metrics_from_loads(routed.loads(), routed.spreads())


def relative_throughput(candidate: RoutingMetrics, baseline: RoutingMetrics) -> float:
    """T(candidate) / T(baseline), both measured on the same posts.

    Raises:
        InvalidArgumentError: if the two were measured on different post counts.
    """
    if candidate.n_posts != baseline.n_posts:
        raise InvalidArgumentError("relative throughput needs metrics over the same posts")
    return candidate.throughput / baseline.throughput
