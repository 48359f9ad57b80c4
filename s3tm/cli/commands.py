"""``s3tm demo-corpus``, ``s3tm learn`` and ``s3tm evaluate``."""

from __future__ import annotations

import argparse
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
import tyro

from core.corpus import Corpus, holdout_mask
from core.corpus.synthetic import SyntheticCorpusSpec, burst_word
from core.errors import InputDataError, InvalidArgumentError
from core.formatting import format_table
from core.learn import algorithm_label, learn_mapping
from core.remap_options import DEFAULT_ALGORITHM, DEFAULT_SPLIT, Algorithm
from core.routing.evaluate import Evaluation, evaluate_table
from core.routing.metrics import routing_metrics
from core.routing.router import route_corpus
from core.routing.table import LearnerManifest, RoutingTable
from s3tm.cli.options import HoldoutOptions, add_command
from s3tm.mapping_files import load_table, save_table
from spark_jobs.lake.corpus_files import read_corpus, read_word_list, write_demo_corpus

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadedCorpus:
    """A corpus file read and normalised, with the fingerprint of all its posts."""

    path: str
    corpus: Corpus
    fingerprint: str


def load_corpus(path: str, *, text_column: str = "text", fmt: str = "auto") -> LoadedCorpus:
    """Read a corpus file with progress output; bad lines are reported, not fatal."""
    started = time.perf_counter()
    log.info("reading %s ...", path)
    corpus, report = read_corpus(path, text_column=text_column, fmt=fmt)  # type: ignore[arg-type]
    log.info("%s (%.1fs)", report.summary(), time.perf_counter() - started)
    return LoadedCorpus(path, corpus, corpus.fingerprint())


@dataclass(frozen=True, kw_only=True)
class CorpusFileOptions:
    corpus: str
    """JSON lines (.jsonl[.gz]) or CSV file"""
    text_column: str = "text"
    """field holding the text"""
    format: Literal["auto", "jsonl", "csv"] = "auto"
    """corpus file format (auto: by the file name)"""


@dataclass(frozen=True, kw_only=True)
class DemoCorpusOptions:
    """write a seeded synthetic corpus (JSON lines)"""

    out: str
    """output file (.jsonl or .jsonl.gz), or a directory with --posts-per-file"""
    posts: int = 100_000
    """posts to generate"""
    words: int = 100_000
    """vocabulary size"""
    days: int = 7
    """posts span this many days (created_at, drift)"""
    topic_drift: float = 0.25
    """per-day std. dev. of each topic's log-popularity (0: no drift)"""
    burst_day: Annotated[tuple[int, ...], tyro.conf.UseAppendAction] = ()
    """a new word bursts on this day (0-based; repeatable)"""
    burst_share: float = 0.15
    """share of the burst day's posts"""
    seed: int = 0
    """seed: the same arguments give the same file"""
    posts_per_file: int | None = None
    """write --out as a directory of gzipped files of this many posts each (a landing
    directory the ingest reads in parallel; default: one file)"""


@dataclass(frozen=True, kw_only=True)
class LearnOptions(CorpusFileOptions, HoldoutOptions):
    """learn a word -> matcher mapping from a corpus"""

    nodes: int
    """number of matchers N"""
    out: str
    """output directory of the routing table"""
    algorithm: Algorithm = DEFAULT_ALGORITHM
    """the learner (salb2: the platform's default)"""
    split: bool = DEFAULT_SPLIT
    """split hot words (paper Sect. 5.1), as the platform's learn job does; salb2 needs it,
    --no-split learns a mapping as its paper prints it"""
    subscribed_words: str | None = None
    """file of subscriptions/words, one per line; learn on their words only (default: every
    word is subscribed)"""
    seed: int = 0
    """seed of hot-word version dealing"""


