"""Slow, obvious references and generators the core tests share: brute-force matching,
loads by routing every post from scratch, planted word communities."""

from __future__ import annotations

import numpy as np

from core.corpus import corpus_from_word_lists


def csr_of_sets(sets: list[set[int]], shuffle: bool = False) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    indptr = np.zeros(len(sets) + 1, dtype=np.int64)
    words: list[int] = []
    for i, s in enumerate(sets):
        row = sorted(s)
        if shuffle:
            row = rng.permutation(row).tolist() if row else []
        words.extend(row)
        indptr[i + 1] = len(words)
    return indptr, np.array(words, dtype=np.int32)


def brute_force(subs: dict[int, set[int]], posts: list[set[int]]) -> list[set[int]]:
    return [{sid for sid, words in subs.items() if words <= post} for post in posts]


def direct_loads(posts: list[set[int]], mapping: dict[int, int], n: int) -> np.ndarray:
    """L(i, M) by routing every post from scratch: a post counts once per matcher."""
    loads = np.zeros(n, dtype=np.int64)
    for post in posts:
        for m in {mapping[t] for t in post if t in mapping}:
            loads[m] += 1
    return loads


def token_sets(problem) -> list[set[int]]:
    return [
        set(problem.post_tokens[problem.post_indptr[p] : problem.post_indptr[p + 1]].tolist())
        for p in range(problem.n_posts)
    ]


def planted_communities(n_groups: int, words_per_group: int, posts: int, seed: int):
    """Posts of 2..5 words drawn from one of ``n_groups`` disjoint word groups (Zipf-ish)."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, words_per_group + 1)
    weights /= weights.sum()
    lists = []
    for _ in range(posts):
        group = rng.integers(n_groups)
        size = rng.integers(2, 6)
        words = rng.choice(words_per_group, size=size, replace=False, p=weights)
        lists.append([f"g{group}w{w}" for w in words])
    return corpus_from_word_lists(lists)
