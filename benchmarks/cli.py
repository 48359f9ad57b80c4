"""``s3tm bench ...``: each benchmark's options declared once, as a dataclass (see
:mod:`s3tm.cli.options`)."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Sequence
from pathlib import Path

from benchmarks.options import (
    ChainBench,
    ChangesBench,
    DeltaEnginesBench,
    DropBench,
    LearnBench,
    LearnJobBench,
    MatcherBench,
    NormaliseBench,
    QualityBench,
    SizingBench,
    SketchBench,
    StreamBench,
    SubscriptionsBench,
)
from core.errors import InputDataError, InvalidArgumentError
from core.subscriptions.workloads import Workload, as_workload
from s3tm.cli.options import CompareOptions, add_command
from spark_jobs.options import config_from

PROG = "s3tm bench"


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
    compare_changes(args)
    return 0


def _run_matcher(args: MatcherBench) -> int:
    from benchmarks import matcher
    from benchmarks.realdata import corpus_or_real

    path = corpus_or_real(args.corpus)
    if args.compare:
        from benchmarks.compare import compare_matcher

        _check_runs(args)
        compare_matcher(args, path)
        return 0
    matcher.run(path, args.synthetic_subscriptions, args.repeats, Path(args.out))
    return 0


def _run_sketch(args: SketchBench) -> int:
    from benchmarks import sketch
    from benchmarks.realdata import require_corpus
    from s3tm.cli.text import parse_int_list

    path = require_corpus(args.corpus)
    if min(args.batch_posts, args.tasks, args.window) < 1:
        raise InputDataError("--batch-posts, --tasks and --window must be >= 1")
    sketch.run(args, path, parse_int_list(args.nodes, "--nodes"))
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

        drop.run_spark(args, corpus)
        return 0
    if not args.compare:
        raise InputDataError("give --compare REV (one core, side by side) or --spark")
    compare_drop(args, corpus)
    return 0


def _run_stream(args: StreamBench) -> int:
    from benchmarks import stream as bench_stream
    from benchmarks.realdata import corpus_or_real
    from core.subscriptions.workloads import parse_workloads

    workloads = parse_workloads(args.workloads)
    inputs = bench_stream.StreamInputs(
        corpus_or_real(args.corpus),
        workloads,
        per_workload(args.posts, workloads, "--posts"),
        per_workload(args.file_posts, workloads, "--file-posts"),
    )
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
        overload.run(args, inputs, factors)
    elif args.compare:
        from benchmarks.compare import compare_stream

        _check_runs(args)
        compare_stream(args, inputs)
    else:
        bench_stream.run(args, inputs)
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
    from s3tm.cli.text import parse_int_list

    corpus = Path(args.corpus) if args.corpus else timed_corpus_path()
    if corpus is None or not corpus.is_file():
        raise InputDataError(
            "the real timed tweets are not there (../shared/data/tweets-ira-timed.jsonl.gz, "
            "or --corpus FILE): this benchmark streams real posts"
        )
    sizes = tuple(parse_int_list(args.sizes, "--sizes"))
    if args.nodes < 1 or args.batch_posts < 1 or args.changes < 2:
        raise InvalidArgumentError("--nodes and --batch-posts must be positive, --changes >= 2")
    config = config_from(
        subscriptions.SubscriptionsBenchConfig, args, sizes=sizes, corpus=corpus,
        out=Path(args.out), workload=as_workload(args.workload),
    )  # fmt: skip
    subscriptions.run(config)
    return 0


def _run_chain(args: ChainBench) -> int:
    from benchmarks import chain

    if args.posts < 1 or args.subscriptions < 1 or args.nodes < 1:
        raise InvalidArgumentError("--posts, --subscriptions and --nodes must be positive")
    chain.run(config_from(chain.ChainConfig, args, workdir=Path(args.workdir), out=Path(args.out)))
    return 0


def _run_learn_job(args: LearnJobBench) -> int:
    from benchmarks import learn_job as bench_learn_job
    from s3tm.cli.text import parse_int_list

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
    from s3tm.cli.text import parse_int_list

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
    from s3tm.cli.text import parse_int_list

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
