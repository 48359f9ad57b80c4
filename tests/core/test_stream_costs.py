"""The stream's cost model: a fit recovers the costs that made the batches, and its
prediction prices spread and balance as the formula says (checked by hand)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import InputDataError, InvalidArgumentError
from core.stream.costs import (
    MIN_BATCHES,
    BatchCounts,
    StreamCosts,
    fit,
    posts_per_second,
    task_seconds,
)
from tests.hypothesis_tiers import examples

TRUE = StreamCosts(
    per_post=1.5e-6, per_copy_route=0.3e-6, per_copy_match=0.1e-6, per_work=0.04e-6,
    per_match=0.2e-6,
)  # fmt: skip


def _batch(posts: int, copies: int, work: int, matches: int, route_share: float) -> BatchCounts:
    """A batch whose stage seconds the true costs make (route and dispatch split the
    per-post cost as ``route_share`` says)."""
    return BatchCounts(
        posts=posts,
        copies=copies,
        work=work,
        matches=matches,
        route_seconds=route_share * TRUE.per_post * posts + TRUE.per_copy_route * copies,
        match_seconds=TRUE.per_copy_match * copies + TRUE.per_work * work,
        dispatch_seconds=(1 - route_share) * TRUE.per_post * posts + TRUE.per_match * matches,
    )


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(
    st.tuples(st.integers(1_000, 200_000), st.floats(1.0, 9.0), st.floats(2.0, 40.0),
              st.floats(0.5, 300.0)),
    min_size=MIN_BATCHES, max_size=20, unique_by=lambda t: t[1],
))  # fmt: skip
def test_a_fit_recovers_the_costs_that_made_the_batches(shapes) -> None:
    batches = [
        _batch(p, int(p * spread), int(p * spread * work), int(p * m), 0.6)
        for p, spread, work, m in shapes
    ]
    fitted = fit(batches)
    # what the batches pin down: every batch's task seconds, to rounding
    assert fitted.max_error < 1e-6
    for batch in batches:
        assert task_seconds(fitted.costs, batch) == pytest.approx(
            batch.route_seconds + batch.match_seconds + batch.dispatch_seconds, rel=1e-6
        )
    assert fitted.costs.source == f"fitted on {len(batches)} batches"


def test_a_fit_needs_enough_batches() -> None:
    with pytest.raises(InputDataError, match="steady batches"):
        fit([_batch(1000, 5000, 90_000, 7000, 0.5)] * (MIN_BATCHES - 1))


def test_the_prediction_is_the_formula() -> None:
    # 2 matchers: route and dispatch spread over 2 cores, the busiest matcher alone
    copies, work = [300, 100], [1000, 3000]
    spread_work = TRUE.per_post * 200 + TRUE.per_copy_route * 400 + TRUE.per_match * 50
    busiest = max(
        TRUE.per_copy_match * c + TRUE.per_work * w for c, w in zip(copies, work, strict=True)
    )
    expected = 200 / (spread_work / 2 + busiest)
    assert posts_per_second(TRUE, 200, 50, copies, work) == pytest.approx(expected)
    # a balanced mapping with the same copies and work is faster; more copies, slower
    balanced = posts_per_second(TRUE, 200, 50, [200, 200], [2000, 2000])
    assert balanced > posts_per_second(TRUE, 200, 50, copies, work)
    assert posts_per_second(TRUE, 200, 50, [400, 400], [2000, 2000]) < balanced
    with pytest.raises(InvalidArgumentError):
        posts_per_second(TRUE, 200, 50, np.array([1, 2]), np.array([1]))
