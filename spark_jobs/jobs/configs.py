"""The batch jobs' options, each a frozen dataclass: the one declaration of an option, its
default and its help. ``s3tm <job>`` and ``spark-submit spark_jobs/jobs/<job>.py`` parse
their command line into them (:mod:`spark_jobs.options`), and the DAGs build a job's
command line from them (:func:`spark_jobs.options.job_argv`). Light on purpose: a DAG file
imports this module while it is parsed (``tests/test_layers.py``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Annotated, Literal

import tyro

from core.errors import InvalidArgumentError
from core.remap_options import (
    DEFAULT_ALGORITHM,
    DEFAULT_FULL_REMAP_GAIN,
    DEFAULT_MAX_MOVED,
    DEFAULT_SPLIT,
    HOLDOUT_FRACTION,
    Algorithm,
)
from spark_jobs.kafka_security import KafkaSecurity, deployment_bootstrap, deployment_topic
from spark_jobs.settings import settings


@dataclass(frozen=True)
class IngestConfig:
    """The ingest job's options: posts from landing files, or from the posts topic where
    the last batch ended."""

    source: Literal["files", "kafka"] = field(default_factory=lambda: settings().posts_source)
    """landing files, or the posts topic on Kafka (default: $S3TM_POSTS_SOURCE or files)"""
    landing: str | None = None
    """directory (or s3:// prefix) of JSON-lines files"""
    pattern: str = "*.jsonl*"
    """file glob in the landing directory"""
    kafka_bootstrap: str = field(default_factory=deployment_bootstrap)
    """Kafka brokers, host:port[,...] (default: $KAFKA_BOOTSTRAP or localhost:9092)"""
    kafka_topic: str = field(default_factory=deployment_topic)
    """the posts topic (default: $POSTS_TOPIC or posts)"""
    sample_rate: float = 1.0
    """fraction of the topic's posts kept in bronze, by post id (Kafka only: landing files
    are kept whole)"""
    batch_id: int | None = None
    """monotonic batch number (default: the epoch second now)"""
    default_day: dt.date | None = None
    """event day of posts without created_at (default: today, UTC)"""
    dated_until: dt.datetime | None = None
    """the batch's cut-off: posts created after it are quarantined (default: the time of
    the read plus 5 minutes of clock skew)"""
    dedupe_days: int = 2
    """a post id already in bronze on the batch's days, or this many days either side, is
    a duplicate (bounds the scan as bronze grows; -1: all of bronze)"""
    # TLS and SASL towards the broker: the environment's KAFKA_* settings
    # (kafka_security.py), never a command-line option
    kafka_security: Annotated[KafkaSecurity, tyro.conf.Suppress] = field(
        default_factory=KafkaSecurity.from_env
    )

    def __post_init__(self) -> None:
        if self.source not in ("files", "kafka"):
            raise InvalidArgumentError(f"source must be files or kafka, got {self.source!r}")
        if self.source == "files" and not self.landing:
            raise InvalidArgumentError("--landing is needed to ingest files (--source files)")
        if not 0.0 < self.sample_rate <= 1.0:
            raise InvalidArgumentError(f"sample rate must be in (0, 1], got {self.sample_rate}")


@dataclass(frozen=True)
class NormaliseConfig:
    """The normalise job's options."""

    sample_rate: float = 1.0
    """fraction of posts kept (deterministic per post id and seed)"""
    seed: int = 0
    """sampling seed"""


@dataclass(frozen=True)
class GraphConfig:
    """The graph job's options."""

    start: dt.date | None = None
    """first day (default: all)"""
    end: dt.date | None = None
    """last day, inclusive (default: all)"""
    window_days: int = 0
    """only the N days that end at --end, else the last N days present in silver (0: all;
    --start wins)"""
    cooccurrence: bool = False
    """also write gold.cooccurrence (word pairs per day: no learner reads it; at 10M posts
    it is the largest table and the slowest step)"""


@dataclass(frozen=True, kw_only=True)
class LearnerOptions:
    """The learner's options: the learn job's and the pipeline's."""

    nodes: int = field(default_factory=lambda: settings().matchers)
    """number of matchers N (default: the deployment's S3TM_MATCHERS)"""
    algorithm: Algorithm = DEFAULT_ALGORITHM
    """learner (salb2: SALB or METIS, then restreaming; salb is Alg. 1 as printed)"""
    split: bool = DEFAULT_SPLIT
    """split hot words"""
    holdout_fraction: float = HOLDOUT_FRACTION
    """posts kept out of learning to evaluate on (deterministic per post id)"""


@dataclass(frozen=True, kw_only=True)
class LearnConfig(LearnerOptions):
    """The learn job's options (``learn_version`` says what each does); the remap DAG's
    params and ``s3tm learn-version`` fill the same fields."""

    incremental: bool = False
    """refine the published version (salb2 only; full remap when none is published, N
    changed, or a full remap gains more than --full-remap-gain)"""
    max_moved: float = DEFAULT_MAX_MOVED
    """incremental: re-place at most this fraction of the active subscriptions"""
    full_remap_gain: float = DEFAULT_FULL_REMAP_GAIN
    """incremental: learn from scratch instead when that gains more than this (relative
    throughput on the window's held-out posts)"""
    start: dt.date | None = None
    """first day of the window"""
    end: dt.date | None = None
    """last day of the window: a scheduled run's, the last day before its data interval
    ends (default: the newest day in gold.post_words)"""
    window_days: int = 0
    """only the N days that end at --end, else the last N days present in gold.post_words
    (0: all)"""
    as_of: dt.datetime | None = None
    """the time the run learns as of: a scheduled run's data interval end (default: now);
    the live hot words are those the stream recorded in the hours before it"""
    subscribed: Literal["auto", "registry", "all"] = "auto"
    """learn on the registry's words (auto: when it has any)"""
    seed: int = 0
    """learning seed"""
    live_hot_words: float = 6.0
    """with --split, give the hot words the stream's sketch reported in the last this many
    hours (stream.health) the versions their live share needs (0: off)"""

    def __post_init__(self) -> None:
        if self.as_of is not None and self.as_of.tzinfo is None:
            # a time without a zone is UTC's, as every time the lakehouse records
            object.__setattr__(self, "as_of", self.as_of.replace(tzinfo=dt.UTC))
        if self.nodes < 1:
            raise InvalidArgumentError(f"--nodes must be >= 1, got {self.nodes}")
        if self.incremental and self.algorithm != "salb2":
            raise InvalidArgumentError(
                "--incremental refines with salb2's restreaming; got --algorithm "
                f"{self.algorithm} (use --algorithm salb2, or --no-incremental)"
            )
        if self.incremental and not self.split:
            raise InvalidArgumentError("--incremental learns salb2, which splits: drop --no-split")
        if not 0.0 <= self.max_moved <= 1.0:
            raise InvalidArgumentError(f"--max-moved must be within [0, 1], got {self.max_moved}")
        if self.full_remap_gain < 0:
            raise InvalidArgumentError(
                f"--full-remap-gain must be >= 0, got {self.full_remap_gain}"
            )


# A scheduled remap (the remap DAG's nightly and backfill runs, a Trigger) learns on the
# last week and refines the published version, moving few subscriptions. A command-line
# run of the job has no data interval and often nothing published: it learns from
# scratch on every day unless told. The DAG's params default to these.
SCHEDULED_WINDOW_DAYS = 7


def scheduled_learn() -> LearnConfig:
    """The remap DAG's learn step with its params' defaults (the window's end and time
    come from the run)."""
    return LearnConfig(incremental=True, window_days=SCHEDULED_WINDOW_DAYS)
