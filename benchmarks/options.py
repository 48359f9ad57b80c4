"""``s3tm bench ...``'s options: each benchmark's, declared once as a dataclass (see
:mod:`s3tm.cli.options`); the CLI parses them and the benchmarks take them as they are."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from core.shedding.plan import ShedMode
from s3tm.cli.options import CompareOptions, CorpusOption, HoldoutOptions, OutOption


@dataclass(frozen=True, kw_only=True)
class LearnBench(OutOption, CompareOptions):
    """learning time vs corpus size (paper Fig. 9)"""

    sizes: str = "125000,250000,500000,1000000"
    """comma-separated numbers of synthetic posts"""
    nodes: int = 256
    """number of matchers N"""
    repeats: int = 3
    """timed runs of each point (the median is reported)"""
    seed: int = 0
    """seed of the corpus and subscriptions"""
    algorithms: str = "salb,salb2"
    """with --compare: the learners timed on each side"""


@dataclass(frozen=True, kw_only=True)
class MatcherBench(OutOption, CompareOptions, CorpusOption):
    """access-predicate vs trie vs counting matcher kernels, posts/s per core"""

    synthetic_subscriptions: int = 1_000_000
    """subscriptions of the synthetic scenario"""
    repeats: int = 3
    """timed runs of each point (the median is reported)"""


@dataclass(frozen=True, kw_only=True)
class ChangesBench(OutOption):
    """a round of subscription changes' cost to the stream's tasks (--compare)"""

    compare: str
    """the revision to compare with"""
    subscriptions: int = 600_000
    """one matcher's subscriptions"""
    posts: int = 50_000
    """texts a route task encodes"""
    runs: int = 3
    """alternating runs (median reported)"""


@dataclass(frozen=True, kw_only=True)
class SizingBench(OutOption, CorpusOption):
    """matcher memory per 100k subscriptions (DEPLOY.md)"""

    subscriptions: str = "100000,1000000"
    """synthetic sizes"""
    nodes: int = 16
    """matchers (N)"""


@dataclass(frozen=True, kw_only=True)
class SketchBench(OutOption, CorpusOption):
    """the stream's hot-word sketch vs exact counts"""

    nodes: str = "16,64,256"
    """N values (threshold 1/(2N))"""
    batch_posts: int = 10_000
    """posts per batch"""
    tasks: int = 4
    """route tasks per batch"""
    window: int = 5
    """batches in the sliding window"""


@dataclass(frozen=True, kw_only=True)
class NormaliseBench(OutOption, CorpusOption):
    """the fast normaliser vs normalize() per text"""

    posts: int = 140_000
    """texts read from the corpus"""
    batch_posts: int = 20_000
    """posts per batch"""
    runs: int = 3
    """alternating runs (median reported)"""


@dataclass(frozen=True, kw_only=True)
class DropBench(OutOption, CorpusOption):
    """a drop level's cost per raw line, against --compare REV"""

    lines: int = 1_000_000
    """raw lines dropped from"""
    fraction: float = 0.75
    """share of the lines dropped"""
    repeats: int = 5
    """timed calls per run (best kept)"""
    compare: str | None = None
    """the git revision to beat (one core)"""
    runs: int = 3
    """alternating runs per side"""
    spark: bool = False
    """instead: wall time per line in the stream's shape on --master (the JVM reading the
    lines, handing them to Python, dropping them there)"""
    master: str = "local[*]"
    """Spark master with --spark"""


@dataclass(frozen=True, kw_only=True)
class LearnJobBench(OutOption, CompareOptions):
    """[spark] learn job time and driver memory"""

    posts: str = "1000000"
    """posts learned on; several (1000000,3000000,10000000): one run each, a table and
    docs/bench/learn_job_scale.csv"""
    nodes: int = 64
    """number of matchers N"""
    seed: int = 0
    """seed of the corpus and subscriptions"""


@dataclass(frozen=True, kw_only=True)
class ChainBench(OutOption):
    """[spark] the whole remap chain on N posts: time and memory per step"""

    posts: int = 1_000_000
    """posts in the corpus"""
    subscriptions: int = 100_000
    """subscriptions drawn"""
    nodes: int = 16
    """number of matchers N"""
    algorithm: str = "salb2"
    """the learner (the DAG's default)"""
    master: str = "local[2]"
    """Spark master"""
    seed: int = 0
    """seed of the corpus and subscriptions"""
    workdir: str = "/tmp/s3tm-chain"
    """corpus (kept, reused per size) and scratch lakehouse"""


