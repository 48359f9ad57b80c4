"""The stream's shedding state on the driver, without Spark: the ladder, the input rate
over a window of plans, and the drop levels' loads fitted on the batches that ran at them."""

from __future__ import annotations

import numpy as np
import pytest

from core.errors import InvalidArgumentError
from core.shedding.drop_cost import DROPPED_POST_COST
from core.stream.shedding_policy import Backlog, SheddingOptions, StreamShedding


def test_the_ladder_caps_down_to_two_drops_then_drops_at_one_matcher() -> None:
    ladder = StreamShedding(SheddingOptions()).ladder
    assert [ladder.cap(level) for level in range(1, 7)] == [7, 6, 5, 4, 3, 2]
    deep = ladder.deep_levels
    drops = [ladder.drop(level) for level in range(7, deep)]
    assert drops[0] == 0.05 and drops[-1] == 0.45
    assert np.allclose(np.diff(drops), 0.05)
    assert all(ladder.cap(level) == 2 for level in range(7, deep))
    deep_drops = [ladder.drop(level) for level in range(deep, ladder.max_level + 1)]
    assert deep_drops[0] == 0.35 and deep_drops[-1] == 0.9
    assert np.allclose(np.diff(deep_drops), 0.05)
    assert all(ladder.cap(level) == 1 for level in range(deep, ladder.max_level + 1))


def test_a_fixed_level_may_drop_posts_too() -> None:
    fixed = StreamShedding(SheddingOptions(max_spread=2.0, drop_fraction=0.3))
    assert fixed.choose(None, 0.0).level == 2 and fixed.ladder.drop(2) == 0.3
    with pytest.raises(InvalidArgumentError):
        SheddingOptions(drop_fraction=0.3)  # a fixed drop needs a fixed cap


def test_drop_level_loads_come_from_what_kept_posts_cost() -> None:
    shedding = StreamShedding(SheddingOptions())
    shedding.capacity = 100_000.0  # posts/s at level 0: 10 us a post
    dropped_cost = DROPPED_POST_COST / shedding.capacity
    kept_cost = {2.0: 12e-6, 1.0: 8e-6}  # the posts a value drop keeps are the costly ones
    ladder = shedding.ladder
    level_at = {(ladder.cap(lv), ladder.drop(lv)): lv for lv in range(ladder.max_level + 1)}
    for cap, kept, dropped in [(2.0, 600_000, 400_000), (1.0, 400_000, 600_000)]:
        level = level_at[(cap, dropped / (kept + dropped))]
        seconds = kept * kept_cost[cap] + dropped * dropped_cost
        shedding.drop_costs.record(level, kept, dropped, seconds)
    loads = shedding.loads()
    for level in range(ladder.cap_levels + 1, ladder.max_level + 1):
        d = ladder.drop(level)
        level_cap = ladder.cap(level)
        assert level_cap is not None  # a drop level caps the spread too
        want = min(1.0, 1e5 * ((1 - d) * kept_cost[level_cap] + d * dropped_cost))
        assert loads[level] == pytest.approx(min(want, loads[level - 1]))
    assert (np.diff(loads) <= 1e-12).all()  # never more load at a higher level
    assert loads[-1] < 0.5


def test_a_cap_no_batch_ran_at_takes_a_measured_caps_cost_by_the_model() -> None:
    shedding = StreamShedding(SheddingOptions())
    shedding.capacity = 100_000.0
    shedding.spread_counts = np.array([0, 100, 300, 400, 200])  # 1 to 4 matchers a post
    ladder = shedding.ladder
    level = ladder.deep_levels - 1  # m = 2, the last drop level
    shedding.drop_costs.record(level, 550_000, 450_000, 5.0)
    costs = shedding.drop_costs.costs(np.linspace(1.0, 0.5, ladder.max_level + 1), 100_000.0)
    assert costs is not None
    kept_cost, dropped_cost = costs.kept, costs.dropped
    measured = (5.0 - 450_000 * dropped_cost) / 550_000
    assert kept_cost[level] == pytest.approx(measured)
    shape = np.linspace(1.0, 0.5, ladder.max_level + 1)
    deep = ladder.deep_levels
    assert kept_cost[deep] == pytest.approx(measured * shape[deep] / shape[level])


def test_deep_levels_need_a_cap_no_larger_than_the_drop_levels() -> None:
    from core.shedding.shedder import LevelLadder

    with pytest.raises(InvalidArgumentError):
        LevelLadder(k=7, min_cap=2, drop_fractions=(0.1,), deep_fractions=(0.2,))
    with pytest.raises(InvalidArgumentError):
        LevelLadder(k=7, min_cap=2, drop_fractions=(0.1,), deep_cap=3.0, deep_fractions=(0.2,))
    with pytest.raises(InvalidArgumentError):
        LevelLadder(k=7, min_cap=2, deep_cap=1.0, deep_fractions=(0.3, 0.2))


def test_the_input_rate_is_measured_over_a_few_plans() -> None:
    shedding = StreamShedding(SheddingOptions())
    # files land in whole numbers: 4, 6, 4, 6 ... thousand posts per 5 s interval
    taken = [4000, 6000, 4000, 6000, 4000, 6000]
    rates = [shedding.input_rate((n, 0.0), 5.0 * t) for t, n in enumerate(taken)]
    assert rates[0] is None
    assert rates[1] == 1200.0  # one interval: off by a file
    assert rates[-1] == pytest.approx(1000.0, rel=0.1)  # over three: about right


