"""evaluate: a candidate routing version against the published one and hash routing, on
held-out posts: spread, imbalance, model throughput and measured replay throughput
(real tries per matcher over the active subscriptions). Results go into the candidate's
``routing.versions`` row.

Held-out posts: ``--day`` (a whole day kept out of the learning window), else the
deterministic hold-out fraction of the learning window that ``learn`` left out.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from core.corpus.arrays import Corpus, corpus_from_arrow_lists
from core.errors import InputDataError
from core.placement.lasp import UNIT_COST, CostModel, Placement, place_subscriptions
from core.replay import replay
from core.routing.evaluate import hash_table
from core.routing.metrics import RoutingMetrics, routing_metrics
from core.routing.router import route_corpus
from core.routing.table import RoutingTable
from core.stream.costs import StreamCosts
from core.stream.costs import posts_per_second as stream_posts_per_second
from spark_jobs.common import exit_process, job_entry
from spark_jobs.jobs.sampling import HOLDOUT_FRACTION, holdout_filter
from spark_jobs.lake import routing_store
from spark_jobs.lake.stream_costs import stream_costs
from spark_jobs.lake.subscription_store import active_corpus

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from spark_jobs.lake.delta_io import Lakehouse

# the replay's timing runs on this many held-out posts (its counted work covers them all):
# timing 2M posts three times over for three tables would take minutes and tell no more
TIMING_POSTS = 200_000


class MeasuredRouting(TypedDict, total=False):
    """One routing table's figures on the held-out posts: ``model`` (the posts-only model's
    metrics) always; the replay's when there are subscriptions to count matcher work with."""

    model: dict[str, Any]
    replay_posts_per_s: float
    replay_timed_posts: int
    work_throughput: float  # counted work (lookups + matches) of the busiest matcher
    matcher_work: list[int]
    matcher_copies: list[int]  # posts routed to each matcher
    matches: int
    stream_posts_per_s: float  # the stream cost model's, a core per matcher


class MeasuredPublished(MeasuredRouting, total=False):
    routing_version: int


class EvaluationReport(TypedDict, total=False):
    """``evaluation`` in a candidate's ``routing.versions`` metrics; ``published`` and the
    ratios to it only when another version is published. A ratio is None when either side
    has no such figure (no subscriptions: no counted work)."""

    posts: int
    day: str | None
    candidate: MeasuredRouting
    hash: MeasuredRouting
    published: MeasuredPublished
    relative_model_throughput_vs_hash: float | None
    relative_replay_throughput_vs_hash: float | None
    relative_work_throughput_vs_hash: float | None
    relative_model_throughput_vs_published: float | None
    relative_work_throughput_vs_published: float | None
    # the stream's predicted speed-up (core.stream.costs), with the costs it used
    relative_stream_throughput_vs_hash: float | None
    relative_stream_throughput_vs_published: float | None
    stream_costs: dict[str, float | str]


class EvaluateSummary(EvaluationReport, total=False):
    """What the job prints (and ``evaluate_version`` returns): the report and its version."""

    routing_version: int


def held_out_posts(
    silver: DataFrame,
    *,
    day: dt.date | None,
    start: dt.date | None,
    end: dt.date | None,
    holdout_fraction: float,
) -> DataFrame:
    """Pure transform: the evaluation posts' word lists."""
    from pyspark.sql import functions as F

    if day is not None:
        return silver.where(F.col("event_day") == F.lit(day)).select("words")
    posts = silver
    if start:
        posts = posts.where(F.col("event_day") >= F.lit(start))
    if end:
        posts = posts.where(F.col("event_day") <= F.lit(end))
    return posts.where(holdout_filter(holdout_fraction)).select("words")


def placement_cost(metrics: Mapping[str, object]) -> CostModel:
    """The cost model the place job placed a version's subscriptions with (from its
    ``routing.versions.metrics``); the unit model for a version placed before it was
    recorded."""
    placement = metrics.get("placement")
    fitted = placement.get("cost_model") if isinstance(placement, dict) else None
    if not fitted:
        return UNIT_COST
    return CostModel(float(fitted["slope"]), float(fitted["intercept"]))


