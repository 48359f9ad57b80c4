"""The driver's placement across batches: a newly published routing version is loaded
(mapping + stored placements); subscriptions registered since are placed into it with LASP
(and appended to ``routing.placements``), cancelled ones taken off; the result is
broadcast to the workers as a :class:`MatcherSnapshot`: the routing arrays and the changes
since the version's base, whose per-matcher files the match tasks read
(:mod:`spark_jobs.stream.matcher_bases`)."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.placement.live import LivePlacement
from core.stream.snapshot import MatcherSnapshot, SnapshotMaker
from schemas import table
from spark_jobs.lake.routing_store import (
    load_routing_table,
    now_utc,
    placement_arrays,
    routing_label,
)
from spark_jobs.stream.health import StreamHealth
from spark_jobs.stream.matcher_bases import FileBases, bases_root

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pyspark import Broadcast

    from spark_jobs.lake.delta_io import Lakehouse


def _pickled_bytes(broadcast: Broadcast[MatcherSnapshot]) -> int:
    """The size of a broadcast as shipped: PySpark pickles it into a file first (0 when
    that file is not there, as with encrypted broadcasts)."""
    path = getattr(broadcast, "_path", None)
    try:
        return os.path.getsize(path) if path else 0
    except OSError:
        return 0


def word_frequencies(lakehouse: Lakehouse) -> dict[str, int]:
    """Post frequency of each word over ``gold.word_stats`` (empty when absent): the
    tries put rare words first."""
    if not lakehouse.exists("gold.word_stats"):
        return {}
    stats = lakehouse.read_arrow("gold.word_stats").select(["word", "post_frequency"])
    totals = stats.group_by("word").aggregate([("post_frequency", "sum")])
    return dict(
        zip(
            totals["word"].to_pylist(),
            totals["post_frequency_sum"].to_pylist(),
            strict=True,
        )
    )


@dataclass
class DriverState:
    """The driver's state across batches: the placement of the current routing version."""

    routing_version: int | None = None
    registry_version: int | None = None
    placement: LivePlacement | None = None
    epoch: int = 0
    snapshot: MatcherSnapshot | None = None
    broadcast: Broadcast[MatcherSnapshot] | None = None


class _Clock:
    """Seconds per named step, for the sync's log line (where a change's cost goes)."""

    def __init__(self) -> None:
        self.laps: list[tuple[str, float]] = []
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps.append((name, now - self._last))
        self._last = now

    def __str__(self) -> str:
        return ", ".join(f"{name} {seconds:.3f} s" for name, seconds in self.laps)


