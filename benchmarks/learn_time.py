"""``s3tm bench learn``: learning time vs corpus size (paper 001, Fig. 9) for hash and SALB.

Corpora are synthetic (``SyntheticCorpusSpec``: ~8 words/post, ~100k words). Each learn
runs on a fresh ``Corpus`` object, so the word->posts transpose (and splitting) is inside
the timing; corpus generation is not. The process is pinned to one core. Peak memory is
measured in a fresh child process per variant (see ``learn_memory``).
"""

from __future__ import annotations

import csv
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.learn_memory import measure_in_child, save_synthetic
from benchmarks.machine import machine_summary, pin_to_one_core
from core.corpus import Corpus
from core.corpus.synthetic import SyntheticCorpusSpec, generate_corpus
from core.formatting import format_table
from core.learn import algorithm_label, build_problem, learn_mapping, learn_salb

VARIANTS = (("hash", False), ("salb", False), ("salb", True), ("salb2", True))


@dataclass(frozen=True)
class LearnTiming:
    posts: int
    words: int
    edges: int
    label: str
    n_matchers: int
    seconds: list[float]
    kernel_seconds: float | None
    peak_mib: float

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def _fresh(corpus: Corpus) -> Corpus:
    # Same arrays, empty caches: the transpose is recomputed inside the timed learn.
    return Corpus(corpus.vocabulary, corpus.indptr, corpus.indices, corpus.post_ids)


def time_learning(
    corpus: Corpus,
    n_matchers: int,
    algorithm: str,
    split: bool,
    repeats: int,
    corpus_file: Path,
) -> LearnTiming:
    seconds: list[float] = []
    for _ in range(repeats):
        fresh = _fresh(corpus)
        started = time.perf_counter()
        learn_mapping(fresh, n_matchers, algorithm, split=split)
        seconds.append(time.perf_counter() - started)
    peak = measure_in_child(corpus_file, n_matchers, algorithm, split)
    kernel = None
    if algorithm == "salb":
        problem = build_problem(corpus, n_matchers, split=split)
        started = time.perf_counter()
        learn_salb(problem, n_matchers)
        kernel = time.perf_counter() - started
    return LearnTiming(
        corpus.n_posts,
        corpus.n_words,
        corpus.n_edges,
        algorithm_label(algorithm, split),
        n_matchers,
        seconds,
        kernel,
        peak,
    )


def run(sizes: list[int], n_matchers: int, repeats: int, out: Path, seed: int) -> list[LearnTiming]:
    machine = machine_summary()
    core = pin_to_one_core()
    print(f"machine: {machine}; this process pinned to core {core}")
    warm = generate_corpus(SyntheticCorpusSpec(n_posts=2_000, n_words=2_000, seed=seed))
    for algorithm, split in VARIANTS:  # JIT compile (or load the cache) outside the timings
        learn_mapping(warm, n_matchers, algorithm, split=split)
    results: list[LearnTiming] = []
    scratch = Path(tempfile.mkdtemp(prefix="s3tm-bench-"))
    for size in sizes:
        corpus, corpus_file = save_synthetic(size, seed, scratch)
        print(
            f"corpus: {corpus.n_posts:,} posts, {corpus.n_words:,} words, "
            f"{corpus.n_edges / corpus.n_posts:.2f} words/post",
            flush=True,
        )
        for algorithm, split in VARIANTS:
            timing = time_learning(corpus, n_matchers, algorithm, split, repeats, corpus_file)
            results.append(timing)
            print(
                f"  {timing.label:<11} median {timing.median:.3f}s of {repeats} "
                f"{[round(s, 3) for s in timing.seconds]}, peak +{timing.peak_mib:.0f} MiB",
                flush=True,
            )
        corpus_file.unlink()
    scratch.rmdir()
    rows = [
        [r.posts, r.words, r.label, r.median, r.kernel_seconds or float("nan"), r.peak_mib]
        for r in results
    ]
    print(f"\nlearning time, N={n_matchers}, median of {repeats} runs, one core")
    print(
        format_table(
            [
                "posts",
                "words",
                "algorithm",
                "learn s (median)",
                "SALB kernel s",
                "peak MiB (own process)",
            ],
            rows,
        )
    )
    _write(results, out, n_matchers, repeats)
    return results


def _write(results: list[LearnTiming], out: Path, n_matchers: int, repeats: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with (out / "learn_time.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            [
                "posts",
                "words",
                "edges",
                "algorithm",
                "n_matchers",
                "median_s",
                "runs_s",
                "salb_kernel_s",
                "peak_rss_mib",
            ]
        )
        for r in results:
            writer.writerow(
                [
                    r.posts,
                    r.words,
                    r.edges,
                    r.label,
                    r.n_matchers,
                    f"{r.median:.4f}",
                    " ".join(f"{s:.4f}" for s in r.seconds),
                    "" if r.kernel_seconds is None else f"{r.kernel_seconds:.4f}",
                    f"{r.peak_mib:.1f}",
                ]
            )
    from benchmarks.experiments.report import pyplot

    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6, 4))
    for label in dict.fromkeys(r.label for r in results):
        points = [(r.posts, r.median) for r in results if r.label == label]
        ax.plot(*zip(*points, strict=True), marker="o", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("training posts")
    ax.set_ylabel(f"learning time (s), median of {repeats}")
    ax.set_title(f"Learning time vs corpus size (N={n_matchers}, one core)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "learn_time.png", dpi=120)
    plt.close(fig)
    print(f"wrote {out / 'learn_time.csv'} and {out / 'learn_time.png'}")