def _placement_of(
    lakehouse: Lakehouse, version: int, routing: RoutingTable, subs: Corpus, cost: CostModel
) -> Placement:
    """The stored placement of ``version`` for the rows of ``subs``; LASP's when a
    subscription has none (registered after placement: placed now, as the stream would)."""
    import numpy as np

    sub_ids, indptr, matchers = routing_store.placement_arrays(lakehouse, version)
    stored = Placement(
        routing.n_matchers, sub_ids, indptr, matchers, np.zeros(routing.n_matchers, np.int64)
    )
    assert subs.post_ids is not None  # active_corpus always sets the sub ids
    placement = stored.select(subs.post_ids)
    if placement is None:
        log.info("version %d: subscriptions not placed yet; placing them with LASP", version)
        return place_subscriptions(routing, subs, policy="lasp", cost=cost)
    return placement


def _measure(
    name: str,
    routing: RoutingTable,
    posts: Corpus,
    subs: Corpus | None,
    placement: Placement | None,
    seed: int,
    costs: StreamCosts,
) -> MeasuredRouting:
    started = time.perf_counter()
    model: RoutingMetrics = routing_metrics(route_corpus(routing, posts, seed=seed))
    result: MeasuredRouting = {"model": model.as_dict(with_loads=False)}
    if subs is not None and placement is not None:
        # counted figures on every post, chunk by chunk; the timing on a sample of them
        measured = replay(
            routing, placement, subs, posts, seed=seed, timing_posts=TIMING_POSTS, keep_pairs=False
        )
        result["replay_posts_per_s"] = measured.throughput
        result["replay_timed_posts"] = measured.timed_posts
        # counted work (lookups + matches) of the busiest matcher: deterministic (the publish gate)
        result["work_throughput"] = measured.work_throughput
        # each matcher's counted work, for the run report's picture of the loads
        work = measured.matcher_operations + measured.matcher_matches
        result["matcher_work"] = work.tolist()
        result["matcher_copies"] = list(model.loads)
        result["matches"] = measured.n_matches
        # what the stream would do with this mapping, by the model fitted to its batches
        result["stream_posts_per_s"] = stream_posts_per_second(
            costs, posts.n_posts, measured.n_matches, model.loads, work
        )
    log.info("%s: measured in %.1f s", name, time.perf_counter() - started)
    return result


