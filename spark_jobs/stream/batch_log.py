"""The stream's batch log (``stream.batches``): each micro-batch's plan, written before it
runs, and its figures, written once it committed; a replayed batch reads its plan back.

Every row is committed with the query's application id and the batch id (a Delta
transaction), so a batch retried after a crash never logs twice.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.errors import InputDataError
from core.stream.latency import bucket_counts, latency_quantiles, latency_sum, merge
from core.stream.notes import DispatchNote, MatchNote, QuarantineNote, RouteNote, TaskNote
from schemas import table
from spark_jobs.lake.routing_store import now_utc

if TYPE_CHECKING:
    from spark_jobs.lake.delta_io import Lakehouse


@dataclass(frozen=True)
class BatchPlan:
    """What a batch runs with, decided before it runs (and reused by a replay)."""

    batch_id: int
    routing_version: int
    registry_version: int | None
    replayed: bool
    shedding: str = "off"
    shedding_level: int = 0
    max_spread: float | None = None
    backlog_posts: int | None = None
    trigger_seconds: float | None = None

    def columns(self) -> dict[str, object]:
        """The plan's shedding and trigger columns of ``stream.batches``."""
        return {
            "shedding": self.shedding,
            "shedding_level": self.shedding_level,
            "max_spread": self.max_spread,
            "backlog_posts": self.backlog_posts,
            "trigger_seconds": self.trigger_seconds,
        }


@dataclass(frozen=True)
class BatchFigures:
    """A committed batch's figures: the columns of its ``stream.batches`` row.

    Attributes:
        subscriptions: subscriptions placed when the batch ran.
        posts, routed_pairs: posts read and (post, matcher) pairs routed.
        capped_posts, dropped_posts, shed_pairs, shed_pairs_by_matcher: what load
            shedding kept from the matchers (the last only when a level was on).
        matches, deliveries, quarantined: rows written.
        written_bytes: Parquet bytes the dispatch tasks wrote.
        routed_bytes, matched_bytes: what the two shuffles carried (none when fused).
        seconds_*: the driver's sync, the tasks' summed route / match / dispatch time,
            the Spark job's wall time, the commits, and the whole batch.
        seconds_match_slowest: the busiest matcher's matching seconds, summed over the
            tasks that ran it: a cluster with a core per matcher waits for it (the
            critical path a balanced mapping shortens; None: not measured).
        latency_p50, latency_p95, latency_p99: seconds from a post's arrival to the
            commit of its deliveries, over the batch's deliveries (within 1%: they are
            counted in 2% buckets, ``core.stream.latency``; None: no delivery had an
            arrival time); latency_buckets, latency_sum: the same as a Prometheus
            histogram's buckets (``PROMETHEUS_BOUNDS``, not cumulative) and sum.
    """

    subscriptions: int
    posts: int
    routed_pairs: int
    capped_posts: int
    dropped_posts: int
    shed_pairs: int
    shed_pairs_by_matcher: list[int] | None
    matches: int
    deliveries: int
    written_bytes: int
    routed_bytes: int
    matched_bytes: int
    quarantined: int
    seconds_sync: float
    seconds_route: float
    seconds_match: float
    seconds_dispatch: float
    seconds_spark: float
    seconds_commit: float
    seconds_total: float
    seconds_match_slowest: float | None = None
    latency_p50: float | None = None
    latency_p95: float | None = None
    latency_p99: float | None = None
    latency_buckets: list[int] | None = None
    latency_sum: float | None = None

    def columns(self) -> dict[str, object]:
        return dataclasses.asdict(self)

    @classmethod
    def of(
        cls, notes: BatchNotes, clock: BatchClock, *, subscriptions: int, shedding: bool
    ) -> BatchFigures:
        """Pure: a batch's figures from its task notes and the driver's clock.
        ``shedding``: a level was on (the pairs shed per matcher are kept then)."""
        route, match, dispatch = notes.route, notes.match, notes.dispatch
        shed_by_matcher = np.zeros(notes.n_matchers, dtype=np.int64)
        for n in route:
            shed_by_matcher += np.asarray(n["shed_by_matcher"], dtype=np.int64)
        return cls(
            subscriptions=subscriptions,
            posts=sum(n["posts"] for n in route),
            routed_pairs=sum(n["pairs"] for n in route),
            # limit notices: what the spread cap kept from the matchers
            capped_posts=sum(n["capped_posts"] for n in route),
            dropped_posts=sum(n["dropped_posts"] for n in route),
            shed_pairs=int(shed_by_matcher.sum()),
            shed_pairs_by_matcher=shed_by_matcher.tolist() if shedding else None,
            matches=sum(n["matches"] for n in dispatch),
            deliveries=sum(n["deliveries"] for n in dispatch),
            written_bytes=sum(sum(n["written_bytes"].values()) for n in dispatch),
            # what the two shuffles carry: route -> match, match -> dispatch
            routed_bytes=sum(n["payload_bytes"] for n in route),
            matched_bytes=sum(n["payload_bytes"] for n in match),
            quarantined=notes.quarantined,
            seconds_sync=round(clock.synced - clock.started, 4),
            seconds_route=round(sum(n["seconds"] for n in route), 4),
            seconds_match=round(sum(n["seconds"] for n in match), 4),
            seconds_dispatch=round(sum(n["seconds"] for n in dispatch), 4),
            seconds_spark=round(clock.computed - clock.synced, 4),
            seconds_commit=round(clock.committed - clock.computed, 4),
            seconds_total=round(clock.committed - clock.started, 4),
            seconds_match_slowest=slowest_matcher_seconds(match),
            **dataclasses.asdict(DeliveryLatency.of(dispatch, clock.after_stamp)),
        )


