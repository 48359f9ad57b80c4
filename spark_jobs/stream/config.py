"""The streaming matcher's options: one frozen dataclass per action, the defaults and help
beside each field. ``s3tm stream run|status`` and ``spark-submit .../stream/job.py`` derive
their command line from them (:mod:`spark_jobs.options`): ``--max-spread`` is
``StreamConfig.max_spread``."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Annotated, ClassVar, Literal, get_args

import tyro

from core.shedding.plan import DropRule, ShedMode
from core.stream.shedding_policy import SheddingOptions
from spark_jobs.kafka_security import KafkaSecurity, deployment_bootstrap, deployment_topic
from spark_jobs.stream.health import HealthOptions

# recent posts that fill a new version's token table ahead of its first batch
WARM_TEXTS = 20_000

JobShape = Literal["auto", "fused", "staged"]
JOB_SHAPES: tuple[str, ...] = get_args(JobShape)

_SHEDDING = SheddingOptions()
_HEALTH = HealthOptions()


@dataclass(frozen=True)
class StreamConfig:
    """One streaming matcher query."""

    source: Literal["files", "kafka"] = "files"
    """where posts come from: JSON-lines files landing in --landing, or Kafka"""
    landing: str = "landing"
    """directory of JSON-lines posts"""
    kafka_bootstrap: str = field(default_factory=deployment_bootstrap)
    """Kafka brokers, host:port[,...] (default: $KAFKA_BOOTSTRAP or localhost:9092)"""
    kafka_topic: str = field(default_factory=deployment_topic)
    """the posts topic (default: $POSTS_TOPIC or posts)"""
    # TLS and SASL towards the broker: the environment's KAFKA_* settings
    # (kafka_security.py), never a command-line option
    kafka_security: Annotated[KafkaSecurity, tyro.conf.Suppress] = field(
        default_factory=KafkaSecurity.from_env
    )
    checkpoint: str | None = None
    """checkpoint location (default: <lakehouse>/_checkpoints/<query>)"""
    query_name: str = "s3tm_matcher"
    """the query's name (and checkpoint's)"""
    max_files_per_trigger: int = 0
    """landed files a micro-batch takes at most (0: all)"""
    max_offsets_per_trigger: int = 0
    """Kafka records a micro-batch takes at most (0: all)"""
    starting_offsets: str = "earliest"
    """where a new checkpoint starts reading the topic: earliest, latest, or an ISO-8601
    time (each partition from its first record at or after it); a checkpoint that exists
    resumes where it stopped"""
    trigger_seconds: float = 0.0
    """seconds between micro-batches (0: back to back)"""
    available_now: bool = False
    """process what has landed, then stop (no adaptive shedding then)"""
    seed: int = 0
    """seeds the split words' version choice"""
    matches_table: bool = True
    """also write one `matches` row per (post, subscription); with --no-matches-table only
    `deliveries` are written (their sub_ids and matcher_ids hold every match: ~2x less to
    write when posts match hundreds of subscriptions)"""
    warm_up: bool = True
    """build a routing version's matcher indexes and token table in every Python worker
    before its first batch (at start, and between batches when a newer version is
    published; the token table from the newest bronze.posts); --no-warm-up: lazily, inside
    the first batch"""
    job_shape: JobShape = "auto"
    """a batch's Spark job: fused (route, match and dispatch in the task that read the
    posts: nothing shuffled, every worker holds every matcher), staged (a match task per
    matcher, two shuffles: each worker holds its matchers' share), auto (fused on a local
    master, staged on a cluster)"""
    shedding: ShedMode = _SHEDDING.mode  # type: ignore[assignment]
    """load shedding (paper 001 Sect. 5.2): the utility that picks the matchers a capped
    post keeps (yield: the most accurate measured, docs/RESULTS.md, Fig. 8a); off: never
    shed"""
    max_spread: float | None = None
    """a fixed cap m for every batch instead of the adaptive level"""
    drop_fraction: float = 0.0
    """with --max-spread: a fixed share of whole posts dropped from every batch too"""
    latency_budget: float = _SHEDDING.latency_budget
    """seconds of backlog at which shedding starts (the buffer size b)"""
    shedding_k: float = _SHEDDING.k
    """cap of shedding level 1"""
    shedding_delta: float = _SHEDDING.delta
    """cap step per shedding level"""
    drop_rule: DropRule = _SHEDDING.drop_rule  # type: ignore[assignment]
    """which posts the last levels drop whole: value, those with the fewest matches by the
    learned estimate (with --shedding yield); random, the baseline"""
    health_window: int = _HEALTH.window_batches
    """routing health (stream.health): batches the hot-word sketch window spans"""
    hot_word_tolerance: float = _HEALTH.hot_word_tolerance
    """routing health: report a word when its share per version exceeds the split
    threshold 1/(2N) by more than this fraction"""

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
class StreamRun:
    """run the streaming matcher"""

    config: Annotated[StreamConfig, tyro.conf.arg(name="")] = field(default_factory=StreamConfig)


@dataclass(frozen=True)
class StreamStatus:
    """the last committed micro-batches"""

    # read from the driver-side tables through delta-rs: no JVM, an answer in a second
    needs_spark: ClassVar[bool] = False
    last: int = 10
    """how many batches to show"""
    as_json: Annotated[bool, tyro.conf.arg(name="json")] = False
    """each batch's whole row as a JSON object"""


# ``s3tm stream run ...`` or ``s3tm stream status ...``
StreamCommand = (
    Annotated[StreamRun, tyro.conf.subcommand("run")]
    | Annotated[StreamStatus, tyro.conf.subcommand("status")]
)
