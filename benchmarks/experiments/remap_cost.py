"""``s3tm experiment remap-cost`` (issue 15, paper 004's lesson): full vs incremental remaps.

Protocol: posts grouped into consecutive time windows (as ``drift``). One set of
subscriptions (tweet- or topic-based, drawn from window 0's posts) lives through all
windows: it is what a remap moves. Window 0: a full ``salb2`` mapping, LASP placement.
At the end of each window t >= 1 two chains remap on window t's posts:

- **full**: ``salb2`` from scratch, its matcher ids renamed to keep the most subscriptions
  where the chain's mapping has them (:func:`core.learn.align_to_published`);
- **incremental**: :func:`core.learn.remap_incremental` of the chain's previous mapping,
  re-placing at most ``--max-moved`` of the subscriptions;
- **policy**: what the remap DAG does (``learn-version --incremental``): the incremental
  remap of the chain's previous mapping, unless the full one beats its throughput on the
  window's held-out posts by more than ``--full-remap-gain`` (then the full one; the
  ``chosen`` column says which).

Every chain learns on the window's training posts; 20% of them are held out (as the learn
job holds out the posts ``evaluate`` judges), and the policy's choice is made there: on
the posts it learned from, a full remap always looks better (``training_relative_
throughput``: it was fitted to them).

Both place with LASP, keeping every subscription whose matcher stays eligible (as the
``place`` job does), and are judged on window t + 1's posts (what the mapping serves until
the next remap): model relative throughput vs hash (Eq. 6; on the learning window's
training and held-out posts too), counted matcher work (lookups + matches, the publish
gate's measure) relative to hash's, subscriptions whose matchers
changed, matchers whose subscription set changed, and the time to build the access-
predicate indexes of those matchers on one core (the stream's warm-up after a switch, if it
rebuilt only changed matchers; today it rebuilds all, the ``all matchers`` column).
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.experiments.drift import Window, _subscriptions, load_windows
from benchmarks.experiments.options import RemapCost
from benchmarks.experiments.report import WindowFigure, finish_windows
from benchmarks.experiments.runner import subscribed_words
from core.corpus import holdout_mask
from core.corpus.arrays import Corpus
from core.errors import InvalidArgumentError
from core.learn import align_to_published, learn_mapping, remap_incremental
from core.learn.api import DEFAULT_PENALTY, gain_of_full_remap
from core.matching.predicate import AccessPredicateMatcher
from core.placement.lasp import Placement, moved_subscriptions, place_subscriptions
from core.remap_options import DEFAULT_FULL_REMAP_GAIN, HOLDOUT_FRACTION
from core.replay import matcher_work
from core.routing.evaluate import evaluate_table
from core.routing.table import RoutingTable
from core.subscriptions.workloads import as_workload

# of each window's posts, HOLDOUT_FRACTION are held out from learning to judge the
# policy's choice (the learn job's default --holdout-fraction)
# recent: the window's latest posts (learn on the past, judge on what came after it);
# random: a hash sample of them (the same week's topics on both sides)
JUDGES = ("recent", "random")

COLUMNS = [
    "remap",
    "chosen",
    "window",
    "window_start",
    "posts_next",
    "training_relative_throughput",
    "held_out_relative_throughput",
    "relative_throughput",
    "work_relative_throughput",
    "moved_subscriptions",
    "moved_fraction",
    "moved_fraction_unaligned",
    "changed_matchers",
    "rebuild_changed_s",
    "rebuild_all_s",
]
FIGURE = WindowFigure(
    "remap_cost",
    COLUMNS,
    ("relative_throughput", "moved_fraction", "rebuild_changed_s"),
    group_by="remap",
)


def _held_out(window: Window, judge: str, seed: int) -> np.ndarray:
    """The posts of ``window`` held out from learning to judge the policy's choice."""
    n = window.posts.n_posts
    if judge == "recent" and window.seconds is not None:
        # the latest HOLDOUT_FRACTION of the posts by time (ties by position: stable)
        latest = np.argsort(window.seconds, kind="stable")[n - round(HOLDOUT_FRACTION * n) :]
        held = np.zeros(n, dtype=bool)
        held[latest] = True
        return held
    return holdout_mask(n, HOLDOUT_FRACTION, seed)


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


def _work_throughput(
    table: RoutingTable, placement: Placement | None, subs: Corpus, posts: Corpus, seed: int
) -> float:
    """Posts / the busiest matcher's counted work (lookups + matches) when ``table`` serves
    ``posts`` (``placement`` None: LASP's fresh placement)."""
    if placement is None:
        placement = place_subscriptions(table, subs, seed=seed)
    busiest = int(matcher_work(table, placement, subs, posts, seed=seed).max())
    return posts.n_posts / busiest if busiest > 0 else float("nan")


