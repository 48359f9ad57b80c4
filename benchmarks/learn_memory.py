"""Peak memory of one learn, measured in a fresh process (``python -m benchmarks.learn_memory``).

In-process RSS peaks are unreliable because the allocator keeps freed pages, so each
figure comes from a child that loads the corpus arrays, records its RSS, resets the kernel's
peak mark, learns once and reports the peak rise (VmHWM - VmRSS before), in MiB.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from benchmarks.machine import peak_rss_mib, reset_peak_rss, rss_mib
from core.corpus import Corpus


def save_corpus(corpus: Corpus, path: Path) -> None:
    np.savez(
        path, vocabulary=corpus.vocabulary.astype(str), indptr=corpus.indptr, indices=corpus.indices
    )


def save_synthetic(size: int, seed: int, folder: Path) -> tuple[Corpus, Path]:
    """A seeded synthetic corpus of ``size`` posts, and the file it is saved to in
    ``folder`` (for the child processes that learn on it)."""
    from core.corpus.synthetic import SyntheticCorpusSpec, generate_corpus

    corpus = generate_corpus(SyntheticCorpusSpec(n_posts=size, seed=seed))
    path = folder / f"corpus-{size}.npz"
    save_corpus(corpus, path)
    return corpus, path


def measure_in_child(corpus_file: Path, n_matchers: int, algorithm: str, split: bool) -> float:
    """Peak MiB of one learn in a fresh interpreter (nan where /proc is unavailable)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.learn_memory",
            str(corpus_file),
            str(n_matchers),
            algorithm,
            "split" if split else "nosplit",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(json.loads(done.stdout.strip().splitlines()[-1])["peak_mib"])


def _child(corpus_file: str, n_matchers: int, algorithm: str, split: bool) -> None:
    from core.learn import learn_mapping

    with np.load(corpus_file) as data:
        corpus = Corpus(data["vocabulary"].astype(object), data["indptr"], data["indices"])
    warm = Corpus(
        corpus.vocabulary[:2].copy(),
        np.array([0, 1], dtype=np.int64),
        np.array([0], dtype=np.int32),
    )
    learn_mapping(warm, n_matchers, algorithm, split=split)  # JIT/cache load outside the peak
    before = rss_mib()
    reset_peak_rss()
    learn_mapping(corpus, n_matchers, algorithm, split=split)
    print(json.dumps({"peak_mib": peak_rss_mib() - before}))


if __name__ == "__main__":
    _child(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "split")
