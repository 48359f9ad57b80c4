"""The streaming matcher's load-shedding policy (the driver's): backlog, level, plan,
learning. No Spark here: the stream hands it the backlog its source reports
(``spark_jobs/stream/backlog.py`` reads it) and the notes its tasks return.

Per micro-batch, before it is routed:

1. the *buffer* is the backlog: posts landed but not yet processed, this batch included
   (files source: bytes of the files Spark's file-source log has not yet handed to a batch
   plus this batch's, in posts through the bytes per post measured so far; Kafka: the
   source's own offsets-behind-latest metric);
2. the controller (:class:`core.shedding.controller.SheddingController`) reads it once per
   batch: the buffer size b is ``latency_budget`` seconds of the capacity measured at level
   0, the fullness is the backlog's work (posts x L(level)), and L(l) comes from the rates
   measured at each level, else from the spreads and the route / match time split;
3. the level, its cap and (``yield``) the utility weights become the batch's
   :class:`ShedPlan`; the plan is recorded before the batch runs, and the weights are kept
   (the stream's :class:`core.stream.slot_weights.SlotWeightStore`), so a replayed batch
   sheds exactly the same pairs.

After the batch: the route tasks' spread histograms, bytes and timings update L(l), the
capacity and bytes per post; the match tasks' yield counts update the yield estimate
(:class:`core.stream.match_yields.MatchYields`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core.errors import InvalidArgumentError
from core.shedding.controller import SheddingController
from core.shedding.drop import kept_byte_share
from core.shedding.drop_cost import DROPPED_POST_COST, DropCostFit
from core.shedding.input_rate import InputRate
from core.shedding.plan import DROP_RULES, SHEDDING_MODES, ShedPlan
from core.shedding.post_value import ValueTable, word_values
from core.shedding.shedder import LevelLadder, pair_load_of_histogram
from core.stream.match_yields import MatchYields
from core.stream.notes import MatchNote, RouteNote
from core.stream.slot_weights import SlotWeightStore
from core.stream.snapshot import MatcherSnapshot

log = logging.getLogger(__name__)

# Share of posts processed in full while shedding, so the yield estimate stays unbiased.
EXEMPT_FRACTION = 0.02
# Weight of a new measurement in the running estimates (capacity, bytes per post).
SMOOTHING = 0.3
# Beyond the smallest cap: the shares of whole posts the last levels drop (the last resort
# when routing the posts, not matching them, is more than the machines can take), in steps
# of 5% so that the controller can settle close to the capacity (issue 37).
DROP_FRACTIONS = tuple(round(0.05 * i, 2) for i in range(1, 10))
# The smallest cap, and the cap of the drop levels. The yield utility keeps 99% of the
# matches at m = 4 and 91% at m = 2 (Fig. 8a), and a value drop keeps the posts with many
# words, whose spreads the cap cuts: at the throughput of 50% dropped at m = 2, m = 4 must
# drop 60% for the same matches (1.5M-post batches of the real tweets, issue 37), so m = 2
# processes a quarter more posts for as many matches
DROP_CAP = 2.0
# Deeper, one matcher per post: at the rate of 60% dropped at m = 2 (340k lines/s), m = 1
# drops 45% and processes 37% more posts for 10% fewer matches (0.66 of them against 0.73;
# 1.5M-post batches of the real tweets, issue 37). The deep levels start where their rate
# passes the last drop level's (m = 2 dropping 45% ~ m = 1 dropping 35%)
DEEP_CAP = 1.0
DEEP_FRACTIONS = tuple(round(0.05 * i, 2) for i in range(7, 19))
# Capacity kept above the input when the controller picks a level. None: the draining term
# already asks for more than the input whenever posts wait, and the loads come from rates
# measured a few batches ago; a 5% margin left a 2x run one level high (60% dropped where
# 55% ran as fast: 88% of capacity processed; 102% and 118% in two runs without it)
HEADROOM = 1.0
# Batches a level's measured rate is trusted for: a batch's time varies by +-20% with the
# files it takes (issue 37: rates measured at levels 20-21 in two slow batches early in a
# 2x run held the stream at level 22, batches half the trigger, for the rest of the run)
RATE_MEMORY = 6
# Batches of a routing version whose time says nothing about capacity: the Python workers
# build the tries of the matchers they meet and fill their token caches. Even after the
# warm-up job the first batch runs ~1.5x slower than a steady one (bench stream), and under
# overload no later batch runs at level 0 to correct a capacity measured on it (tried:
# counting it sheds 30% at 1.25x where 20% is enough).
WARMUP_BATCHES = 1


@dataclass(frozen=True)
class Backlog:
    """What waits before a batch: its own input and what has landed in no batch yet, in
    bytes (files) or posts (when the source counts them: Kafka offsets)."""

    batch_bytes: int  # this batch's input
    waiting_bytes: int  # landed, in no batch yet
    batch_posts: int | None = None  # when the source counts posts (Kafka offsets)
    waiting_posts: int | None = None


@dataclass(frozen=True)
class SheddingOptions:
    """Attributes:
    mode: ``off`` or a utility (``consensus`` | ``subscription`` | ``yield``).
    max_spread: a fixed cap for every batch (no controller); None: adaptive.
    drop_fraction: with ``max_spread``, a fixed share of whole posts dropped too.
    k, delta: the level ladder (level l >= 1 caps at k - (l-1) delta).
    latency_budget: b, in seconds of work at level 0 (the overload segment starts there).
    step: the controller's step rule (``rate`` | ``one``).
    drop_rule: how drop levels pick posts: ``value`` (the least estimated matches, from
        the learned yields; the ``yield`` utility only) or ``random`` (the baseline).
    trigger_seconds: the query's trigger interval (0: as fast as it can, then the latency
        budget stands for it): what one batch brings at the input rate.
    adaptive: False for a catch-up run (``--available-now``): a landed backlog worked
        through on purpose is not overload, so only a fixed ``max_spread`` sheds.
    """

    mode: str = "yield"
    max_spread: float | None = None
    drop_fraction: float = 0.0
    k: float = 7.0
    delta: float = 1.0
    latency_budget: float = 10.0
    step: str = "rate"
    adaptive: bool = True
    drop_rule: str = "value"
    trigger_seconds: float = 0.0

    @property
    def interval_seconds(self) -> float:
        return self.trigger_seconds if self.trigger_seconds > 0 else self.latency_budget

    def __post_init__(self) -> None:
        if self.mode not in SHEDDING_MODES:
            raise InvalidArgumentError(f"--shedding must be one of {SHEDDING_MODES}")
        if self.max_spread is not None and self.max_spread < 1:
            raise InvalidArgumentError(f"--max-spread must be >= 1, got {self.max_spread}")
        if self.max_spread is not None and self.mode == "off":
            raise InvalidArgumentError("--max-spread needs a shedding utility, not 'off'")
        if not 0.0 <= self.drop_fraction < 1.0:
            raise InvalidArgumentError(
                f"--drop-fraction must lie in [0, 1), got {self.drop_fraction}"
            )
        if self.drop_fraction and self.max_spread is None:
            raise InvalidArgumentError("--drop-fraction is a fixed level: it needs --max-spread")
        if self.drop_rule not in DROP_RULES:
            raise InvalidArgumentError(f"--drop-rule must be one of {DROP_RULES}")
        if self.latency_budget <= 0:
            raise InvalidArgumentError("--latency-budget must be > 0")


# -- the driver's shedding state ----------------------------------------------------------------
@dataclass(frozen=True)
class LevelChoice:
    level: int
    max_spread: float | None
    backlog_posts: int | None


class StreamShedding:
    """Decides each batch's level and plan; learns from each batch's notes."""

    def __init__(self, options: SheddingOptions) -> None:
        self.options = options
        fixed = options.max_spread
        self.ladder = (
            LevelLadder(
                k=fixed,
                delta=1.0,
                min_cap=fixed,
                drop_fractions=(options.drop_fraction,) if options.drop_fraction else (),
            )
            if fixed is not None
            else LevelLadder(
                k=options.k,
                delta=options.delta,
                min_cap=min(DROP_CAP, options.k),
                drop_fractions=DROP_FRACTIONS,
                drop_cap=min(DROP_CAP, options.k),
                deep_cap=DEEP_CAP,
                deep_fractions=DEEP_FRACTIONS,
            )
        )
        self.controller: SheddingController | None = None
        self.spread_counts: np.ndarray | None = None
        self.length_counts: np.ndarray | None = None  # raw lines per length bin, all batches
        self.capacity: float | None = None  # posts/s at level 0
        self.posts_per_byte: float | None = None
        self.yields = MatchYields()
        self._input_rate = InputRate()
        self._version: int | None = None
        self._version_batches = 0
        # share of a batch's task time spent per post (route, and dispatch: per match), not
        # per routed pair (match): capping spreads saves only the latter
        self.per_post_share = 0.5
        # (posts/s, batch number) measured at each level after the warm-up: they correct
        # the model of L while fresh
        self.level_rates: dict[int, tuple[float, int]] = {}
        self._batches = 0  # batches learned from
        self._last_level: int | None = None  # the level of the newest measured batch
        self.drop_costs = DropCostFit(self.ladder)

    @property
    def enabled(self) -> bool:
        return self.options.mode != "off"

    def loads(self) -> np.ndarray:
        """L(l) per level: work kept over work at level 0. Per post, a fixed part (route,
        dispatch) and a part per routed pair (match), in the measured proportions; the
        pairs kept at each cap come from the spreads seen so far. The drop levels, and
        any level measured lately, from the batches that ran (see below)."""
        levels = self.ladder.max_level + 1
        pairs = np.linspace(1.0, 1.0 / levels, levels)
        if self.spread_counts is not None and self.spread_counts.sum() > 0:
            # from the histogram: it covers every post the stream has seen
            counts = self.spread_counts
            total = pair_load_of_histogram(counts, None)
            if total > 0:
                pairs = np.array(
                    [1.0]
                    + [
                        pair_load_of_histogram(counts, self.ladder.cap(lv)) / total
                        for lv in range(1, levels)
                    ]
                )
        a = self.per_post_share
        drops = np.array([self.ladder.drop(lv) for lv in range(levels)])
        kept = 1.0 - drops
        # the work a drop level keeps: its posts' share, or (once lengths are known) the
        # share of the bytes in the longest posts, as a value drop keeps the long ones
        work = kept
        if self.length_counts is not None:
            work = np.array([kept_byte_share(self.length_counts, float(d)) for d in drops])
        # a kept post's work by the model, per level (the same at each level of a cap)
        shape = a + (1.0 - a) * pairs
        out = work * shape + (1.0 - kept) * DROPPED_POST_COST
        # the drop levels from what a kept and a dropped post cost in the batches that ran
        # at them (one fit per cap, so a level never visited is as well known as its
        # neighbours)
        first_drop = self.ladder.cap_levels + 1
        costs = self.drop_costs.costs(shape, self.capacity)
        per_line = None
        if costs is not None and self.capacity:
            # seconds a line, in a batch as large as the newest one at a drop level
            per_line = (
                costs.fixed / max(1, self.drop_costs.batch_lines)
                + (1 - drops) * costs.kept
                + drops * costs.dropped
            )
            out[first_drop:] = self.capacity * per_line[first_drop:]
        # where a level ran lately, its measured rate says what its load is
        rates = self._fresh_rates()
        base = rates.get(0, self.level_rates.get(0, (None, 0))[0])
        if base is None and rates:
            level, rate = next(iter(rates.items()))
            base = rate * out[level]
        if base:
            for level, rate in rates.items():
                if level < first_drop:
                    out[level] = min(1.0, base / rate) if level else 1.0
            current = self._last_level
            if current is not None and current >= first_drop and current in rates:
                # the drop levels from the newest batch's rate, scaled by the fit's cost of
                # a line at each level: the fit gives the shape (a value drop's kept posts
                # cost more than average ones), the batch that just ran the scale
                if per_line is not None:
                    scaled = base * per_line[first_drop:] / (rates[current] * per_line[current])
                    out[first_drop:] = scaled
                else:
                    out[current] = base / rates[current]
        return np.maximum(np.minimum.accumulate(np.minimum(out, 1.0)), 1e-6)

    def _fresh_rates(self) -> dict[int, float]:
        """posts/s of the levels measured within the last ``RATE_MEMORY`` batches."""
        return {
            level: rate
            for level, (rate, seen) in self.level_rates.items()
            if self._batches - seen < RATE_MEMORY
        }

    def backlog_posts(self, backlog: Backlog | None) -> int | None:
        """Posts landed and not yet processed, this batch's included (what the batch log
        records)."""
        if backlog is None:
            return None
        if backlog.waiting_posts is not None:
            return int(backlog.waiting_posts + (backlog.batch_posts or 0))
        if self.posts_per_byte is None:
            return None
        return round((backlog.batch_bytes + backlog.waiting_bytes) * self.posts_per_byte)

    def _split_posts(self, backlog: Backlog) -> tuple[float, float] | None:
        """(this batch's posts, posts waiting behind it), or None before bytes per post
        are known for a file source."""
        if backlog.waiting_posts is not None:
            return float(backlog.batch_posts or 0), float(backlog.waiting_posts)
        if self.posts_per_byte is None:
            return None
        return (
            backlog.batch_bytes * self.posts_per_byte,
            backlog.waiting_bytes * self.posts_per_byte,
        )

    def input_rate(self, split: tuple[float, float], now: float) -> float | None:
        """Posts/s landed over the last plans (:class:`InputRate`)."""
        return self._input_rate.observe(split, now)

    def choose(self, backlog: Backlog | None, now: float) -> LevelChoice:
        """The level of the next batch (a new plan; a replay reuses its recorded one).

        The controller's buffer is what waits beyond one interval's input: the posts behind
        this batch, and the part of the batch itself past what an interval brings at the
        measured rate (a catch-up batch takes several intervals' files at once, and they
        are backlog as much as the files still waiting).
        """
        posts = self.backlog_posts(backlog)
        if not self.enabled:
            return LevelChoice(0, None, posts)
        if self.options.max_spread is not None:  # a fixed level: the ladder's last
            return LevelChoice(self.ladder.max_level, self.options.max_spread, posts)
        if not self.options.adaptive:
            return LevelChoice(0, None, posts)
        split = self._split_posts(backlog) if backlog is not None else None
        input_rate = self.input_rate(split, now) if split is not None else None
        if self.controller is None or split is None or self.capacity is None:
            return LevelChoice(0, None, posts)
        loads = self.loads()
        self.controller.retune(loads, self.options.latency_budget * self.capacity, self.capacity)
        batch, waiting = split
        if input_rate is not None:
            waiting = max(0.0, batch + waiting - input_rate * self.options.interval_seconds)
        # the buffer in work, not posts: a backlog at level l takes L(l) of the time it
        # would at level 0 (Little's law, as the segments assume)
        work = waiting * float(loads[self.controller.level])
        decision = self.controller.adapt(work, input_rate)
        if decision.moved:
            log.info(
                "stream: shedding level %d -> %d (%d posts waiting, input %s posts/s, "
                "capacity %d posts/s, %s segment)",
                decision.level - decision.moved,
                decision.level,
                round(waiting),
                "?" if input_rate is None else f"{input_rate:,.0f}",
                round(self.capacity),
                decision.segment,
            )
        return LevelChoice(decision.level, self.ladder.cap(decision.level), posts)

    def plan(
        self,
        level: int,
        max_spread: float | None,
        snapshot: MatcherSnapshot,
        weights: SlotWeightStore,
        batch_id: int,
        *,
        replayed: bool,
    ) -> ShedPlan:
        """The batch's plan; yield weights saved to ``weights`` first (or, on a replay,
        loaded from it)."""
        mode = self.options.mode
        if mode == "off" or max_spread is None:
            # the yield estimate learns from a sample even at level 0: counting every
            # post would put its bookkeeping on each match task's hot path
            return ShedPlan(
                utility=mode, exempt_fraction=EXEMPT_FRACTION if mode == "yield" else 0.0
            )
        drop = self.ladder.drop(level) if level <= self.ladder.max_level else 0.0
        weight = None
        values = None
        if mode == "yield":
            weight = self.yields.weights(snapshot, weights, batch_id, replayed=replayed)
            if drop > 0 and self.options.drop_rule == "value":
                # from the saved weights, so a replay ranks the posts as the first run did
                values = ValueTable.from_words(
                    snapshot.words,
                    word_values(weight, snapshot.part_start, snapshot.part_count),
                )
        return ShedPlan(
            utility=mode,
            level=level,
            max_spread=max_spread,
            slot_weight=weight,
            # only the learned utility needs posts processed in full (the others keep the
            # cap strictly)
            exempt_fraction=EXEMPT_FRACTION if mode == "yield" else 0.0,
            drop_fraction=drop,
            drop_values=values,
        )

    def learn(
        self,
        snapshot: MatcherSnapshot,
        level: int,
        route_notes: Sequence[RouteNote],
        match_notes: Sequence[MatchNote],
        seconds: float,
        dispatch_seconds: float = 0.0,
    ) -> None:
        """Fold one committed batch in: spreads, bytes per post, capacity, yields."""
        if snapshot.routing_version != self._version:
            # spreads and warm-up are a routing version's own
            self._version, self._version_batches = snapshot.routing_version, 0
            self.spread_counts = None
            self.level_rates = {}
            self._last_level = None
            self.drop_costs.clear()
        self._version_batches += 1
        posts = sum(n["posts"] for n in route_notes)
        taken = posts + sum(n["dropped_posts"] for n in route_notes)  # input absorbed
        read = sum(n["bytes"] for n in route_notes)
        counts = [np.asarray(n["spread_counts"], dtype=np.int64) for n in route_notes]
        if counts:
            size = max(c.shape[0] for c in counts)
            total = np.zeros(size, dtype=np.int64)
            for c in counts:
                total[: c.shape[0]] += c
            self.spread_counts = (
                total
                if self.spread_counts is None or self.spread_counts.shape[0] != size
                else self.spread_counts + total
            )
        lengths = [n["length_counts"] for n in route_notes if "length_counts" in n]
        if lengths:
            batch_lengths = np.sum(np.asarray(lengths, dtype=np.int64), axis=0)
            self.length_counts = (
                batch_lengths if self.length_counts is None else self.length_counts + batch_lengths
            )
        if taken and read:
            self.posts_per_byte = _smooth(self.posts_per_byte, taken / read)
        # a cap saves match work per routed pair; the dispatch's work is per match, and a
        # cap keeps most matches (91% at m = 2), so it counts with the per-post work
        per_post = sum(n["seconds"] for n in route_notes) + dispatch_seconds
        per_pair = sum(n["seconds"] for n in match_notes)
        if per_post + per_pair > 0 and self._version_batches > WARMUP_BATCHES:
            self.per_post_share = _smooth(self.per_post_share, per_post / (per_post + per_pair))
        if taken and seconds > 0 and self._version_batches > WARMUP_BATCHES:
            self._batches += 1
            if level > self.ladder.cap_levels:
                self.drop_costs.record(level, posts, taken - posts, seconds)
            rate = taken / seconds
            # smoothed with the level's last rate while that is fresh, else measured anew
            fresh = self._fresh_rates().get(level)
            self.level_rates[level] = (_smooth(fresh, rate), self._batches)
            self._last_level = level
            if level == 0:
                self.capacity = self.level_rates[0][0]
            elif 0 not in self.level_rates:
                self.capacity = rate * float(self.loads()[level])
        adaptive = self.enabled and self.options.adaptive and self.options.max_spread is None
        if self.controller is None and adaptive and self.capacity is not None:
            self.controller = SheddingController(
                self.loads(),
                self.options.latency_budget * self.capacity,
                step=self.options.step,
                capacity=self.capacity,
                headroom=HEADROOM,
            )
        if self.options.mode == "yield":
            self.yields.learn(snapshot, match_notes)


def _smooth(old: float | None, new: float) -> float:
    return new if old is None else (1 - SMOOTHING) * old + SMOOTHING * new
