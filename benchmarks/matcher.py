"""``s3tm bench matcher``: the matcher kernels' throughput on the same posts and tweet-based
subscriptions, one core: the access-predicate matcher (paper 000, the stream's default
index), the trie (paper 001) and the counting baseline.

Scenarios: the real corpus (100k subscriptions drawn from its training posts, matching its
held-out posts) when present, and a synthetic corpus big enough for 1M subscriptions
(1M posts registered as subscriptions, 200k other posts matched). Timings cover the match
call only (posts already encoded to word ids, as in the streaming job), best of
``repeats`` after a warm-up call; builds are timed once. The counting matcher runs on the
first 20,000 posts only (it is 40-170x slower). All three must return exactly the same
matches, or the benchmark fails.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.experiments.report import write_csv
from benchmarks.machine import machine_summary, pin_to_one_core
from benchmarks.matcher_probe import checksum
from core.corpus import Corpus, holdout_mask
from core.corpus.synthetic import SyntheticCorpusSpec, generate_corpus
from core.formatting import format_table
from core.matching.counting import CountingMatcher
from core.matching.matches import Matches
from core.matching.predicate import AccessPredicateMatcher
from core.matching.trie import TrieMatcher
from core.placement.cost import encode_subscriptions, subscription_dictionary
from core.remap_options import HOLDOUT_FRACTION, HOLDOUT_SEED
from core.subscriptions.workloads import tweet_subscriptions

COUNTING_POSTS = 20_000


@dataclass(frozen=True)
class Scenario:
    """Encoded input of one scenario: subscriptions and posts as CSR of word ids."""

    name: str
    sub_ids: np.ndarray
    sub_indptr: np.ndarray
    sub_words: np.ndarray
    post_indptr: np.ndarray
    post_words: np.ndarray
    word_map: np.ndarray

    @property
    def n_subscriptions(self) -> int:
        return int(self.sub_ids.shape[0])

    @property
    def n_posts(self) -> int:
        return int(self.post_indptr.shape[0] - 1)

    def save(self, path: Path) -> None:
        np.savez(
            path,
            name=np.array(self.name),
            sub_ids=self.sub_ids,
            sub_indptr=self.sub_indptr,
            sub_words=self.sub_words,
            post_indptr=self.post_indptr,
            post_words=self.post_words,
            word_map=self.word_map,
        )


def encode(name: str, subs: Corpus, posts: Corpus) -> Scenario:
    """Subscriptions in dictionary ids (rarest first, as the matchers get them)."""
    dictionary = subscription_dictionary(subs, posts)
    rows = np.arange(subs.n_posts, dtype=np.int64)
    indptr, words = encode_subscriptions(subs, dictionary, rows)
    word_map = dictionary.map_vocabulary(posts.vocabulary.tolist())
    return Scenario(name, rows, indptr, words, posts.indptr, posts.indices, word_map)


def scenarios(real_corpus: Path | None, synthetic_subs: int) -> list[Scenario]:
    """The real-tweet scenario (when the corpus is present) and the synthetic ones."""
    found: list[Scenario] = []
    if real_corpus is not None:
        from spark_jobs.lake.corpus_files import read_corpus

        corpus, _ = read_corpus(real_corpus)
        mask = holdout_mask(corpus.n_posts, HOLDOUT_FRACTION, HOLDOUT_SEED)
        training, held_out = corpus.select(~mask), corpus.select(mask)
        subs = tweet_subscriptions(training, min(100_000, training.n_posts), seed=7)
        found.append(encode(f"real tweets ({real_corpus.name})", subs, held_out))
    else:
        print("real corpus absent: real-data scenario skipped")
    corpus = generate_corpus(SyntheticCorpusSpec(n_posts=synthetic_subs + 200_000, seed=3))
    posts = corpus.select(np.arange(synthetic_subs, corpus.n_posts))
    for n_subs in sorted({min(100_000, synthetic_subs), synthetic_subs}):
        subs = tweet_subscriptions(corpus.select(np.arange(synthetic_subs)), n_subs, seed=3)
        found.append(encode("synthetic", subs, posts))
    return found


def best_of(fn: Callable[[], Matches], repeats: int) -> tuple[float, Matches]:
    """Best wall time of ``repeats`` calls after one warm-up call (JIT, caches)."""
    best = np.inf
    result = fn()
    for _ in range(repeats):
        started = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - started)
    return float(best), result


def match_checksum(matches: Matches) -> int:
    return checksum(matches.indptr, matches.sub_ids)


@dataclass(frozen=True)
class MatcherRun:
    scenario: str
    subscriptions: int
    posts: int
    trie_posts_per_s: float
    predicate_posts_per_s: float
    counting_posts_per_s: float
    trie_ops_per_post: float
    predicate_ops_per_post: float
    counting_ops_per_post: float
    matches_per_post: float
    trie_build_s: float
    predicate_build_s: float
    trie_mib: float
    predicate_mib: float


def run_scenario(s: Scenario, repeats: int) -> MatcherRun:
    started = time.perf_counter()
    trie = TrieMatcher(capacity=int(s.sub_indptr[-1]) + 1)
    trie.insert_many(s.sub_ids, s.sub_indptr, s.sub_words)
    trie_build = time.perf_counter() - started
    started = time.perf_counter()
    predicate = AccessPredicateMatcher(s.sub_ids, s.sub_indptr, s.sub_words)
    predicate_build = time.perf_counter() - started
    counting = CountingMatcher(s.sub_ids, s.sub_indptr, s.sub_words)
    t_trie, by_trie = best_of(lambda: trie.match(s.post_indptr, s.post_words, s.word_map), repeats)
    t_pred, by_pred = best_of(
        lambda: predicate.match(s.post_indptr, s.post_words, s.word_map), repeats
    )
    few = min(COUNTING_POSTS, s.n_posts)
    few_indptr = s.post_indptr[: few + 1]
    few_words = s.post_words[: int(few_indptr[-1])]
    t_count, by_count = best_of(
        lambda: counting.match(few_indptr, few_words, s.word_map), max(1, repeats // 2)
    )
    if match_checksum(by_trie) != match_checksum(by_pred) or by_trie.n_matches != by_pred.n_matches:
        raise AssertionError(f"{s.name}: trie and access-predicate matchers disagree")
    head = Matches(by_trie.indptr[: few + 1], by_trie.sub_ids[: by_trie.indptr[few]], 0)
    if match_checksum(by_count) != match_checksum(head) or by_count.n_matches != head.n_matches:
        raise AssertionError(f"{s.name}: trie and counting matchers disagree")
    n = s.n_posts
    return MatcherRun(
        s.name,
        s.n_subscriptions,
        n,
        n / t_trie,
        n / t_pred,
        few / t_count,
        by_trie.operations / n,
        by_pred.operations / n,
        by_count.operations / few,
        by_trie.n_matches / n,
        trie_build,
        predicate_build,
        trie.nbytes / 2**20,
        predicate.nbytes / 2**20,
    )


HEADER = [
    "scenario",
    "subscriptions",
    "posts",
    "predicate posts/s",
    "trie posts/s",
    "counting posts/s",
    "predicate vs trie",
    "predicate ops/post",
    "trie ops/post",
    "counting ops/post",
    "matches/post",
    "predicate build s",
    "trie build s",
    "predicate MiB",
    "trie MiB",
]


def run(real_corpus: Path | None, synthetic_subs: int, repeats: int, out: Path) -> None:
    machine = machine_summary()
    core = pin_to_one_core()
    print(f"machine: {machine}; this process pinned to core {core}")
    results: list[MatcherRun] = []
    for scenario in scenarios(real_corpus, synthetic_subs):
        results.append(run_scenario(scenario, repeats))
        print(results[-1], flush=True)
    rows = [
        [
            r.scenario,
            r.subscriptions,
            r.posts,
            r.predicate_posts_per_s,
            r.trie_posts_per_s,
            r.counting_posts_per_s,
            r.predicate_posts_per_s / r.trie_posts_per_s,
            r.predicate_ops_per_post,
            r.trie_ops_per_post,
            r.counting_ops_per_post,
            r.matches_per_post,
            r.predicate_build_s,
            r.trie_build_s,
            r.predicate_mib,
            r.trie_mib,
        ]
        for r in results
    ]
    print(
        f"\nmatcher kernels, one core, best of {repeats} after a warm-up call; tweet-based "
        f"subscriptions; counting on the first {COUNTING_POSTS:,} posts; identical matches"
    )
    print(format_table(HEADER, rows))
    write_csv([dict(zip(HEADER, row, strict=True)) for row in rows], out / "matcher.csv")
    print(f"wrote {out / 'matcher.csv'}")
