"""``s3tm experiment scalability|subscriptions|corpus-size|learning-time``.

Protocol (all): read and normalise the corpus; seeded 80/20 train/held-out split; learn on
training posts restricted to the subscriptions' words; place subscriptions with LASP
(cost model fitted per workload, Fig. 3); report model metrics on the held-out posts and
the measured replay throughput (one real trie per matcher, slowest matcher bounds
throughput). Relative throughputs are against hash routing (+LASP) at the same N, on the
same posts and subscriptions.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmarks.experiments.report import plot_panels, print_rows, write_csv
from benchmarks.experiments.runner import VARIANTS, Workloads, run_configuration, subscribed_words
from benchmarks.machine import machine_summary
from core.corpus import Corpus, holdout_mask
from core.learn import learn_mapping
from core.placement.cost import CostFit
from core.remap_options import HOLDOUT_FRACTION
from core.subscriptions.workloads import Workload
from s3tm.cli.commands import load_corpus

log = logging.getLogger(__name__)

COLUMNS = [
    "workload",
    "subscriptions",
    "N",
    "algorithm",
    "spread",
    "imbalance",
    "model_rel_throughput",
    "replay_posts_per_s",
    "replay_rel_throughput",
    "replay_work_rel_throughput",
    "learn_s",
]
PANELS = [
    "model_rel_throughput",
    "replay_rel_throughput",
    "replay_work_rel_throughput",
    "spread",
    "imbalance",
]


def prepare(corpus_path: Path, seed: int, lda_iterations: int) -> Workloads:
    print(f"machine: {machine_summary()}", flush=True)
    loaded = load_corpus(str(corpus_path))
    mask = holdout_mask(loaded.corpus.n_posts, HOLDOUT_FRACTION, seed)
    training, held_out = loaded.corpus.select(~mask), loaded.corpus.select(mask)
    print(
        f"corpus {corpus_path.name}: {training.n_posts:,} training / {held_out.n_posts:,} "
        f"held-out posts (seed {seed})",
        flush=True,
    )
    return Workloads(training, held_out, seed, lda_iterations)


def _against_hash(
    training: Corpus,
    work: Workloads,
    subs: Corpus,
    cost: CostFit,
    n_matchers: int,
    variants: Sequence[str],
    repeats: int,
) -> list[dict[str, Any]]:
    """Run hash first (the baseline of every relative figure), then the other variants."""
    base = run_configuration(
        training,
        work.held_out,
        subs,
        cost,
        n_matchers,
        "hash",
        hash_replay=None,
        seed=work.seed,
        repeats=repeats,
    )
    reference = (base["replay_posts_per_s"], base["replay_ops_per_post_max"])
    return [
        base
        if variant == "hash"
        else run_configuration(
            training,
            work.held_out,
            subs,
            cost,
            n_matchers,
            variant,
            hash_replay=reference,
            seed=work.seed,
            repeats=repeats,
        )
        for variant in variants
    ]


def _sweep(
    work: Workloads,
    kind: Workload,
    n_subs: int,
    nodes: Sequence[int],
    variants: Sequence[str],
    repeats: int,
) -> list[dict[str, Any]]:
    subs = work.get(kind, n_subs)
    cost = work.cost(kind, n_subs)
    print(
        f"{kind}-based: {subs.n_posts:,} subscriptions; f(x) = {cost.model.slope:.4f} x + "
        f"{cost.model.intercept:.3f} (R^2 {cost.r_squared:.3f})",
        flush=True,
    )
    rows = []
    for n in nodes:
        for row in _against_hash(work.training, work, subs, cost, n, variants, repeats):
            rows.append({"workload": kind, **row})
            print(
                f"  {kind:<5} N={n:<4} {row['algorithm']:<10} "
                f"model x{row['model_rel_throughput']:.2f}"
                f"  replay x{row['replay_rel_throughput']:.2f}"
                f"  work x{row['replay_work_rel_throughput']:.2f}  spread {row['spread']:.2f}"
                f"  imbalance {row['imbalance']:.2f}",
                flush=True,
            )
    return rows


def _finish(
    rows: list[dict[str, Any]], out: Path, name: str, x: str, title: str, log_y: Sequence[str] = ()
) -> None:
    print_rows(rows, [c for c in COLUMNS if c in rows[0]])
    write_csv(rows, out / f"{name}.csv")
    plot_panels(
        rows,
        x=x,
        panels=PANELS,
        group_by="algorithm",
        split_by="workload",
        path=out / f"{name}.png",
        title=title,
        log_y=log_y,
    )
    print(f"wrote {out / (name + '.csv')} and {out / (name + '.png')}")


def scalability(
    work: Workloads,
    nodes: Sequence[int],
    variants: Sequence[str],
    n_subs: int,
    repeats: int,
    out: Path,
) -> list[dict[str, Any]]:
    """Fig. 5: metrics vs N for both workloads."""
    rows: list[dict[str, Any]] = []
    for kind in ("tweet", "topic"):
        rows += _sweep(work, kind, n_subs, nodes, variants, repeats)
    _finish(rows, out, "scalability", "N", f"Scalability (Fig. 5), {n_subs:,} subscriptions")
    return rows


def subscriptions(
    work: Workloads,
    counts: Sequence[int],
    n_matchers: int,
    variants: Sequence[str],
    repeats: int,
    out: Path,
) -> list[dict[str, Any]]:
    """Fig. 7a-h: metrics vs number of subscriptions at fixed N."""
    rows: list[dict[str, Any]] = []
    for kind in ("tweet", "topic"):
        for count in counts:
            rows += _sweep(work, kind, count, [n_matchers], variants, repeats)
    _finish(rows, out, "subscriptions", "subscriptions", f"Subscriptions (Fig. 7), N={n_matchers}")
    return rows


def _training_samples(work: Workloads, sizes: Sequence[int]) -> Iterator[Corpus]:
    """Seeded samples of the training posts, one per size (sizes above the corpus skipped)."""
    full = work.training
    for size in sizes:
        if size > full.n_posts:
            print(f"  {size:,} training posts exceed the corpus; skipped")
            continue
        yield (
            full
            if size >= full.n_posts
            else full.select(holdout_mask(full.n_posts, size / full.n_posts, work.seed))
        )


def corpus_size(
    work: Workloads,
    sizes: Sequence[int],
    n_matchers: int,
    variants: Sequence[str],
    n_subs: int,
    repeats: int,
    out: Path,
) -> list[dict[str, Any]]:
    """Fig. 6: held-out metrics vs learning-corpus size (topic-based subscriptions)."""
    subs = work.get("topic", n_subs)
    cost = work.cost("topic", n_subs)
    rows: list[dict[str, Any]] = []
    for sample in _training_samples(work, sizes):
        for row in _against_hash(sample, work, subs, cost, n_matchers, variants, repeats):
            rows.append({"workload": "topic", "training_posts": sample.n_posts, **row})
            print(
                f"  {sample.n_posts:>7,} posts {row['algorithm']:<10} model x"
                f"{row['model_rel_throughput']:.2f} replay x{row['replay_rel_throughput']:.2f}",
                flush=True,
            )
    print_rows(rows, ["training_posts", *[c for c in COLUMNS if c != "workload"]])
    write_csv(rows, out / "corpus_size.csv")
    plot_panels(
        rows,
        x="training_posts",
        panels=PANELS,
        group_by="algorithm",
        split_by="workload",
        path=out / "corpus_size.png",
        title=f"Learning-corpus size (Fig. 6), N={n_matchers}",
    )
    print(f"wrote {out / 'corpus_size.csv'} and {out / 'corpus_size.png'}")
    return rows


def learning_time(
    work: Workloads,
    sizes: Sequence[int],
    n_matchers: int,
    variants: Sequence[str],
    n_subs: int,
    out: Path,
) -> list[dict[str, Any]]:
    """Fig. 9: learning time vs learning-corpus size, SALB vs the METIS-based baselines."""
    words = subscribed_words(work.get("tweet", min(n_subs, work.training.n_posts)))
    rows: list[dict[str, Any]] = []
    for sample in _training_samples(work, sizes):
        for variant in variants:
            algorithm, split = VARIANTS[variant]
            started = time.perf_counter()
            learned = learn_mapping(
                sample, n_matchers, algorithm, split=split, subscribed_words=words, seed=work.seed
            )
            rows.append(
                {
                    "workload": "tweet",
                    "training_posts": sample.n_posts,
                    "N": n_matchers,
                    "algorithm": variant,
                    "learn_s": learned.learn_seconds,
                    "wall_s": time.perf_counter() - started,
                    "mapped_words": int(learned.table.words.shape[0]),
                }
            )
            print(
                f"  {sample.n_posts:>7,} posts {variant:<10} {learned.learn_seconds:.2f}s",
                flush=True,
            )
    print_rows(rows, ["training_posts", "N", "algorithm", "mapped_words", "learn_s"])
    write_csv(rows, out / "learning_time.csv")
    plot_panels(
        rows,
        x="training_posts",
        panels=["learn_s"],
        group_by="algorithm",
        split_by="workload",
        path=out / "learning_time.png",
        title=f"Learning time (Fig. 9), N={n_matchers}",
        log_y=["learn_s"],
    )
    print(f"wrote {out / 'learning_time.csv'} and {out / 'learning_time.png'}")
    return rows