@dataclass(frozen=True, kw_only=True)
class EvaluateOptions(CorpusFileOptions):
    """spread, loads, imbalance, throughput vs hash"""

    mapping: str
    """directory written by `s3tm learn`"""
    posts: Literal["auto", "holdout", "all"] = "auto"
    """auto: the held-out posts when CORPUS is the training corpus, else all posts"""
    seed: int = 0
    """seed of split-word version choice"""
    per_matcher: bool = False
    """print every matcher's load"""
    json: bool = False
    """print JSON instead of a table"""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the core commands to the ``s3tm`` parser."""
    add_command(sub, "demo-corpus", DemoCorpusOptions, run_demo_corpus, prog="s3tm")
    add_command(sub, "learn", LearnOptions, run_learn, prog="s3tm")
    add_command(sub, "evaluate", EvaluateOptions, run_evaluate, prog="s3tm")


def run_demo_corpus(args: DemoCorpusOptions) -> int:
    spec = SyntheticCorpusSpec(
        n_posts=args.posts,
        n_words=args.words,
        seed=args.seed,
        days=args.days,
        topic_drift=args.topic_drift if args.days > 1 else 0.0,
        burst_days=tuple(sorted(set(args.burst_day))),
        burst_share=args.burst_share,
    )
    started = time.perf_counter()

    def progress(file: Path, posts: int) -> None:
        print(
            f"  {posts:,} / {spec.n_posts:,} posts written ({file.name}, "
            f"{time.perf_counter() - started:.0f}s)",
            flush=True,
        )

    corpus = write_demo_corpus(
        args.out,
        spec,
        posts_per_file=args.posts_per_file,
        progress=progress if args.posts_per_file else None,
    )
    print(
        f"wrote {corpus.n_posts:,} posts ({corpus.n_words:,} distinct words, "
        f"{corpus.n_edges / corpus.n_posts:.2f} words/post) over {spec.days} days to "
        f"{args.out} in {time.perf_counter() - started:.1f}s"
    )
    for burst, day in enumerate(spec.burst_days):
        print(
            f"burst: '{burst_word(spec, burst)}' from day {day} ({spec.burst_share:.0%} of posts)"
        )
    return 0


def _holdout_split(corpus: Corpus, fraction: float, seed: int) -> tuple[Corpus, np.ndarray | None]:
    if fraction == 0:
        return corpus, None
    mask = holdout_mask(corpus.n_posts, fraction, seed)
    return corpus.select(~mask), mask


def run_learn(args: LearnOptions) -> int:
    if args.nodes < 1:
        raise InvalidArgumentError(f"--nodes must be >= 1, got {args.nodes}")
    if not 0.0 <= args.holdout_fraction < 1.0:
        raise InvalidArgumentError("--holdout-fraction must be in [0, 1)")
    subscribed = read_word_list(args.subscribed_words) if args.subscribed_words else None
    loaded = load_corpus(args.corpus, text_column=args.text_column, fmt=args.format)
    training, _ = _holdout_split(loaded.corpus, args.holdout_fraction, args.split_seed)
    split = args.split
    log.info(
        "learning %s with N=%d on %d posts ...",
        algorithm_label(args.algorithm, split),
        args.nodes,
        training.n_posts,
    )
    learned = learn_mapping(
        training,
        args.nodes,
        args.algorithm,
        split=split,
        subscribed_words=subscribed,
        seed=args.seed,
    )
    training_metrics = routing_metrics(route_corpus(learned.table, training, seed=args.seed))
    manifest: LearnerManifest = {
        **learned.table.manifest,
        "source": {
            "path": str(Path(args.corpus).resolve()),
            "fingerprint": loaded.fingerprint,
            "posts": loaded.corpus.n_posts,
            "holdout_fraction": args.holdout_fraction,
            "split_seed": args.split_seed,
            "text_column": args.text_column,
        },
        "training_metrics": training_metrics.as_dict(with_loads=False),
    }
    table = RoutingTable(
        learned.table.n_matchers,
        learned.table.words,
        learned.table.part_indptr,
        learned.table.part_matchers,
        learned.table.subscribed_words,
        manifest,
    )
    out = save_table(table, args.out)
    print(
        f"{manifest['label']} N={args.nodes}: mapped {manifest['mapped_tokens']:,} tokens "
        f"({manifest['hot_words']} hot words split) from {training.n_posts:,} training posts "
        f"in {learned.learn_seconds:.2f}s -> {out}"
    )
    print(
        f"training posts: spread {training_metrics.spread:.3f}, imbalance "
        f"{training_metrics.imbalance:.3f}, load CV {training_metrics.load_cv:.3f}"
    )
    return 0


def select_evaluation_posts(
    table: RoutingTable, loaded: LoadedCorpus, mode: str
) -> tuple[Corpus, str]:
    """The posts to evaluate on and a description; refuses the training posts."""
    source = table.manifest.get("source")
    same_corpus = source is not None and source["fingerprint"] == loaded.fingerprint
    fraction = float(source["holdout_fraction"]) if source is not None else 0.0
    if mode == "all":
        if same_corpus:
            log.warning("evaluating on all posts of the training corpus, training posts included")
        return loaded.corpus, f"all {loaded.corpus.n_posts:,} posts"
    if mode == "auto" and not same_corpus:
        return loaded.corpus, f"all {loaded.corpus.n_posts:,} posts (not the training corpus)"
    if fraction == 0.0:
        raise InputDataError(
            "this mapping was learned on every post of this corpus: there is no hold-out to "
            "evaluate on (learn with --holdout-fraction > 0, or evaluate another corpus)"
        )
    if not same_corpus:
        log.warning("corpus differs from the training corpus; applying its hold-out split anyway")
    assert source is not None  # a fraction above 0 comes from the manifest's source
    mask = holdout_mask(loaded.corpus.n_posts, fraction, int(source["split_seed"]))
    held_out = loaded.corpus.select(mask)
    return held_out, (
        f"{held_out.n_posts:,} held-out posts ({fraction:.0%}, split seed {source['split_seed']})"
    )


def render_evaluation(
    table: RoutingTable, result: Evaluation, posts: str, per_matcher: bool
) -> str:
    label = table.manifest.get("label", table.manifest.get("algorithm", "mapping"))
    rows: list[list[object]] = []
    for name, attr in [
        ("spread (mean |K| over posts)", "spread"),
        ("spread over routed posts", "spread_routed"),
        ("routed fraction", "routed_fraction"),
        ("imbalance (max/mean load)", "imbalance"),
        ("load coefficient of variation", "load_cv"),
        ("throughput |P|/max load", "throughput"),
    ]:
        rows.append([name, getattr(result.candidate, attr), getattr(result.hash_baseline, attr)])
    for name, fn in [("min load", min), ("max load", max)]:
        rows.append([name, fn(result.candidate.loads), fn(result.hash_baseline.loads)])
    rows.append(["relative throughput vs hash", result.relative_throughput, 1.0])
    lines = [
        f"{label}, N={table.n_matchers}, on {posts}",
        format_table(["metric", label, "hash"], rows),
    ]
    if per_matcher:
        lines.append(
            format_table(
                ["matcher", f"load ({label})", "load (hash)"],
                [
                    [i, a, b]
                    for i, (a, b) in enumerate(
                        zip(result.candidate.loads, result.hash_baseline.loads, strict=True)
                    )
                ],
            )
        )
    return "\n".join(lines)


def run_evaluate(args: EvaluateOptions) -> int:
    table = load_table(args.mapping)
    loaded = load_corpus(args.corpus, text_column=args.text_column, fmt=args.format)
    posts, description = select_evaluation_posts(table, loaded, args.posts)
    result = evaluate_table(table, posts, seed=args.seed)
    if args.json:
        print(
            json.dumps(
                {"mapping": str(args.mapping), "posts": description, **result.as_dict()}, indent=2
            )
        )
    else:
        print(render_evaluation(table, result, description, args.per_matcher))
    return 0
