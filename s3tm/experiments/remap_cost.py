"""``s3tm experiment remap-cost`` (issue 15, paper 004's lesson): full vs incremental remaps.

Protocol: posts grouped into consecutive time windows (as ``drift``). One set of
subscriptions (tweet- or topic-based, drawn from window 0's posts) lives through all
windows: it is what a remap moves. Window 0: a full ``salb2`` mapping, LASP placement.
At the end of each window t >= 1 two chains remap on window t's posts:

- **full**: ``salb2`` from scratch;
- **incremental**: :func:`core.learn.remap_incremental` of the chain's previous mapping,
  re-placing at most ``--max-moved`` of the subscriptions.

Both place with LASP, keeping every subscription whose matcher stays eligible (as the
``place`` job does), and are judged on window t + 1's posts (what the mapping serves until
the next remap): model relative throughput vs hash (Eq. 6), subscriptions whose matchers
changed, matchers whose subscription set changed, and the time to build the access-
predicate indexes of those matchers on one core (the stream's warm-up after a switch, if it
rebuilt only changed matchers; today it rebuilds all, the ``all matchers`` column).
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.corpus.arrays import Corpus
from core.errors import InvalidArgumentError
from core.learn import learn_mapping, remap_incremental
from core.learn.api import DEFAULT_PENALTY
from core.matching.predicate import AccessPredicateMatcher
from core.placement.lasp import Placement, moved_subscriptions, place_subscriptions
from core.routing.evaluate import evaluate_table
from core.routing.table import RoutingTable
from s3tm.experiments.drift import _subscriptions, load_windows
from s3tm.experiments.report import plot_panels, print_rows, write_csv
from s3tm.experiments.runner import subscribed_words

COLUMNS = [
    "remap",
    "window",
    "window_start",
    "posts_next",
    "relative_throughput",
    "moved_subscriptions",
    "moved_fraction",
    "changed_matchers",
    "rebuild_changed_s",
    "rebuild_all_s",
]


def _build_seconds(placement: Placement, subs: Corpus, matchers: Sequence[int]) -> float:
    """One core's time to build the access-predicate indexes of ``matchers``."""
    sub_ptr, sub_rows = placement.subscriptions_by_matcher()
    started = time.perf_counter()
    for i in matchers:
        rows = sub_rows[sub_ptr[i] : sub_ptr[i + 1]].astype(np.int64)
        if rows.size == 0:
            continue
        picked = subs.select(rows)
        AccessPredicateMatcher(rows, picked.indptr, picked.indices)
    return time.perf_counter() - started


def _changed_matchers(before: Placement, after: Placement) -> list[int]:
    """Matchers whose set of subscriptions differs between two placements."""

    def sets(p: Placement) -> list[set[int]]:
        ptr, rows = p.subscriptions_by_matcher()
        ids = p.sub_ids
        return [set(ids[rows[ptr[i] : ptr[i + 1]]].tolist()) for i in range(p.n_matchers)]

    old, new = sets(before), sets(after)
    return [i for i in range(after.n_matchers) if old[i] != new[i]]


