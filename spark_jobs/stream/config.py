"""The streaming matcher's options: one frozen dataclass (the defaults live here) and the
command line that fills it (``s3tm stream run|status``, ``spark-submit .../stream/job.py``)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from core.errors import InvalidArgumentError
from core.shedding.plan import DROP_RULES, SHEDDING_MODES
from core.stream.shedding_policy import SheddingOptions
from spark_jobs.common import add_common_arguments, add_kafka_arguments, config_from
from spark_jobs.kafka_security import DEFAULT_BOOTSTRAP, DEFAULT_TOPIC, KafkaSecurity
from spark_jobs.stream.health import HealthOptions

# recent posts that fill a new version's token table ahead of its first batch
WARM_TEXTS = 20_000

# a batch's Spark job (spark_jobs.stream.pipeline): auto, fused or staged
JOB_SHAPES = ("auto", "fused", "staged")

_SHEDDING = SheddingOptions()
_HEALTH = HealthOptions()


@dataclass(frozen=True)
class StreamConfig:
    """One streaming matcher query.

    Attributes:
        source: ``files`` (JSON lines landing in ``landing``) or ``kafka``.
        checkpoint: the query's checkpoint location (None: ``<lakehouse>/_checkpoints/
            <query_name>``, filled by :meth:`with_checkpoint`).
        max_files_per_trigger: files a micro-batch takes at most (0: all that landed).
        max_offsets_per_trigger: Kafka records a micro-batch takes at most (0: all).
        starting_offsets: where a new checkpoint starts reading the topic: ``earliest``,
            ``latest`` or an ISO-8601 time (``spark_jobs.common.kafka_start_options``).
        trigger_seconds: the processing-time trigger (0: batches back to back).
        available_now: process what has landed, then stop (no adaptive shedding then).
        seed: seeds the choice of split-word versions.
        matches_table: also write ``matches`` (else only ``deliveries``, which hold them).
        warm_up: build a version's indexes and token table before its first batch.
        job_shape: a batch's Spark job: ``fused`` (route, match and dispatch in the task
            that read the posts), ``staged`` (three stages, two shuffles: a match task per
            matcher on a cluster), ``auto`` (fused on a local master, else staged).
        shedding, max_spread, drop_fraction, latency_budget, shedding_k, shedding_delta,
        drop_rule: load shedding (:class:`SheddingOptions`).
        health_window, hot_word_tolerance: routing health (:class:`HealthOptions`).
    """

    source: Literal["files", "kafka"] = "files"
    landing: str = "landing"
    kafka_bootstrap: str = DEFAULT_BOOTSTRAP
    kafka_topic: str = DEFAULT_TOPIC
    # TLS and SASL towards the broker: the environment's KAFKA_* settings (kafka_security.py)
    kafka_security: KafkaSecurity = field(default_factory=KafkaSecurity.from_env)
    checkpoint: str | None = None
    query_name: str = "s3tm_matcher"
    max_files_per_trigger: int = 0
    max_offsets_per_trigger: int = 0
    starting_offsets: str = "earliest"
    trigger_seconds: float = 0.0
    available_now: bool = False
    seed: int = 0
    matches_table: bool = True
    warm_up: bool = True
    job_shape: str = "auto"
    shedding: str = _SHEDDING.mode
    max_spread: float | None = None
    drop_fraction: float = 0.0
    latency_budget: float = _SHEDDING.latency_budget
    shedding_k: float = _SHEDDING.k
    shedding_delta: float = _SHEDDING.delta
    drop_rule: str = _SHEDDING.drop_rule
    health_window: int = _HEALTH.window_batches
    hot_word_tolerance: float = _HEALTH.hot_word_tolerance

    def shedding_options(self) -> SheddingOptions:
        """The query's shedding options: a catch-up run (``available_now``) never adapts."""
        return SheddingOptions(
            mode=self.shedding,
            max_spread=self.max_spread,
            drop_fraction=self.drop_fraction,
            k=self.shedding_k,
            delta=self.shedding_delta,
            latency_budget=self.latency_budget,
            adaptive=not self.available_now,
            drop_rule=self.drop_rule,
            trigger_seconds=self.trigger_seconds,
        )

    def health_options(self) -> HealthOptions:
        return HealthOptions(
            window_batches=self.health_window, hot_word_tolerance=self.hot_word_tolerance
        )

    def with_checkpoint(self, checkpoint: str) -> StreamConfig:
        return replace(self, checkpoint=checkpoint)