class PlacementSync:
    """Brings :attr:`state` to a (routing version, registry version) and broadcasts it.

    Args:
        lakehouse: the routing tables and the subscription registry.
        health: told of each version loaded (its hot-word threshold depends on N).
        seed: seeds the choice of split-word versions in the snapshot.
        owner: names this matcher's snapshots in the workers' caches.
        checkpoint: the stream's checkpoint; the matcher bases are written under it.
    """

    def __init__(
        self, lakehouse: Lakehouse, health: StreamHealth, *, seed: int, owner: str, checkpoint: str
    ):
        self.lakehouse = lakehouse
        self.health = health
        self.seed = seed
        self.owner = owner
        self.bases = FileBases()
        self.bases_root = bases_root(checkpoint)
        self.bases.remove_others(self.bases_root, owner)
        self.maker = SnapshotMaker(self.bases, self.bases_root, owner=owner)
        self.broadcast_bytes = 0  # the current snapshot, pickled as Spark ships it
        self.state = DriverState()

    def reset(self) -> None:
        """Forget everything: the next :meth:`bring_to` loads from scratch."""
        self.state = DriverState()
        self.maker.new_version()

    def bring_to(
        self, routing_version: int, registry_version: int | None
    ) -> tuple[MatcherSnapshot, bool]:
        """The snapshot of that state, and whether the routing version switched."""
        state, lake = self.state, self.lakehouse
        changed = False
        started = time.perf_counter()
        switched = state.routing_version != routing_version or state.placement is None
        if switched:
            self._load_version(routing_version)
            changed = True
        if changed or state.registry_version != registry_version:
            changed |= self._apply_registry(routing_version, registry_version)
            state.registry_version = registry_version
        placed = time.perf_counter()
        if changed or state.snapshot is None:
            assert state.placement is not None
            state.epoch += 1
            state.snapshot = self.maker.freeze(
                state.placement, routing_version, state.epoch, seed=self.seed
            )
            # the base before the current one may still serve a warm-up; older ones serve none
            while len(self.maker.written) > 2:
                self.bases.remove(self.maker.written.pop(0))
            if state.broadcast is not None:
                state.broadcast.unpersist()
            state.broadcast = lake.spark.sparkContext.broadcast(state.snapshot)
            self.broadcast_bytes = _pickled_bytes(state.broadcast)
            log.info(
                "stream: placement at epoch %d in %.2f s (registry and LASP %.2f s, snapshot "
                "and broadcast %.2f s, %d bytes)",
                state.epoch,
                time.perf_counter() - started,
                placed - started,
                time.perf_counter() - placed,
                self.broadcast_bytes,
            )
        assert state.snapshot is not None
        return state.snapshot, switched

    def _load_version(self, version: int) -> None:
        lake, state = self.lakehouse, self.state
        routing = load_routing_table(lake, version)
        state.placement = LivePlacement(routing, word_frequency=word_frequencies(lake))
        self.health.use_version(routing)
        state.routing_version = version
        self.maker.new_version()
        log.info("stream: %s loaded (N=%d)", routing_label(version), routing.n_matchers)

    def _apply_registry(self, routing_version: int, registry_version: int | None) -> bool:
        """Place new active subscriptions, remove cancelled ones; True when anything changed."""
        placement = self.state.placement
        assert placement is not None
        clock = _Clock()
        gone, arriving_ids = self._registry_change(registry_version)
        clock.lap("registry ids")
        if arriving_ids.size == 0 and gone.size == 0:
            return False
        arriving = self._registry_rows(registry_version, arriving_ids)
        clock.lap("arriving rows")
        new = np.asarray(arriving["sub_id"], dtype=np.int64)
        self.maker.codes.assign(new.tolist(), arriving["subscriber"].to_pylist())
        self.maker.added(new.tolist())
        # stored placements of this version (the place job's, or this stream's before a
        # restart) are taken over where they cover their subscription; the rest: LASP
        stored_subs, place_indptr, placed_matchers = placement_arrays(
            self.lakehouse, routing_version, new
        )
        has = np.isin(new, stored_subs)
        clock.lap("stored placements")
        replaced = placement.adopt_arrays(
            new[has], arriving["words"].filter(pa.array(has)), place_indptr, placed_matchers
        )
        fresh = new[~has]
        placement.place_arrays(fresh, arriving["words"].filter(pa.array(~has)))
        appended = np.concatenate([fresh, replaced])
        clock.lap("LASP")
        if replaced.size:
            log.warning(
                "stream: %d stored placements of version %d did not cover their "
                "subscriptions and were placed again (e.g. %s)",
                replaced.size,
                routing_version,
                replaced[:5].tolist(),
            )
        if appended.size:
            self._append_placements(routing_version, appended)
        clock.lap("placements append")
        log.info(
            "stream: version %d: %d subscriptions (+%d stored, +%d placed by LASP, -%d) in %s",
            routing_version,
            len(placement),
            int(has.sum()) - replaced.size,
            appended.size,
            gone.size,
            clock,
        )
        return True

    def _registry_change(self, registry_version: int | None) -> tuple[np.ndarray, np.ndarray]:
        """The ids of the subscriptions cancelled since the placement was made (removed
        from it here) and of those that arrived (sorted), at ``registry_version``."""
        lake, placement = self.lakehouse, self.state.placement
        assert placement is not None
        # columns, not a Python row per subscription: the registry holds millions, and a
        # change between batches reads two id columns, then only the arriving rows
        registry = (
            lake.read_arrow(
                "subscriptions.registry",
                version=registry_version,
                columns=["sub_id", "cancelled_at"],
            )
            if registry_version is not None
            else table("subscriptions.registry").schema.empty_table()
        )
        active_ids = np.asarray(
            registry.filter(pc.is_null(registry["cancelled_at"]))["sub_id"], dtype=np.int64
        )
        placed_ids = placement.sub_ids
        # a dense mask by id (ids are allocated from 1 up): linear, not a sort of millions
        top = int(max(placed_ids.max(initial=0), active_ids.max(initial=0))) + 1
        is_active = np.zeros(top, dtype=np.bool_)
        is_active[active_ids] = True
        gone = placed_ids[~is_active[placed_ids]]
        placement.remove(gone)
        self.maker.removed(gone.tolist())
        arriving_ids = np.sort(active_ids[~placement.placed(active_ids)])
        return gone, arriving_ids

    def _registry_rows(self, registry_version: int | None, sub_ids: np.ndarray) -> pa.Table:
        """``sub_ids``' registry rows (id, words, subscriber), by id."""
        if registry_version is None or sub_ids.size == 0:
            return table("subscriptions.registry").schema.empty_table()
        field = pc.field("sub_id")
        rows = self.lakehouse.read_arrow(
            "subscriptions.registry",
            version=registry_version,
            columns=["sub_id", "words", "subscriber"],
            where=(field >= int(sub_ids[0]))
            & (field <= int(sub_ids[-1]))
            & field.isin(pa.array(sub_ids)),
        )
        return rows.sort_by("sub_id")

    def _append_placements(self, version: int, sub_ids: np.ndarray) -> None:
        """Append the placements of ``sub_ids`` (placed by this stream) to the version's."""
        placement = self.state.placement
        assert placement is not None
        ids, _, _, matcher_indptr, matchers = placement.rows_of(np.sort(sub_ids))
        counts = np.diff(matcher_indptr)
        n = int(counts.sum())
        data = pa.table(
            {
                "routing_version": pa.array(np.full(n, version, dtype=np.int64)),
                "sub_id": pa.array(np.repeat(ids, counts)),
                "matcher_id": pa.array(matchers.astype(np.int32)),
                "placed_at": pa.array([now_utc()] * n, pa.timestamp("us", tz="UTC")),
            }
        )
        self.lakehouse.write_arrow(data, "routing.placements")
