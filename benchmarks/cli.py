"""``s3tm bench ...``: each benchmark's options declared once, as a dataclass (see
:mod:`s3tm.cli.options`)."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from core.errors import InputDataError, InvalidArgumentError
from core.subscriptions.workloads import Workload, as_workload
from s3tm.cli.options import (
    CompareOptions,
    CorpusOption,
    HoldoutOptions,
    OutOption,
    add_command,
)

PROG = "s3tm bench"


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
    shedding: str = "yield"
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


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    bench = sub.add_parser(
        "bench", help="benchmarks: print measured figures, write CSV/PNG (checkout)"
    )
    kinds = bench.add_subparsers(dest="bench", required=True, metavar="BENCHMARK")
    # each command's help is its options' docstring
    command = functools.partial(add_command, kinds, prog=PROG)
    command("learn", LearnBench, _run_learn)
    command("matcher", MatcherBench, _run_matcher)
    command("changes", ChangesBench, _run_changes)
    command("sizing", SizingBench, _run_sizing)
    command("sketch", SketchBench, _run_sketch)
    command("normalise", NormaliseBench, _run_normalise)
    command("drop", DropBench, _run_drop)
    command("learn-job", LearnJobBench, _run_learn_job)
    command("chain", ChainBench, _run_chain)
    command("delta-engines", DeltaEnginesBench, _run_delta_engines)
    command("stream", StreamBench, _run_stream)
    command("subscriptions", SubscriptionsBench, _run_subscriptions)
    command("quality", QualityBench, _run_quality)


def _check_runs(args: CompareOptions | ChangesBench) -> None:
    if args.runs < 1:
        raise InputDataError("--runs must be at least 1")


def _run_delta_engines(args: DeltaEnginesBench) -> int:
    from benchmarks.delta_engines import bench_delta_engines

    bench_delta_engines(args.posts, args.runs, args.nodes, Path(args.out))
    return 0


def _run_sizing(args: SizingBench) -> int:
    from benchmarks import sizing
    from benchmarks.realdata import corpus_or_real

    path = corpus_or_real(args.corpus)
    sizes = [int(s) for s in args.subscriptions.split(",") if s.strip()]
    sizing.run(path, sizes, args.nodes, Path(args.out))
    return 0


def _run_changes(args: ChangesBench) -> int:
    from benchmarks.compare import compare_changes

    _check_runs(args)
    if args.subscriptions < 1200 or args.posts < 100:
        raise InputDataError("--subscriptions must be >= 1200 and --posts >= 100")
    compare_changes(
        args.compare,
        subscriptions=args.subscriptions,
        posts=args.posts,
        runs=args.runs,
        out=Path(args.out),
    )
    return 0


def _run_matcher(args: MatcherBench) -> int:
    from benchmarks import matcher
    from benchmarks.realdata import corpus_or_real

    path = corpus_or_real(args.corpus)
    if args.compare:
        from benchmarks.compare import compare_matcher

        _check_runs(args)
        compare_matcher(
            args.compare,
            corpus=path,
            synthetic_subs=args.synthetic_subscriptions,
            repeats=args.repeats,
            runs=args.runs,
            out=Path(args.out),
        )
        return 0
    matcher.run(path, args.synthetic_subscriptions, args.repeats, Path(args.out))
    return 0


def _run_sketch(args: SketchBench) -> int:
    from benchmarks import sketch
    from benchmarks.realdata import require_corpus
    from s3tm.cli.demo import parse_int_list

    path = require_corpus(args.corpus)
    if min(args.batch_posts, args.tasks, args.window) < 1:
        raise InputDataError("--batch-posts, --tasks and --window must be >= 1")
    sketch.run(
        path,
        nodes=parse_int_list(args.nodes, "--nodes"),
        batch_posts=args.batch_posts,
        tasks=args.tasks,
        window=args.window,
        out=Path(args.out),
    )
    return 0


def _run_normalise(args: NormaliseBench) -> int:
    from benchmarks import normalise
    from benchmarks.realdata import require_corpus

    path = require_corpus(args.corpus)
    if min(args.posts, args.batch_posts, args.runs) < 1:
        raise InputDataError("--posts, --batch-posts and --runs must be >= 1")
    normalise.run(
        path, posts=args.posts, batch_posts=args.batch_posts, runs=args.runs, out=Path(args.out)
    )
    return 0


def _run_drop(args: DropBench) -> int:
    from benchmarks.compare import compare_drop
    from benchmarks.realdata import corpus_or_real

    if args.corpus and not Path(args.corpus).is_file():
        raise InputDataError(f"corpus not found: {args.corpus}")
    if min(args.lines, args.repeats, args.runs) < 1:
        raise InputDataError("--lines, --repeats and --runs must be >= 1")
    if not 0 < args.fraction < 1:
        raise InputDataError(f"--fraction must lie in (0, 1), got {args.fraction}")
    corpus = corpus_or_real(args.corpus)
    if args.spark:
        from benchmarks import drop

        drop.run_spark(
            corpus,
            lines=args.lines,
            fraction=args.fraction,
            repeats=args.repeats,
            master=args.master,
            out=Path(args.out),
        )
        return 0
    if not args.compare:
        raise InputDataError("give --compare REV (one core, side by side) or --spark")
    compare_drop(
        args.compare,
        corpus=corpus,
        lines=args.lines,
        fraction=args.fraction,
        repeats=args.repeats,
        runs=args.runs,
        out=Path(args.out),
    )
    return 0


def _run_stream(args: StreamBench) -> int:
    from benchmarks import stream as bench_stream
    from benchmarks.realdata import corpus_or_real
    from core.subscriptions.workloads import parse_workloads

    workloads = parse_workloads(args.workloads)
    if args.overload is not None:
        from benchmarks import overload

        try:
            factors = [float(f) for f in args.overload.split(",") if f.strip()]
        except ValueError:
            raise InputDataError(
                f"--overload takes factors like 1.5,2, got {args.overload!r}"
            ) from None
        if len(workloads) != 1:
            raise InputDataError("--overload takes one workload (--workloads tweet)")
        overload.run(
            corpus_or_real(args.corpus),
            workload=workloads[0],
            nodes=args.nodes,
            subscriptions=args.subscriptions,
            factors=factors,
            modes=args.overload_modes,
            duration=args.duration,
            trigger=args.trigger_seconds,
            file_seconds=args.file_seconds,
            utility=args.shedding,
            seed=args.seed,
            out=Path(args.out),
            master=args.master,
            source=args.source,
        )
        return 0
    if args.compare:
        from benchmarks.compare import compare_stream

        _check_runs(args)
        compare_stream(
            args.compare,
            corpus=corpus_or_real(args.corpus),
            workloads=workloads,
            nodes=args.nodes,
            subscriptions=args.subscriptions,
            posts=per_workload(args.posts, workloads, "--posts"),
            file_posts=per_workload(args.file_posts, workloads, "--file-posts"),
            seed=args.seed,
            runs=args.runs,
            out=Path(args.out),
            matches_table=args.matches_table,
        )
        return 0
    bench_stream.run(
        corpus_or_real(args.corpus),
        workloads=workloads,
        nodes=args.nodes,
        subscriptions=args.subscriptions,
        posts=per_workload(args.posts, workloads, "--posts"),
        file_posts=per_workload(args.file_posts, workloads, "--file-posts"),
        seed=args.seed,
        out=Path(args.out),
        master=args.master,
        matches_table=args.matches_table,
    )
    return 0


def per_workload(value: str, workloads: Sequence[Workload], option: str) -> dict[Workload, int]:
    """``"200000"`` or ``"tweet=200000,topic=20000"`` -> a positive int per workload.

    Raises:
        InputDataError: naming the option, for a bad number or a missing workload.
    """
    chosen: dict[str, int]
    try:
        if "=" not in value:
            chosen = dict.fromkeys(workloads, int(value))
        else:
            pairs = (item.split("=", 1) for item in value.split(",") if item.strip())
            chosen = {k.strip(): int(v) for k, v in pairs}
    except ValueError:
        raise InputDataError(f"{option}: not a number or workload=number list: {value!r}") from None
    missing = [w for w in workloads if w not in chosen]
    if missing or any(chosen[w] < 1 for w in workloads):
        raise InputDataError(f"{option} needs a positive number for {workloads}, got {value!r}")
    return {w: chosen[w] for w in workloads}


def _run_subscriptions(args: SubscriptionsBench) -> int:
    from benchmarks import subscriptions
    from benchmarks.realdata import timed_corpus_path
    from s3tm.cli.demo import parse_int_list

    corpus = Path(args.corpus) if args.corpus else timed_corpus_path()
    if corpus is None or not corpus.is_file():
        raise InputDataError(
            "the real timed tweets are not there (../shared/data/tweets-ira-timed.jsonl.gz, "
            "or --corpus FILE): this benchmark streams real posts"
        )
    sizes = tuple(parse_int_list(args.sizes, "--sizes"))
    if args.nodes < 1 or args.batch_posts < 1 or args.changes < 2:
        raise InvalidArgumentError("--nodes and --batch-posts must be positive, --changes >= 2")
    subscriptions.run(
        subscriptions.SubscriptionsBenchConfig(
            sizes=sizes,
            nodes=args.nodes,
            batch_posts=args.batch_posts,
            changes=args.changes,
            corpus=corpus,
            master=args.master,
            out=Path(args.out),
            seed=args.seed,
            max_posts=args.max_posts,
            algorithm=args.algorithm,
            workload=as_workload(args.workload),
            stream=args.stream,
        )
    )
    return 0


def _run_chain(args: ChainBench) -> int:
    from benchmarks import chain

    if args.posts < 1 or args.subscriptions < 1 or args.nodes < 1:
        raise InvalidArgumentError("--posts, --subscriptions and --nodes must be positive")
    chain.run(
        chain.ChainConfig(
            posts=args.posts,
            subscriptions=args.subscriptions,
            nodes=args.nodes,
            algorithm=args.algorithm,
            master=args.master,
            workdir=Path(args.workdir),
            out=Path(args.out),
            seed=args.seed,
        )
    )
    return 0


def _run_learn_job(args: LearnJobBench) -> int:
    from benchmarks import learn_job as bench_learn_job
    from s3tm.cli.demo import parse_int_list

    sizes = parse_int_list(args.posts, "--posts")
    if args.compare:
        from benchmarks.compare import compare_learn_job

        _check_runs(args)
        if len(sizes) != 1:
            raise InvalidArgumentError("--compare runs one size: give --posts one number")
        compare_learn_job(
            args.compare,
            posts=sizes[0],
            nodes=args.nodes,
            seed=args.seed,
            runs=args.runs,
            out=Path(args.out),
        )
        return 0
    if len(sizes) == 1:
        bench_learn_job.run(sizes[0], args.nodes, args.seed)
    else:
        bench_learn_job.scale(sizes, args.nodes, args.seed, Path(args.out))
    return 0


def _run_learn(args: LearnBench) -> int:
    from benchmarks import learn_time
    from s3tm.cli.demo import parse_int_list

    sizes = parse_int_list(args.sizes, "--sizes")
    if args.compare:
        from benchmarks.compare import compare_learn
        from core.learn import ALGORITHMS

        _check_runs(args)
        algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
        unknown = sorted(set(algorithms).difference(ALGORITHMS))
        if not algorithms or unknown:
            raise InputDataError(
                f"--algorithms must list some of {', '.join(ALGORITHMS)}; got {args.algorithms!r}"
            )
        compare_learn(
            args.compare,
            sizes=sizes,
            nodes=args.nodes,
            algorithms=algorithms,
            seed=args.seed,
            runs=args.runs,
            out=Path(args.out),
        )
        return 0
    learn_time.run(sizes, args.nodes, args.repeats, Path(args.out), args.seed)
    return 0


def _run_quality(args: QualityBench) -> int:
    from benchmarks import quality
    from benchmarks.realdata import require_corpus
    from s3tm.cli.demo import parse_int_list

    path = require_corpus(args.corpus)
    quality.run(
        path,
        parse_int_list(args.nodes, "--nodes"),
        args.holdout_fraction,
        args.split_seed,
        args.topic_words,
        args.topic_pool,
        Path(args.out),
    )
    return 0
