"""``s3tm demo``: the README's first command, on generated data.

Part 1 (core, seconds): writes a seeded synthetic corpus, reads it back through the
normaliser, keeps 20% of the posts out, learns hash, SALB and SALB+split mappings for a few
N, and prints their metrics on the held-out posts side by side. Parts 2 and 3 (unless
``--no-airflow``): the platform end to end through Airflow, Spark and Delta, then the
streaming matcher (``devtools.local.airflow.demo``).
"""

from __future__ import annotations

import argparse
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from core.corpus import holdout_mask
from core.corpus.synthetic import SyntheticCorpusSpec
from core.formatting import format_table
from core.learn import algorithm_label, learn_mapping
from core.remap_options import HOLDOUT_FRACTION, HOLDOUT_SEED
from core.routing.evaluate import evaluate_table
from s3tm.cli.commands import load_corpus
from s3tm.cli.options import add_command
from s3tm.cli.text import parse_int_list
from s3tm.mapping_files import save_table
from spark_jobs.lake.corpus_files import write_demo_corpus

log = logging.getLogger(__name__)

DEMO_ALGORITHMS = (("hash", False), ("salb", False), ("salb", True), ("salb2", True))


@dataclass(frozen=True, kw_only=True)
class DemoOptions:
    """generate a corpus, learn hash/SALB/SALB+split/salb2, compare"""

    posts: int = 100_000
    """posts in the generated corpus"""
    nodes: str = "16,64,256"
    """comma-separated N values"""
    seed: int = 0
    """seed of the corpus, the hold-out and the learners"""
    out: str = "demo-output"
    """directory for corpus and mappings"""
    airflow: bool = True
    """the Airflow half: its DAGs remap the corpus (--no-airflow: only the quick core
    comparison, no Spark, no Airflow)"""
    airflow_nodes: int = 16
    """N for the Airflow remap run"""
    subscriptions: int = 2000
    """topic-based subscriptions registered before the remap run"""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    add_command(sub, "demo", DemoOptions, run_demo, prog="s3tm")


def run_demo(args: DemoOptions) -> int:
    nodes = parse_int_list(args.nodes, "--nodes")
    out = Path(args.out)
    corpus_path = out / "corpus.jsonl.gz"
    started = time.perf_counter()
    log.info("writing a %d-post synthetic corpus to %s ...", args.posts, corpus_path)
    write_demo_corpus(corpus_path, SyntheticCorpusSpec(n_posts=args.posts, seed=args.seed))
    loaded = load_corpus(str(corpus_path))
    mask = holdout_mask(loaded.corpus.n_posts, HOLDOUT_FRACTION, args.seed + HOLDOUT_SEED)
    training, held_out = loaded.corpus.select(~mask), loaded.corpus.select(mask)
    rows: list[list[object]] = []
    for n in nodes:
        for algorithm, split in DEMO_ALGORITHMS:
            label = algorithm_label(algorithm, split)
            log.info("N=%d: learning %s ...", n, label)
            learned = learn_mapping(training, n, algorithm, split=split, seed=args.seed)
            save_table(learned.table, out / "mappings" / f"{label}-N{n}")
            result = evaluate_table(learned.table, held_out, seed=args.seed)
            m = result.candidate
            rows.append(
                [
                    n,
                    label,
                    m.spread,
                    m.imbalance,
                    m.load_cv,
                    result.relative_throughput,
                    learned.table.n_split_words,
                    learned.learn_seconds,
                ]
            )
    print(
        f"\nS3-TM demo: {training.n_posts:,} training posts, {held_out.n_posts:,} held-out "
        f"posts, every word subscribed ({time.perf_counter() - started:.1f}s in all)"
    )
    print(
        format_table(
            [
                "N",
                "algorithm",
                "spread",
                "imbalance",
                "load CV",
                "rel. throughput",
                "hot words",
                "learn s",
            ],
            rows,
        )
    )
    print(
        f"\ncorpus: {corpus_path}\nmappings: {out / 'mappings'}/<algorithm>-N<N> "
        "(evaluate one with `s3tm evaluate --mapping DIR --corpus FILE`)"
    )
    if args.airflow:
        # Airflow, Spark and Delta only load here: part 1 stays fast without them.
        from devtools.local.airflow.demo import run as run_airflow_demo

        run_airflow_demo(
            out, corpus_path, nodes=args.airflow_nodes, subscriptions=args.subscriptions
        )
    return 0
