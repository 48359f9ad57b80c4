"""Routing health of the live stream: one ``stream.health`` row per micro-batch.

Each route task returns, in its note, its posts' loads under the published version and
under hash routing, and a :class:`~core.monitor.sketch.WordSketch` of their words. The
driver merges them per batch and keeps the batches' sketches over a sliding window of
``window_batches`` batches (keyed by batch id, so a replayed batch replaces its own), whose
hot words (:func:`core.monitor.health.hot_words`) go into the row. The window lives on the
driver: after a restart it fills again from the next batches.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.errors import InvalidArgumentError
from core.monitor.health import (
    HotWord,
    RoutingHealth,
    hot_words,
    split_threshold,
    work_throughput,
)
from core.monitor.sketch import SketchSpec, WordSketch
from core.routing.hashing import stable_hash
from core.routing.table import RoutingTable

if TYPE_CHECKING:
    from core.stream.notes import MatchNote, RouteNote

# 4 x 16384 int64 counters and 512 candidates: 520 KiB per route task
SKETCH_SPEC = SketchSpec(width=1 << 14, depth=4, capacity=512, seed=0)


@dataclass(frozen=True)
class HealthOptions:
    """``window_batches``: batches the hot-word window spans; ``hot_word_tolerance``: the
    relative margin over the split threshold before a word is reported."""

    window_batches: int = 30
    hot_word_tolerance: float = 0.25

    def validate(self) -> None:
        if self.window_batches < 1:
            raise InvalidArgumentError(f"window_batches must be >= 1, got {self.window_batches}")
        if self.hot_word_tolerance < 0:
            raise InvalidArgumentError("hot_word_tolerance must be >= 0")


@dataclass(frozen=True)
class HealthFigures:
    """A batch's routing health: its ``stream.health`` columns (without the identifying
    ones), and the hot words among them with the threshold they passed."""

    columns: dict[str, object]
    hot_words: list[HotWord]
    split_threshold: float


def counted_work(
    n_matchers: int, posts: int, match_notes: Sequence[MatchNote]
) -> dict[str, object]:
    """``work`` per matcher and ``work_throughput`` (posts per unit of the busiest matcher's
    work): the columns the monitor judges a version by, as the publish gate does."""
    work = [0] * n_matchers
    for note in match_notes:
        for matcher, count in (note.get("work") or {}).items():
            work[int(matcher)] += int(count)
    return {"work": work, "work_throughput": work_throughput(posts, work)}


class StreamHealth:
    """The driver's side: merges the route tasks' figures into ``stream.health`` rows."""

    def __init__(self, options: HealthOptions | None = None) -> None:
        self.options = options or HealthOptions()
        self.options.validate()
        self._window: OrderedDict[int, WordSketch] = OrderedDict()
        self._table: RoutingTable | None = None
        self._word_of_key: dict[int, str] = {}
        self._words_known = 0

    def use_version(self, table: RoutingTable) -> None:
        """The routing version whose versions the hot words are judged against."""
        self._table = table

    def _learn_words(self, words: Sequence[str]) -> None:
        if len(words) < self._words_known:  # a new version's dictionary: start again
            self._word_of_key, self._words_known = {}, 0
        for word in words[self._words_known :]:
            self._word_of_key[stable_hash(word)] = word
        self._words_known = len(words)

    def _versions_of(self, word: str) -> tuple[int, bool]:
        assert self._table is not None
        index = self._table.word_index.get(word)
        if index is None:
            return 1, False
        return int(self._table.part_indptr[index + 1] - self._table.part_indptr[index]), True

    def row(
        self,
        batch_id: int,
        n_matchers: int,
        words: Sequence[str],
        route_notes: Sequence[RouteNote],
        match_notes: Sequence[MatchNote] = (),
    ) -> HealthFigures:
        """The batch's ``stream.health`` figures (without the identifying columns); the
        match tasks' notes give each matcher's counted work (lookups + matches)."""
        if self._table is None:
            raise InvalidArgumentError("no routing version in use")
        health = RoutingHealth.empty(n_matchers)
        batch_sketch = WordSketch(SKETCH_SPEC)
        for note in route_notes:
            health = health.merge(RoutingHealth.from_rows([note["health"]]))
            batch_sketch = batch_sketch.merge(WordSketch.from_text(note["sketch"], SKETCH_SPEC))
        self._window[batch_id] = batch_sketch
        self._window.move_to_end(batch_id)
        while len(self._window) > self.options.window_batches:
            self._window.popitem(last=False)
        window = WordSketch(SKETCH_SPEC)
        for sketch in self._window.values():
            window = window.merge(sketch)
        self._learn_words(words)
        hot = hot_words(
            window,
            self._word_of_key,
            self._versions_of,
            n_matchers,
            tolerance=self.options.hot_word_tolerance,
        )
        threshold = split_threshold(n_matchers)
        columns: dict[str, object] = {
            "n_matchers": n_matchers,
            **health.as_row(),
            "window_batches": len(self._window),
            "window_occurrences": window.total,
            "split_threshold": threshold,
            "hot_words": [h.as_dict() for h in hot],
            "sketch_bytes": max((n["sketch_bytes"] for n in route_notes), default=0),
            "sketch_seconds": round(sum(n["sketch_seconds"] for n in route_notes), 6),
            "route_seconds": round(sum(n["task_seconds"] for n in route_notes), 6),
            **counted_work(n_matchers, health.posts, match_notes),
        }
        return HealthFigures(columns, hot, threshold)
