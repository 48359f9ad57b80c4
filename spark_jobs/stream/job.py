"""stream: the streaming matcher. Posts -> route -> match -> dispatch, per micro-batch.

A Spark Structured Streaming query reads posts (JSON lines landing in a directory by
default; Kafka on a cluster) and, in ``foreachBatch``, for each micro-batch:

1. plans it: the published routing version and the ``subscriptions.registry`` snapshot it
   will use, written to ``stream.batches`` first (a replayed batch reuses its plan, so a
   restart after a crash repeats exactly what the first attempt did);
2. brings the driver's placement up to date: a new published version is loaded (mapping +
   placements); subscriptions added since are placed with LASP into it (and appended to
   ``routing.placements``), cancelled ones taken off; the result is broadcast as a snapshot;
3. runs ONE Spark job: normalise + route each post to its matchers (multicast; a split word
   picks one version), ``repartition(M)`` so matcher m is match task m mod M (M = N, or
   the task slots when fewer), match on that matcher's trie (cached in the worker across
   batches), ``repartition(P)`` by post, dispatch:
   ``matches`` (each (post, subscription) once: an all-hot-word subscription is placed on
   several matchers, so duplicates are dropped) and ``deliveries`` (a post once per
   subscriber, with the ids it matched) written as Parquet files by the dispatch tasks;
4. commits each output table's files in one Delta transaction carrying the batch id, so a
   replayed batch is never written twice; bad records go to ``silver.posts_quarantine``
   with the reason;
5. records the batch's figures in ``stream.batches`` and its routing health in
   ``stream.health``: the published version's loads beside hash routing's on the same
   posts, and the hot words of a sliding window's word sketch (``s3tm_monitor`` reads it).

A batch routes and matches with exactly one routing version; a newly published version is
picked up at the next batch boundary.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import time
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.corpus.io import MAX_TEXT_CHARS
from core.errors import InputDataError, InvalidArgumentError
from core.placement.live import LivePlacement
from core.shedding.plan import NO_SHEDDING, SHEDDING_MODES, ShedPlan
from core.stream.dispatch import Subscribers
from core.stream.snapshot import MatcherSnapshot, snapshot_of
from schemas import table
from spark_jobs import failpoints
from spark_jobs.common import job_main, log
from spark_jobs.lake.routing_store import (
    load_placements,
    load_routing_table,
    now_utc,
    published_version,
)
from spark_jobs.lake.storage import join, spark_uri
from spark_jobs.stream import tasks as stream_tasks
from spark_jobs.stream.health import HealthOptions, StreamHealth
from spark_jobs.stream.shedding import (
    Backlog,
    SheddingOptions,
    StreamShedding,
    file_backlog,
    kafka_backlog,
)

# recent posts that fill a new version's token table ahead of its first batch
WARM_TEXTS = 20_000
# posts the warm-up sends through the pipeline (the sample repeated): about a batch
WARM_PIPELINE_POSTS = 100_000

STREAM_CONF = {
    # Bigger Arrow batches: fewer Python round trips per micro-batch.
    "spark.sql.execution.arrow.maxRecordsPerBatch": "50000",
    # Split a landed file into one task per core or more (the default cost of opening a
    # file, 4 MB, leaves a 10 MB file in 3 uneven tasks).
    "spark.sql.files.openCostInBytes": str(512 * 1024),
    # One job per batch with a fixed plan: N matcher tasks, P dispatch tasks (adaptive
    # execution would coalesce them and re-plan every batch).
    "spark.sql.adaptive.enabled": "false",
}


@dataclass(frozen=True)
class BatchPlan:
    batch_id: int
    routing_version: int
    registry_version: int | None
    replayed: bool
    shedding: str = "off"
    shedding_level: int = 0
    max_spread: float | None = None
    backlog_posts: int | None = None

    def columns(self) -> dict[str, Any]:
        """The plan's shedding columns of ``stream.batches``."""
        return {
            "shedding": self.shedding,
            "shedding_level": self.shedding_level,
            "max_spread": self.max_spread,
            "backlog_posts": self.backlog_posts,
        }


def task_slots(spark: Any) -> int:
    """Tasks the application runs at once: the threads of a local master, else Spark's
    default parallelism (the executors' cores)."""
    import re

    master = str(spark.sparkContext.master)
    local = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", master)
    if local:
        threads = local.group(1)
        if threads is None:
            return 1
        return (os.cpu_count() or 1) if threads == "*" else max(1, int(threads))
    return max(1, int(spark.sparkContext.defaultParallelism))


def word_frequencies(lakehouse: Any) -> dict[str, int]:
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


