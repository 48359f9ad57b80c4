"""``s3tm bench quality``: spread, imbalance and relative throughput of hash, SALB and
SALB+split on a real corpus, for several N and two subscription scenarios.

Protocol: read and normalise the corpus; a seeded 80/20 train/held-out split; learn on the
training posts; evaluate on the held-out posts; relative throughput is T / T(hash) on the
same held-out posts with the same subscribed words. Scenarios: every word subscribed, and a
topic-like subscribed vocabulary (``--topic-words`` words drawn, seeded, from the
``--topic-pool`` most frequent training words).
"""

from __future__ import annotations

import csv
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks.machine import machine_summary
from core.corpus import Corpus, holdout_mask
from core.errors import InvalidArgumentError
from core.formatting import format_table
from core.learn import algorithm_label, learn_mapping
from core.routing.evaluate import evaluate_table
from s3tm.cli.commands import load_corpus

VARIANTS = (("hash", False), ("hash", True), ("salb", False), ("salb", True))
HEADER = [
    "subscriptions",
    "N",
    "algorithm",
    "spread",
    "spread routed",
    "routed %",
    "imbalance",
    "load CV",
    "rel. throughput",
    "hot words",
    "learn s",
]


def topic_like_vocabulary(training: Corpus, n_words: int, pool: int, seed: int) -> list[str]:
    """``n_words`` words drawn without replacement from the ``pool`` most frequent ones."""
    if n_words > pool:
        raise InvalidArgumentError(
            f"--topic-words ({n_words}) must not exceed --topic-pool ({pool})"
        )
    ranked = np.argsort(-training.word_frequencies, kind="stable")[:pool]
    chosen = np.random.default_rng(seed).choice(
        ranked, size=min(n_words, ranked.size), replace=False
    )
    return sorted(str(training.vocabulary[i]) for i in chosen)


def run(
    corpus_path: Path,
    nodes: Sequence[int],
    holdout: float,
    split_seed: int,
    topic_words: int,
    topic_pool: int,
    out: Path,
) -> list[list[object]]:
    print(f"machine: {machine_summary()}")
    loaded = load_corpus(str(corpus_path))
    mask = holdout_mask(loaded.corpus.n_posts, holdout, split_seed)
    training, held_out = loaded.corpus.select(~mask), loaded.corpus.select(mask)
    print(
        f"corpus {corpus_path.name}: {loaded.corpus.n_posts:,} posts, "
        f"{loaded.corpus.n_words:,} words, {loaded.corpus.n_edges / loaded.corpus.n_posts:.2f}"
        f" words/post; {training.n_posts:,} training, {held_out.n_posts:,} held out "
        f"(split seed {split_seed})",
        flush=True,
    )
    scenarios: list[tuple[str, list[str] | None]] = [
        ("all words", None),
        (
            f"topic-like {topic_words}/{topic_pool}",
            topic_like_vocabulary(training, topic_words, topic_pool, split_seed),
        ),
    ]
    rows: list[list[object]] = []
    for scenario, subscribed in scenarios:
        for n in nodes:
            for algorithm, split in VARIANTS:
                started = time.perf_counter()
                learned = learn_mapping(
                    training, n, algorithm, split=split, subscribed_words=subscribed
                )
                result = evaluate_table(learned.table, held_out)
                m = result.candidate
                row: list[object] = [
                    scenario,
                    n,
                    algorithm_label(algorithm, split),
                    m.spread,
                    m.spread_routed,
                    100 * m.routed_fraction,
                    m.imbalance,
                    m.load_cv,
                    result.relative_throughput,
                    learned.table.n_split_words,
                    learned.learn_seconds,
                ]
                rows.append(row)
                print(
                    f"  {scenario:<22} N={n:<4} {row[2]:<11} spread {m.spread:.3f} "
                    f"imbalance {m.imbalance:.3f} rel {result.relative_throughput:.3f} "
                    f"({time.perf_counter() - started:.1f}s)",
                    flush=True,
                )
    print("\nheld-out evaluation; rel. throughput = T / T(hash), T = |P| / max matcher load")
    print(format_table(HEADER, rows))
    _write(rows, out)
    return rows


def _write(rows: list[list[object]], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with (out / "quality.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(HEADER)
        for row in rows:
            writer.writerow([f"{v:.4f}" if isinstance(v, float) else v for v in row])
    from benchmarks.experiments.report import pyplot

    plt = pyplot()

    scenarios = list(dict.fromkeys(str(r[0]) for r in rows))
    fig, axes = plt.subplots(1, len(scenarios), figsize=(5 * len(scenarios), 4), squeeze=False)
    for ax, scenario in zip(axes[0], scenarios, strict=True):
        for label in dict.fromkeys(str(r[2]) for r in rows):
            points = [
                (r[1], r[HEADER.index("rel. throughput")])
                for r in rows
                if r[0] == scenario and r[2] == label
            ]
            ax.plot(*zip(*points, strict=True), marker="o", label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("matchers N")
        ax.set_ylabel("relative throughput vs hash")
        ax.set_title(scenario)
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(out / "quality.png", dpi=120)
    plt.close(fig)
    print(f"wrote {out / 'quality.csv'} and {out / 'quality.png'}")
