"""learn: ``gold.post_words`` of a window -> a candidate routing version.

Reads the bipartite edges of the learning window (held-out posts excluded: the same
deterministic hold-out ``evaluate`` uses), builds the CSR arrays on the driver, runs the
chosen learner (hash | SALB | gC | gFC | gFCL | gNFCL, optionally with hot-word splitting),
and writes ``routing.mappings`` rows and a ``routing.versions`` row with status
``candidate``. Learning is on the subscribed words of the active subscriptions when there
are any (``--subscribed registry``), else on all words.

Driver memory and time: the edges arrive as Arrow columns (post id and word strings) and
Arrow's kernels dictionary-encode them into the CSR's integer codes, with no Python object
per edge; ``s3tm bench learn-job`` measures the job, ``s3tm bench learn`` the learner's own
working set (~133 MiB per million posts for SALB).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time
from collections.abc import Sequence
from typing import Any

from core.corpus.arrays import Corpus, corpus_from_codes
from core.errors import InputDataError, InvalidArgumentError
from core.learn import ALGORITHMS, algorithm_label, learn_mapping
from core.monitor.health import versions_needed
from core.routing.metrics import routing_metrics
from core.routing.router import route_corpus
from spark_jobs.common import job_main, log, window_start
from spark_jobs.jobs.sampling import holdout_filter
from spark_jobs.lake.routing_store import add_candidate, now_utc
from spark_jobs.lake.subscription_store import active_subscriptions


def window_edges(
    post_words: Any, start: dt.date | None, end: dt.date | None, holdout_fraction: float
) -> Any:
    """Pure transform: the training edges (post_id, word) of a day window."""
    from pyspark.sql import functions as F

    edges = post_words
    if start:
        edges = edges.where(F.col("day") >= F.lit(start))
    if end:
        edges = edges.where(F.col("day") <= F.lit(end))
    return edges.where(~holdout_filter(holdout_fraction)).select("post_id", "word")


def training_corpus(edges: Any) -> Corpus:
    """The training edges (post_id, word) as a :class:`Corpus`; word ids by frequency
    (most frequent first, ties by word), posts in arrival order.

    Arrow all the way: the edges arrive as Arrow columns and are dictionary-encoded by
    Arrow's kernels; no Python object per edge (the old path's pandas factorisation of
    object arrays took ~half of the job and most of its driver memory).
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    table = edges.select("post_id", "word").toArrow()
    if table.num_rows == 0:
        raise InputDataError("no training edges in the learning window")
    posts = pc.dictionary_encode(table["post_id"]).combine_chunks()
    words = pc.dictionary_encode(table["word"]).combine_chunks()
    del table
    codes = np.asarray(words.indices, dtype=np.int32)
    counts = np.bincount(codes, minlength=len(words.dictionary))
    # gold.post_words holds an edge once, so a word's edge count is its post frequency
    order = pc.sort_indices(
        pa.table({"count": counts, "word": words.dictionary}),
        sort_keys=[("count", "descending"), ("word", "ascending")],
    )
    order = np.asarray(order, dtype=np.int64)
    rank = np.empty_like(order)
    rank[order] = np.arange(order.shape[0])
    return corpus_from_codes(
        np.asarray(posts.indices, dtype=np.int64),
        rank[codes].astype(np.int32),
        words.dictionary.take(pa.array(order)).to_numpy(zero_copy_only=False),
        len(posts.dictionary),
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=16, help="number of matchers N")
    parser.add_argument("--algorithm", choices=ALGORITHMS, default="salb")
    parser.add_argument(
        "--split",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="split hot words (default on)",
    )
    parser.add_argument("--start", type=dt.date.fromisoformat, help="first day of the window")
    parser.add_argument("--end", type=dt.date.fromisoformat, help="last day of the window")
    parser.add_argument(
        "--window-days",
        type=int,
        default=0,
        help="only the last N days present in gold.post_words (0: all)",
    )
    parser.add_argument("--holdout-fraction", type=float, default=0.2)
    parser.add_argument(
        "--subscribed",
        choices=["auto", "registry", "all"],
        default="auto",
        help="learn on the registry's words (auto: when it has any)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--live-hot-words",
        type=float,
        default=6.0,
        metavar="HOURS",
        help="with --split, give the hot words the stream's sketch reported in the last "
        "HOURS (stream.health) the versions their live share needs (0: off)",
    )


