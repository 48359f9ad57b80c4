"""``s3tm experiment ...``: each experiment's options declared once, as a dataclass (see
:mod:`s3tm.cli.options`)."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from benchmarks.experiments.options import (
    CorpusSize,
    Drift,
    LearningTime,
    PaperExperiment,
    RemapCost,
    Scalability,
    Shedding,
    SheddingControl,
    SubscriptionCounts,
    WindowOptions,
)
from benchmarks.experiments.runner import VARIANTS
from core.errors import InputDataError, InvalidArgumentError
from s3tm.cli.options import add_command

PROG = "s3tm experiment"
PaperName = Literal["scalability", "subscriptions", "corpus-size", "learning-time"]


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
    from benchmarks.realdata import require_corpus  # the settings: when a command runs

    return require_corpus(corpus)


def _run_remap_cost(args: RemapCost) -> int:
    from benchmarks.experiments.remap_cost import remap_cost

    remap_cost(args, _timed_corpus(args), progress=_progress(args))
    return 0


def _run_drift(args: Drift) -> int:
    from benchmarks.experiments.drift import drift

    drift(args, _timed_corpus(args), progress=_progress(args))
    return 0


def _run_shedding_control(args: SheddingControl) -> int:
    from benchmarks.experiments import paper, shedding
    from s3tm.cli.text import parse_int_list

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
    from s3tm.cli.text import parse_int_list

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
    from s3tm.cli.text import parse_int_list

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
