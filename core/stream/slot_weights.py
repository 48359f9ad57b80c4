"""A batch's yield weights by (word, matcher), so that a replayed batch sheds exactly the
pairs its first run did: slots are numbered anew by a restarted driver, names are not.
Where they are kept is the stream's business (a :class:`SlotWeightStore`)."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from core.stream.snapshot import MatcherSnapshot


class SlotWeightStore(Protocol):
    """Keeps the weights each batch was planned with."""

    def save(self, batch_id: int, snapshot: MatcherSnapshot, weights: np.ndarray) -> None: ...

    def load(self, batch_id: int, snapshot: MatcherSnapshot) -> np.ndarray | None: ...


def slot_names(snapshot: MatcherSnapshot) -> tuple[np.ndarray, np.ndarray]:
    """(word, matcher) of each of the snapshot's slots."""
    word_of_slot = np.repeat(np.arange(snapshot.n_words), snapshot.part_count)
    words = np.array(snapshot.words, dtype=object)[word_of_slot]
    return words, snapshot.part_matchers


def weights_of_slots(
    snapshot: MatcherSnapshot, words: np.ndarray, matchers: np.ndarray, weights: np.ndarray
) -> np.ndarray:
    """The snapshot's slot weights from weights kept by (word, matcher); 0 for a slot none
    was kept for."""
    stored = {(str(w), int(m)): float(x) for w, m, x in zip(words, matchers, weights, strict=True)}
    slot_words, slot_matchers = slot_names(snapshot)
    return np.array(
        [stored.get((str(w), int(m)), 0.0) for w, m in zip(slot_words, slot_matchers, strict=True)]
    )
