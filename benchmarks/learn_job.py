"""``s3tm bench learn-job``: wall time and peak memory of the learn job on N synthetic posts.

The posts' bipartite edges are written straight into ``gold.post_words`` of a scratch
lakehouse (one day); then a fresh process runs the learn job and reports the peak resident
memory of the Python driver (VmHWM) and of the JVM it started (local mode).
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from benchmarks.machine import machine_summary
from core.corpus.synthetic import SyntheticCorpusSpec, generate_corpus
from core.errors import S3TMError
from core.formatting import format_table
from core.remap_options import HOLDOUT_FRACTION
from schemas import table

EDGE_CHUNK_POSTS = 500_000
EDGES_DAY = dt.date(2026, 1, 1)  # one day: the learn job reads its whole window


def write_edges(lakehouse_root: Path, n_posts: int, seed: int) -> int:
    """The corpus' (day, post_id, word) edges, written in chunks of posts: at 10M posts the
    edges are ~80M rows, too many to build as Python lists at once."""
    from deltalake import write_deltalake

    corpus = generate_corpus(SyntheticCorpusSpec(n_posts=n_posts, seed=seed))
    assert corpus.post_ids is not None  # synthetic corpora carry post ids
    schema = table("gold.post_words").schema
    vocabulary = pa.array(corpus.vocabulary, pa.string())
    post_ids = pa.array(corpus.post_ids, pa.string())
    day = pa.scalar(EDGES_DAY, pa.date32())

    def chunks() -> Iterator[pa.RecordBatch]:
        for first in range(0, corpus.n_posts, EDGE_CHUNK_POSTS):
            last = min(first + EDGE_CHUNK_POSTS, corpus.n_posts)
            lo, hi = int(corpus.indptr[first]), int(corpus.indptr[last])
            posts = np.repeat(
                np.arange(first, last, dtype=np.int64), np.diff(corpus.indptr[first : last + 1])
            )
            yield pa.RecordBatch.from_arrays(
                [
                    pa.repeat(day, hi - lo),
                    post_ids.take(pa.array(posts)),
                    vocabulary.take(pa.array(corpus.indices[lo:hi])),
                ],
                schema=schema,
            )

    write_deltalake(
        str(table("gold.post_words").location(lakehouse_root)),
        pa.RecordBatchReader.from_batches(schema, chunks()),
        partition_by=["day"],
    )
    return corpus.n_edges


def _child(lakehouse_root: str, nodes: int) -> None:
    from spark_jobs.jobs.learn import LearnConfig, learn_version
    from spark_jobs.lake.delta_io import Lakehouse
    from spark_jobs.lake.session import build_session
    from spark_jobs.runtime.peak_rss import driver_jvm_pid, peak_mib

    spark = build_session("s3tm-bench-learn-job")
    jvm_pid = driver_jvm_pid(spark)
    assert jvm_pid is not None, "a local session has a JVM gateway"
    started = time.perf_counter()
    summary = learn_version(
        Lakehouse(spark, lakehouse_root),
        LearnConfig(
            nodes=nodes,
            algorithm="salb",
            split=True,
            holdout_fraction=HOLDOUT_FRACTION,
            subscribed="all",
            live_hot_words=0.0,
        ),
    )
    wall = time.perf_counter() - started

    print(
        json.dumps(
            {
                "wall_s": wall,
                "python_peak_mib": peak_mib() or float("nan"),
                "jvm_peak_mib": peak_mib(jvm_pid) or float("nan"),
                **summary,
            }
        )
    )


@dataclass(frozen=True)
class LearnJobRun:
    """One learn job's figures (``bench learn-job``)."""

    posts: int
    edges: int
    training_posts: int
    nodes: int
    wall_s: float
    read_s: float
    learn_s: float
    driver_peak_mib: float
    jvm_peak_mib: float


def run(n_posts: int, nodes: int, seed: int) -> LearnJobRun:
    """One learn job on ``n_posts`` synthetic posts in a scratch lakehouse (removed after)."""
    root = Path(tempfile.mkdtemp(prefix="s3tm-learn-job-"))
    try:
        edges = write_edges(root, n_posts, seed)
        print(f"wrote {edges:,} edges of {n_posts:,} synthetic posts to {root}", flush=True)
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.learn_job", str(root), str(nodes)],
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if done.returncode != 0:
        raise S3TMError(f"the learn job failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    figures = LearnJobRun(
        posts=n_posts,
        edges=edges,
        training_posts=int(result["training_posts"]),
        nodes=nodes,
        wall_s=float(result["wall_s"]),
        read_s=float(result["read_seconds"]),
        learn_s=float(result["learn_seconds"]),
        driver_peak_mib=float(result["python_peak_mib"]),
        jvm_peak_mib=float(result["jvm_peak_mib"]),
    )
    print(
        f"learn job (SALB+split, N={nodes}) on {figures.training_posts:,} training posts: "
        f"{figures.wall_s:.1f}s (read {figures.read_s:.1f}s, learn {figures.learn_s:.1f}s); "
        f"peak RSS: Python driver {figures.driver_peak_mib:.0f} MiB, "
        f"JVM {figures.jvm_peak_mib:.0f} MiB",
        flush=True,
    )
    return figures


def scale(sizes: list[int], nodes: int, seed: int, out: Path) -> list[dict[str, object]]:
    """The learn job at each size, one fresh process each: wall time, its read and learn
    parts, the driver's and the JVM's peak RSS, and the time relative to the first size;
    ``learn_job_scale.csv``."""
    print(f"machine: {machine_summary()}")
    runs = [run(n_posts, nodes, seed) for n_posts in sizes]
    rows: list[dict[str, object]] = [
        {
            "posts": r.posts,
            "edges": r.edges,
            "training_posts": r.training_posts,
            "nodes": r.nodes,
            "wall_s": round(r.wall_s, 2),
            "read_s": round(r.read_s, 2),
            "learn_s": round(r.learn_s, 2),
            "wall_vs_first": round(r.wall_s / runs[0].wall_s, 2),
            "driver_peak_mib": round(r.driver_peak_mib),
            "jvm_peak_mib": round(r.jvm_peak_mib),
        }
        for r in runs
    ]
    print("\nlearn job (SALB+split) by corpus size, one process per size")
    print(format_table(list(rows[0]), [list(r.values()) for r in rows]))
    out.mkdir(parents=True, exist_ok=True)
    path = out / "learn_job_scale.csv"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {path}")
    return rows


if __name__ == "__main__":
    _child(sys.argv[1], int(sys.argv[2]))
