"""Whether a routing version still pays, from its live health: the monitor's rule.

A remap is asked for when (any of):

- ``no_version``: posts are there to learn from but nothing is published;
- ``throughput_drop``: the version's live relative throughput (against hash routing, on
  the period's posts) fell by more than ``max_drop`` from its value at publish time;
- ``hot_word``: the live word sketch reports a word whose share per version exceeds the
  split threshold (:func:`core.monitor.health.hot_words`).

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
) -> HealthCheck:
    """Apply the rule above.

    Args:
        live: the published version's merged health over the period (None: no rows).
        reference: its relative throughput at publish time (None: not evaluated).
        hot_words: the latest window's reported words (``word``, ``share``, ``versions``).

    Raises:
        InvalidArgumentError: if ``max_drop`` is not in [0, 1).
    """
    if not 0.0 <= max_drop < 1.0:
        raise InvalidArgumentError(f"max_drop must be in [0, 1), got {max_drop}")
    if not has_version:
        if has_posts:
            return HealthCheck(REMAP, ["no_version: posts are ingested but none is published"])
        return HealthCheck(NO_DATA)
    if live is None or live.posts == 0:
        return HealthCheck(NO_DATA, reference_relative_throughput=reference)
    conditions = []
    now = live.relative_throughput
    if reference is not None and not math.isnan(now) and now < (1.0 - max_drop) * reference:
        conditions.append(
            f"throughput_drop: live relative throughput {now:.3f} is "
            f"{1 - now / reference:.1%} below {reference:.3f} at publish "
            f"(more than {max_drop:.0%})"
        )
    for word in hot_words:
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
    )