def remap_cost(
    path: Path,
    *,
    nodes: int,
    window_days: float,
    min_posts: int,
    max_windows: int,
    start: str | None = None,
    workload: str,
    n_subscriptions: int,
    max_moved: float,
    lda_iterations: int,
    seed: int,
    out: Path,
    penalty: float | None = None,
    as_json: bool = False,
    progress: Any = print,
) -> list[dict[str, Any]]:
    """Run the protocol above; write ``remap_cost.csv`` / ``.png`` under ``out``."""
    if workload not in ("topic", "tweet"):
        raise InvalidArgumentError(f"--workload takes topic or tweet, got {workload!r}")
    if not 0.0 <= max_moved <= 1.0:
        raise InvalidArgumentError(f"--max-moved must be within [0, 1], got {max_moved}")
    penalty = DEFAULT_PENALTY if penalty is None else penalty
    if not math.isfinite(penalty) or penalty < 0:
        raise InvalidArgumentError(f"--penalty must be a finite number >= 0, got {penalty}")
    windows = load_windows(
        path,
        window_days=window_days,
        min_posts=min_posts,
        max_windows=max_windows,
        start=start,
        progress=progress,
    )
    if len(windows) < 3:
        raise InvalidArgumentError(
            f"remap-cost needs 3 windows (learn, remap, serve); {len(windows)} qualify"
        )
    subs = _subscriptions(windows[0].posts, workload, n_subscriptions, lda_iterations, seed)
    words = frozenset(subscribed_words(subs))
    # subscriptions per word (a subscription's words are distinct in the corpus rows)
    per_word = Counter(subs.vocabulary[subs.indices].tolist())
    progress(
        f"{subs.n_posts:,} {workload}-based subscriptions from window 0 ({len(words):,} "
        f"words), N={nodes}, incremental budget {max_moved:.0%}, penalty {penalty:g}"
    )
    first = learn_mapping(windows[0].posts, nodes, "salb2", subscribed_words=words, seed=seed)
    start_placement = place_subscriptions(first.table, subs, seed=seed)
    chains: dict[str, tuple[RoutingTable, Placement]] = {
        "full": (first.table, start_placement),
        "incremental": (first.table, start_placement),
    }
    rows: list[dict[str, Any]] = []
    for k in range(1, len(windows) - 1):
        posts, serve = windows[k].posts, windows[k + 1].posts
        for remap, (table, placement) in list(chains.items()):
            started = time.perf_counter()
            if remap == "full":
                learned = learn_mapping(posts, nodes, "salb2", subscribed_words=words, seed=seed)
            else:
                learned = remap_incremental(
                    posts,
                    table,
                    per_word,
                    n_subscriptions=subs.n_posts,
                    max_moved_fraction=max_moved,
                    penalty=penalty,
                    subscribed_words=words,
                    seed=seed,
                )
            learn_s = time.perf_counter() - started
            placed = place_subscriptions(
                learned.table, subs, seed=seed, previous=placement.single_matchers()
            )
            moved = moved_subscriptions(placement.matcher_sets(), placed)
            changed = _changed_matchers(placement, placed)
            evaluation = evaluate_table(learned.table, serve, seed=seed)
            row = {
                "remap": remap,
                "window": windows[k].index,
                "window_start": str(windows[k].start)[:10],
                "posts_next": serve.n_posts,
                "relative_throughput": evaluation.relative_throughput,
                "spread": evaluation.candidate.spread_routed,
                "imbalance": evaluation.candidate.imbalance,
                "moved_subscriptions": moved,
                "moved_fraction": moved / subs.n_posts,
                "changed_matchers": len(changed),
                "rebuild_changed_s": _build_seconds(placed, subs, changed),
                "rebuild_all_s": _build_seconds(placed, subs, range(nodes)),
                "learn_s": learn_s,
                "workload": workload,
            }
            rows.append(row)
            chains[remap] = (learned.table, placed)
            if as_json:
                print(json.dumps(row), flush=True)
            progress(
                f"  window {row['window']:>3} {remap:<11} x{row['relative_throughput']:.2f} "
                f"on the next window, {moved:,} subscriptions moved "
                f"({row['moved_fraction']:.1%}), {len(changed)} matchers changed "
                f"({row['rebuild_changed_s']:.3f}s to rebuild, all {row['rebuild_all_s']:.3f}s)"
            )
    if not as_json:
        print_rows(rows, COLUMNS)
    _summarize(rows, progress)
    write_csv(rows, out / "remap_cost.csv")
    plot_panels(
        rows,
        x="window",
        panels=["relative_throughput", "moved_fraction", "rebuild_changed_s"],
        group_by="remap",
        split_by="workload",
        path=out / "remap_cost.png",
        title=f"Full vs incremental remap, N={nodes}",
        log_x=False,
    )
    progress(f"wrote {out / 'remap_cost.csv'} and {out / 'remap_cost.png'}")
    return rows


def _summarize(rows: list[dict[str, Any]], progress: Any) -> None:
    full = {r["window"]: r for r in rows if r["remap"] == "full"}
    inc = {r["window"]: r for r in rows if r["remap"] == "incremental"}
    ratios = [inc[w]["relative_throughput"] / full[w]["relative_throughput"] for w in full]
    progress(
        f"\nincremental / full relative throughput: mean {np.mean(ratios):.3f}, "
        f"min {min(ratios):.3f} over {len(ratios)} remaps"
    )
    for name, chain in (("full", full), ("incremental", inc)):
        moved = [r["moved_fraction"] for r in chain.values()]
        rebuild = [r["rebuild_changed_s"] for r in chain.values()]
        progress(
            f"{name}: subscriptions moved per remap mean {np.mean(moved):.1%}, max "
            f"{max(moved):.1%}; rebuild of changed matchers mean {np.mean(rebuild):.3f}s"
        )