@dataclass(frozen=True)
class StreamCommand:
    """``run`` (the query, ``config``) or ``status`` (the ``last`` committed batches, as a
    table or, ``as_json``, one JSON object each)."""

    action: Literal["run", "status"]
    config: StreamConfig
    last: int = 10
    as_json: bool = False

    @classmethod
    def of(cls, options: Mapping[str, object]) -> StreamCommand:
        """The command of parsed command-line options."""
        action = options["action"]
        last = options.get("last", cls.last)
        if action not in ("run", "status") or not isinstance(last, int):
            raise InvalidArgumentError(f"stream: unknown action {action!r} or --last {last!r}")
        return cls(
            action="run" if action == "run" else "status",
            config=config_from(StreamConfig, options),
            last=last,
            as_json=bool(options.get("json", False)),
        )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = StreamConfig
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    # --lakehouse and --master after the action too, as every command group takes them
    common = argparse.ArgumentParser(add_help=False)
    add_common_arguments(common, nested=True)
    run_p = sub.add_parser("run", parents=[common], help="run the streaming matcher")
    run_p.add_argument(
        "--source",
        choices=("files", "kafka"),
        default=defaults.source,
        help="where posts come from: JSON-lines files landing in --landing, or Kafka",
    )
    run_p.add_argument("--landing", default=defaults.landing, help="directory of JSON-lines posts")
    add_kafka_arguments(run_p)
    run_p.add_argument(
        "--checkpoint", help="checkpoint location (default: <lakehouse>/_checkpoints/<query>)"
    )
    run_p.add_argument(
        "--query-name", default=defaults.query_name, help="the query's name (and checkpoint's)"
    )
    run_p.add_argument(
        "--max-files-per-trigger",
        type=int,
        default=defaults.max_files_per_trigger,
        help="landed files a micro-batch takes at most (0: all)",
    )
    run_p.add_argument(
        "--max-offsets-per-trigger",
        type=int,
        default=defaults.max_offsets_per_trigger,
        help="Kafka records a micro-batch takes at most (0: all)",
    )
    run_p.add_argument(
        "--starting-offsets",
        default=defaults.starting_offsets,
        help="where a new checkpoint starts reading the topic: earliest, latest, or an "
        "ISO-8601 time (each partition from its first record at or after it); a checkpoint "
        "that exists resumes where it stopped",
    )
    run_p.add_argument(
        "--trigger-seconds",
        type=float,
        default=defaults.trigger_seconds,
        help="seconds between micro-batches (0: back to back)",
    )
    run_p.add_argument(
        "--available-now", action="store_true", help="process what has landed, then stop"
    )
    run_p.add_argument(
        "--seed", type=int, default=defaults.seed, help="seeds the split words' version choice"
    )
    run_p.add_argument(
        "--matches-table",
        action=argparse.BooleanOptionalAction,
        default=defaults.matches_table,
        help="also write one `matches` row per (post, subscription); with --no-matches-table "
        "only `deliveries` are written (their sub_ids and matcher_ids hold every match: "
        "~2x less to write when posts match hundreds of subscriptions)",
    )
    run_p.add_argument(
        "--warm-up",
        action=argparse.BooleanOptionalAction,
        default=defaults.warm_up,
        help="build a routing version's matcher indexes and token table in every Python "
        "worker before its first batch (at start, and between batches when a newer version "
        f"is published; the token table from the {WARM_TEXTS:,} newest bronze.posts); "
        "--no-warm-up: lazily, inside the first batch",
    )
    run_p.add_argument(
        "--job-shape",
        choices=JOB_SHAPES,
        default=defaults.job_shape,
        help="a batch's Spark job: fused (route, match and dispatch in the task that read "
        "the posts: nothing shuffled, every worker holds every matcher), staged (a match "
        "task per matcher, two shuffles: each worker holds its matchers' share), auto "
        "(default: fused on a local master, staged on a cluster)",
    )
    shed = run_p.add_argument_group("load shedding (paper 001 Sect. 5.2)")
    shed.add_argument(
        "--shedding",
        choices=SHEDDING_MODES,
        default=defaults.shedding,
        help="utility that picks the matchers a capped post keeps (default: %(default)s, "
        "the most accurate measured: docs/RESULTS.md, Fig. 8a); off: never shed",
    )
    shed.add_argument(
        "--max-spread",
        type=float,
        help="a fixed cap m for every batch instead of the adaptive level",
    )
    shed.add_argument(
        "--drop-fraction",
        type=float,
        default=defaults.drop_fraction,
        help="with --max-spread: a fixed share of whole posts dropped from every batch too",
    )
    shed.add_argument(
        "--latency-budget",
        type=float,
        default=defaults.latency_budget,
        help="seconds of backlog at which shedding starts (the buffer size b)",
    )
    shed.add_argument(
        "--shedding-k", type=float, default=defaults.shedding_k, help="cap of level 1"
    )
    shed.add_argument(
        "--shedding-delta", type=float, default=defaults.shedding_delta, help="cap step per level"
    )
    shed.add_argument(
        "--drop-rule",
        choices=DROP_RULES,
        default=defaults.drop_rule,
        help="which posts the last levels drop whole: value, those with the fewest matches "
        "by the learned estimate (with --shedding yield); random, the baseline",
    )
    health = run_p.add_argument_group("routing health (stream.health)")
    health.add_argument(
        "--health-window",
        type=int,
        default=defaults.health_window,
        help="batches the hot-word sketch window spans",
    )
    health.add_argument(
        "--hot-word-tolerance",
        type=float,
        default=defaults.hot_word_tolerance,
        help="report a word when its share per version exceeds the split threshold "
        "1/(2N) by more than this fraction",
    )
    status_p = sub.add_parser("status", parents=[common], help="the last committed micro-batches")
    status_p.add_argument(
        "--last", type=int, default=StreamCommand.last, help="how many batches to show"
    )
    status_p.add_argument(
        "--json", action="store_true", help="each batch's whole row as a JSON object"
    )
