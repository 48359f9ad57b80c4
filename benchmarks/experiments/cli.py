"""``s3tm experiment ...``: each experiment's options declared once, as a dataclass (see
:mod:`s3tm.cli.options`)."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from benchmarks.experiments.runner import VARIANTS
from core.errors import InputDataError, InvalidArgumentError
from core.subscriptions.workloads import Workload
from s3tm.cli.options import add_command

PROG = "s3tm experiment"
PaperName = Literal["scalability", "subscriptions", "corpus-size", "learning-time"]


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


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    exp = sub.add_parser(
        "experiment", help="the paper's experiments: table, CSV and PNG (checkout)"
    )
    kinds = exp.add_subparsers(dest="experiment", required=True, metavar="EXPERIMENT")
    # each experiment's help is its options' docstring
    command = functools.partial(add_command, kinds, prog=PROG)
    command("scalability", Scalability, functools.partial(_run, "scalability"))
    command("subscriptions", SubscriptionCounts, functools.partial(_run, "subscriptions"))
    command("corpus-size", CorpusSize, functools.partial(_run, "corpus-size"))
    command("learning-time", LearningTime, functools.partial(_run, "learning-time"))
    command("shedding", Shedding, _run_shedding)
    command("shedding-control", SheddingControl, _run_shedding_control)
    command("drift", Drift, _run_drift)
    command("remap-cost", RemapCost, _run_remap_cost)


def _timed_corpus(args: WindowOptions) -> Path:
    from benchmarks.realdata import timed_corpus_path

    path = Path(args.corpus) if args.corpus else timed_corpus_path()
    if path is None:
        raise InputDataError(
            "timestamped corpus not found: pass --corpus FILE (e.g. `s3tm demo-corpus --days "
            "28 --burst-day 14`) or set S3TM_SHARED_DATA"
        )
    return path


def _progress(args: WindowOptions) -> Callable[[str], None]:
    import sys

    def progress(message: str) -> None:  # --json: stdout carries only the JSON lines
        print(message, file=sys.stderr if args.json else sys.stdout, flush=True)

    return progress


def _real_corpus(corpus: str | None) -> Path:
    from benchmarks.realdata import real_corpus_path

    path = Path(corpus) if corpus else real_corpus_path()
    if path is None:
        raise InputDataError("corpus not found: pass --corpus FILE or set S3TM_SHARED_DATA")
    return path


def _run_remap_cost(args: RemapCost) -> int:
    from benchmarks.experiments.remap_cost import remap_cost

    remap_cost(
        _timed_corpus(args),
        nodes=args.nodes,
        window_days=args.window_days,
        min_posts=args.min_posts,
        max_windows=args.windows,
        start=args.start,
        workload=args.workload,
        n_subscriptions=args.subscriptions,
        max_moved=args.max_moved,
        penalty=args.penalty,
        full_remap_gain=args.full_remap_gain,
        judge=args.judge,
        lda_iterations=args.lda_iterations,
        seed=args.seed,
        out=Path(args.out),
        as_json=args.json,
        progress=_progress(args),
    )
    return 0


def _run_drift(args: Drift) -> int:
    from benchmarks.experiments.drift import drift

    variants = [v for v in args.algorithms.split(",") if v]
    if "hash" not in variants:
        variants = ["hash", *variants]
    drift(
        _timed_corpus(args),
        nodes=args.nodes,
        variants=variants,
        window_days=args.window_days,
        min_posts=args.min_posts,
        max_windows=args.windows,
        start=args.start,
        workload=args.workload,
        n_subscriptions=args.subscriptions,
        lda_iterations=args.lda_iterations,
        seed=args.seed,
        out=Path(args.out),
        as_json=args.json,
        progress=_progress(args),
    )
    return 0


def _run_shedding_control(args: SheddingControl) -> int:
    from benchmarks.experiments import paper, shedding
    from s3tm.cli.demo import parse_int_list

    nodes = parse_int_list(args.nodes, "--nodes")
    work = paper.prepare(_real_corpus(args.corpus), args.seed, args.lda_iterations)
    shedding.shedding_control(
        work,
        nodes[0],
        args.subscriptions,
        Path(args.out),
        buffer_seconds=args.buffer_seconds,
        duration=args.duration,
    )
    return 0


def _run_shedding(args: Shedding) -> int:
    import contextlib
    import sys

    from benchmarks.experiments import paper, shedding
    from core.subscriptions.workloads import parse_workloads
    from s3tm.cli.demo import parse_int_list

    path = _real_corpus(args.corpus)
    nodes = parse_int_list(args.nodes, "--nodes")
    kinds = parse_workloads(args.workloads)
    try:
        caps = [float(c) for c in args.caps.split(",") if c]
    except ValueError as error:
        raise InvalidArgumentError(f"--caps takes numbers, got {args.caps!r}") from error
    if not caps or min(caps) < 1:
        raise InvalidArgumentError("--caps needs spread caps >= 1")
    # --json: stdout carries only the JSON lines; progress goes to stderr
    progress = contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()
    with progress:
        work = paper.prepare(path, args.seed, args.lda_iterations)
    shedding.shedding(
        work, kinds, nodes, args.subscriptions, caps, Path(args.out), as_json=args.json
    )
    return 0


def _run(name: PaperName, args: PaperExperiment) -> int:
    from benchmarks.experiments import paper
    from s3tm.cli.demo import parse_int_list

    path = _real_corpus(args.corpus)
    variants = [v for v in args.algorithms.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise InvalidArgumentError(f"unknown algorithms {unknown}; choose from {list(VARIANTS)}")
    if "hash" not in variants and name != "learning-time":
        variants = ["hash", *variants]
    nodes = parse_int_list(args.nodes, "--nodes")
    out = Path(args.out)
    work = paper.prepare(path, args.seed, args.lda_iterations)
    if name == "scalability":
        paper.scalability(work, nodes, variants, args.subscriptions, args.repeats, out)
    elif name == "subscriptions":
        paper.subscriptions(
            work, parse_int_list(args.counts, "--counts"), nodes[0], variants, args.repeats, out
        )
    elif name == "corpus-size":
        paper.corpus_size(
            work,
            parse_int_list(args.sizes, "--sizes"),
            nodes[0],
            variants,
            args.subscriptions,
            args.repeats,
            out,
        )
    else:
        paper.learning_time(
            work, parse_int_list(args.sizes, "--sizes"), nodes[0], variants, args.subscriptions, out
        )
    return 0
