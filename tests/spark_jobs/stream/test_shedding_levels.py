"""The stream's shedding state on the driver, without Spark: the ladder, the input rate
over a window of plans, and the drop levels' loads fitted on the batches that ran at them."""

from __future__ import annotations

import numpy as np
import pytest

from core.errors import InvalidArgumentError
from spark_jobs.stream.shedding import SheddingOptions, StreamShedding


def test_the_ladder_caps_down_to_four_then_drops_in_small_steps() -> None:
    ladder = StreamShedding(SheddingOptions()).ladder
    assert [ladder.cap(level) for level in range(1, 5)] == [7, 6, 5, 4]
    drops = [ladder.drop(level) for level in range(5, ladder.max_level + 1)]
    assert drops[0] == 0.05 and drops[-1] == 0.9
    assert np.allclose(np.diff(drops), 0.05)
    assert all(ladder.cap(level) == 4 for level in range(5, ladder.max_level + 1))


def test_a_fixed_level_may_drop_posts_too() -> None:
    fixed = StreamShedding(SheddingOptions(max_spread=2.0, drop_fraction=0.3))
    assert fixed.choose(None, 0.0).level == 2 and fixed.ladder.drop(2) == 0.3
    with pytest.raises(InvalidArgumentError):
        SheddingOptions(drop_fraction=0.3)  # a fixed drop needs a fixed cap


def test_drop_level_loads_come_from_what_kept_and_dropped_posts_cost() -> None:
    shedding = StreamShedding(SheddingOptions())
    shedding.capacity = 100_000.0  # posts/s at level 0: 10 us a post
    kept_cost, dropped_cost = 8e-6, 1.5e-6
    for kept, dropped in [(600_000, 400_000), (400_000, 600_000), (500_000, 500_000)]:
        shedding._drop_batches.append((kept, dropped, kept * kept_cost + dropped * dropped_cost))
    loads = shedding.loads()
    ladder = shedding.ladder
    for level in range(ladder.cap_levels + 1, ladder.max_level + 1):
        d = ladder.drop(level)
        assert loads[level] == pytest.approx(1e5 * ((1 - d) * kept_cost + d * dropped_cost))
    assert (np.diff(loads) <= 1e-12).all()  # never more load at a higher level


def test_the_input_rate_is_measured_over_a_few_plans() -> None:
    shedding = StreamShedding(SheddingOptions())
    # files land in whole numbers: 4, 6, 4, 6 ... thousand posts per 5 s interval
    taken = [4000, 6000, 4000, 6000, 4000, 6000]
    rates = [shedding.input_rate((n, 0.0), 5.0 * t) for t, n in enumerate(taken)]
    assert rates[0] is None
    assert rates[1] == 1200.0  # one interval: off by a file
    assert rates[-1] == pytest.approx(1000.0, rel=0.1)  # over three: about right
