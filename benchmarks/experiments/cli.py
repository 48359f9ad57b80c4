"""``s3tm experiment ...``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from benchmarks.experiments.runner import VARIANTS
from core.errors import InputDataError, InvalidArgumentError
from core.subscriptions.workloads import WORKLOADS, Workload


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    exp = sub.add_parser(
        "experiment", help="the paper's experiments: table, CSV and PNG (checkout)"
    )
    kinds = exp.add_subparsers(dest="experiment", required=True, metavar="EXPERIMENT")
    specs = {
        "scalability": ("Fig. 5: metrics vs N", "2,4,8,16,32,64,128,256"),
        "subscriptions": ("Fig. 7: metrics vs number of subscriptions (N fixed)", "16"),
        "corpus-size": ("Fig. 6: metrics vs learning-corpus size", "64"),
        "learning-time": ("Fig. 9: learning time, SALB vs METIS baselines", "64"),
    }
    for name, (text, nodes) in specs.items():
        p = kinds.add_parser(name, help=text)
        p.add_argument("--corpus", help="corpus file (default: ../shared/data tweets)")
        p.add_argument("--nodes", default=nodes, help="comma-separated N values")
        p.add_argument(
            "--algorithms",
            default=",".join(VARIANTS),
            help=f"comma-separated, from {','.join(VARIANTS)}",
        )
        p.add_argument(
            "--subscriptions",
            type=int,
            default=100_000,
            help="subscriptions per workload (tweet-based past the training posts: every post "
            "repeated evenly, see core/subscriptions/workloads.py)",
        )
        p.add_argument(
            "--counts",
            default="100,1000,10000,100000",
            help="subscription counts (subscriptions experiment)",
        )
        p.add_argument(
            "--sizes",
            default="10000,25000,50000,112000",
            help="learning-corpus sizes (corpus-size, learning-time)",
        )
        p.add_argument("--repeats", type=int, default=3, help="replay timing: best of")
        _add_run_arguments(p)
        p.set_defaults(handler=_run, experiment_name=name)
    _register_shedding(kinds)
    _register_drift(kinds)
    _register_remap_cost(kinds)


def _add_run_arguments(p: argparse.ArgumentParser) -> None:
    """What every experiment takes: LDA iterations, the seed and the output folder."""
    p.add_argument(
        "--lda-iterations",
        type=int,
        default=5,
        help="LDA iterations of the topic-based subscriptions",
    )
    p.add_argument(
        "--seed", type=int, default=7, help="seed of the sampling, subscriptions and learners"
    )
    p.add_argument("--out", default="docs/experiments", help="directory for the CSV and the PNG")


def _register_remap_cost(kinds: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = kinds.add_parser(
        "remap-cost", help="full vs incremental remaps on consecutive windows: gain vs moves"
    )
    _add_window_arguments(p, workload="tweet", subscriptions_help="from window 0's posts")
    p.add_argument(
        "--max-moved", type=float, default=0.1, help="incremental: most subscriptions moved"
    )
    p.add_argument(
        "--penalty",
        type=float,
        default=None,
        help="incremental: score lost per subscription a move re-places (default: the "
        "learner's, 1 post per subscription; 0: moves are free within the budget)",
    )
    p.add_argument(
        "--full-remap-gain",
        type=float,
        default=None,
        help="the policy chain (the remap DAG's rule): learn from scratch when that beats "
        "the incremental remap's throughput by more than this (default 0.1) on the held-out "
        "posts of the window",
    )
    p.add_argument(
        "--judge",
        choices=["recent", "random"],
        default="recent",
        help="which 20%% of a window's posts are held out to judge the policy's choice: its "
        "latest (default) or a random sample",
    )
    p.set_defaults(handler=_run_remap_cost, experiment_name="remap-cost")


def _add_window_arguments(
    p: argparse.ArgumentParser, *, workload: Workload, subscriptions_help: str
) -> None:
    """The arguments of the experiments over time windows of a timestamped corpus."""
    p.add_argument("--corpus", help="timestamped corpus (default: ../shared/data tweets-ira-timed)")
    p.add_argument("--nodes", type=int, default=16, help="N")
    p.add_argument("--window-days", type=float, default=7.0, help="window length (a week)")
    p.add_argument("--min-posts", type=int, default=2000, help="skip sparser windows")
    p.add_argument("--windows", type=int, default=12, help="at most this many windows")
    p.add_argument("--start", help="first window's start (ISO date; default: the first post's)")
    p.add_argument(
        "--workload",
        choices=WORKLOADS,
        default=workload,
        help="tweet-based or topic-based subscriptions",
    )
    p.add_argument("--subscriptions", type=int, default=10_000, help=subscriptions_help)
    p.add_argument("--json", action="store_true", help="one JSON object per line per row")
    _add_run_arguments(p)


def _timed_corpus(args: argparse.Namespace) -> Path:
    from benchmarks.realdata import timed_corpus_path

    path = Path(args.corpus) if args.corpus else timed_corpus_path()
    if path is None:
        raise InputDataError(
            "timestamped corpus not found: pass --corpus FILE (e.g. `s3tm demo-corpus --days "
            "28 --burst-day 14`) or set S3TM_SHARED_DATA"
        )
    return path


def _progress(args: argparse.Namespace) -> Callable[[str], None]:
    import sys

    def progress(message: str) -> None:  # --json: stdout carries only the JSON lines
        print(message, file=sys.stderr if args.json else sys.stdout, flush=True)

    return progress


def _run_remap_cost(args: argparse.Namespace) -> int:
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


def _register_drift(kinds: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = kinds.add_parser(
        "drift", help="Fig. 7i-l: a mapping learned on window 0, evaluated on later windows"
    )
    _add_window_arguments(p, workload="topic", subscriptions_help="new ones per window")
    p.add_argument(
        "--algorithms",
        default="hash,gFCL,salb,salb+split",
        help="comma-separated learners to compare",
    )
    p.set_defaults(handler=_run_drift, experiment_name="drift")


def _run_drift(args: argparse.Namespace) -> int:
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


def _register_shedding(kinds: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = kinds.add_parser(
        "shedding", help="Fig. 8a: accuracy vs load shed, per utility and spread cap"
    )
    p.add_argument("--corpus", help="corpus file (default: ../shared/data tweets)")
    p.add_argument("--nodes", default="16,64", help="comma-separated N values")
    p.add_argument("--subscriptions", type=int, default=100_000, help="subscriptions registered")
    p.add_argument("--workloads", default="tweet,topic", help="tweet,topic")
    p.add_argument(
        "--caps",
        default="8,7.5,7,6.5,6,5.5,5,4.5,4,3.5,3,2.5,2,1.5,1",
        help="spread caps m (fractional: the last matcher with that probability)",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per line per row")
    _add_run_arguments(p)
    p.set_defaults(handler=_run_shedding, experiment_name="shedding")
    c = kinds.add_parser(
        "shedding-control", help="Fig. 8b: the shedding level under input steps (simulated)"
    )
    c.add_argument("--corpus", help="corpus file (default: ../shared/data tweets)")
    c.add_argument("--nodes", default="16", help="N")
    c.add_argument("--subscriptions", type=int, default=100_000, help="subscriptions registered")
    c.add_argument("--buffer-seconds", type=float, default=2.0, help="b, in seconds of capacity")
    c.add_argument("--duration", type=float, default=2000.0, help="simulated seconds")
    _add_run_arguments(c)
    c.set_defaults(handler=_run_shedding, experiment_name="shedding-control")


def _run_shedding(args: argparse.Namespace) -> int:
    import contextlib
    import sys

    from benchmarks.experiments import paper, shedding
    from benchmarks.realdata import real_corpus_path
    from s3tm.cli.demo import parse_int_list

    path = Path(args.corpus) if args.corpus else real_corpus_path()
    if path is None:
        raise InputDataError("corpus not found: pass --corpus FILE or set S3TM_SHARED_DATA")
    nodes = parse_int_list(args.nodes, "--nodes")
    out = Path(args.out)
    if args.experiment_name == "shedding-control":
        work = paper.prepare(path, args.seed, args.lda_iterations)
        shedding.shedding_control(
            work,
            nodes[0],
            args.subscriptions,
            out,
            buffer_seconds=args.buffer_seconds,
            duration=args.duration,
        )
        return 0
    from core.subscriptions.workloads import parse_workloads

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
    shedding.shedding(work, kinds, nodes, args.subscriptions, caps, out, as_json=args.json)
    return 0


def _run(args: argparse.Namespace) -> int:
    from benchmarks.experiments import paper
    from benchmarks.realdata import real_corpus_path
    from s3tm.cli.demo import parse_int_list

    path = Path(args.corpus) if args.corpus else real_corpus_path()
    if path is None:
        raise InputDataError("corpus not found: pass --corpus FILE or set S3TM_SHARED_DATA")
    variants = [v for v in args.algorithms.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise InvalidArgumentError(f"unknown algorithms {unknown}; choose from {list(VARIANTS)}")
    if "hash" not in variants and args.experiment_name != "learning-time":
        variants = ["hash", *variants]
    nodes = parse_int_list(args.nodes, "--nodes")
    out = Path(args.out)
    work = paper.prepare(path, args.seed, args.lda_iterations)
    name = args.experiment_name
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
