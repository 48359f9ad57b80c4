"""The stream's batch log (``stream.batches``): each micro-batch's plan, written before it
runs, and its figures, written once it committed; a replayed batch reads its plan back.

Every row is committed with the query's application id and the batch id (a Delta
transaction), so a batch retried after a crash never logs twice.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from core.errors import InputDataError
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
        routed_bytes, matched_bytes: what the two shuffles carried.
        seconds_*: the driver's sync, the tasks' summed route / match / dispatch time,
            the Spark job's wall time, the commits, and the whole batch.
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

    def columns(self) -> dict[str, object]:
        return dataclasses.asdict(self)


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
