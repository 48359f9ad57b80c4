"""``s3tm bench learn|quality``."""

from __future__ import annotations

import argparse
from pathlib import Path

from core.errors import InputDataError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    bench = sub.add_parser("bench", help="benchmarks: print measured figures, write CSV/PNG")
    kinds = bench.add_subparsers(dest="bench", required=True, metavar="BENCHMARK")

    p = kinds.add_parser("learn", help="learning time vs corpus size (paper Fig. 9)")
    p.add_argument(
        "--sizes",
        default="125000,250000,500000,1000000",
        help="comma-separated numbers of synthetic posts",
    )
    p.add_argument("--nodes", type=int, default=256)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="docs/bench", help="directory for CSV and PNG")
    p.set_defaults(handler=_run_learn)

    p = kinds.add_parser("matcher", help="trie vs counting matcher kernel, posts/s per core")
    p.add_argument("--corpus", help="real corpus (default: ../shared/data tweets if present)")
    p.add_argument("--synthetic-subscriptions", type=int, default=1_000_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default="docs/bench", help="directory for the CSV")
    p.set_defaults(handler=_run_matcher)

    p = kinds.add_parser("learn-job", help="[spark] learn job time and driver memory")
    p.add_argument("--posts", type=int, default=1_000_000)
    p.add_argument("--nodes", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(handler=_run_learn_job)

    p = kinds.add_parser("stream", help="[spark] streaming matcher posts/s end to end")
    p.add_argument("--corpus", help="real corpus (default: ../shared/data tweets if present)")
    p.add_argument("--workloads", default="tweet,topic", help="tweet and/or topic")
    p.add_argument("--nodes", type=int, default=16)
    p.add_argument("--subscriptions", type=int, default=100_000)
    p.add_argument("--posts", type=int, default=1_000_000, help="posts streamed per workload")
    p.add_argument("--file-posts", type=int, default=100_000, help="posts per file = per batch")
    p.add_argument("--master", help="Spark master (default local[*])")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="docs/bench", help="directory for the CSV")
    p.set_defaults(handler=_run_stream)

    p = kinds.add_parser("quality", help="hash vs SALB vs SALB+split on the real corpus")
    p.add_argument("--corpus", help="corpus file (default: ../shared/data/tweets-tweeteval)")
    p.add_argument("--nodes", default="4,16,64,256")
    p.add_argument("--holdout-fraction", type=float, default=0.2)
    p.add_argument("--split-seed", type=int, default=7)
    p.add_argument("--topic-words", type=int, default=500)
    p.add_argument("--topic-pool", type=int, default=3000)
    p.add_argument("--out", default="docs/bench", help="directory for CSV and PNG")
    p.set_defaults(handler=_run_quality)


def _run_matcher(args: argparse.Namespace) -> int:
    from core.bench import matcher
    from core.bench.realdata import real_corpus_path

    path = Path(args.corpus) if args.corpus else real_corpus_path()
    matcher.run(path, args.synthetic_subscriptions, args.repeats, Path(args.out))
    return 0


def _run_stream(args: argparse.Namespace) -> int:
    from core.bench.realdata import real_corpus_path
    from spark_jobs import bench_stream

    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    bad = sorted(set(workloads) - {"tweet", "topic"})
    if bad or not workloads:
        raise InputDataError(f"--workloads takes tweet and/or topic, got {args.workloads!r}")
    bench_stream.run(
        Path(args.corpus) if args.corpus else real_corpus_path(),
        workloads=workloads,
        nodes=args.nodes,
        subscriptions=args.subscriptions,
        posts=args.posts,
        file_posts=args.file_posts,
        seed=args.seed,
        out=Path(args.out),
        master=args.master,
    )
    return 0


def _run_learn_job(args: argparse.Namespace) -> int:
    from spark_jobs import bench_learn_job

    bench_learn_job.run(args.posts, args.nodes, args.seed)
    return 0


def _run_learn(args: argparse.Namespace) -> int:
    from core.bench import learn_time
    from core.cli.demo import parse_int_list

    learn_time.run(
        parse_int_list(args.sizes, "--sizes"), args.nodes, args.repeats, Path(args.out), args.seed
    )
    return 0


def _run_quality(args: argparse.Namespace) -> int:
    from core.bench import quality
    from core.bench.realdata import real_corpus_path
    from core.cli.demo import parse_int_list

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