def partition_keys(spark: Any, n_matchers: int) -> np.ndarray:
    """For each matcher m an int key that ``repartition(N, key)`` sends to partition m.

    Spark hash-partitions by pmod(murmur3(key), N); the keys are found by asking Spark
    itself, so they follow its hash function exactly.
    """
    from pyspark.sql import functions as F

    rows = (
        spark.range(0, 64 * n_matchers + 64)
        .select(F.col("id").cast("int").alias("key"))
        .select("key", F.expr(f"pmod(hash(key), {n_matchers})").alias("part"))
        .groupBy("part")
        .agg(F.min("key").alias("key"))
        .collect()
    )
    keys = np.full(n_matchers, -1, dtype=np.int32)
    for row in rows:
        keys[row["part"]] = row["key"]
    if (keys < 0).any():
        raise InvalidArgumentError(f"no partition key found for some of {n_matchers} matchers")
    return keys


@dataclass
class _Driver:
    """The driver's state across batches: the placement of the current routing version."""

    routing_version: int | None = None
    registry_version: int | None = None
    placement: LivePlacement | None = None
    epoch: int = 0
    subscribers: Subscribers = field(default_factory=lambda: Subscribers.of({}))
    snapshot: MatcherSnapshot | None = None
    broadcast: Any = None


