"""Read a landing file's records as they are and send them at a steady rate.

Records go unchanged (bytes of each line, blank and malformed ones included): the stream
judges every line and quarantines the bad ones with a reason, as the batch ingest does, so
the producer must not filter. The key is the post id when the line has one, so Kafka's
default partitioner keeps a post's retries on one partition.
"""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from core.errors import InputDataError, InvalidArgumentError

Send = Callable[[bytes | None, bytes], None]


@dataclass(frozen=True)
class ReplayFigures:
    records: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else float("inf")


def landing_records(path: Path) -> Iterator[tuple[bytes | None, bytes]]:
    """``(key, value)`` per line of a JSON-lines file (``.gz`` or plain)."""
    if not path.is_file():
        raise InputDataError(f"corpus not found: {path}")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as lines:
        for raw in lines:
            value = raw.rstrip(b"\r\n")
            key = None
            try:
                post_id = json.loads(value).get("id")
                key = None if post_id is None else str(post_id).encode()
            except (ValueError, AttributeError):
                pass  # not a JSON object: sent as it is, the stream quarantines it
            yield key, value


def replay(
    records: Iterable[tuple[bytes | None, bytes]],
    send: Send,
    *,
    rate: float = 0.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    progress: Callable[[int, float], None] | None = None,
    progress_every: int = 100_000,
) -> ReplayFigures:
    """Send every record, at most ``rate`` records per second on average (0: unthrottled).

    The schedule is absolute (record k is due at k / rate), so a slow send does not lower
    the average rate and a burst never exceeds it for long.
    """
    if rate < 0:
        raise InvalidArgumentError(f"--rate must be >= 0, got {rate}")
    started = clock()
    sent = 0
    for key, value in records:
        if rate > 0:
            wait = started + sent / rate - clock()
            if wait > 0:
                sleep(wait)
        send(key, value)
        sent += 1
        if progress is not None and sent % progress_every == 0:
            progress(sent, clock() - started)
    return ReplayFigures(sent, clock() - started)