def evaluate_version(
    lakehouse: Lakehouse, version: int | None, *, day: dt.date | None = None, seed: int = 0
) -> EvaluateSummary:
    chosen = version if version is not None else routing_store.latest_pending(lakehouse)
    if chosen is None:
        raise InputDataError("no candidate routing version to evaluate")
    meta = routing_store.get_version(lakehouse, chosen)
    params, inputs = json.loads(meta["params"]), json.loads(meta["inputs"])
    start = dt.date.fromisoformat(inputs["start"]) if inputs.get("start") else None
    end = dt.date.fromisoformat(inputs["end"]) if inputs.get("end") else None
    words = held_out_posts(
        lakehouse.read("silver.posts"),
        day=day,
        start=start,
        end=end,
        holdout_fraction=float(params.get("holdout_fraction", HOLDOUT_FRACTION)),
    )
    # word lists straight from Arrow: 2M held-out posts as Python lists took gigabytes
    posts = corpus_from_arrow_lists(words.toArrow()["words"])
    log.info("evaluating routing version %d on %s held-out posts", chosen, f"{posts.n_posts:,}")
    if posts.n_posts == 0:
        raise InputDataError("no held-out posts to evaluate on")
    candidate = routing_store.load_routing_table(lakehouse, chosen)
    active = active_corpus(lakehouse)
    subs = active if active.n_posts else None
    report: EvaluationReport = {"posts": posts.n_posts, "day": day.isoformat() if day else None}
    cost = placement_cost(json.loads(meta["metrics"] or "{}"))
    cand_place = _placement_of(lakehouse, chosen, candidate, subs, cost) if subs else None
    costs = stream_costs(lakehouse)
    report["stream_costs"] = costs.as_dict()
    report["candidate"] = _measure("candidate", candidate, posts, subs, cand_place, seed, costs)
    # one routing's placement held at a time: at 10M subscriptions each is hundreds of MB
    del cand_place
    baseline = hash_table(candidate.n_matchers, candidate.subscribed_words)
    # placed as the candidate's were (the same LASP cost model): a like-for-like floor
    base_place = place_subscriptions(baseline, subs, policy="lasp", cost=cost) if subs else None
    report["hash"] = _measure("hash routing", baseline, posts, subs, base_place, seed, costs)
    del base_place
    live = routing_store.published_version(lakehouse)
    if live is not None and live != chosen:
        current = routing_store.load_routing_table(lakehouse, live)
        live_subs_ok = subs is not None and (
            current.subscribed_words is None
            or all(w in current.subscribed_words for w in active.vocabulary.tolist())
        )
        live_place = (
            _placement_of(lakehouse, live, current, subs, cost)
            if subs is not None and live_subs_ok
            else None
        )
        report["published"] = MeasuredPublished(
            routing_version=live,
            **_measure(
                f"published version {live}",
                current,
                posts,
                subs if live_place else None,
                live_place,
                seed,
                costs,
            ),
        )

    def ratio(a: MeasuredRouting, b: MeasuredRouting, key: str) -> float | None:
        if key == "model":
            return float(a["model"]["throughput"]) / float(b["model"]["throughput"])
        if key in ("work", "stream"):
            figure = "work_throughput" if key == "work" else "stream_posts_per_s"
            if a.get(figure) and b.get(figure):
                return float(a[figure]) / float(b[figure])  # type: ignore[literal-required]
            return None
        if "replay_posts_per_s" in a and "replay_posts_per_s" in b:
            return a["replay_posts_per_s"] / b["replay_posts_per_s"]
        return None

    report["relative_model_throughput_vs_hash"] = ratio(
        report["candidate"], report["hash"], "model"
    )
    report["relative_replay_throughput_vs_hash"] = ratio(
        report["candidate"], report["hash"], "replay"
    )
    report["relative_work_throughput_vs_hash"] = ratio(report["candidate"], report["hash"], "work")
    report["relative_stream_throughput_vs_hash"] = ratio(
        report["candidate"], report["hash"], "stream"
    )
    if "published" in report:
        report["relative_stream_throughput_vs_published"] = ratio(
            report["candidate"], report["published"], "stream"
        )
        report["relative_model_throughput_vs_published"] = ratio(
            report["candidate"], report["published"], "model"
        )
        report["relative_work_throughput_vs_published"] = ratio(
            report["candidate"], report["published"], "work"
        )
    metrics = json.loads(meta["metrics"] or "{}")
    metrics["evaluation"] = report
    routing_store.update_versions(lakehouse, {chosen: {"metrics": json.dumps(metrics)}})
    return EvaluateSummary(routing_version=chosen, **report)


@dataclass(frozen=True)
class EvaluateConfig:
    """The evaluation job's options."""

    version: int | None = None
    """routing version (default: the latest candidate)"""
    day: dt.date | None = None
    """evaluate on this held-out day only (default: every held-out post)"""
    seed: int = 0
    """seed of the split-word version choice"""


def run(config: EvaluateConfig, lakehouse: Lakehouse) -> int:
    report = evaluate_version(lakehouse, config.version, day=config.day, seed=config.seed)
    print(json.dumps(report))
    return 0


main = job_entry("evaluate", __doc__, EvaluateConfig, run)


if __name__ == "__main__":
    exit_process(main())
