"""``s3tm bench sketch``: the stream's word sketch against exact counts on a replayed corpus.

The corpus (the real tweets by default; in file order, or time order for a timestamped
one) is replayed as a stream of micro-batches of ``--batch-posts`` posts, each split over
``--tasks`` route tasks. As in the streaming job, every task sketches its posts' words
(every word counts as subscribed here), the driver merges the task sketches per batch and
over a sliding window of ``--window`` batches, and reports the words above the split
threshold ``1 / (2N)`` of the window's word occurrences. At every batch the report is
compared with the exact counts of the same window: recall of the truly hot words, false
positives, memory per task, and the sketch's time per post.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.experiments.report import write_csv
from benchmarks.machine import machine_summary
from benchmarks.options import SketchBench
from core.formatting import format_table
from core.monitor.health import split_threshold
from core.monitor.sketch import WordSketch, word_keys
from spark_jobs.lake.corpus_files import read_corpus
from spark_jobs.stream.health import SKETCH_SPEC


def run(options: SketchBench, path: Path, nodes: Sequence[int]) -> list[dict[str, Any]]:
    """The sketch against exact counts on ``path``'s posts, for each N of ``nodes``."""
    batch_posts = options.batch_posts
    tasks = options.tasks
    window = options.window
    out = Path(options.out)
    print(f"machine: {machine_summary()}")
    started = time.perf_counter()
    corpus, report = read_corpus(path)
    print(f"{path.name}: {report.summary()} ({time.perf_counter() - started:.0f}s)", flush=True)
    keys = word_keys(corpus.vocabulary)
    n_batches = corpus.n_posts // batch_posts
    recent: deque[tuple[WordSketch, np.ndarray]] = deque(maxlen=window)
    stats = {n: {"hot": 0, "found": 0, "false": 0, "max_hot": 0, "checks": 0} for n in nodes}
    sketch_seconds, task_bytes = 0.0, 0
    for b in range(n_batches):
        lo = b * batch_posts
        batch_sketch = WordSketch(SKETCH_SPEC)
        exact = np.zeros(corpus.n_words, dtype=np.int64)
        for part in np.array_split(np.arange(lo, lo + batch_posts), tasks):
            ids = corpus.indices[corpus.indptr[part[0]] : corpus.indptr[part[-1] + 1]]
            tick = time.perf_counter()
            task = WordSketch(SKETCH_SPEC)
            counts = np.bincount(ids, minlength=corpus.n_words)
            present = np.flatnonzero(counts)
            task.add(keys[present], counts[present])
            sketch_seconds += time.perf_counter() - tick
            task_bytes = max(task_bytes, task.nbytes)
            # shipped as the route task's note does, then merged on the driver
            batch_sketch = batch_sketch.merge(WordSketch.from_text(task.to_text(), SKETCH_SPEC))
            exact += counts
        recent.append((batch_sketch, exact))
        merged = WordSketch(SKETCH_SPEC)
        for sketch, _ in recent:
            merged = merged.merge(sketch)
        truth = np.sum([c for _, c in recent], axis=0)
        total = int(truth.sum())
        for n in nodes:
            phi = split_threshold(n)
            hot = set(keys[truth > phi * total].tolist())
            found_keys, _ = merged.heavy_hitters(phi)
            found = set(found_keys.tolist())
            s = stats[n]
            s["hot"] += len(hot)
            s["found"] += len(hot & found)
            s["false"] += len(found - hot)
            s["max_hot"] = max(s["max_hot"], len(hot))
            s["checks"] += 1
    posts = n_batches * batch_posts
    rows = [
        {
            "N": n,
            "threshold": round(split_threshold(n), 5),
            "windows checked": s["checks"],
            "hot words (max)": s["max_hot"],
            "recall": round(s["found"] / s["hot"], 4) if s["hot"] else None,
            "false positives/window": round(s["false"] / s["checks"], 2),
            "sketch KiB/task": round(task_bytes / 1024),
            "sketch us/post": round(1e6 * sketch_seconds / posts, 2),
        }
        for n, s in stats.items()
    ]
    print(
        f"\n{posts:,} posts replayed: {n_batches} batches of {batch_posts:,} over {tasks} "
        f"tasks, window {window} batches; sketch {SKETCH_SPEC}"
    )
    print(format_table(list(rows[0]), [list(r.values()) for r in rows]))
    write_csv(rows, out / "sketch.csv")
    print(f"wrote {out / 'sketch.csv'}")
    return rows
