"""The experiments' options, declared once as dataclasses: ``s3tm experiment`` parses the
command line into them (:mod:`s3tm.cli.options`), and the experiments take them whole."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from benchmarks.experiments.runner import VARIANTS
from core.subscriptions.workloads import Workload


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    lda_iterations: int = 5
    """LDA iterations of the topic-based subscriptions"""
    seed: int = 7
    """seed of the sampling, subscriptions and learners"""
    out: str = "docs/experiments"
    """directory for the CSV and the PNG"""


@dataclass(frozen=True, kw_only=True)
class PaperExperiment(RunOptions):
    corpus: str | None = None
    """corpus file (default: ../shared/data tweets)"""
    nodes: str = "16"
    """comma-separated N values"""
    algorithms: str = ",".join(VARIANTS)
    """comma-separated learners (hash is always compared)"""
    subscriptions: int = 100_000
    """subscriptions per workload (tweet-based past the training posts: every post repeated
    evenly, see core/subscriptions/workloads.py)"""
    counts: str = "100,1000,10000,100000"
    """subscription counts (subscriptions experiment)"""
    sizes: str = "10000,25000,50000,112000"
    """learning-corpus sizes (corpus-size, learning-time)"""
    repeats: int = 3
    """replay timing: best of"""


@dataclass(frozen=True, kw_only=True)
class Scalability(PaperExperiment):
    """Fig. 5: metrics vs N"""

    nodes: str = "2,4,8,16,32,64,128,256"
    """comma-separated N values"""


@dataclass(frozen=True, kw_only=True)
class SubscriptionCounts(PaperExperiment):
    """Fig. 7: metrics vs number of subscriptions (N fixed)"""


@dataclass(frozen=True, kw_only=True)
class CorpusSize(PaperExperiment):
    """Fig. 6: metrics vs learning-corpus size"""

    nodes: str = "64"
    """N"""


@dataclass(frozen=True, kw_only=True)
class LearningTime(PaperExperiment):
    """Fig. 9: learning time, SALB vs METIS baselines"""

    nodes: str = "64"
    """N"""


@dataclass(frozen=True, kw_only=True)
class WindowOptions(RunOptions):
    """The experiments over time windows of a timestamped corpus."""

    corpus: str | None = None
    """timestamped corpus (default: ../shared/data tweets-ira-timed)"""
    nodes: int = 16
    """N"""
    window_days: float = 7.0
    """window length (a week)"""
    min_posts: int = 2000
    """skip sparser windows"""
    windows: int = 12
    """at most this many windows"""
    start: str | None = None
    """first window's start (ISO date; default: the first post's)"""
    workload: Workload = "tweet"
    """tweet-based or topic-based subscriptions"""
    subscriptions: int = 10_000
    """subscriptions: from window 0's posts (remap-cost), new ones per window (drift)"""
    json: bool = False
    """one JSON object per line per row"""


@dataclass(frozen=True, kw_only=True)
class RemapCost(WindowOptions):
    """full vs incremental remaps on consecutive windows: gain vs moves"""

    max_moved: float = 0.1
    """incremental: most subscriptions moved"""
    penalty: float | None = None
    """incremental: score lost per subscription a move re-places (default: the learner's, 1
    post per subscription; 0: moves are free within the budget)"""
    full_remap_gain: float | None = None
    """the policy chain (the remap DAG's rule): learn from scratch when that beats the
    incremental remap's throughput by more than this (default 0.1) on the held-out posts of
    the window"""
    judge: Literal["recent", "random"] = "recent"
    """which 20% of a window's posts are held out to judge the policy's choice: its latest
    or a random sample"""


@dataclass(frozen=True, kw_only=True)
class Drift(WindowOptions):
    """Fig. 7i-l: a mapping learned on window 0, evaluated on later windows"""

    workload: Workload = "topic"
    """tweet-based or topic-based subscriptions"""
    algorithms: str = "hash,gFCL,salb,salb+split"
    """comma-separated learners to compare"""


@dataclass(frozen=True, kw_only=True)
class Shedding(RunOptions):
    """Fig. 8a: accuracy vs load shed, per utility and spread cap"""

    corpus: str | None = None
    """corpus file (default: ../shared/data tweets)"""
    nodes: str = "16,64"
    """comma-separated N values"""
    subscriptions: int = 100_000
    """subscriptions registered"""
    workloads: str = "tweet,topic"
    """tweet,topic"""
    caps: str = "8,7.5,7,6.5,6,5.5,5,4.5,4,3.5,3,2.5,2,1.5,1"
    """spread caps m (fractional: the last matcher with that probability)"""
    json: bool = False
    """one JSON object per line per row"""


@dataclass(frozen=True, kw_only=True)
class SheddingControl(RunOptions):
    """Fig. 8b: the shedding level under input steps (simulated)"""

    corpus: str | None = None
    """corpus file (default: ../shared/data tweets)"""
    nodes: str = "16"
    """N"""
    subscriptions: int = 100_000
    """subscriptions registered"""
    buffer_seconds: float = 2.0
    """b, in seconds of capacity"""
    duration: float = 2000.0
    """simulated seconds"""