def live_hot_words(lakehouse: Any, hours: float) -> dict[str, float]:
    """The hot words of the latest ``stream.health`` row recorded in the last ``hours``,
    with their live share of word occurrences: a burst the learning window dilutes."""
    if hours <= 0 or not lakehouse.exists("stream.health"):
        return {}
    since = now_utc() - dt.timedelta(hours=hours)
    rows = [
        r for r in lakehouse.read_arrow("stream.health").to_pylist() if r["recorded_at"] >= since
    ]
    if not rows:
        return {}
    latest = max(rows, key=lambda r: r["recorded_at"])
    return {h["word"]: float(h["share"]) for h in latest["hot_words"] or []}


def learn_version(
    lakehouse: Any,
    *,
    nodes: int,
    algorithm: str,
    split: bool,
    start: dt.date | None,
    end: dt.date | None,
    holdout_fraction: float,
    subscribed: str,
    seed: int,
    live_hot_hours: float = 0.0,
) -> dict[str, Any]:
    """Learn and write one candidate version; returns its summary."""
    if nodes < 1:
        raise InvalidArgumentError(f"--nodes must be >= 1, got {nodes}")
    started = time.perf_counter()
    edges_version = lakehouse.version("gold.post_words")
    if edges_version is None:
        raise InputDataError("gold.post_words does not exist: run the graph job first")
    corpus = training_corpus(
        window_edges(lakehouse.read("gold.post_words", edges_version), start, end, holdout_fraction)
    )
    read_s = time.perf_counter() - started
    words = None
    subs = active_subscriptions(lakehouse) if subscribed != "all" else []
    if subscribed == "registry" and not subs:
        raise InputDataError("--subscribed registry, but the registry has no active subscription")
    if subs:
        words = sorted({w for row in subs for w in row["words"]})
    live = live_hot_words(lakehouse, live_hot_hours) if split else {}
    min_parts = {w: versions_needed(share, nodes) for w, share in live.items()}
    if min_parts:
        log.info("live hot words (stream.health) get at least these versions: %s", min_parts)
    learned = learn_mapping(
        corpus,
        nodes,
        algorithm,
        split=split,
        subscribed_words=words,
        seed=seed,
        min_parts=min_parts,
    )
    training = routing_metrics(route_corpus(learned.table, corpus, seed=seed))
    params = {
        "split": split,
        "seed": seed,
        "holdout_fraction": holdout_fraction,
        "label": algorithm_label(algorithm, split),
        "hot_words": learned.table.n_split_words,
        "live_hot_words": min_parts,
    }
    inputs = {
        "gold.post_words": edges_version,
        "start": start.isoformat() if start else None,
        "end": end.isoformat() if end else None,
        "training_posts": corpus.n_posts,
        "training_edges": corpus.n_edges,
        "subscriptions": len(subs),
    }
    version = add_candidate(
        lakehouse,
        learned.table,
        {
            "algorithm": algorithm,
            "n_matchers": nodes,
            "params": json.dumps(params),
            "inputs": json.dumps(inputs),
            "subscribed_words": words,
            "metrics": json.dumps(
                {
                    "training": training.as_dict(with_loads=False),
                    "learn_seconds": learned.learn_seconds,
                    "read_seconds": read_s,
                }
            ),
            "validation": None,
            "status": "candidate",
            "created_at": now_utc(),
            "published_at": None,
            "retired_at": None,
        },
    )
    summary = {
        "routing_version": version,
        "label": params["label"],
        "n_matchers": nodes,
        "mapping_rows": len(learned.table.to_frame()),
        **inputs,
        "learn_seconds": round(learned.learn_seconds, 3),
        "read_seconds": round(read_s, 3),
    }
    log.info(
        "learned candidate version %d (%s, N=%d) on %d posts",
        version,
        params["label"],
        nodes,
        corpus.n_posts,
    )
    return summary


def run(args: argparse.Namespace, lakehouse: Any) -> int:
    start = args.start
    if (
        start is None
        and getattr(args, "window_days", 0) > 0
        and lakehouse.exists("gold.post_words")
    ):
        start = window_start(lakehouse.read("gold.post_words"), "day", args.window_days)
    summary = learn_version(
        lakehouse,
        nodes=args.nodes,
        algorithm=args.algorithm,
        split=args.split,
        start=start,
        end=args.end,
        holdout_fraction=args.holdout_fraction,
        subscribed=args.subscribed,
        seed=args.seed,
        live_hot_hours=getattr(args, "live_hot_words", 0.0),
    )
    print(json.dumps(summary))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return job_main("learn", __doc__ or "", add_arguments, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
