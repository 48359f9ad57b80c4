"""Follows ``subscriptions.registry`` between batches: a driver thread that brings the
placement to each new registry version while no batch runs, so the batch after a change
finds its placement synced (the registry read, LASP, the placements' append and the new
snapshot done in the driver's idle time, not on the batch's path).

A batch still plans the latest registry version and syncs to it itself when the follower
has not got there (a change committed just before the batch): what a batch matches is the
same with or without the follower; only where the seconds are spent moves.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

log = logging.getLogger(__name__)


if TYPE_CHECKING:
    from spark_jobs.lake.delta_io import Lakehouse
    from spark_jobs.stream.placement_sync import PlacementSync

# how often the follower asks the registry for its version (a Delta log listing)
FOLLOW_SECONDS = 0.5


class RegistryFollower:
    """Syncs ``sync`` to the registry's latest version whenever ``batch_lock`` is free.

    Args:
        lakehouse: the registry's lakehouse.
        sync: the stream's placement state (brought forward under ``batch_lock``).
        batch_lock: held by the stream for a whole batch; the follower only takes it free.
        active: whether to go on (the query is running).
    """

    def __init__(
        self,
        lakehouse: Lakehouse,
        sync: PlacementSync,
        batch_lock: threading.Lock,
        active: Callable[[], bool],
        *,
        interval_s: float = FOLLOW_SECONDS,
    ) -> None:
        self.lakehouse = lakehouse
        self.sync = sync
        self.batch_lock = batch_lock
        self.active = active
        self.interval_s = interval_s
        self.synced = 0  # registry versions the follower brought the placement to
        self.seconds = 0.0  # what those syncs took (off the batches' path)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="s3tm-registry-follower")
        self._thread.daemon = True  # never keeps a finished stream's process alive

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                if not self.active():
                    return
            except Exception:  # the session is gone: the stream has ended
                return
            self.follow_once()

    def follow_once(self) -> bool:
        """One look at the registry; True when the placement was brought to a new version."""
        if not self.batch_lock.acquire(blocking=False):
            return False  # a batch is running: it syncs itself
        try:
            state = self.sync.state
            if state.routing_version is None or state.placement is None:
                return False  # nothing loaded yet: the first batch loads it
            latest = self.lakehouse.version("subscriptions.registry")
            if latest is None or latest == state.registry_version:
                return False
            started = time.perf_counter()
            self.sync.bring_to(state.routing_version, latest)
            self.seconds += time.perf_counter() - started
            self.synced += 1
            log.info("stream: placement brought to registry version %d between batches", latest)
            return True
        except Exception as error:  # a lost head start, never a failure of the stream
            log.warning("stream: following the registry failed (the next batch syncs): %s", error)
            self.sync.reset()
            return False
        finally:
            self.batch_lock.release()
