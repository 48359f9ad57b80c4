"""Delivery latency from per-task age histograms, against the exact per-post reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import InvalidArgumentError
from core.stream.latency import (
    PROMETHEUS_BOUNDS,
    age_histogram,
    bucket_counts,
    latency_quantiles,
    latency_sum,
    merge,
    pooled_quantiles,
)
from tests.hypothesis_tiers import examples

AGES = st.lists(st.floats(-50, 3_600_000, allow_nan=False), min_size=1, max_size=300)


@settings(max_examples=examples(200), deadline=None)
@given(AGES, AGES, st.floats(0, 30), st.sampled_from([0.5, 0.9, 0.95, 0.99, 1.0]))
def test_quantiles_of_merged_tasks_are_the_exact_ones_within_a_bucket(
    first, second, after_start, q
) -> None:
    # two tasks' histograms, merged as the driver merges them (keys crossed JSON: strings)
    merged = merge(
        [{str(b): c for b, c in age_histogram(np.array(a)).items()} for a in (first, second)]
    )
    quantiles = latency_quantiles(merged, after_start, [q])
    assert quantiles is not None
    (estimate,) = quantiles
    ages = np.sort(np.maximum(np.array(first + second), 0.0))
    exact_age = ages[max(1, int(np.ceil(q * ages.size))) - 1] / 1000.0
    # a bucket is 2% wide: its middle is within 1% of any age in it (0.5 ms under 1 ms);
    # quantiles are rounded to 0.1 ms
    assert abs(estimate - (exact_age + after_start)) <= 0.0101 * exact_age + 0.0006 + 1e-9
    counts = bucket_counts(merged, after_start)
    assert sum(counts) == ages.size == sum(merged.values())
    exact_sum = float(np.sum(ages / 1000.0 + after_start))
    # (an age under 1 ms counts as 0.5 ms)
    tolerance = 0.0101 * exact_sum + 0.0005 * ages.size + 1e-9
    assert abs(latency_sum(merged, after_start) - exact_sum) <= tolerance


def test_prometheus_buckets_count_each_post_under_its_least_bound() -> None:
    # ages 0.1 s and 0.9 s, 4.5 s after the batch's start: 4.6 s and 5.4 s
    histogram = age_histogram(np.array([100.0, 900.0]))
    counts = bucket_counts(histogram, 4.5)
    assert len(counts) == len(PROMETHEUS_BOUNDS) + 1
    assert counts[PROMETHEUS_BOUNDS.index(5.0)] == 1
    assert counts[PROMETHEUS_BOUNDS.index(10.0)] == 1
    assert bucket_counts(age_histogram(np.array([10_000_000.0])), 0.0)[-1] == 1  # +Inf


def test_no_post_no_latency_and_bad_input_is_refused() -> None:
    assert latency_quantiles({}, 1.0, [0.5]) is None
    assert bucket_counts({}, 1.0) == [0] * (len(PROMETHEUS_BOUNDS) + 1)
    with pytest.raises(InvalidArgumentError):
        age_histogram(np.array([np.nan]))
    with pytest.raises(InvalidArgumentError):
        latency_quantiles({1: 1}, 0.0, [1.5])


@settings(max_examples=examples(100), deadline=None)
@given(AGES, st.floats(0, 5), AGES, st.floats(0, 5), st.sampled_from([0.5, 0.95, 0.99]))
def test_pooled_batches_quantiles_are_the_exact_ones_within_a_bucket(
    first, first_after, second, second_after, q
) -> None:
    """Two batches, each shifted by its own seconds from start to commit."""
    pooled = pooled_quantiles(
        [
            (age_histogram(np.array(first)), first_after),
            (age_histogram(np.array(second)), second_after),
        ],
        [q],
    )
    assert pooled is not None
    (estimate,) = pooled
    exact = np.sort(
        np.concatenate(
            [
                np.maximum(np.array(first), 0.0) / 1000.0 + first_after,
                np.maximum(np.array(second), 0.0) / 1000.0 + second_after,
            ]
        )
    )
    value = exact[max(1, int(np.ceil(q * exact.size))) - 1]
    # the bucket's 1% of the age (at most 1% of the latency) and 0.5 ms, 0.1 ms rounding;
    # pooling may order two near values the other way: the rank is off by one bucket
    assert abs(estimate - value) <= 0.0202 * value + 0.0011
    assert pooled_quantiles([({}, 1.0)], [0.5]) is None