class StreamMatcher:
    """The ``foreachBatch`` handler: keeps the placement state and writes each batch.

    Args:
        lakehouse: where the routing tables, the registry and the outputs live.
        checkpoint: the query's checkpoint location (its id names the query's writes).
        seed: seeds the choice of split-word versions.
    """

    def __init__(
        self,
        lakehouse: Any,
        checkpoint: str,
        *,
        seed: int = 0,
        shedding: SheddingOptions | None = None,
        landing: str | None = None,
        health: HealthOptions | None = None,
        matches_table: bool = True,
        warm: bool = True,
    ) -> None:
        self.lakehouse = lakehouse
        # build a version's indexes and token table ahead of its first batch (prime,
        # prefetch); False: lazily, in the first batch's tasks
        self.warm = warm
        self.warmups: list[dict[str, Any]] = []
        self._texts: list[str] | None = None
        # False: deliveries only (they carry each match's sub id and matcher; the
        # ``matches`` rows derive from them, core.stream.dispatch.matches_of_deliveries)
        self.matches_table = matches_table
        self.outputs = ("matches", "deliveries") if matches_table else ("deliveries",)
        self.checkpoint = checkpoint
        self.seed = seed
        self.shedding = StreamShedding(shedding or SheddingOptions(mode="off"))
        self.health = StreamHealth(health)
        self.landing = landing  # the files source's directory (None: Kafka)
        self.query: Any = None  # set once started: the Kafka backlog is in its progress
        self.state = _Driver()
        self.query_id: str | None = None
        # the latest batches' figures (bounded: the query may run for months)
        self.figures: deque[dict[str, Any]] = deque(maxlen=10_000)
        self._pkeys: dict[int, np.ndarray] = {}
        # names this matcher's snapshots in the workers' caches (see MatcherSnapshot.owner)
        self.instance = uuid.uuid4().hex

    # -- identity and plan -----------------------------------------------------------------
    def _query_id(self) -> str:
        if self.query_id is None:
            # Spark writes the query id into <checkpoint>/metadata when the query starts;
            # it survives restarts, so it names this query's Delta transactions.
            line = self.lakehouse.spark.read.text(f"{self.checkpoint}/metadata").first()
            self.query_id = str(json.loads(line[0])["id"])
        return self.query_id

    @property
    def app_id(self) -> str:
        return f"s3tm.stream.{self._query_id()}"

    def plan(self, batch_id: int) -> BatchPlan:
        """The batch's routing version and registry snapshot (a replay reuses its plan)."""
        lake = self.lakehouse
        last_planned = lake.last_batch("stream.batches", f"{self.app_id}.planned")
        if last_planned is not None and batch_id <= last_planned:
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
            if mine:
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
                )
        version = published_version(lake) if lake.exists("routing.versions") else None
        if version is None:
            raise InputDataError(
                "no published routing version: run the remap DAG or `s3tm routing publish`"
            )
        choice = self.shedding.choose(self._backlog(batch_id), time.monotonic())
        plan = BatchPlan(
            batch_id,
            version,
            lake.version("subscriptions.registry"),
            False,
            shedding=self.shedding.options.mode,
            shedding_level=choice.level,
            max_spread=choice.max_spread,
            backlog_posts=choice.backlog_posts,
        )
        self._record(plan, "planned", {})
        return plan

    def _backlog(self, batch_id: int) -> Backlog | None:
        """Posts landed and not yet processed (this batch's included), as the source says."""
        try:
            if self.landing is not None:
                return file_backlog(self.checkpoint, self.landing, batch_id)
            return kafka_backlog(self.query)
        except (OSError, ValueError, KeyError) as error:  # a measurement, never a failure
            log.warning("stream: backlog not measured for batch %d: %s", batch_id, error)
            return None

    def _record(self, plan: BatchPlan, stage: str, figures: dict[str, Any]) -> None:
        row = {
            "query_id": self._query_id(),
            "batch_id": plan.batch_id,
            "stage": stage,
            "routing_version": plan.routing_version,
            "registry_version": plan.registry_version,
            "epoch": self.state.epoch,
            "recorded_at": now_utc(),
            **plan.columns(),
            **figures,
        }
        spec = table("stream.batches")
        self.lakehouse.write_arrow(
            pa.Table.from_pylist([row], schema=spec.schema),
            "stream.batches",
            app_id=f"{self.app_id}.{stage}",
            batch_id=plan.batch_id,
        )

    def _record_health(
        self, plan: BatchPlan, snapshot: MatcherSnapshot, route_notes: list[dict[str, Any]]
    ) -> None:
        row = {
            "query_id": self._query_id(),
            "batch_id": plan.batch_id,
            "routing_version": plan.routing_version,
            "recorded_at": now_utc(),
            **self.health.row(plan.batch_id, snapshot.n_matchers, snapshot.words, route_notes),
        }
        self.lakehouse.write_arrow(
            pa.Table.from_pylist([row], schema=table("stream.health").schema),
            "stream.health",
            app_id=f"{self.app_id}.health",
            batch_id=plan.batch_id,
        )
        if row["hot_words"]:
            log.info(
                "stream: batch %d hot words over the split threshold (%.4f): %s",
                plan.batch_id,
                row["split_threshold"],
                ", ".join(
                    f"{h['word']} ({h['share']:.3f}, v={h['versions']})" for h in row["hot_words"]
                ),
            )

    # -- placement state ---------------------------------------------------------------------
    def sync(self, plan: BatchPlan) -> MatcherSnapshot:
        """Bring the placement to the plan's version and registry snapshot; broadcast it.
        A version the workers have not met yet is warmed first (see :meth:`warm_up`)."""
        return self._bring_to(plan.routing_version, plan.registry_version)

    def _bring_to(self, routing_version: int, registry_version: int | None) -> MatcherSnapshot:
        state, lake = self.state, self.lakehouse
        changed = False
        switched = state.routing_version != routing_version or state.placement is None
        if switched:
            self._load_version(routing_version)
            changed = True
        if changed or state.registry_version != registry_version:
            changed |= self._apply_registry(routing_version, registry_version)
            state.registry_version = registry_version
        if changed or state.snapshot is None:
            assert state.placement is not None
            state.epoch += 1
            state.snapshot = snapshot_of(
                state.placement,
                routing_version,
                state.epoch,
                subscribers=state.subscribers,
                seed=self.seed,
                owner=self.instance,
            )
            if state.broadcast is not None:
                state.broadcast.unpersist()
            state.broadcast = lake.spark.sparkContext.broadcast(state.snapshot)
        assert state.snapshot is not None
        if switched and self.warm:
            self.warm_up()
        return state.snapshot

    # -- warm-up: the work of a version's first batch, done before it ------------------------
    def prime(self) -> None:
        """Before the query starts: load the published version and warm the workers with it,
        so the first batch finds its indexes built and its token table filled."""
        lake = self.lakehouse
        version = published_version(lake) if lake.exists("routing.versions") else None
        if version is not None:
            self._bring_to(version, lake.version("subscriptions.registry"))

    def prefetch(self) -> None:
        """Between batches: a newer published version is loaded, broadcast and warmed now,
        so the batch that switches to it starts warm. A failure here only costs the warm
        start: the next batch loads the version itself (and says why it could not)."""
        lake = self.lakehouse
        try:
            version = published_version(lake)
            if version is not None and version != self.state.routing_version:
                log.info("stream: routing version %d published; warming it up", version)
                self._bring_to(version, lake.version("subscriptions.registry"))
        except Exception as error:
            log.warning("stream: prefetching the published version failed: %s", error)
            self.state = _Driver()  # the next batch starts from a clean load

    def _warm_texts(self) -> list[str]:
        if self._texts is None:
            try:
                recent = self.lakehouse.recent_rows("bronze.posts", ["text"], WARM_TEXTS)
                self._texts = recent.column("text").to_pylist()
            except Exception as error:
                log.warning("stream: no recent posts to warm the token table: %s", error)
                self._texts = []
        return self._texts

    def warm_up(self) -> dict[str, Any]:
        """Warm the workers for the current snapshot (:meth:`_warm_up`). A warm-up that
        fails is reported and skipped, never fatal: the first batch then builds lazily."""
        assert self.state.snapshot is not None
        started = time.perf_counter()
        try:
            return self._warm_up()
        except Exception as error:
            figures = {
                "routing_version": self.state.snapshot.routing_version,
                "seconds": round(time.perf_counter() - started, 3),
                "failed": f"{type(error).__name__}: {error}",
            }
            self.warmups.append(figures)
            log.warning(
                "stream: warming version %d failed (%s); its first batch builds lazily",
                figures["routing_version"],
                figures["failed"],
            )
            return figures

    def _warm_up(self) -> dict[str, Any]:
        """Warm every Python worker with the current snapshot (``stream_tasks.warm_workers``:
        one task per task slot), then send recent posts through the batch's own three
        stages into staging folders that are dropped, never committed: the JVM compiles the
        plan's code and every stage's Python path (parsing, dispatch, Parquet) runs once."""
        from pyspark.sql import functions as F

        state, spark, lake = self.state, self.lakehouse.spark, self.lakehouse
        assert state.snapshot is not None
        started = time.perf_counter()
        slots = task_slots(spark)
        texts = self._warm_texts()
        # the sample travels once per worker, not in every task
        sample = spark.sparkContext.broadcast(texts)
        try:
            notes = [
                json.loads(row["note"])
                for row in spark.range(slots, numPartitions=slots)
                .mapInArrow(
                    stream_tasks.warm_workers(state.broadcast, state.snapshot.key, sample),
                    stream_tasks.WARMED_SCHEMA,
                )
                .collect()
            ]
            piped = time.perf_counter()
            if texts:
                # the sample repeated up to about a batch: the first batch's buffers are
                # then not the first the workers' allocators meet (page faults, pools)
                posts = spark.range(
                    max(len(texts), WARM_PIPELINE_POSTS), numPartitions=slots
                ).mapInArrow(stream_tasks.sample_lines(sample), stream_tasks.LINES_SCHEMA)
                if self.landing is not None:
                    # through the files source's own reader too (text files, binary cast)
                    scratch = join(self.checkpoint, "warm-up")
                    posts.select(F.col("line").cast("string")).write.mode("overwrite").text(scratch)
                    posts = (
                        spark.read.format("text")
                        .load(scratch)
                        .select(
                            F.col("value").cast("binary").alias("line"),
                            F.col("_metadata.file_path").alias("source_file"),
                        )
                    )
                staging = {name: lake.staging_dir(name) for name in self.outputs}
                try:
                    self.dispatched(posts, state.snapshot, -1, now_utc(), staging).collect()
                finally:
                    for folder in staging.values():
                        lake.discard_staged(folder)
        finally:
            sample.unpersist()
        figures = {
            "routing_version": state.snapshot.routing_version,
            "seconds": round(time.perf_counter() - started, 3),
            "workers": len({n["pid"] for n in notes}),
            "index_seconds": round(max((n["index_seconds"] for n in notes), default=0.0), 3),
            "pipeline_seconds": round(time.perf_counter() - piped, 3),
            "texts": len(texts),
        }
        self.warmups.append(figures)
        log.info(
            "stream: version %d warmed in %.2fs on %d Python workers (indexes %.2fs; "
            "%d recent posts through the pipeline in %.2fs, nothing written)",
            figures["routing_version"],
            figures["seconds"],
            figures["workers"],
            figures["index_seconds"],
            figures["texts"],
            figures["pipeline_seconds"],
        )
        return figures

    def _load_version(self, version: int) -> None:
        lake, state = self.lakehouse, self.state
        routing = load_routing_table(lake, version)
        state.placement = LivePlacement(routing, word_frequency=word_frequencies(lake))
        self.health.use_version(routing)
        state.routing_version = version
        state.subscribers = Subscribers.of({})
        log.info("stream: routing version %d loaded (N=%d)", version, routing.n_matchers)

    def _apply_registry(self, routing_version: int, registry_version: int | None) -> bool:
        """Place new active subscriptions, remove cancelled ones; True when anything changed."""
        lake, state = self.lakehouse, self.state
        placement = state.placement
        assert placement is not None
        rows = (
            lake.read_arrow("subscriptions.registry", version=registry_version).to_pylist()
            if registry_version is not None
            else []
        )
        active = {r["sub_id"]: r for r in rows if r["cancelled_at"] is None}
        state.subscribers = Subscribers.of({s: r["subscriber"] for s, r in active.items()})
        gone = [s for s in placement.sub_ids if s not in active]
        placement.remove(gone)
        new = sorted(s for s in active if s not in placement)
        if not new and not gone:
            return False
        stored = self._stored_placements(routing_version, set(new))
        adopt = [s for s in new if s in stored]
        replaced = placement.adopt(
            adopt, [active[s]["words"] for s in adopt], [stored[s] for s in adopt]
        )
        fresh = [s for s in new if s not in stored]
        placed = placement.place(fresh, [active[s]["words"] for s in fresh])
        for s in replaced:
            placed[s] = placement.get(s).matchers
        if replaced:
            log.warning(
                "stream: %d stored placements of version %d did not cover their "
                "subscriptions and were placed again (e.g. %s)",
                len(replaced),
                routing_version,
                replaced[:5],
            )
        if placed:
            self._append_placements(routing_version, placed)
        log.info(
            "stream: version %d: %d subscriptions (+%d stored, +%d placed by LASP, -%d)",
            routing_version,
            len(placement),
            len(adopt) - len(replaced),
            len(placed),
            len(gone),
        )
        return True

    def _stored_placements(self, version: int, wanted: set[int]) -> dict[int, list[int]]:
        rows = load_placements(self.lakehouse, version)
        out: dict[int, list[int]] = {}
        for sub, matcher in zip(
            rows["sub_id"].to_pylist(), rows["matcher_id"].to_pylist(), strict=True
        ):
            if sub in wanted:
                out.setdefault(sub, []).append(matcher)
        return out

    def _append_placements(self, version: int, placed: dict[int, np.ndarray]) -> None:
        subs = sorted(placed)
        counts = [len(placed[s]) for s in subs]
        n = sum(counts)
        data = pa.table(
            {
                "routing_version": pa.array(np.full(n, version, dtype=np.int64)),
                "sub_id": pa.array(np.repeat(np.array(subs, dtype=np.int64), counts)),
                "matcher_id": pa.array(np.concatenate([placed[s] for s in subs]).astype(np.int32)),
                "placed_at": pa.array([now_utc()] * n, pa.timestamp("us", tz="UTC")),
            }
        )
        self.lakehouse.write_arrow(data, "routing.placements")

    # -- one micro-batch ---------------------------------------------------------------------
    def partition_keys(self, n_matchers: int) -> np.ndarray:
        if n_matchers not in self._pkeys:
            self._pkeys[n_matchers] = partition_keys(self.lakehouse.spark, n_matchers)
        return self._pkeys[n_matchers]

    def dispatched(
        self,
        posts: Any,
        snapshot: MatcherSnapshot,
        batch_id: int,
        now: dt.datetime,
        staging: dict[str, str],
        shed_plan: ShedPlan = NO_SHEDDING,
    ) -> Any:
        """Pure transform: raw posts -> notes, with ``matches`` / ``deliveries`` files
        written to ``staging`` as a side effect of the dispatch tasks.

        route (one task per input split) -> repartition(M): matcher m is task m mod M -> match ->
        repartition(P) by post -> dispatch (dedupe, deliveries, Parquet files).
        """

        spark = self.lakehouse.spark
        # one dispatch task per task slot, and no more match tasks than slots either (with
        # fewer slots than matchers, matcher m goes to match task m mod slots): every Python
        # task costs 0.05-0.1 s of set-up here, more than a small matcher's work in a batch
        slots = task_slots(spark)
        n_match = min(snapshot.n_matchers, slots)
        match_keys = self.partition_keys(n_match)
        pkeys = match_keys[np.arange(snapshot.n_matchers) % n_match]
        n_dispatch = slots
        dkeys = self.partition_keys(n_dispatch)
        bc = self.state.broadcast
        crash = failpoints.task_point(batch_id)  # None unless a crash test armed one
        # raw lines go to the route tasks as bytes: each is judged there by the ingest's
        # rules (core.corpus.json_lines), so no line is dropped or coerced on the way
        raw = posts.select("line", "source_file")
        routed = raw.mapInArrow(
            stream_tasks.route_posts(
                bc, snapshot.key, pkeys, MAX_TEXT_CHARS, n_dispatch, shed_plan, crash=crash
            ),
            stream_tasks.ROUTED_SCHEMA,
        )
        matched = routed.repartition(n_match, "pkey").mapInArrow(
            stream_tasks.match_posts(
                bc,
                snapshot.key,
                dkeys,
                shed_plan.learns_yield,
                crash=crash,
            ),
            stream_tasks.MATCHED_SCHEMA,
        )
        return matched.repartition(n_dispatch, "dkey").mapInArrow(
            stream_tasks.dispatch_matches(bc, snapshot.key, batch_id, now, staging, crash=crash),
            stream_tasks.DISPATCHED_SCHEMA,
        )

    def __call__(self, posts: Any, batch_id: int) -> None:
        """foreachBatch: route, match and dispatch one micro-batch."""
        started = time.perf_counter()
        failpoints.crash_driver("before-plan", batch_id)
        plan = self.plan(batch_id)
        failpoints.crash_driver("after-plan", batch_id)
        snapshot = self.sync(plan)
        failpoints.crash_driver("after-sync", batch_id)
        shed_plan = self.shedding.plan(
            plan.shedding_level,
            plan.max_spread,
            snapshot,
            self.checkpoint,
            batch_id,
            replayed=plan.replayed,
        )
        synced = time.perf_counter()
        lake, app = self.lakehouse, self.app_id
        now = now_utc()
        staging = {name: lake.staging_dir(name) for name in self.outputs}
        notes = [
            json.loads(row["note"])
            for row in self.dispatched(
                posts,
                snapshot,
                batch_id,
                now,
                {k: str(v) for k, v in staging.items()},
                shed_plan,
            ).collect()
        ]
        computed = time.perf_counter()
        failpoints.crash_driver("after-dispatch", batch_id)
        # each output table in one Delta commit carrying the batch id: a replayed batch
        # finds it committed and drops its files instead
        written = {
            name: lake.commit_staged(name, staging[name], app_id=app, batch_id=batch_id)
            for name in self.outputs
            if name != "deliveries"
        }
        failpoints.crash_driver("after-matches", batch_id)
        written["deliveries"] = lake.commit_staged(
            "deliveries", staging["deliveries"], app_id=app, batch_id=batch_id
        )
        failpoints.crash_driver("after-deliveries", batch_id)
        quarantined = [n for n in notes if n["kind"] == "quarantine"]
        if quarantined:
            self._quarantine(quarantined, batch_id, now)
        failpoints.crash_driver("after-quarantine", batch_id)
        committed = time.perf_counter()
        log.debug(
            "stream: batch %d task notes %s",
            batch_id,
            [n for n in notes if n["kind"] != "quarantine"],
        )
        by_kind = {
            kind: [n for n in notes if n["kind"] == kind] for kind in ("route", "match", "dispatch")
        }
        dispatch = by_kind["dispatch"]
        shed_by_matcher = np.zeros(snapshot.n_matchers, dtype=np.int64)
        for n in by_kind["route"]:
            shed_by_matcher += np.asarray(n["shed_by_matcher"], dtype=np.int64)
        figures = {
            "subscriptions": len(self.state.placement or ()),
            "posts": sum(n["posts"] for n in by_kind["route"]),
            "routed_pairs": sum(n["pairs"] for n in by_kind["route"]),
            # limit notices: what the spread cap kept from the matchers
            "capped_posts": sum(n["capped_posts"] for n in by_kind["route"]),
            "dropped_posts": sum(n["dropped_posts"] for n in by_kind["route"]),
            "shed_pairs": int(shed_by_matcher.sum()),
            "shed_pairs_by_matcher": shed_by_matcher.tolist() if plan.shedding_level else None,
            "matches": sum(n["matches"] for n in dispatch),
            "deliveries": sum(n["deliveries"] for n in dispatch),
            "written_bytes": sum(sum(n.get("written_bytes", {}).values()) for n in dispatch),
            # what the two shuffles carry: route -> match, match -> dispatch
            "routed_bytes": sum(n["payload_bytes"] for n in by_kind["route"]),
            "matched_bytes": sum(n["payload_bytes"] for n in by_kind["match"]),
            "quarantined": len(quarantined),
            "seconds_sync": round(synced - started, 4),
            "seconds_route": round(sum(n["seconds"] for n in by_kind["route"]), 4),
            "seconds_match": round(sum(n["seconds"] for n in by_kind["match"]), 4),
            "seconds_dispatch": round(sum(n["seconds"] for n in dispatch), 4),
            "seconds_spark": round(computed - synced, 4),
            "seconds_commit": round(committed - computed, 4),
            "seconds_total": round(committed - started, 4),
        }
        self._record(plan, "committed", figures)
        failpoints.crash_driver("after-record", batch_id)
        self._record_health(plan, snapshot, by_kind["route"])
        self.shedding.learn(
            snapshot,
            plan.shedding_level,
            by_kind["route"],
            by_kind["match"],
            committed - started,
            dispatch_seconds=figures["seconds_dispatch"],
        )
        self.figures.append(
            {
                "batch_id": batch_id,
                "routing_version": plan.routing_version,
                "replayed": plan.replayed,
                "skipped_commits": [n for n, w in written.items() if w.skipped],
                **figures,
            }
        )
        log.info(
            "stream: batch %d v%d%s: %d posts -> %d pairs%s -> %d matches, %d deliveries, "
            "%d quarantined in %.2fs",
            batch_id,
            plan.routing_version,
            " (replayed plan)" if plan.replayed else "",
            figures["posts"],
            figures["routed_pairs"],
            (
                f" (level {plan.shedding_level}, m={plan.max_spread:g}: "
                f"{figures['capped_posts']} posts capped, {figures['dropped_posts']} dropped, "
                f"{figures['shed_pairs']} pairs shed)"
                if plan.max_spread is not None
                else ""
            ),
            figures["matches"],
            figures["deliveries"],
            figures["quarantined"],
            figures["seconds_total"],
        )
        if self.warm and not plan.replayed:
            self.prefetch()

    def _quarantine(self, notes: list[dict[str, Any]], batch_id: int, now: dt.datetime) -> None:
        spec = table("silver.posts_quarantine")
        data = pa.Table.from_pylist(
            [
                {
                    "stage": "stream",
                    "reason": n["reason"],
                    "post_id": n["post_id"],
                    "source_file": n["source_file"],
                    "line_number": None,
                    "raw": n["raw"],
                    "ingest_batch": f"{self.app_id}:{batch_id}",
                    "quarantined_at": now,
                }
                for n in notes
            ],
            schema=spec.schema,
        )
        self.lakehouse.write_arrow(
            data, "silver.posts_quarantine", app_id=self.app_id, batch_id=batch_id
        )


