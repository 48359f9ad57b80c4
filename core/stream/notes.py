"""The notes the stream's tasks send back to the driver (JSON in the ``note`` column): one
per task with its figures, and one per quarantined record. TypedDicts, because they cross
a JSON boundary; the driver sorts them by ``kind``."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict


class QuarantineNote(TypedDict):
    """A record the route task rejected, with the reason (``core.corpus.json_lines``)."""

    kind: Literal["quarantine"]
    reason: str
    post_id: str | None
    source_file: str
    raw: str


class RouteNote(TypedDict):
    """A route task's figures (the routing health and word sketch of its posts included)."""

    kind: Literal["route"]
    posts: int
    pairs: int
    routed_pairs: int
    quarantined: int
    bytes: int
    payload_bytes: int  # shuffled to the match tasks
    capped_posts: int
    dropped_posts: int
    dropped_value: float  # estimated matches of the dropped posts (a value drop)
    kept_value: float  # ... and of the posts kept beside them
    shed_by_matcher: list[int]
    spread_counts: list[int]  # posts per spread 0..N (before the cap)
    length_counts: NotRequired[list[int]]  # raw lines per length bin (drop.length_histogram)
    seconds: float
    health: NotRequired[dict[str, object]]  # RoutingHealth.as_row()
    sketch: NotRequired[str]
    sketch_bytes: NotRequired[int]
    sketch_seconds: NotRequired[float]
    task_seconds: NotRequired[float]
    change_seconds: NotRequired[float]  # extending the encoder to the changes' new words
    cpu_seconds: NotRequired[float]
    pid: NotRequired[int]


class YieldCounts(TypedDict):
    """Matches and posts per (matcher, slot) of the yield utility's estimate."""

    slots: list[int]
    matches: list[int]
    posts: list[int]


class MatchNote(TypedDict):
    """A match task's figures."""

    kind: Literal["match"]
    rows: int
    matches: int
    payload_bytes: int  # shuffled to the dispatch tasks
    seconds: float
    matchers: NotRequired[list[int]]
    work: NotRequired[dict[str, int]]  # per matcher id: index lookups + matches
    matcher_seconds: NotRequired[dict[str, float]]  # per matcher id: its matching's seconds
    yield_counts: NotRequired[YieldCounts]
    task_seconds: NotRequired[float]
    cpu_seconds: NotRequired[float]
    pid: NotRequired[int]
    worker_trie_builds: NotRequired[int]
    worker_base_reads: NotRequired[int]  # matcher bases this Python worker has read
    worker_base_bytes: NotRequired[int]  # their subscription bytes
    worker_held_bytes: NotRequired[int]  # subscription bytes the worker holds now
    worker_held_matchers: NotRequired[int]  # the matchers it holds them for
    change_seconds: NotRequired[float]  # this task's seconds taking subscription changes


class DispatchNote(TypedDict):
    """A dispatch task's figures."""

    kind: Literal["dispatch"]
    rows: int
    matches: int
    deliveries: int
    written_bytes: dict[str, int]  # Parquet bytes per output table
    seconds: float
    task_seconds: float
    # deliveries per bucket of their post's age at the batch's start (core.stream.latency)
    latency_ages: NotRequired[dict[str, int]]


class WarmNote(TypedDict):
    """A warm-up task's figures (one per Python worker slot)."""

    kind: Literal["warm"]
    pid: int
    matchers: int
    texts: int
    tokens: int
    index_seconds: float
    seconds: float


TaskNote = QuarantineNote | RouteNote | MatchNote | DispatchNote | WarmNote