@dataclass(frozen=True)
class DeliveryLatency:
    """A batch's delivery latency figures (None: no delivery had an arrival time)."""

    latency_p50: float | None = None
    latency_p95: float | None = None
    latency_p99: float | None = None
    latency_buckets: list[int] | None = None
    latency_sum: float | None = None

    @classmethod
    def of(cls, dispatch: Sequence[DispatchNote], after_start: float) -> DeliveryLatency:
        """For deliveries committed ``after_start`` seconds after the batch's stamp (the
        dispatch notes count their posts' ages at the stamp)."""
        ages = merge([n.get("latency_ages", {}) for n in dispatch])
        quantiles = latency_quantiles(ages, after_start, (0.5, 0.95, 0.99))
        if quantiles is None:
            return cls()
        p50, p95, p99 = quantiles
        return cls(
            p50,
            p95,
            p99,
            bucket_counts(ages, after_start),
            round(latency_sum(ages, after_start), 4),
        )


def slowest_matcher_seconds(match: Sequence[MatchNote]) -> float | None:
    """The most seconds one matcher spent matching, summed over the tasks that ran it
    (None when no task measured its matchers)."""
    per_matcher: dict[str, float] = {}
    for note in match:
        for matcher, seconds in note.get("matcher_seconds", {}).items():
            per_matcher[matcher] = per_matcher.get(matcher, 0.0) + seconds
    return round(max(per_matcher.values()), 4) if per_matcher else None


@dataclass(frozen=True)
class BatchNotes:
    """A batch's task notes by kind: the tasks' figures and the quarantined records."""

    n_matchers: int
    route: list[RouteNote]
    match: list[MatchNote]
    dispatch: list[DispatchNote]
    quarantine: list[QuarantineNote] = dataclasses.field(default_factory=list)

    @property
    def quarantined(self) -> int:
        return len(self.quarantine)

    @classmethod
    def of(cls, n_matchers: int, notes: Sequence[TaskNote]) -> BatchNotes:
        """The notes a batch's job returned, sorted by kind (warm-up notes left out)."""
        return cls(
            n_matchers,
            [n for n in notes if n["kind"] == "route"],
            [n for n in notes if n["kind"] == "match"],
            [n for n in notes if n["kind"] == "dispatch"],
            [n for n in notes if n["kind"] == "quarantine"],
        )


@dataclass(frozen=True)
class BatchClock:
    """The driver's clock over a batch (``time.perf_counter`` readings): started, the
    placement synced, the Spark job done, the tables committed; ``stamped``: when the
    batch's time stamp was taken (its tasks count posts' ages from it)."""

    started: float
    synced: float
    computed: float
    committed: float
    stamped: float | None = None

    @property
    def after_stamp(self) -> float:
        """Seconds from the batch's stamp (else the sync) to its commit."""
        return self.committed - (self.synced if self.stamped is None else self.stamped)


