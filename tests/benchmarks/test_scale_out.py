"""The scale-out projection: the busiest matcher bounds a batch once each matcher has a core."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.scale_out import BatchCosts, batch_costs
from core.errors import InvalidArgumentError


def test_the_busiest_matcher_bounds_a_batch_once_each_matcher_has_a_core() -> None:
    # 16 matchers, 1.6 s of matching in all: balanced, each takes 0.1 s; skewed, one 0.4 s
    balanced = BatchCosts(posts=1000, serial=0.1, spread=3.2, match=1.6, slowest_matcher=0.1)
    skewed = BatchCosts(posts=1000, serial=0.1, spread=3.2, match=1.6, slowest_matcher=0.4)
    # on 2 cores both divide their work: the same time, as Amdahl's law over tasks says
    assert balanced.seconds_on(2) == pytest.approx(0.1 + 1.6 + 0.8)
    assert skewed.seconds_on(2) == balanced.seconds_on(2)
    # on 16 and 64 the skewed mapping waits for its busiest matcher
    assert balanced.seconds_on(16) == pytest.approx(0.1 + 0.2 + 0.1)
    assert skewed.seconds_on(16) == pytest.approx(0.1 + 0.2 + 0.4)
    assert skewed.seconds_on(64) == pytest.approx(0.1 + 0.05 + 0.4)
    assert balanced.posts_per_second(64) == pytest.approx(1000 / (0.1 + 0.05 + 0.1))


@given(
    st.floats(0, 10),
    st.floats(0, 10),
    st.floats(0.01, 10),
    st.floats(0, 1),
    st.integers(1, 256),
)
def test_more_cores_never_slow_a_batch(serial, spread, match, share, cores) -> None:
    costs = BatchCosts(1.0, serial, spread, match, match * share)
    assert costs.seconds_on(cores + 1) <= costs.seconds_on(cores) + 1e-12
    # never faster than its serial part and its busiest matcher
    assert costs.seconds_on(cores) >= serial + match * share - 1e-12


def test_the_jvm_share_is_what_the_job_held_the_cores_beyond_its_tasks() -> None:
    costs = batch_costs(
        posts=200_000, serial=0.09, spark_job=1.0, local_cores=2, route=0.5, match=0.4,
        dispatch=0.5, slowest_matcher=0.05,
    )  # fmt: skip
    assert costs.spread == pytest.approx(0.5 + 0.5 + (2.0 - 1.4))
    with pytest.raises(InvalidArgumentError, match="slowest matcher"):
        batch_costs(1, 0, 1, 2, 0, 0.1, 0, 0.2)
    with pytest.raises(InvalidArgumentError, match="cores"):
        BatchCosts(1, 0, 0, 0, 0).seconds_on(0)