# -- the query ---------------------------------------------------------------------------------
def source(spark: Any, args: argparse.Namespace) -> Any:
    """The streaming DataFrame of raw input: ``line`` (a record's bytes) and ``source_file``.

    Lines, not parsed JSON: Spark's JSON reader drops blank lines and turns a numeric or
    nested ``id`` into a string, so a bad record could vanish or pass unseen; the route
    tasks judge every line instead, as the batch ingest does.
    """
    from pyspark.sql import functions as F

    if args.source == "kafka":
        # Needs the spark-sql-kafka package on the cluster image (it cannot be fetched here).
        try:
            raw = (
                spark.readStream.format("kafka")
                .option("kafka.bootstrap.servers", args.kafka_bootstrap)
                .option("subscribe", args.kafka_topic)
                .option("startingOffsets", "earliest")
                .load()
            )
        except Exception as err:
            if "kafka" not in str(err).lower() or "data source" not in str(err).lower():
                raise
            raise InputDataError(
                "the Kafka source needs Spark's spark-sql-kafka-0-10 jar, which this Spark "
                "installation lacks: run in the platform image (docker/Dockerfile bakes it "
                "in), or read landing files with --source files"
            ) from err
        return raw.select(
            F.col("value").alias("line"),
            F.concat_ws(":", "topic", "partition", "offset").alias("source_file"),
        )
    landing = Path(args.landing)
    if not landing.is_dir():
        raise InputDataError(f"landing directory not found: {landing}")
    # the text source splits lines at LF, CRLF and a lone CR, like the ingest, and keeps
    # blank ones; a cast to binary keeps bytes that are not UTF-8 as they were
    reader = spark.readStream.format("text")
    if args.max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", args.max_files_per_trigger)
    lines = reader.load(str(landing))
    return lines.select(
        F.col("value").cast("binary").alias("line"),
        F.col("_metadata.file_path").alias("source_file"),
    )


