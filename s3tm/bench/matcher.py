"""``s3tm bench matcher``: the trie matcher's kernel throughput against the counting
baseline on the same posts and tweet-based subscriptions, one core.

Scenarios: the real corpus (100k subscriptions drawn from its training posts, matching its
held-out posts) when present, and a synthetic corpus big enough for 1M subscriptions
(1M posts registered as subscriptions, 200k other posts matched). Timings cover the match
call only (posts already normalised to word ids, as in the streaming job), best of
``repeats``; the counting matcher runs on the first 20,000 posts only (it is ~50x slower)
and must return exactly the trie's matches there.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.corpus import Corpus, holdout_mask
from core.corpus.synthetic import SyntheticCorpusSpec, generate_corpus
from core.formatting import format_table
from core.matching.counting import CountingMatcher
from core.matching.matches import Matches
from core.matching.trie import TrieMatcher
from core.placement.cost import encode_subscriptions, subscription_dictionary
from core.subscriptions.workloads import tweet_subscriptions
from s3tm.bench.machine import machine_summary, pin_to_one_core
from s3tm.experiments.report import write_csv

COUNTING_POSTS = 20_000


@dataclass(frozen=True)
class MatcherRun:
    scenario: str
    subscriptions: int
    posts: int
    build_s: float
    trie_posts_per_s: float
    counting_posts_per_s: float
    trie_ops_per_post: float
    counting_ops_per_post: float
    matches_per_post: float


def _best(fn: Callable[[], Matches], repeats: int) -> tuple[float, Matches]:
    best = np.inf
    result = fn()
    for _ in range(repeats):
        started = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - started)
    return float(best), result


def run_scenario(name: str, subs: Corpus, posts: Corpus, repeats: int) -> MatcherRun:
    dictionary = subscription_dictionary(subs, posts)
    rows = np.arange(subs.n_posts, dtype=np.int64)
    indptr, words = encode_subscriptions(subs, dictionary, rows)
    word_map = dictionary.map_vocabulary(posts.vocabulary.tolist())
    started = time.perf_counter()
    trie = TrieMatcher(capacity=int(indptr[-1]) + 1)
    trie.insert_many(rows, indptr, words)
    build = time.perf_counter() - started
    counting = CountingMatcher(rows, indptr, words)
    trie.match(posts.indptr[:2], posts.indices[: posts.indptr[1]], word_map)  # warm-up (JIT)
    t_trie, trie_matches = _best(lambda: trie.match(posts.indptr, posts.indices, word_map), repeats)
    t_count, count_matches = _best(
        lambda: counting.match(posts.indptr, posts.indices, word_map), repeats
    )
    same = all(
        a == b
        for a, b in zip(
            trie_matches.as_sets(),
            count_matches.as_sets(),
            strict=True,
        )
    )
    if not same:
        raise AssertionError("trie and counting matchers disagree")
    n = posts.n_posts
    return MatcherRun(
        name,
        subs.n_posts,
        n,
        build,
        n / t_trie,
        n / t_count,
        trie_matches.operations / n,
        count_matches.operations / n,
        trie_matches.n_matches / n,
    )


def run(real_corpus: Path | None, synthetic_subs: int, repeats: int, out: Path) -> None:
    machine = machine_summary()
    core = pin_to_one_core()
    print(f"machine: {machine}; this process pinned to core {core}")
    results: list[MatcherRun] = []
    if real_corpus is not None:
        from core.corpus.io import read_corpus

        corpus, _ = read_corpus(real_corpus)
        mask = holdout_mask(corpus.n_posts, 0.2, 7)
        training, held_out = corpus.select(~mask), corpus.select(mask)
        subs = tweet_subscriptions(training, min(100_000, training.n_posts), seed=7)
        results.append(run_scenario(f"real tweets ({real_corpus.name})", subs, held_out, repeats))
        print(results[-1], flush=True)
    else:
        print("real corpus absent: real-data scenario skipped")
    corpus = generate_corpus(SyntheticCorpusSpec(n_posts=synthetic_subs + 200_000, seed=3))
    posts = corpus.select(np.arange(synthetic_subs, corpus.n_posts))
    for n_subs in sorted({min(100_000, synthetic_subs), synthetic_subs}):
        subs = tweet_subscriptions(corpus.select(np.arange(synthetic_subs)), n_subs, seed=3)
        results.append(run_scenario("synthetic", subs, posts, repeats))
        print(results[-1], flush=True)
    rows = [
        [
            r.scenario,
            r.subscriptions,
            r.posts,
            r.trie_posts_per_s,
            r.counting_posts_per_s,
            r.trie_posts_per_s / r.counting_posts_per_s,
            r.trie_ops_per_post,
            r.counting_ops_per_post,
            r.matches_per_post,
            r.build_s,
        ]
        for r in results
    ]
    header = [
        "scenario",
        "subscriptions",
        "posts",
        "trie posts/s",
        "counting posts/s",
        "speed-up",
        "trie ops/post",
        "counting ops/post",
        "matches/post",
        "trie build s",
    ]
    print(f"\nmatcher kernel, one core, best of {repeats}; tweet-based subscriptions")
    print(format_table(header, rows))
    write_csv([dict(zip(header, row, strict=True)) for row in rows], out / "matcher.csv")
    print(f"wrote {out / 'matcher.csv'}")
