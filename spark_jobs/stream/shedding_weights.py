"""The yield weights of each shedding batch, kept beside the query's checkpoint (the
driver's disk or an object store through the checkpoint's file system path), so a batch
replayed after a crash sheds the pairs its first run shed."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from core.stream.slot_weights import slot_names, weights_of_slots
from core.stream.snapshot import MatcherSnapshot


class CheckpointWeights:
    """The weights under ``<checkpoint>/s3tm_shedding`` (a ``SlotWeightStore``)."""

    def __init__(self, checkpoint: str) -> None:
        self.folder = Path(checkpoint) / "s3tm_shedding"

    def path(self, batch_id: int) -> Path:
        return self.folder / f"yield-weights-{batch_id}.npz"

    def save(self, batch_id: int, snapshot: MatcherSnapshot, weights: np.ndarray) -> None:
        words, matchers = slot_names(snapshot)
        path = self.path(batch_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.tmp.npz")
        np.savez(temporary, words=words.astype(str), matchers=matchers, weights=weights)
        temporary.replace(path)  # whole or not at all: a crash mid-write leaves no file

    def load(self, batch_id: int, snapshot: MatcherSnapshot) -> np.ndarray | None:
        path = self.path(batch_id)
        if not path.exists():
            return None
        with np.load(path) as saved:
            return weights_of_slots(snapshot, saved["words"], saved["matchers"], saved["weights"])