def start(spark: Any, lakehouse: Any, args: argparse.Namespace) -> tuple[Any, StreamMatcher]:
    """Start the query; returns it with its handler (whose ``figures`` grow per batch)."""
    if not lakehouse.exists("routing.versions") or published_version(lakehouse) is None:
        raise InputDataError(
            "no published routing version: run the remap DAG or `s3tm routing publish`"
        )
    for key, value in STREAM_CONF.items():
        spark.conf.set(key, value)
    # as many route tasks per landed file as task slots, not more (see task_slots)
    spark.conf.set("spark.sql.files.minPartitionNum", str(task_slots(spark)))
    handler = StreamMatcher(
        lakehouse,
        args.checkpoint,
        seed=args.seed,
        shedding=shedding_options(args),
        landing=args.landing if args.source == "files" else None,
        health=HealthOptions(
            window_batches=getattr(args, "health_window", HealthOptions().window_batches),
            hot_word_tolerance=getattr(
                args, "hot_word_tolerance", HealthOptions().hot_word_tolerance
            ),
        ),
        matches_table=getattr(args, "matches_table", True),
        warm=getattr(args, "warm_up", True),
    )
    if handler.warm:
        handler.prime()
    writer = (
        source(spark, args)
        .writeStream.queryName(args.query_name)
        .option("checkpointLocation", args.checkpoint)
        .foreachBatch(handler)
    )
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    elif args.trigger_seconds > 0:
        writer = writer.trigger(processingTime=f"{args.trigger_seconds} seconds")
    query = writer.start()
    handler.query = query
    return query, handler


