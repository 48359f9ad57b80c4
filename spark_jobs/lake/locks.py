"""The lakehouse's per-table locks, for the read-modify-writes of small driver-side tables
(allocating the next routing version or subscription id, updating version statuses).
Appends need no lock: Delta commits them atomically."""

from __future__ import annotations

import contextlib
import fcntl
import threading
from collections.abc import Iterator
from pathlib import Path

from spark_jobs.lake import storage

# Locks this thread holds, by lock-file path: re-entrant, so a locked read-modify-write may
# call another one on the same table (flock would deadlock on a second open of the file).
_HELD = threading.local()


@contextlib.contextmanager
def table_lock(location: str, name: str, *, remote: bool) -> Iterator[None]:
    """Hold the lock of table ``name`` of the lakehouse at ``location``: an exclusive
    ``flock`` on ``<root>/_locks/<name>.lock``, serialised with every other process of this
    machine or shared file system. On an object store (``remote``) the lock is a lease
    object ``<root>/_locks/<name>.lock`` created with a conditional put
    (:func:`storage.object_lock`): exclusive across machines."""
    key = storage.join(location, "_locks", f"{name}.lock")
    held: dict[str, int] = _HELD.__dict__.setdefault("paths", {})
    if held.get(key):
        held[key] += 1
        try:
            yield
        finally:
            held[key] -= 1
        return
    if remote:
        with storage.object_lock(key):
            held[key] = 1
            try:
                yield
            finally:
                held.pop(key, None)
        return
    lock_path = Path(key)
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        held[key] = 1
        try:
            yield
        finally:
            held.pop(key, None)
            fcntl.flock(handle, fcntl.LOCK_UN)