def _catch_up_level(trigger_seconds: float) -> int:
    from core.shedding.controller import SheddingController

    shedding = StreamShedding(SheddingOptions(trigger_seconds=trigger_seconds, latency_budget=5.0))
    shedding.capacity = 1000.0  # posts/s at level 0: one 5 s interval at 1x is 5,000 posts
    shedding.controller = SheddingController(
        shedding.loads(), 5.0 * 1000.0, capacity=1000.0, step="rate"
    )
    for t in range(4):  # steady at 0.9x: level 0
        choice = shedding.choose(Backlog(0, 0, batch_posts=4500, waiting_posts=0), 5.0 * t)
        assert choice.level == 0
    # then a batch of two intervals (the one before took too long), nothing behind it
    return shedding.choose(Backlog(0, 0, batch_posts=9000, waiting_posts=0), 20.0).level


def test_a_catch_up_batch_counts_as_backlog() -> None:
    """A batch that takes two intervals' files at once carries an interval of backlog in
    it, though nothing waits behind it: the controller sheds for it, beyond what the input
    rate alone asks (an interval so long that no batch exceeds it stands for that)."""
    assert _catch_up_level(5.0) > _catch_up_level(1e9) > 0


def _learn(shedding: StreamShedding, level: int, kept: int, dropped: int, seconds: float) -> None:
    from types import SimpleNamespace

    snapshot = SimpleNamespace(routing_version=1, owner="test", part_matchers=np.zeros(4))
    note = {
        "posts": kept,
        "dropped_posts": dropped,
        "bytes": 200 * (kept + dropped),
        "spread_counts": [0, kept],
        "seconds": seconds,
    }
    shedding.learn(snapshot, level, [note], [{"seconds": 0.0}], seconds)  # type: ignore[arg-type,list-item,typeddict-item]


def test_a_rate_measured_long_ago_does_not_hold_the_level_up() -> None:
    """Issue 37, seen at 2x: two slow early batches at levels 20 and 21 held the stream at
    level 22 for the rest of the run, with batches of half the trigger. Rates are trusted
    for a few batches only, and the drop levels scale from the newest batch."""
    from core.shedding.controller import SheddingController

    shedding = StreamShedding(SheddingOptions(latency_budget=5.0, trigger_seconds=5.0))
    _learn(shedding, 0, 600_000, 0, 4.0)  # the warm-up batch: no rate from it
    _learn(shedding, 0, 600_000, 0, 4.0)  # 150k posts/s at level 0
    assert shedding.capacity == pytest.approx(150_000)
    shedding.controller = SheddingController(
        shedding.loads(), 5.0 * 150_000, capacity=150_000, step="rate"
    )
    first = shedding.ladder.cap_levels + 1
    level_of = {
        round(shedding.ladder.drop(lv), 2): lv for lv in range(first, shedding.ladder.max_level + 1)
    }
    # two slow batches at 80% and 85% dropped, then steady fast ones at 90%
    _learn(shedding, level_of[0.8], 360_000, 1_440_000, 6.0)
    _learn(shedding, level_of[0.85], 270_000, 1_530_000, 6.0)
    stale = shedding.loads()[level_of[0.85]]
    # files land whole: 4 to 6 of 300k lines a batch, 1 s a batch whatever its size
    dropped_cost = DROPPED_POST_COST / 150_000
    for files in (5, 4, 6, 5, 6, 4, 5, 5):
        lines = 300_000 * files
        kept = lines // 10
        _learn(
            shedding,
            level_of[0.9],
            kept,
            lines - kept,
            1.0 + kept * 9e-6 + (lines - kept) * dropped_cost,
        )
    loads = shedding.loads()
    rate_at = {d: shedding.capacity / loads[lv] for d, lv in level_of.items()}
    assert rate_at[0.9] == pytest.approx(
        1_500_000 / (1.0 + 150_000 * 9e-6 + 1_350_000 * dropped_cost), rel=0.02
    )

    # the other levels from the fit (1 s a batch, 9 us a kept post), not from what they
    # measured long ago (85%: 300k posts/s then; 342k by the costs of the 90% batches)
    def true_rate(drop: float) -> float:
        return 1_500_000 / (1.0 + 1_500_000 * ((1 - drop) * 9e-6 + drop * dropped_cost))

    assert loads[level_of[0.85]] < 0.95 * stale
    for drop in (0.5, 0.7, 0.8, 0.85):
        assert rate_at[drop] == pytest.approx(true_rate(drop), rel=0.05)
    # at an input of 320k posts/s, nothing waiting: the least level that covers it, below 90%
    for t in range(4):
        choice = shedding.choose(Backlog(0, 0, batch_posts=1_600_000, waiting_posts=0), 5.0 * t)
    assert first <= choice.level < level_of[0.9]
    assert rate_at[shedding.ladder.drop(choice.level)] >= 320_000
    assert rate_at[shedding.ladder.drop(choice.level - 1)] < 1.05 * 320_000


def test_before_any_drop_level_ran_its_load_is_the_work_of_the_long_posts() -> None:
    """A value drop keeps the long posts: dropping half the posts keeps far more than half
    the work when half the posts are ten times as long as the rest."""
    from core.shedding.drop import length_histogram

    shedding = StreamShedding(SheddingOptions())
    level = next(
        lv
        for lv in range(shedding.ladder.cap_levels + 1, shedding.ladder.max_level + 1)
        if shedding.ladder.drop(lv) == 0.5
    )
    by_posts = shedding.loads()[level]
    shedding.length_counts = length_histogram(np.r_[np.full(500, 40), np.full(500, 400)])
    by_bytes = shedding.loads()[level]
    assert by_bytes > 1.4 * by_posts
    assert (np.diff(shedding.loads()) <= 1e-12).all()
