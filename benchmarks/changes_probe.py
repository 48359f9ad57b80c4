"""One side of ``s3tm bench changes --compare REV``: what a round of subscription changes
costs the stream's tasks in a tree's code, on generated input, one core; one JSON line.

- a match task: a matcher's access-predicate index over ``subscriptions`` ids, then four
  rounds of cancellations marked in it (``set_cancelled``, 300 more ids each round);
- a route task: a fixed-vocabulary encoder over ``posts`` generated texts (90% of their
  words in its vocabulary), the vocabulary grown by 300 of the words it lacked (``extend``),
  and the same texts encoded again.

Run as a script with the tree under test first on ``PYTHONPATH``: the same probe measures
an earlier revision's code and this one's on identical input (both only call names every
revision since the cancelled marks has).
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np


def cancellation_rounds(n_subscriptions: int, seed: int = 0) -> dict[str, float]:
    from core.matching.predicate import AccessPredicateMatcher

    # compile (or load) the kernels on a small index first: a tree whose numba cache is cold
    # (a fresh worktree) would otherwise time the JIT as its index build
    warm = AccessPredicateMatcher(
        np.arange(4, dtype=np.int64), np.arange(5, dtype=np.int64), np.arange(4, dtype=np.int32)
    )
    warm.set_cancelled(np.array([1], dtype=np.int64))
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, 12, n_subscriptions)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    n_words = max(1000, n_subscriptions // 3)
    words = np.concatenate(
        [np.sort(rng.choice(n_words, k, replace=False)) for k in lengths.tolist()]
    ).astype(np.int32)
    ids = rng.permutation(10 * n_subscriptions)[:n_subscriptions].astype(np.int64)
    started = time.perf_counter()
    index = AccessPredicateMatcher(ids, indptr, words)
    build = time.perf_counter() - started
    rounds = []
    for k in range(4):
        gone = rng.choice(ids, min(ids.shape[0], 300 * (k + 1)), replace=False)
        started = time.perf_counter()
        index.set_cancelled(gone)
        rounds.append(time.perf_counter() - started)
    return {
        "build_s": build,
        "first_round_ms": 1e3 * rounds[0],
        "later_round_ms": 1e3 * float(np.median(rounds[1:])),
    }


def encoder_after_growth(n_posts: int, seed: int = 0) -> dict[str, float]:
    import pyarrow as pa

    from core.text import normalize
    from core.text.encoder import WordEncoder

    rng = np.random.default_rng(seed)
    vocabulary = [f"w{k}x" for k in range(max(400, n_posts // 2))]  # normalise to themselves
    picks = rng.integers(0, len(vocabulary), (n_posts, 12))
    texts = [" ".join(vocabulary[j] for j in row) for row in picks.tolist()]
    words = sorted({w for t in texts for w in normalize(t)})
    known, lacked = words[: len(words) * 9 // 10], words[len(words) * 9 // 10 :]
    encoder = WordEncoder(known)
    batch = pa.array(texts, pa.string())
    encoder.encode(batch)
    started = time.perf_counter()
    encoder.encode(batch)
    steady = time.perf_counter() - started
    encoder.extend([*known, *lacked[:300]])
    started = time.perf_counter()
    encoder.encode(batch)
    after = time.perf_counter() - started
    return {"encode_steady_s": steady, "encode_after_growth_s": after}


def main(argv: list[str]) -> int:
    subscriptions, posts = int(argv[0]), int(argv[1])
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core, like a task
    # the encoder first: the index of the cancellation rounds is hundreds of MB, and what
    # the allocator was left with after it timed the encoder differently in the two trees
    figures = {**encoder_after_growth(posts), **cancellation_rounds(subscriptions)}
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
