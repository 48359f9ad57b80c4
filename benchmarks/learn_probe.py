"""One side of ``s3tm bench learn --compare``: times ``learn_mapping`` of each algorithm on a
saved corpus (``learn_memory.save_corpus``), one core, and prints one JSON line.

Run as a script with the tree under test first on ``PYTHONPATH``, so that the same probe
measures an earlier revision's code and this one's on identical input. It imports only
names every revision has (``Corpus``, ``learn_mapping``).
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np


def main(argv: list[str]) -> int:
    path, n_matchers, algorithms = argv[0], int(argv[1]), argv[2].split(",")
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    from core.corpus import Corpus
    from core.learn import learn_mapping

    with np.load(path) as data:
        vocabulary = data["vocabulary"].astype(object)
        indptr, indices = data["indptr"], data["indices"]
    warm = Corpus(vocabulary[:2].copy(), np.array([0, 1], np.int64), np.array([0], np.int32))
    seconds: dict[str, float] = {}
    for algorithm in algorithms:
        learn_mapping(warm, n_matchers, algorithm)  # JIT / cache load outside the timing
        corpus = Corpus(vocabulary, indptr, indices)  # fresh: the transpose is timed too
        started = time.perf_counter()
        learn_mapping(corpus, n_matchers, algorithm)
        seconds[algorithm] = time.perf_counter() - started
    print(json.dumps({"seconds": seconds}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