@dataclass(frozen=True, kw_only=True)
class DeltaEnginesBench(OutOption):
    """[spark] the remap chain with delta-spark vs the delta-rs bridge"""

    posts: int = 200_000
    """demo posts the chain ingests"""
    runs: int = 2
    """alternating runs per engine"""
    nodes: int = 16
    """number of matchers N"""


@dataclass(frozen=True, kw_only=True)
class StreamBench(OutOption, CompareOptions, CorpusOption):
    """[spark] streaming matcher posts/s end to end"""

    workloads: str = "tweet,topic"
    """tweet and/or topic"""
    nodes: int = 16
    """number of matchers N"""
    subscriptions: int = 100_000
    """subscriptions registered"""
    posts: str = "tweet=1400000,topic=240000"
    """posts streamed: one number, or per workload (topic-based subscriptions match ~213
    times per post in docs/bench/stream.csv, so their batches are output-bound)"""
    file_posts: str = "tweet=200000,topic=20000"
    """posts per landed file = per micro-batch: one number, or per workload"""
    master: str | None = None
    """Spark master (default local[*])"""
    seed: int = 0
    """seed of the corpus and subscriptions"""
    matches_table: bool = True
    """the stream also writes `matches` rows (--no-matches-table: deliveries only, which
    hold every match; with --compare only the new side, the baseline writes both)"""
    routing: str = "salb"
    """the learner of the published version (salb: SALB + hot-word splitting; salb2; hash:
    hash routing); several, comma-separated (hash,salb2): --runs alternating runs of each
    on the same posts and subscriptions, side by side in stream_routing.csv"""
    overload: str | None = None
    """F[,F...]: feed the stream at F x its measured capacity, one run per factor and drop
    rule (for example 1.25,1.5,2,3)"""
    overload_modes: str = "value,random"
    """with --overload, runs per factor: value (drop the posts of least estimated matches),
    random (drop at random: the baseline), off (no shedding)"""
    duration: float = 60.0
    """with --overload: seconds fed per run"""
    trigger_seconds: float = 5.0
    """with --overload: the trigger interval"""
    file_seconds: float = 1.0
    """with --overload: a file lands this often"""
    shedding: ShedMode = "yield"
    """with --overload: the utility of the shedding run"""
    source: Literal["files", "kafka"] = "files"
    """with --overload: posts arrive as landed files, or on a Kafka topic (a broker from
    the resolved jars; the backlog is the consumer lag)"""


@dataclass(frozen=True, kw_only=True)
class SubscriptionsBench(OutOption):
    """[spark] the platform at 100k/1M/10M subscriptions: register, learn, place,
    validate, evaluate, publish, stream (real tweets)"""

    sizes: str = "100000,1000000,10000000"
    """comma-separated subscription counts (tweet-based, drawn from the posts)"""
    nodes: int = 16
    """number of matchers N"""
    batch_posts: int = 50_000
    """posts a stream batch reads (one file)"""
    changes: int = 10_000
    """subscription changes committed between two stream batches, three times (half new,
    half cancelled)"""
    corpus: str | None = None
    """real tweets with times (default: ../shared/data's timed tweets)"""
    max_posts: int | None = None
    """read at most this many posts of the corpus"""
    algorithm: str = "salb2"
    """the learner (the platform's)"""
    workload: str = "tweet"
    """tweet (training posts' word sets) or topic (LDA topics' word sets)"""
    stream: bool = True
    """stream held-out posts through the published version (--no-stream: the remap's steps
    only; topic-based subscriptions at 10M match ~20k times per post)"""
    master: str | None = None
    """Spark master (default local[*])"""
    seed: int = 0
    """seed of the subscriptions"""


@dataclass(frozen=True, kw_only=True)
class QualityBench(OutOption, HoldoutOptions):
    """hash vs SALB vs SALB+split on the real corpus"""

    corpus: str | None = None
    """corpus file (default: ../shared/data/tweets-tweeteval)"""
    nodes: str = "4,16,64,256"
    """number of matchers N"""
    topic_words: int = 500
    """words per LDA topic of the topic-based subscriptions"""
    topic_pool: int = 3000
    """most frequent words the topic model draws from"""
