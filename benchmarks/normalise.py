"""``s3tm bench normalise``: the fast normaliser against the reference, on the same texts.

The texts (the real tweets by default) are normalised in batches of ``--batch-posts`` three
ways, in one process, alternating: the reference ``normalize()`` called per text (its own
token cache warm: what the batch job and the stream's route tasks did before),
``normalize_arrow`` (the numba tokeniser over the Arrow buffer, sorted word lists out) and
a ``WordEncoder`` of the words seen (word ids out, the stream's route path). Cold = a fresh
process state (empty token tables), warm = the same texts again. Every fast result is
checked against the reference before any figure is printed.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from benchmarks.experiments.report import write_csv
from benchmarks.machine import machine_summary
from core.corpus.records import ReadReport
from core.errors import InputDataError
from core.formatting import format_table
from core.text import encoder as fast
from core.text.normalize import clear_token_cache, normalize
from spark_jobs.lake.corpus_files import iter_raw_posts


def _texts(path: Path, limit: int) -> list[str]:
    texts = [
        post.text
        for post in itertools.islice(iter_raw_posts(path, ReadReport(path=str(path))), limit)
    ]
    if not texts:
        raise InputDataError(f"{path}: no texts")
    return texts


def _reset() -> None:
    """Empty every token table: the reference's cache and the fast path's shared encoder."""
    clear_token_cache()
    fast.clear_shared_encoder()


def run(path: Path, *, posts: int, batch_posts: int, runs: int, out: Path) -> list[dict[str, Any]]:
    print(f"machine: {machine_summary()}")
    texts = _texts(path, posts)
    batches = [texts[i : i + batch_posts] for i in range(0, len(texts), batch_posts)]
    arrays = [pa.array(b, pa.string()) for b in batches]
    print(f"{path.name}: {len(texts):,} texts in {len(batches)} batches of {batch_posts:,}")
    # exactness first: the figures below are only worth printing if the outputs agree
    _reset()
    reference = [[normalize(t) for t in b] for b in batches]
    for array, expected in zip(arrays, reference, strict=True):
        if fast.normalize_arrow(array).to_pylist() != expected:
            raise AssertionError("normalize_arrow differs from normalize()")
    vocabulary = sorted({w for b in reference for words in b for w in words})

    def reference_pass() -> None:
        for b in batches:
            [normalize(t) for t in b]

    def arrow_pass() -> None:
        for array in arrays:
            fast.normalize_arrow(array)

    encoder: dict[str, fast.WordEncoder] = {}

    def encoder_pass() -> None:
        enc = encoder.setdefault("e", fast.WordEncoder(vocabulary))
        for array in arrays:
            enc.encode(array)

    ways = {
        "normalize() per text": reference_pass,
        "normalize_arrow": arrow_pass,
        "WordEncoder (ids)": encoder_pass,
    }
    timings: dict[tuple[str, str], list[float]] = {}
    for _ in range(runs):
        for name, work in ways.items():
            _reset()
            encoder.clear()
            for state in ("cold", "warm"):
                started = time.perf_counter()
                work()
                timings.setdefault((name, state), []).append(time.perf_counter() - started)
    rows = []
    for state in ("cold", "warm"):
        base = sorted(timings[("normalize() per text", state)])[runs // 2]
        for name in ways:
            seconds = sorted(timings[(name, state)])[runs // 2]
            rows.append(
                {
                    "way": name,
                    "tokens": state,
                    "texts": len(texts),
                    "median s": round(seconds, 3),
                    "posts/s": round(len(texts) / seconds),
                    "us/post": round(1e6 * seconds / len(texts), 2),
                    "x reference": round(base / seconds, 2),
                    "runs": runs,
                }
            )
    print(f"\nnormalising {len(texts):,} texts, one core, median of {runs} alternating runs")
    print(format_table(list(rows[0]), [list(r.values()) for r in rows]))
    out.mkdir(parents=True, exist_ok=True)
    write_csv(rows, out / "normalise.csv")
    print(f"wrote {out / 'normalise.csv'}")
    return rows
