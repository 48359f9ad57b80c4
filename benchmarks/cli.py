"""``s3tm bench learn|quality``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from core.errors import InputDataError, InvalidArgumentError
from core.subscriptions.workloads import Workload, as_workload
from s3tm.cli.commands import add_holdout_options

BENCH_OUT = "docs/bench"


def _add_out(p: argparse.ArgumentParser) -> None:
    """``--out``, declared once for every benchmark: where its CSV (and PNG) go."""
    p.add_argument("--out", default=BENCH_OUT, help="directory for the CSV (and PNG, if any)")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    bench = sub.add_parser(
        "bench", help="benchmarks: print measured figures, write CSV/PNG (checkout)"
    )
    kinds = bench.add_subparsers(dest="bench", required=True, metavar="BENCHMARK")

    p = kinds.add_parser("learn", help="learning time vs corpus size (paper Fig. 9)")
    p.add_argument(
        "--sizes",
        default="125000,250000,500000,1000000",
        help="comma-separated numbers of synthetic posts",
    )
    p.add_argument("--nodes", type=int, default=256, help="number of matchers N")
    p.add_argument(
        "--repeats", type=int, default=3, help="timed runs of each point (the median is reported)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the corpus and subscriptions")
    _add_out(p)
    p.add_argument(
        "--algorithms",
        default="salb,salb2",
        help="with --compare: the learners timed on each side (default salb,salb2)",
    )
    _compare_arguments(p)
    p.set_defaults(handler=_run_learn)

    p = kinds.add_parser(
        "matcher", help="access-predicate vs trie vs counting matcher kernels, posts/s per core"
    )
    p.add_argument("--corpus", help="real corpus (default: ../shared/data tweets if present)")
    p.add_argument(
        "--synthetic-subscriptions",
        type=int,
        default=1_000_000,
        help="subscriptions of the synthetic scenario",
    )
    p.add_argument(
        "--repeats", type=int, default=3, help="timed runs of each point (the median is reported)"
    )
    _add_out(p)
    _compare_arguments(p)
    p.set_defaults(handler=_run_matcher)

    p = kinds.add_parser(
        "changes", help="a round of subscription changes' cost to the stream's tasks (--compare)"
    )
    p.add_argument("--compare", required=True, metavar="REV", help="the revision to compare with")
    p.add_argument("--subscriptions", type=int, default=600_000, help="one matcher's subscriptions")
    p.add_argument("--posts", type=int, default=50_000, help="texts a route task encodes")
    p.add_argument("--runs", type=int, default=3, help="alternating runs (median reported)")
    _add_out(p)
    p.set_defaults(handler=_run_changes)

    p = kinds.add_parser("sizing", help="matcher memory per 100k subscriptions (DEPLOY.md)")
    p.add_argument("--corpus", help="real corpus (default: ../shared/data tweets if present)")
    p.add_argument("--subscriptions", default="100000,1000000", help="synthetic sizes")
    p.add_argument("--nodes", type=int, default=16, help="matchers (N)")
    _add_out(p)
    p.set_defaults(handler=_run_sizing)

    p = kinds.add_parser("sketch", help="the stream's hot-word sketch vs exact counts")
    p.add_argument("--corpus", help="real corpus (default: ../shared/data tweets if present)")
    p.add_argument("--nodes", default="16,64,256", help="N values (threshold 1/(2N))")
    p.add_argument("--batch-posts", type=int, default=10_000, help="posts per batch")
    p.add_argument("--tasks", type=int, default=4, help="route tasks per batch")
    p.add_argument("--window", type=int, default=5, help="batches in the sliding window")
    _add_out(p)
    p.set_defaults(handler=_run_sketch)

    p = kinds.add_parser("normalise", help="the fast normaliser vs normalize() per text")
    p.add_argument("--corpus", help="real corpus (default: ../shared/data tweets if present)")
    p.add_argument("--posts", type=int, default=140_000, help="texts read from the corpus")
    p.add_argument("--batch-posts", type=int, default=20_000, help="posts per batch")
    p.add_argument("--runs", type=int, default=3, help="alternating runs (median reported)")
    _add_out(p)
    p.set_defaults(handler=_run_normalise)

    p = kinds.add_parser("drop", help="a drop level's cost per raw line, against --compare REV")
    p.add_argument("--corpus", help="real corpus (default: ../shared/data tweets if present)")
    p.add_argument("--lines", type=int, default=1_000_000, help="raw lines dropped from")
    p.add_argument("--fraction", type=float, default=0.75, help="share of the lines dropped")
    p.add_argument("--repeats", type=int, default=5, help="timed calls per run (best kept)")
    p.add_argument("--compare", metavar="REV", help="the git revision to beat (one core)")
    p.add_argument("--runs", type=int, default=3, help="alternating runs per side")
    p.add_argument(
        "--spark",
        action="store_true",
        help="instead: wall time per line in the stream's shape on --master (the JVM reading "
        "the lines, handing them to Python, dropping them there)",
    )
    p.add_argument("--master", default="local[*]", help="Spark master with --spark")
    _add_out(p)
    p.set_defaults(handler=_run_drop)

    p = kinds.add_parser("learn-job", help="[spark] learn job time and driver memory")
    p.add_argument(
        "--posts",
        default="1000000",
        help="posts learned on; several (1000000,3000000,10000000): one run each, a table "
        "and docs/bench/learn_job_scale.csv",
    )
    p.add_argument("--nodes", type=int, default=64, help="number of matchers N")
    p.add_argument("--seed", type=int, default=0, help="seed of the corpus and subscriptions")
    _add_out(p)
    _compare_arguments(p)
    p.set_defaults(handler=_run_learn_job)

    p = kinds.add_parser(
        "chain", help="[spark] the whole remap chain on N posts: time and memory per step"
    )
    p.add_argument("--posts", type=int, default=1_000_000, help="posts in the corpus")
    p.add_argument("--subscriptions", type=int, default=100_000, help="subscriptions drawn")
    p.add_argument("--nodes", type=int, default=16, help="number of matchers N")
    p.add_argument("--algorithm", default="salb2", help="the learner (the DAG's default)")
    p.add_argument("--master", default="local[2]", help="Spark master")
    p.add_argument("--seed", type=int, default=0, help="seed of the corpus and subscriptions")
    p.add_argument(
        "--workdir",
        default="/tmp/s3tm-chain",
        help="corpus (kept, reused per size) and scratch lakehouse",
    )
    _add_out(p)
    p.set_defaults(handler=_run_chain)

    p = kinds.add_parser(
        "delta-engines", help="[spark] the remap chain with delta-spark vs the delta-rs bridge"
    )
    p.add_argument("--posts", type=int, default=200_000, help="demo posts the chain ingests")
    p.add_argument("--runs", type=int, default=2, help="alternating runs per engine")
    p.add_argument("--nodes", type=int, default=16, help="number of matchers N")
    _add_out(p)
    p.set_defaults(handler=_run_delta_engines)

    p = kinds.add_parser("stream", help="[spark] streaming matcher posts/s end to end")
    p.add_argument("--corpus", help="real corpus (default: ../shared/data tweets if present)")
    p.add_argument("--workloads", default="tweet,topic", help="tweet and/or topic")
    p.add_argument("--nodes", type=int, default=16, help="number of matchers N")
    p.add_argument("--subscriptions", type=int, default=100_000, help="subscriptions registered")
    p.add_argument(
        "--posts",
        default="tweet=1400000,topic=240000",
        help="posts streamed: one number, or per workload (topic-based subscriptions match "
        "~213 times per post in docs/bench/stream.csv, so their batches are output-bound)",
    )
    p.add_argument(
        "--file-posts",
        default="tweet=200000,topic=20000",
        help="posts per landed file = per micro-batch: one number, or per workload",
    )
    p.add_argument("--master", help="Spark master (default local[*])")
    p.add_argument("--seed", type=int, default=0, help="seed of the corpus and subscriptions")
    p.add_argument(
        "--matches-table",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the stream also writes `matches` rows (--no-matches-table: deliveries only, "
        "which hold every match; with --compare only the new side, the baseline writes both)",
    )
    _add_out(p)
    _compare_arguments(p)
    over = p.add_argument_group("overload (--overload F[,F...])")
    over.add_argument(
        "--overload",
        metavar="F[,F...]",
        help="feed the stream at F x its measured capacity, one run per factor and drop "
        "rule (for example 1.25,1.5,2,3)",
    )
    over.add_argument(
        "--overload-modes",
        default="value,random",
        help="runs per factor: value (drop the posts of least estimated matches), random "
        "(drop at random: the baseline), off (no shedding)",
    )
    over.add_argument("--duration", type=float, default=60.0, help="seconds fed per run")
    over.add_argument("--trigger-seconds", type=float, default=5.0, help="the trigger interval")
    over.add_argument("--file-seconds", type=float, default=1.0, help="a file lands this often")
    over.add_argument("--shedding", default="yield", help="the utility of the shedding run")
    over.add_argument(
        "--source",
        choices=("files", "kafka"),
        default="files",
        help="posts arrive as landed files, or on a Kafka topic (a broker from the resolved "
        "jars; the backlog is the consumer lag)",
    )
    p.set_defaults(handler=_run_stream)

    p = kinds.add_parser(
        "subscriptions",
        help="[spark] the platform at 100k/1M/10M subscriptions: register, learn, place, "
        "validate, evaluate, publish, stream (real tweets)",
    )
    p.add_argument(
        "--sizes",
        default="100000,1000000,10000000",
        help="comma-separated subscription counts (tweet-based, drawn from the posts)",
    )
    p.add_argument("--nodes", type=int, default=16, help="number of matchers N")
    p.add_argument(
        "--batch-posts", type=int, default=50_000, help="posts a stream batch reads (one file)"
    )
    p.add_argument(
        "--changes",
        type=int,
        default=10_000,
        help="subscription changes committed between two stream batches, three times (half new, "
        "half cancelled)",
    )
    p.add_argument(
        "--corpus", help="real tweets with times (default: ../shared/data's timed tweets)"
    )
    p.add_argument("--max-posts", type=int, help="read at most this many posts of the corpus")
    p.add_argument(
        "--algorithm", default="salb2", help="the learner (default salb2, the platform's)"
    )
    p.add_argument(
        "--workload",
        default="tweet",
        help="tweet (training posts' word sets) or topic (LDA topics' word sets)",
    )
    p.add_argument(
        "--stream",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="stream held-out posts through the published version (--no-stream: the remap's "
        "steps only; topic-based subscriptions at 10M match ~20k times per post)",
    )
    p.add_argument("--master", help="Spark master (default local[*])")
    p.add_argument("--seed", type=int, default=0, help="seed of the subscriptions")
    _add_out(p)
    p.set_defaults(handler=_run_subscriptions)

    p = kinds.add_parser("quality", help="hash vs SALB vs SALB+split on the real corpus")
    p.add_argument("--corpus", help="corpus file (default: ../shared/data/tweets-tweeteval)")
    p.add_argument("--nodes", default="4,16,64,256", help="number of matchers N")
    add_holdout_options(p)
    p.add_argument(
        "--topic-words",
        type=int,
        default=500,
        help="words per LDA topic of the topic-based subscriptions",
    )
    p.add_argument(
        "--topic-pool",
        type=int,
        default=3000,
        help="most frequent words the topic model draws from",
    )
    _add_out(p)
    p.set_defaults(handler=_run_quality)


def _compare_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--compare",
        metavar="REV",
        help="also run it at git revision REV (a worktree), alternating runs, and print the ratio",
    )
    p.add_argument("--runs", type=int, default=3, help="runs per side with --compare (default 3)")


def _check_runs(args: argparse.Namespace) -> None:
    if args.runs < 1:
        raise InputDataError("--runs must be at least 1")


def _run_delta_engines(args: argparse.Namespace) -> int:
    from benchmarks.delta_engines import bench_delta_engines

    bench_delta_engines(args.posts, args.runs, args.nodes, Path(args.out))
    return 0


def _run_sizing(args: argparse.Namespace) -> int:
    from benchmarks import sizing
    from benchmarks.realdata import real_corpus_path

    path = Path(args.corpus) if args.corpus else real_corpus_path()
    sizes = [int(s) for s in args.subscriptions.split(",") if s.strip()]
    sizing.run(path, sizes, args.nodes, Path(args.out))
    return 0


def _run_changes(args: argparse.Namespace) -> int:
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


def _run_matcher(args: argparse.Namespace) -> int:
    from benchmarks import matcher
    from benchmarks.realdata import real_corpus_path

    path = Path(args.corpus) if args.corpus else real_corpus_path()
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


def _run_sketch(args: argparse.Namespace) -> int:
    from benchmarks import sketch
    from benchmarks.realdata import real_corpus_path
    from s3tm.cli.demo import parse_int_list

    path = Path(args.corpus) if args.corpus else real_corpus_path()
    if path is None:
        raise InputDataError("corpus not found: pass --corpus FILE or set S3TM_SHARED_DATA")
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


def _run_normalise(args: argparse.Namespace) -> int:
    from benchmarks import normalise
    from benchmarks.realdata import real_corpus_path

    path = Path(args.corpus) if args.corpus else real_corpus_path()
    if path is None:
        raise InputDataError("corpus not found: pass --corpus FILE or set S3TM_SHARED_DATA")
    if not path.is_file():
        raise InputDataError(f"corpus not found: {path}")
    if min(args.posts, args.batch_posts, args.runs) < 1:
        raise InputDataError("--posts, --batch-posts and --runs must be >= 1")
    normalise.run(
        path, posts=args.posts, batch_posts=args.batch_posts, runs=args.runs, out=Path(args.out)
    )
    return 0


def _run_drop(args: argparse.Namespace) -> int:
    from benchmarks.compare import compare_drop
    from benchmarks.realdata import real_corpus_path

    if args.corpus and not Path(args.corpus).is_file():
        raise InputDataError(f"corpus not found: {args.corpus}")
    if min(args.lines, args.repeats, args.runs) < 1:
        raise InputDataError("--lines, --repeats and --runs must be >= 1")
    if not 0 < args.fraction < 1:
        raise InputDataError(f"--fraction must lie in (0, 1), got {args.fraction}")
    corpus = Path(args.corpus) if args.corpus else real_corpus_path()
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


def _run_stream(args: argparse.Namespace) -> int:
    from benchmarks import stream as bench_stream
    from benchmarks.realdata import real_corpus_path
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
            Path(args.corpus) if args.corpus else real_corpus_path(),
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
            corpus=Path(args.corpus) if args.corpus else real_corpus_path(),
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
        Path(args.corpus) if args.corpus else real_corpus_path(),
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


def _run_subscriptions(args: argparse.Namespace) -> int:
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


def _run_chain(args: argparse.Namespace) -> int:
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


def _run_learn_job(args: argparse.Namespace) -> int:
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


def _run_learn(args: argparse.Namespace) -> int:
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


def _run_quality(args: argparse.Namespace) -> int:
    from benchmarks import quality
    from benchmarks.realdata import real_corpus_path
    from s3tm.cli.demo import parse_int_list

    path = Path(args.corpus) if args.corpus else real_corpus_path()
    if path is None:
        raise InputDataError(
            "real corpus not found: pass --corpus FILE or set "
            "S3TM_SHARED_DATA to the folder holding tweets-tweeteval.jsonl.gz"
        )
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
