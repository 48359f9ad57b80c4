"""place: LASP placement of all active subscriptions for a routing version ->
``routing.placements``. The cost function f is fitted to the trie's measured operations on
a sample of silver posts (paper Fig. 3) unless ``--unit-cost`` is given.

A subscription placed on one matcher under the published version stays there while that
matcher is still eligible for it (a remap re-places only the subscriptions whose words
moved: an incremental remap moves few); the summary and the version's metrics count the
subscriptions that moved."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from core.corpus.arrays import Corpus, corpus_from_word_lists
from core.errors import InputDataError
from core.placement.cost import fit_cost_model
from core.placement.lasp import (
    UNIT_COST,
    CostModel,
    Placement,
    moved_subscriptions,
    place_subscriptions,
)
from spark_jobs import failpoints
from spark_jobs.common import exit_process, job_entry
from spark_jobs.lake.routing_store import (
    get_version,
    latest_pending,
    load_routing_table,
    placement_arrays,
    published_version,
    update_versions,
    write_placements,
)
from spark_jobs.lake.subscription_store import active_corpus

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from spark_jobs.lake.delta_io import Lakehouse


def sample_posts(lakehouse: Lakehouse, n: int, seed: int) -> Corpus | None:
    """Up to ``n`` silver posts (for fitting the cost model), or None when silver is empty."""
    if not lakehouse.exists("silver.posts"):
        return None
    frame = lakehouse.read("silver.posts").select("words")
    total = frame.count()
    if total == 0:
        return None
    rows = frame.sample(fraction=min(1.0, 1.2 * n / total), seed=seed).limit(n).toArrow()
    return corpus_from_word_lists(rows["words"].to_pylist())


def published_placement(
    lakehouse: Lakehouse, version: int, n_matchers: int
) -> tuple[int | None, Placement | None]:
    """The published version and its stored placement, when it is another version than
    ``version`` with the same N (else nothing stays in place: ``(None, None)``)."""
    published = published_version(lakehouse)
    if published in (None, version) or not lakehouse.exists("routing.placements"):
        return None, None
    if int(get_version(lakehouse, published)["n_matchers"]) != n_matchers:
        return None, None
    sub_ids, indptr, matchers = placement_arrays(lakehouse, published)
    unknown = np.zeros(n_matchers, dtype=np.int64)  # |H(i)| is not stored
    return published, Placement(n_matchers, sub_ids, indptr, matchers, unknown)


class PlaceSummary(TypedDict, total=False):
    """What the place job did (printed as JSON; the remap DAG's report reads it)."""

    routing_version: int
    subscriptions: int
    placement_rows: int
    multicast: int
    cost_model: dict[str, float]
    previous_version: int | None
    moved_subscriptions: int | None
    seconds: float


def place_version(
    lakehouse: Lakehouse, version: int | None, *, unit_cost: bool = False, seed: int = 0
) -> tuple[int, Placement | None, PlaceSummary]:
    """Place the active subscriptions for ``version`` (default: the latest candidate)."""
    chosen = version if version is not None else latest_pending(lakehouse)
    if chosen is None:
        raise InputDataError("no candidate routing version to place subscriptions for")
    started = time.perf_counter()
    corpus = active_corpus(lakehouse)
    if corpus.n_posts == 0:
        log.info("version %d: no active subscription to place", chosen)
        write_placements(
            lakehouse,
            chosen,
            np.array([], dtype=np.int64),
            np.zeros(1, dtype=np.int64),
            np.array([], dtype=np.int32),
        )
        return chosen, None, {"routing_version": chosen, "subscriptions": 0}
    routing = load_routing_table(lakehouse, chosen)
    cost: CostModel = UNIT_COST
    posts = None if unit_cost else sample_posts(lakehouse, 20_000, seed)
    if posts is not None and corpus.n_posts >= 8:
        cost = fit_cost_model(corpus, posts, seed=seed).model
    kept_from, before = published_placement(lakehouse, chosen, routing.n_matchers)
    placement = place_subscriptions(
        routing, corpus, policy="lasp", cost=cost, seed=seed, previous=before
    )
    failpoints.crash("place:before-commit")
    rows = write_placements(
        lakehouse, chosen, placement.sub_ids, placement.indptr, placement.matchers
    )
    moved = moved_subscriptions(before, placement) if before is not None else None
    summary: PlaceSummary = {
        "routing_version": chosen,
        "subscriptions": corpus.n_posts,
        "placement_rows": rows,
        "multicast": placement.multicast_count(),
        "cost_model": {"slope": cost.slope, "intercept": cost.intercept},
        "previous_version": kept_from,
        "moved_subscriptions": moved,
        "seconds": round(time.perf_counter() - started, 3),
    }
    if kept_from is not None:
        log.info(
            "version %d: %d of %d subscriptions moved from version %d's placement",
            chosen,
            moved,
            corpus.n_posts,
            kept_from,
        )
    metrics = json.loads(get_version(lakehouse, chosen)["metrics"] or "{}")
    metrics["placement"] = {
        "subscriptions": corpus.n_posts,
        "previous_version": kept_from,
        "moved_subscriptions": moved,
        # evaluate places hash routing's subscriptions with the same model: a like-for-like
        # comparison (LASP's choice depends on it)
        "cost_model": {"slope": cost.slope, "intercept": cost.intercept},
    }
    update_versions(lakehouse, {chosen: {"metrics": json.dumps(metrics)}})
    return chosen, placement, summary


@dataclass(frozen=True)
class PlaceConfig:
    """The placement job's options."""

    version: int | None = None
    """routing version (default: the latest candidate)"""
    unit_cost: bool = False
    """f(x) = x instead of fitting the cost model"""
    seed: int = 0
    """seed of the placement's tie-breaking and sampling"""


def run(config: PlaceConfig, lakehouse: Lakehouse) -> int:
    _, _, summary = place_version(
        lakehouse, config.version, unit_cost=config.unit_cost, seed=config.seed
    )
    print(json.dumps(summary))
    return 0


main = job_entry("place", __doc__, PlaceConfig, run)


if __name__ == "__main__":
    exit_process(main())
