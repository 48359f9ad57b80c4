"""``s3tm bench sizing``: memory of the matcher state per 100k subscriptions, for the
deployment sizing note (docs/DEPLOY.md).

A streaming matcher task's Python worker caches the indexes of the matchers it serves; in
the worst case (few cores, many matchers) one worker holds all N of them, i.e. every placed
subscription once. Measured here for both indexes (the access-predicate matcher, the
stream's default, and the trie): the indexes' array bytes (capacity included), the growth
of this process' resident set while the N indexes are built, and the build time (the
warm-up a version switch costs per worker). Subscriptions are tweet-based, drawn from the
real corpus when present and from the synthetic one, each placed on one matcher.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.experiments.report import write_csv
from benchmarks.machine import machine_summary, rss_mib
from benchmarks.matcher_probe import build_index
from core.corpus import Corpus
from core.corpus.arrays import take_rows
from core.corpus.synthetic import SyntheticCorpusSpec, generate_corpus
from core.formatting import format_table
from core.placement.cost import encode_subscriptions, subscription_dictionary
from core.subscriptions.workloads import tweet_subscriptions

INDEX_KINDS = ("predicate", "trie")  # the stream's default first

HEADER = [
    "scenario",
    "index",
    "subscriptions",
    "matchers",
    "index MiB",
    "RSS growth MiB",
    "index MiB per 100k",
    "RSS MiB per 100k",
    "build s",
]


@dataclass(frozen=True)
class SizingRun:
    scenario: str
    index: str
    subscriptions: int
    matchers: int
    index_mib: float
    rss_mib: float
    build_s: float

    def row(self) -> list[object]:
        per = 100_000 / self.subscriptions
        return [self.scenario, self.index, self.subscriptions, self.matchers, self.index_mib,
                self.rss_mib, self.index_mib * per, self.rss_mib * per, self.build_s]  # fmt: skip


def measure(name: str, subs: Corpus, matchers: int, kind: str = "predicate") -> SizingRun:
    """Build one index per matcher holding its share of ``subs`` (sub i on matcher i mod N)."""
    dictionary = subscription_dictionary(subs, subs)
    rows = np.arange(subs.n_posts, dtype=np.int64)
    indptr, words = encode_subscriptions(subs, dictionary, rows)
    shares = []
    for matcher in range(matchers):
        own = rows[matcher::matchers]
        own_indptr, own_words = take_rows(indptr, words, own)
        shares.append((own, own_indptr, own_words.astype(words.dtype)))
    build_index(kind, rows[:1], indptr[:2], words[: indptr[1]])  # compile first
    gc.collect()
    before = rss_mib()
    started = time.perf_counter()
    indexes = [build_index(kind, *share) for share in shares]
    build = time.perf_counter() - started
    grown = rss_mib() - before
    assert sum(t.n_subscriptions for t in indexes) == subs.n_posts
    held = sum(t.nbytes for t in indexes) / 2**20
    del indexes
    gc.collect()
    return SizingRun(name, kind, subs.n_posts, matchers, held, grown, build)


def run(real_corpus: Path | None, sizes: list[int], matchers: int, out: Path) -> None:
    print(f"machine: {machine_summary()}")
    results: list[SizingRun] = []
    if real_corpus is not None:
        from spark_jobs.lake.corpus_files import read_corpus

        corpus, _ = read_corpus(real_corpus)
        n = min(100_000, corpus.n_posts)
        subs = tweet_subscriptions(corpus, n, 7)
        for kind in INDEX_KINDS:
            results.append(measure(f"real tweets ({real_corpus.name})", subs, matchers, kind))
            print(format_table(HEADER, [results[-1].row()]), flush=True)
    else:
        print("real corpus absent: real-data scenario skipped")
    largest = max(sizes)
    corpus = generate_corpus(SyntheticCorpusSpec(n_posts=largest, seed=3))
    for size in sorted(sizes):
        subs = tweet_subscriptions(corpus, size, 3)
        for kind in INDEX_KINDS:
            results.append(measure("synthetic", subs, matchers, kind))
            print(format_table(HEADER, [results[-1].row()]), flush=True)
    print("\n" + format_table(HEADER, [r.row() for r in results]))
    path = out / "sizing.csv"
    write_csv([dict(zip(HEADER, r.row(), strict=True)) for r in results], path)
    print(f"wrote {path}")