def shedding_options(args: argparse.Namespace) -> SheddingOptions:
    """The run's shedding options (arguments absent from older callers take defaults)."""
    defaults = SheddingOptions()
    return SheddingOptions(
        mode=getattr(args, "shedding", defaults.mode),
        max_spread=getattr(args, "max_spread", None),
        k=getattr(args, "shedding_k", defaults.k),
        delta=getattr(args, "shedding_delta", defaults.delta),
        latency_budget=getattr(args, "latency_budget", defaults.latency_budget),
        adaptive=not getattr(args, "available_now", False),
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    run_p = sub.add_parser("run", help="run the streaming matcher")
    run_p.add_argument("--source", choices=("files", "kafka"), default="files")
    run_p.add_argument("--landing", default="landing", help="directory of JSON-lines posts")
    run_p.add_argument("--kafka-bootstrap", default="localhost:9092")
    run_p.add_argument("--kafka-topic", default="posts")
    run_p.add_argument(
        "--checkpoint", help="checkpoint location (default: <lakehouse>/_checkpoints/<query>)"
    )
    run_p.add_argument("--query-name", default="s3tm_matcher")
    run_p.add_argument("--max-files-per-trigger", type=int, default=0)
    run_p.add_argument("--trigger-seconds", type=float, default=0.0, help="0: back to back")
    run_p.add_argument(
        "--available-now", action="store_true", help="process what has landed, then stop"
    )
    run_p.add_argument("--seed", type=int, default=0)
    run_p.add_argument(
        "--matches-table",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also write one `matches` row per (post, subscription); with --no-matches-table "
        "only `deliveries` are written (their sub_ids and matcher_ids hold every match: "
        "~2x less to write when posts match hundreds of subscriptions)",
    )
    run_p.add_argument(
        "--warm-up",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="build a routing version's matcher indexes and token table in every Python "
        "worker before its first batch (at start, and between batches when a newer version "
        f"is published; the token table from the {WARM_TEXTS:,} newest bronze.posts); "
        "--no-warm-up: lazily, inside the first batch",
    )
    shed = run_p.add_argument_group("load shedding (paper 001 Sect. 5.2)")
    shed.add_argument(
        "--shedding",
        choices=SHEDDING_MODES,
        default=SheddingOptions().mode,
        help="utility that picks the matchers a capped post keeps (default: %(default)s, "
        "the most accurate measured: docs/RESULTS.md, Fig. 8a); off: never shed",
    )
    shed.add_argument(
        "--max-spread",
        type=float,
        help="a fixed cap m for every batch instead of the adaptive level",
    )
    shed.add_argument(
        "--latency-budget",
        type=float,
        default=SheddingOptions().latency_budget,
        help="seconds of backlog at which shedding starts (the buffer size b)",
    )
    shed.add_argument("--shedding-k", type=float, default=7.0, help="cap of level 1")
    shed.add_argument("--shedding-delta", type=float, default=1.0, help="cap step per level")
    health = run_p.add_argument_group("routing health (stream.health)")
    health.add_argument(
        "--health-window",
        type=int,
        default=HealthOptions().window_batches,
        help="batches the hot-word sketch window spans",
    )
    health.add_argument(
        "--hot-word-tolerance",
        type=float,
        default=HealthOptions().hot_word_tolerance,
        help="report a word when its share per version exceeds the split threshold "
        "1/(2N) by more than this fraction",
    )
    status_p = sub.add_parser("status", help="the last committed micro-batches")
    status_p.add_argument("--last", type=int, default=10)


def run(args: argparse.Namespace, lakehouse: Any) -> int:
    if args.action == "status":
        rows = lakehouse.read_arrow("stream.batches")
        done = sorted(
            (r for r in rows.to_pylist() if r["stage"] == "committed"),
            key=lambda r: r["recorded_at"],
        )
        for row in done[-args.last :]:
            print(json.dumps({k: v for k, v in row.items() if k != "recorded_at"}, default=str))
        for row in done[-args.last :]:
            if row.get("capped_posts") or row.get("dropped_posts"):
                by_matcher = row["shed_pairs_by_matcher"] or []
                print(
                    f"limit notice: batch {row['batch_id']} (level {row['shedding_level']}, "
                    f"m={row['max_spread']:g}, {row['shedding']}): {row['capped_posts']} of "
                    f"{row['posts']} posts capped, {row['dropped_posts'] or 0} dropped, "
                    f"{row['shed_pairs']} (post, matcher) pairs not forwarded; per matcher: "
                    + ", ".join(f"{m}: {n}" for m, n in enumerate(by_matcher) if n)
                )
        if lakehouse.exists("stream.health"):
            wanted = {(r["query_id"], r["batch_id"]) for r in done[-args.last :]}
            for row in sorted(
                lakehouse.read_arrow("stream.health").to_pylist(), key=lambda r: r["recorded_at"]
            ):
                if (row["query_id"], row["batch_id"]) not in wanted:
                    continue
                hot = ", ".join(
                    f"{h['word']} {h['share']:.1%}/{h['versions']}v" for h in row["hot_words"]
                )
                print(
                    f"health: batch {row['batch_id']} v{row['routing_version']}: relative "
                    f"throughput x{row['relative_throughput'] or float('nan'):.2f} of hash, "
                    f"spread {row['spread'] or float('nan'):.2f}, imbalance "
                    f"{row['imbalance'] or float('nan'):.2f}; hot words: {hot or 'none'}"
                )
        return 0
    if args.checkpoint is None:
        args.checkpoint = spark_uri(join(lakehouse.location, "_checkpoints", args.query_name))
    query, _ = start(lakehouse.spark, lakehouse, args)
    log.info(
        "stream: query %s running (checkpoint %s); Ctrl-C stops it", query.name, args.checkpoint
    )
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    failpoints.arm()
    return job_main("stream", __doc__ or "", add_arguments, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