def _changed_matchers(before: Placement, after: Placement) -> list[int]:
    """Matchers whose set of subscriptions differs between two placements."""

    def sets(p: Placement) -> list[set[int]]:
        ptr, rows = p.subscriptions_by_matcher()
        ids = p.sub_ids
        return [set(ids[rows[ptr[i] : ptr[i + 1]]].tolist()) for i in range(p.n_matchers)]

    old, new = sets(before), sets(after)
    return [i for i in range(after.n_matchers) if old[i] != new[i]]


def remap_cost(
    options: RemapCost, path: Path, *, progress: Callable[[str], None] = print
) -> list[dict[str, Any]]:
    """Run the protocol above on the corpus at ``path``; write ``remap_cost.csv`` /
    ``.png`` under ``options.out``."""
    workload = as_workload(options.workload)
    nodes, seed, as_json, judge = options.nodes, options.seed, options.json, options.judge
    max_moved, penalty = options.max_moved, options.penalty
    full_remap_gain = options.full_remap_gain
    if not 0.0 <= max_moved <= 1.0:
        raise InvalidArgumentError(f"--max-moved must be within [0, 1], got {max_moved}")
    penalty = DEFAULT_PENALTY if penalty is None else penalty
    if not math.isfinite(penalty) or penalty < 0:
        raise InvalidArgumentError(f"--penalty must be a finite number >= 0, got {penalty}")
    full_remap_gain = DEFAULT_FULL_REMAP_GAIN if full_remap_gain is None else full_remap_gain
    if judge not in JUDGES:
        raise InvalidArgumentError(f"--judge takes {' or '.join(JUDGES)}, got {judge!r}")
    if not full_remap_gain >= 0:  # NaN too
        raise InvalidArgumentError(f"--full-remap-gain must be >= 0, got {full_remap_gain}")
    windows = load_windows(path, options, progress)
    if len(windows) < 3:
        raise InvalidArgumentError(
            f"remap-cost needs 3 windows (learn, remap, serve); {len(windows)} qualify"
        )
    subs = _subscriptions(windows[0].posts, workload, options)
    words = frozenset(subscribed_words(subs))
    # subscriptions per word (a subscription's words are distinct in the corpus rows)
    per_word = Counter(subs.vocabulary[subs.indices].tolist())
    progress(
        f"{subs.n_posts:,} {workload}-based subscriptions from window 0 ({len(words):,} "
        f"words), N={nodes}, incremental budget {max_moved:.0%}, penalty {penalty:g}"
    )
    # every salb2 learns as the learn job does: the subscriptions weigh the words
    first = learn_mapping(
        windows[0].posts, nodes, "salb2", subscribed_words=words, seed=seed, subscriptions=subs
    )
    start_placement = place_subscriptions(first.table, subs, seed=seed)
    chains: dict[str, tuple[RoutingTable, Placement]] = {
        remap: (first.table, start_placement) for remap in ("full", "incremental", "policy")
    }
    rows: list[dict[str, Any]] = []
    for k in range(1, len(windows) - 1):
        window, serve = windows[k].posts, windows[k + 1].posts
        held = _held_out(windows[k], judge, seed + k)
        posts, held_out = window.select(~held), window.select(held)
        # the full remap does not depend on the chain: learned once, used by both chains
        # that may take it
        started = time.perf_counter()
        full = learn_mapping(
            posts, nodes, "salb2", subscribed_words=words, seed=seed, subscriptions=subs
        )
        full_s = time.perf_counter() - started
        hash_work = _work_throughput(
            learn_mapping(posts, nodes, "hash", subscribed_words=words, seed=seed).table,
            None,
            subs,
            serve,
            seed,
        )
        full_fit = evaluate_table(full.table, posts, seed=seed)
        full_judged = evaluate_table(full.table, held_out, seed=seed)
        for remap, (table, placement) in list(chains.items()):
            # a full remap takes the matcher ids of the chain's mapping where it can
            aligned = align_to_published(full, table, per_word)
            chosen, learned, learn_s = "full", aligned, full_s
            fit, judged = full_fit, full_judged
            if remap != "full":
                started = time.perf_counter()
                learned = remap_incremental(
                    posts,
                    table,
                    per_word,
                    n_subscriptions=subs.n_posts,
                    max_moved_fraction=max_moved,
                    penalty=penalty,
                    subscribed_words=words,
                    seed=seed,
                    subscriptions=subs,
                    # the policy learns the full remap beside it (as the learn job does)
                    # and counts the subscriptions' matches once; the incremental chain
                    # alone counts them itself, so its learn time includes them
                    frequencies=full.subscription_frequencies if remap == "policy" else None,
                )
                learn_s = time.perf_counter() - started
                chosen, fit = "incremental", evaluate_table(learned.table, posts, seed=seed)
                judged = evaluate_table(learned.table, held_out, seed=seed)
                if remap == "policy":
                    learn_s += full_s  # the DAG learns the full remap beside it to compare
                    gain = gain_of_full_remap(
                        full_judged.candidate.throughput, judged.candidate.throughput
                    )
                    if gain > full_remap_gain:
                        chosen, learned, fit, judged = "full", aligned, full_fit, full_judged
            placed = place_subscriptions(
                learned.table, subs, seed=seed, previous=placement.single_matchers()
            )
            moved = moved_subscriptions(placement.matcher_sets(), placed)
            # what the full remap would move with its own matcher ids (the renaming's gain)
            moved_unaligned = moved
            if chosen == "full":
                moved_unaligned = moved_subscriptions(
                    placement.matcher_sets(),
                    place_subscriptions(
                        full.table, subs, seed=seed, previous=placement.single_matchers()
                    ),
                )
            changed = _changed_matchers(placement, placed)
            evaluation = evaluate_table(learned.table, serve, seed=seed)
            row = {
                "remap": remap,
                "chosen": chosen,
                "window": windows[k].index,
                "window_start": str(windows[k].start)[:10],
                "posts_next": serve.n_posts,
                "training_relative_throughput": fit.relative_throughput,
                "held_out_relative_throughput": judged.relative_throughput,
                "relative_throughput": evaluation.relative_throughput,
                # counted matcher work (lookups + matches) on the next window, vs hash
                "work_relative_throughput": _work_throughput(
                    learned.table, placed, subs, serve, seed
                )
                / hash_work,
                "spread": evaluation.candidate.spread_routed,
                "imbalance": evaluation.candidate.imbalance,
                "moved_subscriptions": moved,
                "moved_fraction": moved / subs.n_posts,
                "moved_fraction_unaligned": moved_unaligned / subs.n_posts,
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
            name = remap if remap != "policy" else f"policy ({chosen})"
            progress(
                f"  window {row['window']:>3} {name:<20} x{row['relative_throughput']:.2f} "
                f"on the next window (x{row['training_relative_throughput']:.2f} on its own, "
                f"x{row['held_out_relative_throughput']:.2f} held out), "
                f"{moved:,} subscriptions moved "
                f"({row['moved_fraction']:.1%}), {len(changed)} matchers changed "
                f"({row['rebuild_changed_s']:.3f}s to rebuild, all {row['rebuild_all_s']:.3f}s)"
            )
    title = f"Full vs incremental remap, N={nodes}"
    return finish_windows(rows, FIGURE, _summarize, options, progress, title)


def _summarize(rows: list[dict[str, Any]], progress: Any) -> None:
    chains = {
        remap: {r["window"]: r for r in rows if r["remap"] == remap}
        for remap in ("full", "incremental", "policy")
    }
    full = chains["full"]
    for remap in ("incremental", "policy"):
        chain = chains[remap]
        for label, column in (
            ("relative throughput on the next window", "relative_throughput"),
            ("counted work on the next window", "work_relative_throughput"),
            ("on the posts it learned from", "training_relative_throughput"),
            ("on the learning window's held-out posts", "held_out_relative_throughput"),
        ):
            ratios = [chain[w][column] / full[w][column] for w in full]
            progress(
                f"{remap} / full {label}: mean {np.mean(ratios):.3f}, min {min(ratios):.3f} "
                f"over {len(ratios)} remaps"
            )
    fallbacks = sum(r["chosen"] == "full" for r in chains["policy"].values())
    progress(f"policy: {fallbacks} of {len(full)} remaps learned from scratch")
    for name, chain in chains.items():
        moved = [r["moved_fraction"] for r in chain.values()]
        rebuild = [r["rebuild_changed_s"] for r in chain.values()]
        unaligned = [r["moved_fraction_unaligned"] for r in chain.values()]
        own_ids = (
            f" (its full remaps with their own matcher ids: mean {np.mean(unaligned):.1%})"
            if any(r["chosen"] == "full" for r in chain.values())
            else ""
        )
        progress(
            f"{name}: subscriptions moved per remap mean {np.mean(moved):.1%}, max "
            f"{max(moved):.1%}{own_ids}; rebuild of changed matchers mean {np.mean(rebuild):.3f}s"
        )
