"""One side of ``s3tm bench matcher --compare``: times the matcher index a tree's streaming
job uses on a saved scenario (``Scenario.save``), one core, and prints one JSON line.

Run as a script with the tree under test first on ``PYTHONPATH``, so that the same probe
measures an earlier revision's code and this one's on identical input. Only names that
every revision has are imported: ``TrieMatcher``, and ``MatcherCache.index_kind`` where a
revision has it (earlier ones matched with the trie only).
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np


def build_index(kind: str, sub_ids: np.ndarray, indptr: np.ndarray, words: np.ndarray):  # type: ignore[no-untyped-def]
    """The matcher index ``kind`` ("trie" or "predicate") holding the CSR subscriptions."""
    if kind == "trie":
        from core.matching.trie import TrieMatcher

        trie = TrieMatcher(capacity=int(indptr[-1]) + 1)
        trie.insert_many(sub_ids, indptr, words)
        return trie
    from core.matching.predicate import AccessPredicateMatcher

    return AccessPredicateMatcher(sub_ids, indptr, words)


def checksum(indptr: np.ndarray, sub_ids: np.ndarray) -> int:
    """Order-free fingerprint of a match result's (post, subscription) pairs."""
    posts = np.repeat(np.arange(indptr.shape[0] - 1, dtype=np.uint64), np.diff(indptr))
    mixed = (posts * np.uint64(1_000_003) + sub_ids.astype(np.uint64)) * np.uint64(
        0x9E3779B97F4A7C15
    )
    return int(np.bitwise_xor.reduce(mixed ^ (mixed >> np.uint64(29)))) if mixed.size else 0


def main(argv: list[str]) -> int:
    path, repeats = argv[0], int(argv[1])
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    from core.stream.worker import MatcherCache

    kind = getattr(MatcherCache(), "index_kind", "trie")
    data = np.load(path)
    sub_ids, indptr, words = data["sub_ids"], data["sub_indptr"], data["sub_words"]
    build_index(kind, sub_ids[:1], indptr[:2], words[: indptr[1]])  # JIT: not part of the build
    started = time.perf_counter()
    index = build_index(kind, sub_ids, indptr, words)
    build = time.perf_counter() - started
    posts = (data["post_indptr"], data["post_words"], data["word_map"])
    result = index.match(*posts)  # warm-up: JIT and caches
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        result = index.match(*posts)
        best = min(best, time.perf_counter() - started)
    n_posts = int(posts[0].shape[0] - 1)
    print(
        json.dumps(
            {
                "index": kind,
                "posts_s": n_posts / best,
                "build_s": build,
                "matches": int(result.sub_ids.shape[0]),
                "checksum": checksum(result.indptr, result.sub_ids),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
