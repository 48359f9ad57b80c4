"""``s3tm experiment drift`` (paper 001, Sect. 6.4, Fig. 7i-l): how a mapping ages.

Protocol: posts are grouped into consecutive time windows (``--window-days``, a week by
default) from their ``created_at``; windows with fewer than ``--min-posts`` posts are
skipped (the real timestamped tweets are sparse at both ends). Each window gets its own,
new subscriptions (topic-based: LDA fitted on that window's posts, as the paper draws new
subscriptions per week; or tweet-based). Each algorithm learns ONE mapping on window 0
(with window 0's subscribed words) and that fixed mapping is evaluated on every later
window, against hash routing of the same posts and that window's subscribed words (words
the mapping never saw route by hash). The "re-learned" line learns, at the start of each
window, on the previous window's posts with the current subscriptions' words: what a
remap at each window boundary would have given. The "re-learned in-window" line learns on
the first half of each window (in time) and is evaluated on its second half: what a remap
the monitor triggers within the window gives. Figures are the routing model's (Eq. 6,
C = 1), on all of a window's posts (the second half for the in-window line).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.experiments.options import Drift, WindowOptions
from benchmarks.experiments.report import WindowFigure, finish_windows
from benchmarks.experiments.runner import VARIANTS, subscribed_words
from benchmarks.machine import machine_summary
from core.corpus.arrays import Corpus
from core.errors import InputDataError, InvalidArgumentError
from core.learn import learn_mapping
from core.routing.evaluate import evaluate_table
from core.routing.table import RoutingTable
from core.subscriptions.workloads import (
    Workload,
    as_workload,
    fit_topics,
    topic_subscriptions,
    tweet_subscriptions,
)
from spark_jobs.lake.corpus_files import read_timed_corpus

COLUMNS = [
    "algorithm",
    "relearned",
    "learned_on",
    "window",
    "window_start",
    "posts",
    "subscribed_words",
    "relative_throughput",
    "throughput",
    "spread",
    "imbalance",
]
FIGURE = WindowFigure(
    "drift", COLUMNS, ("relative_throughput", "spread", "imbalance"), group_by="line"
)


# which mapping a row evaluates -> the suffix of its line in the plot and the summary
LINES = {
    "window 0": "",
    "previous window": " re-learned",
    "window's first half": " re-learned in-window",
}


@dataclasses.dataclass(frozen=True)
class Window:
    index: int  # windows since window 0 (calendar, so skipped sparse windows show)
    start: np.datetime64
    posts: Corpus
    seconds: np.ndarray | None = None  # each post's time (int64 Unix seconds)


def time_windows(
    corpus: Corpus,
    times: np.ndarray,
    *,
    window_days: float,
    min_posts: int,
    max_windows: int,
    start: np.datetime64 | None = None,
) -> list[Window]:
    """Consecutive windows of ``window_days`` from ``start`` (default: midnight UTC of the
    first post) on; window 0 is the first holding ``min_posts`` posts, sparser windows are
    skipped; at most ``max_windows`` are returned.

    Raises:
        InputDataError: if no post has a time, or fewer than two windows qualify.
    """
    if window_days <= 0 or min_posts < 1 or max_windows < 2:
        raise InvalidArgumentError("window_days > 0, min_posts >= 1, max_windows >= 2 required")
    timed = ~np.isnat(times)
    if not timed.any():
        raise InputDataError("no post has a created_at time: drift needs a timestamped corpus")
    seconds = times[timed].astype("datetime64[s]").astype(np.int64)
    length = round(window_days * 86_400)
    origin = (
        int(np.asarray(start, dtype="datetime64[s]").astype(np.int64))
        if start is not None
        else int(seconds.min()) // 86_400 * 86_400  # midnight UTC of the first post
    )
    slot = np.full(corpus.n_posts, -1, dtype=np.int64)
    slot[timed] = (seconds - origin) // length
    slot[slot < 0] = -1  # before start
    counts = np.bincount(slot[slot >= 0]) if (slot >= 0).any() else np.zeros(1, np.int64)
    dense = np.flatnonzero(counts >= min_posts)
    if dense.shape[0] < 2:
        raise InputDataError(
            f"fewer than two {window_days:g}-day windows hold {min_posts} posts "
            f"(largest: {counts.max()}); lower --min-posts or --window-days"
        )
    first = int(dense[0])
    chosen = [int(s) for s in dense if s - first < max_windows * 10][:max_windows]
    post_seconds = np.zeros(corpus.n_posts, dtype=np.int64)
    post_seconds[timed] = seconds
    windows = []
    for s in chosen:
        rows = np.flatnonzero(slot == s)
        windows.append(
            Window(
                s - first,
                np.datetime64(origin + s * length, "s"),
                corpus.select(rows),
                post_seconds[rows],
            )
        )
    return windows


def load_windows(
    path: Path, options: WindowOptions, progress: Callable[[str], None]
) -> list[Window]:
    """Read a timestamped corpus and cut it into the ``options``' windows
    (:func:`time_windows`), printing the machine, the corpus report and the windows."""
    start, window_days = options.start, options.window_days
    try:
        first_day = np.datetime64(start, "s") if start else None
    except ValueError:
        raise InvalidArgumentError(f"--start takes an ISO date, got {start!r}") from None
    progress(f"machine: {machine_summary()}")
    started = time.perf_counter()
    corpus, times, report = read_timed_corpus(path)
    progress(f"{path.name}: {report.summary()} ({time.perf_counter() - started:.0f}s)")
    windows = time_windows(
        corpus,
        times,
        window_days=window_days,
        min_posts=options.min_posts,
        max_windows=options.windows,
        start=first_day,
    )
    progress(
        f"{len(windows)} windows of {window_days:g} day(s) from {windows[0].start}: "
        + ", ".join(f"{w.index}:{w.posts.n_posts}" for w in windows)
    )
    return windows


def _subscriptions(posts: Corpus, kind: Workload, options: WindowOptions) -> Corpus:
    """``options.subscriptions`` subscriptions of the ``kind`` workload from ``posts``."""
    count, seed = options.subscriptions, options.seed
    if kind == "tweet":
        return tweet_subscriptions(posts, count, seed)
    model = fit_topics(posts, max_iter=options.lda_iterations, seed=seed)
    return topic_subscriptions(posts, model, count, seed)


def _evaluate(
    table: RoutingTable, words: frozenset[str], posts: Corpus, seed: int
) -> dict[str, Any]:
    evaluation = evaluate_table(
        dataclasses.replace(table, subscribed_words=words), posts, seed=seed
    )
    m = evaluation.candidate
    return {
        "relative_throughput": evaluation.relative_throughput,
        "throughput": m.throughput,
        "spread": m.spread_routed,
        "imbalance": m.imbalance,
    }


def _summarize(rows: list[dict[str, Any]], progress: Any) -> None:
    """Relative throughput per line and window, and what re-learning recovers."""
    windows = sorted({r["window"] for r in rows})
    lines: dict[str, dict[int, float]] = {}
    for r in rows:
        name = r["line"]
        lines.setdefault(name, {})[r["window"]] = r["relative_throughput"]
    progress("\nrelative throughput vs hash, per window (fixed: learned on window 0)")
    width = max(len(name) for name in lines) + 2
    progress(" " * width + "".join(f"{w:>6}" for w in windows))
    for name, values in lines.items():
        progress(
            f"{name:<{width}}"
            + "".join(f"{values[w]:>6.2f}" if w in values else f"{'-':>6}" for w in windows)
        )
    for name, values in lines.items():
        for suffix in (" re-learned", " re-learned in-window"):
            again = lines.get(name + suffix)
            if not again:
                continue
            later = [w for w in windows if w in again and w in values and w > windows[0]]
            fixed = float(np.mean([values[w] for w in later]))
            relearned = float(np.mean([again[w] for w in later]))
            progress(
                f"{name}: fixed mapping x{fixed:.2f} on average over windows {later[0]}-"
                f"{later[-1]} (x{values[windows[0]]:.2f} on window 0);{suffix} x"
                f"{relearned:.2f} ({(relearned / fixed - 1):+.1%})"
            )


def drift(
    options: Drift, path: Path, *, progress: Callable[[str], None] = print
) -> list[dict[str, Any]]:
    """Run the protocol above on the corpus at ``path``; write ``drift.csv`` / ``drift.png``
    under ``options.out``."""
    variants = [v for v in options.algorithms.split(",") if v]
    if "hash" not in variants:
        variants = ["hash", *variants]
    nodes, seed, as_json = options.nodes, options.seed, options.json
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise InvalidArgumentError(f"unknown algorithms {unknown}; choose from {list(VARIANTS)}")
    workload = as_workload(options.workload)
    windows = load_windows(path, options, progress)
    words: list[frozenset[str]] = []
    for window in windows:
        subs = _subscriptions(window.posts, workload, options)
        words.append(frozenset(subscribed_words(subs)))
        progress(
            f"  window {window.index}: {subs.n_posts:,} {workload}-based subscriptions, "
            f"{len(words[-1]):,} words"
        )
    rows: list[dict[str, Any]] = []

    def emit(variant: str, learned_on: str, k: int, figures: dict[str, Any], posts: int) -> None:
        window = windows[k]
        row = {
            "algorithm": variant,
            "relearned": learned_on != "window 0",
            "learned_on": learned_on,
            "window": window.index,
            "window_start": str(window.start)[:10],
            "posts": posts,
            "subscribed_words": len(words[k]),
            **figures,
            "line": variant + LINES[learned_on],
        }
        rows.append(row)
        if as_json:
            print(json.dumps(row), flush=True)
        progress(
            f"  {variant:<10} {LINES[learned_on]:<21} window {window.index:>3}"
            f"  x{row['relative_throughput']:.2f}  spread {row['spread']:.2f}"
            f"  imbalance {row['imbalance']:.2f}"
        )

    for variant in variants:
        algorithm, split = VARIANTS[variant]
        fixed = learn_mapping(
            windows[0].posts, nodes, algorithm, split=split, subscribed_words=words[0], seed=seed
        ).table
        for k in range(len(windows)):
            figures = _evaluate(fixed, words[k], windows[k].posts, seed)
            emit(variant, "window 0", k, figures, windows[k].posts.n_posts)
        if variant == "hash":
            continue  # hash has nothing to learn
        for k in range(1, len(windows)):
            table = learn_mapping(
                windows[k - 1].posts,
                nodes,
                algorithm,
                split=split,
                subscribed_words=words[k],
                seed=seed,
            ).table
            figures = _evaluate(table, words[k], windows[k].posts, seed)
            emit(variant, "previous window", k, figures, windows[k].posts.n_posts)
            # learned on the window's first half (posts are in time order), judged on the rest
            posts = windows[k].posts
            half = posts.n_posts // 2
            first, rest = (
                posts.select(np.arange(half)),
                posts.select(np.arange(half, posts.n_posts)),
            )
            table = learn_mapping(
                first, nodes, algorithm, split=split, subscribed_words=words[k], seed=seed
            ).table
            emit(
                variant,
                "window's first half",
                k,
                _evaluate(table, words[k], rest, seed),
                rest.n_posts,
            )
    for row in rows:
        row["workload"] = workload
    title = f"Drift (Fig. 7i-l): mappings learned on window 0, N={nodes}"
    return finish_windows(rows, FIGURE, _summarize, options, progress, title)
