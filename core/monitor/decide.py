"""Whether a routing version still pays, from its live health: the monitor's rule.

A remap is asked for when (any of):

- ``no_version``: posts are there to learn from but nothing routes them (no version
  published, and no remap has yet judged a candidate against hash routing);
- ``throughput_drop``: the version's live posts/s as the stream's cost model predicts
  them (``core.stream.costs``: the measure the publish gate judges versions by, from the
  period's posts, matches and each matcher's copies and counted work) fell by more than
  ``max_drop`` below its reference, the same figure over the version's first period of
  live posts. Rows without the model's counts fall back to throughput by counted matcher
  work (posts per unit of the busiest matcher's lookups + matches), and rows written
  before the stream counted work to the posts-only model against hash routing; each
  says which;
- ``hot_word``: the live word sketch reports a word whose share per version exceeds the
  split threshold (:func:`core.monitor.health.hot_words`).

While the stream routes by hash (the publish gate kept the remap's candidate out: it did
not beat hash), hash routing is the version checked, by its throughput drop only: a hot word
under hash asks for nothing, since the remap that would split it is the one that lost to
hash, and asking again every check would re-learn the same loser every hour; the nightly
remap still tries.

Otherwise the version is ``healthy`` (or there is ``no data``: no live posts in the period).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.errors import InvalidArgumentError
from core.monitor.health import RoutingHealth

HEALTHY, REMAP, NO_DATA = "healthy", "remap", "no data"


@dataclass(frozen=True)
class HealthCheck:
    """A check's decision and why: ``conditions`` are ``"<code>: <explanation>"``."""

    decision: str
    conditions: list[str] = field(default_factory=list)
    live_relative_throughput: float | None = None
    reference_relative_throughput: float | None = None
    live_work_throughput: float | None = None
    reference_work_throughput: float | None = None
    live_stream_posts_per_s: float | None = None
    reference_stream_posts_per_s: float | None = None

    @property
    def codes(self) -> list[str]:
        return [c.split(":", 1)[0] for c in self.conditions]


def decide(
    *,
    has_version: bool,
    has_posts: bool,
    live: RoutingHealth | None,
    reference: float | None,
    hot_words: Sequence[Mapping[str, Any]],
    split_threshold: float | None,
    max_drop: float,
    live_work: float | None = None,
    reference_work: float | None = None,
    live_stream: float | None = None,
    reference_stream: float | None = None,
    hash_routing: bool = False,
) -> HealthCheck:
    """Apply the rule above.

    Args:
        live: the published version's merged health over the period (None: no rows).
        reference: its model relative throughput at publish time (None: not evaluated).
        live_stream, reference_stream: its posts/s by the stream's cost model over the
            period and over its first live period (None: rows without the model's counts).
        live_work, reference_work: its throughput by counted work over the same periods
            (None: not counted; the posts-only model decides).
        hot_words: the latest window's reported words (``word``, ``share``, ``versions``).
        hash_routing: the version checked is hash routing (see the module's rule).

    Raises:
        InvalidArgumentError: if ``max_drop`` is not in [0, 1).
    """
    if not 0.0 <= max_drop < 1.0:
        raise InvalidArgumentError(f"max_drop must be in [0, 1), got {max_drop}")
    if not has_version:
        if has_posts:
            return HealthCheck(
                REMAP, ["no_version: posts are ingested but no routing version is in force"]
            )
        return HealthCheck(NO_DATA)
    if live is None or live.posts == 0:
        return HealthCheck(
            NO_DATA,
            reference_relative_throughput=reference,
            reference_work_throughput=reference_work,
            reference_stream_posts_per_s=reference_stream,
        )
    conditions = []
    now = live.relative_throughput
    # the gate's measure where the rows carry its counts, else counted work
    measured = next(
        (
            (name, now_value, then)
            for name, now_value, then in (
                ("the stream model's posts/s", live_stream, reference_stream),
                ("throughput by matcher work", live_work, reference_work),
            )
            if now_value is not None and then
        ),
        None,
    )
    if measured is not None:
        name, now_value, then = measured
        if now_value < (1.0 - max_drop) * then:
            conditions.append(
                f"throughput_drop: {name} x{now_value / then:.3f} of the version's first live "
                f"period ({1 - now_value / then:.1%} lower, more than {max_drop:.0%})"
            )
    elif reference is not None and not math.isnan(now) and now < (1.0 - max_drop) * reference:
        conditions.append(
            f"throughput_drop: live relative throughput {now:.3f} (posts-only model: the "
            f"health rows count no matcher work) is {1 - now / reference:.1%} below "
            f"{reference:.3f} at publish (more than {max_drop:.0%})"
        )
    for word in [] if hash_routing else hot_words:
        conditions.append(
            f"hot_word: '{word['word']}' carries {word['share']:.1%} of word occurrences "
            f"over {word['versions']} version(s)"
            + (f" (split threshold {split_threshold:.1%})" if split_threshold else "")
            + ("" if word.get("mapped", True) else "; the version never saw it")
        )
    return HealthCheck(
        REMAP if conditions else HEALTHY,
        conditions,
        None if math.isnan(now) else now,
        reference,
        live_work,
        reference_work,
        live_stream,
        reference_stream,
    )
