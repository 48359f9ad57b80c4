"""The incremental remap's rule: refine the published version, or learn from scratch.

A full remap is already learned; the incremental one refines the published version moving
few subscription words. The full one wins when nothing is published, when N changed, or
when it gains more than ``full_remap_gain`` (:func:`core.learn.api.gain_of_full_remap`) on
posts neither learner saw: on its own training posts a full remap always looks better.
"""

from __future__ import annotations

import logging
from collections import Counter

from core.corpus.arrays import Corpus
from core.learn.api import LearnedMapping, gain_of_full_remap, remap_incremental
from core.learn.remap_params import RemapChoice
from core.routing.metrics import RoutingMetrics, routing_metrics
from core.routing.router import route_corpus
from core.routing.table import RoutingTable

log = logging.getLogger(__name__)


def incremental_or_full(
    published_table: tuple[int, RoutingTable] | None,
    word_subscriptions: Counter[str],
    corpus: Corpus,
    judge: Corpus | None,
    full: LearnedMapping,
    full_metrics: RoutingMetrics,
    n_subscriptions: int,
    sub_corpus: Corpus | None,
    words: list[str] | None,
    *,
    max_moved: float,
    full_remap_gain: float,
    seed: int,
    min_parts: dict[str, int],
) -> tuple[LearnedMapping, RoutingMetrics, RemapChoice]:
    """The incremental remap of the published version, unless the full one (already
    learned, with its training metrics) must win: nothing published, N changed, or it
    gains more than allowed on ``judge``, the window's held-out posts (the training posts
    when the window has none)."""
    if published_table is None:
        return full, full_metrics, {"remap": "full", "remap_reason": "no published version"}
    published, table = published_table
    n_matchers = full.table.n_matchers
    if table.n_matchers != n_matchers:
        reason = f"N changed ({table.n_matchers} -> {n_matchers})"
        return full, full_metrics, {"remap": "full", "remap_reason": reason}
    refined = remap_incremental(
        corpus,
        table,
        word_subscriptions,
        n_subscriptions=n_subscriptions,
        max_moved_fraction=max_moved,
        subscribed_words=words,
        seed=seed,
        min_parts=min_parts,
        subscriptions=sub_corpus,
        # the same window's subscription counts, already taken by the full remap
        frequencies=full.subscription_frequencies,
    )
    metrics = routing_metrics(route_corpus(refined.table, corpus, seed=seed))
    judged_on = "held-out posts" if judge is not None else "training posts (no held-out post)"
    if judge is None:
        full_judged, judged = full_metrics.throughput, metrics.throughput
    else:
        full_judged = routing_metrics(route_corpus(full.table, judge, seed=seed)).throughput
        judged = routing_metrics(route_corpus(refined.table, judge, seed=seed)).throughput
    gain = gain_of_full_remap(full_judged, judged)
    manifest = refined.table.manifest
    about: RemapChoice = {
        "from_version": published,
        "moved_tokens": int(manifest["moved_tokens"]),
        "moved_subscription_words": int(manifest["moved_subscription_words"]),
        "move_budget": int(manifest["move_budget"]),
        "incremental_training_throughput": round(metrics.throughput, 3),
        "full_training_throughput": round(full_metrics.throughput, 3),
        "remap_judged_on": judged_on,
        "judged_posts": judge.n_posts if judge is not None else corpus.n_posts,
        "incremental_judged_throughput": round(judged, 3),
        "full_judged_throughput": round(full_judged, 3),
        "full_remap_gain": round(gain, 4),
    }
    if gain > full_remap_gain:
        reason = f"a full remap gains {gain:.1%} > {full_remap_gain:.1%} on the {judged_on}"
        log.info("incremental remap of version %d: %s, learning from scratch", published, reason)
        return full, full_metrics, {**about, "remap": "full", "remap_reason": reason}
    log.info(
        "incremental remap of version %d: %d tokens moved (%d of %d subscription words "
        "allowed), a full remap would gain %.1f%% on the %s",
        published,
        about["moved_tokens"],
        about["moved_subscription_words"],
        about["move_budget"],
        100 * gain,
        judged_on,
    )
    reason = f"a full remap gains {gain:.1%} <= {full_remap_gain:.1%} on the {judged_on}"
    return refined, metrics, {**about, "remap": "incremental", "remap_reason": reason}
