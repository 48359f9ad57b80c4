"""Post-to-delivery latency: a post's age when its batch started, kept per task as a
log-bucketed histogram, then shifted by the batch's own time to its commit.

A task knows when each delivered post arrived (the Kafka record's timestamp, or the landed
file's modification time) and the batch's start stamp; only the driver knows when the
batch's deliveries were committed (the moment they became visible). So tasks count each
delivered post's age at the batch's start in buckets 2% wide, the driver merges the
counts and adds the start-to-commit seconds: the latency of every delivered post, within
2%, for a few hundred integers a task instead of one per post.

Prometheus buckets (``le`` bounds) come from the same counts: :func:`bucket_counts`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from core.errors import InvalidArgumentError

# bucket b holds ages in [GROWTH**(b-1), GROWTH**b) milliseconds; bucket 0 ages under 1 ms
GROWTH = 1.02
_LOG_GROWTH = float(np.log(GROWTH))
# the delivery latency's Prometheus bucket bounds, seconds (a trigger of 1-10 s in mind)
PROMETHEUS_BOUNDS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)


def age_histogram(ages_ms: np.ndarray) -> dict[int, int]:
    """Counts per bucket of ages in milliseconds (negative ages, a clock ahead of the
    broker's or the file system's, count as 0)."""
    ages = np.asarray(ages_ms, dtype=np.float64)
    if ages.size == 0:
        return {}
    if np.isnan(ages).any():
        raise InvalidArgumentError("ages must be numbers")
    buckets = np.zeros(ages.shape[0], dtype=np.int64)
    grown = ages >= 1.0
    buckets[grown] = np.floor(np.log(ages[grown]) / _LOG_GROWTH).astype(np.int64) + 1
    found, counts = np.unique(buckets, return_counts=True)
    return {int(b): int(c) for b, c in zip(found, counts, strict=True)}


def merge(histograms: Sequence[Mapping[str, int] | Mapping[int, int]]) -> dict[int, int]:
    """Sum histograms (their keys may be strings: they cross a JSON boundary)."""
    total: dict[int, int] = {}
    for histogram in histograms:
        for bucket, count in histogram.items():
            total[int(bucket)] = total.get(int(bucket), 0) + int(count)
    return total


def _ages_and_counts(histogram: Mapping[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Each bucket's representative age in seconds (its geometric middle), ascending."""
    buckets = np.array(sorted(histogram), dtype=np.int64)
    counts = np.array([histogram[int(b)] for b in buckets], dtype=np.int64)
    middle = np.where(buckets > 0, GROWTH ** (buckets - 0.5), 0.5) / 1000.0
    return middle, counts


def latency_quantiles(
    histogram: Mapping[int, int], after_start: float, quantiles: Sequence[float]
) -> list[float] | None:
    """The latency quantiles, seconds: each post's age at the batch's start plus
    ``after_start`` (the seconds from the start to the commit). None: no post."""
    return pooled_quantiles([(histogram, after_start)], quantiles)


def bucket_counts(
    histogram: Mapping[int, int], after_start: float, bounds: Sequence[float] = PROMETHEUS_BOUNDS
) -> list[int]:
    """Posts per Prometheus bucket (not cumulative): ``len(bounds) + 1`` counts, the last
    above every bound; and with :func:`latency_sum`, a histogram's ``_sum``."""
    if list(bounds) != sorted(bounds):
        raise InvalidArgumentError("bucket bounds must be ascending")
    counts = np.zeros(len(bounds) + 1, dtype=np.int64)
    if histogram:
        ages, per_bucket = _ages_and_counts(histogram)
        slot = np.searchsorted(np.asarray(bounds, dtype=np.float64), ages + after_start)
        np.add.at(counts, slot, per_bucket)
    return [int(c) for c in counts]


def latency_sum(histogram: Mapping[int, int], after_start: float) -> float:
    """The posts' latencies summed, seconds (a Prometheus histogram's ``_sum``)."""
    if not histogram:
        return 0.0
    ages, counts = _ages_and_counts(histogram)
    return float(np.sum((ages + after_start) * counts))


def pooled_quantiles(
    samples: Sequence[tuple[Mapping[int, int], float]], quantiles: Sequence[float]
) -> list[float] | None:
    """Latency quantiles over several batches' deliveries: each batch's age histogram with
    its own seconds from start to commit (``(histogram, after_start)`` pairs)."""
    values, counts = [], []
    for histogram, after_start in samples:
        if histogram:
            ages, per_bucket = _ages_and_counts(histogram)
            values.append(ages + after_start)
            counts.append(per_bucket)
    if not values:
        return None
    if any(not 0 <= q <= 1 for q in quantiles):
        raise InvalidArgumentError("quantiles lie in [0, 1]")
    latency = np.concatenate(values)
    weight = np.concatenate(counts)
    order = np.argsort(latency, kind="stable")
    latency, cumulative = latency[order], np.cumsum(weight[order])
    total = int(cumulative[-1])
    # the nearest rank: the smallest latency with at least q of the posts at or below it
    ranks = [max(1, int(np.ceil(q * total))) for q in quantiles]
    return [round(float(latency[i]), 4) for i in np.searchsorted(cumulative, ranks)]