@dataclass(frozen=True)
class SubscriptionMemory:
    """Where a batch's subscriptions were held: the version's base (every matcher, in files
    under the checkpoint), the broadcast's changes since it, and the most any match task's
    Python worker held (its own matchers)."""

    n_matchers: int
    base_bytes: int
    changes_bytes: int
    broadcast_bytes: int  # the whole snapshot as broadcast (pickled)
    workers: int  # distinct match-task Python workers in the batch
    worker_matchers_max: int
    worker_bytes_max: int
    # the tasks' seconds taking the changes since the base (the match tasks: indexing the
    # additions, marking the cancelled, a base the changes made; the route tasks: the new
    # words), summed over the tasks: subscription changes' work on the tasks
    change_seconds: float = 0.0


@dataclass(frozen=True)
class CommittedBatch:
    """What the handler keeps of each committed batch (``StreamMatcher.figures``)."""

    batch_id: int
    routing_version: int
    replayed: bool
    skipped_commits: list[str]
    figures: BatchFigures
    memory: SubscriptionMemory | None = None
    # the deliveries' ages at the batch's stamp and the seconds from it to the commit
    # (core.stream.latency.pooled_quantiles pools batches): benchmarks read them
    latency_ages: dict[int, int] | None = None
    latency_after_stamp: float = 0.0


class BatchLog:
    """``stream.batches`` and ``stream.health`` rows of one query (named by its checkpoint)."""

    def __init__(self, lakehouse: Lakehouse, checkpoint: str) -> None:
        self.lakehouse = lakehouse
        self.checkpoint = checkpoint
        self.query_id: str | None = None

    def _query_id(self) -> str:
        if self.query_id is None:
            # Spark writes the query id into <checkpoint>/metadata when the query starts;
            # it survives restarts, so it names this query's Delta transactions.
            line = self.lakehouse.spark.read.text(f"{self.checkpoint}/metadata").first()
            if line is None:
                raise InputDataError(f"{self.checkpoint}/metadata is empty: no query id")
            self.query_id = str(json.loads(line[0])["id"])
        return self.query_id

    @property
    def app_id(self) -> str:
        return f"s3tm.stream.{self._query_id()}"

    def planned(self, batch_id: int) -> BatchPlan | None:
        """The plan an earlier attempt of ``batch_id`` recorded (None: a new batch)."""
        lake = self.lakehouse
        last_planned = lake.last_batch("stream.batches", f"{self.app_id}.planned")
        if last_planned is None or batch_id > last_planned:
            return None
        # a replay: read the (growing) batch log only then
        planned = lake.read_arrow("stream.batches")
        mine = planned.filter(
            pc.and_(
                pc.equal(planned["query_id"], self._query_id()),
                pc.and_(
                    pc.equal(planned["batch_id"], batch_id),
                    pc.equal(planned["stage"], "planned"),
                ),
            )
        ).to_pylist()
        if not mine:
            return None
        row = mine[0]
        return BatchPlan(
            batch_id,
            row["routing_version"],
            row["registry_version"],
            True,
            shedding=row["shedding"] or "off",
            shedding_level=row["shedding_level"] or 0,
            max_spread=row["max_spread"],
            backlog_posts=row["backlog_posts"],
            trigger_seconds=row.get("trigger_seconds"),
        )

    def record(
        self, plan: BatchPlan, stage: str, epoch: int, figures: BatchFigures | None = None
    ) -> None:
        """One ``stream.batches`` row: the plan (``planned``) or its figures (``committed``)."""
        row = {
            "query_id": self._query_id(),
            "batch_id": plan.batch_id,
            "stage": stage,
            "routing_version": plan.routing_version,
            "registry_version": plan.registry_version,
            "epoch": epoch,
            "recorded_at": now_utc(),
            **plan.columns(),
            **(figures.columns() if figures is not None else {}),
        }
        spec = table("stream.batches")
        self.lakehouse.write_arrow(
            pa.Table.from_pylist([row], schema=spec.schema),
            "stream.batches",
            app_id=f"{self.app_id}.{stage}",
            batch_id=plan.batch_id,
        )

    def record_health(self, plan: BatchPlan, health: dict[str, object]) -> None:
        """The batch's ``stream.health`` row (``health``: its figures, StreamHealth.row)."""
        row = {
            "query_id": self._query_id(),
            "batch_id": plan.batch_id,
            "routing_version": plan.routing_version,
            "recorded_at": now_utc(),
            **health,
        }
        self.lakehouse.write_arrow(
            pa.Table.from_pylist([row], schema=table("stream.health").schema),
            "stream.health",
            app_id=f"{self.app_id}.health",
            batch_id=plan.batch_id,
        )
