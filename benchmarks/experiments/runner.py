"""One experiment configuration: learn -> place (LASP) -> model metrics + measured replay."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.corpus.arrays import Corpus
from core.learn import algorithm_label, learn_mapping
from core.placement.cost import CostFit, fit_cost_model
from core.placement.lasp import place_subscriptions
from core.replay import replay
from core.routing.evaluate import evaluate_table
from core.subscriptions.workloads import (
    TopicModel,
    Workload,
    fit_topics,
    topic_subscriptions,
    tweet_subscriptions,
)

log = logging.getLogger(__name__)

VARIANTS: dict[str, tuple[str, bool]] = {
    "hash": ("hash", False),
    "gC": ("gC", False),
    "gFC": ("gFC", False),
    "gFCL": ("gFCL", False),
    "gNFCL": ("gNFCL", False),
    "salb": ("salb", False),
    "salb+split": ("salb", True),
    "salb2": ("salb2", True),  # salb2 splits hot words as part of its form
}


def subscribed_words(subs: Corpus) -> set[str]:
    return set(subs.vocabulary[np.unique(subs.indices)].tolist())


@dataclass
class Workloads:
    """Tweet- and topic-based subscriptions over the training posts, built once, and the
    cost model fitted to each (paper Fig. 3)."""

    training: Corpus
    held_out: Corpus
    seed: int
    lda_iterations: int
    _topics: TopicModel | None = None
    _cache: dict[tuple[str, int], Corpus] = field(default_factory=dict)
    _costs: dict[tuple[str, int], CostFit] = field(default_factory=dict)

    def get(self, kind: Workload, n: int) -> Corpus:
        key = (kind, n)
        if key not in self._cache:
            if kind == "tweet":
                self._cache[key] = tweet_subscriptions(self.training, n, self.seed)
            else:
                if self._topics is None:
                    log.info("fitting LDA (100 topics) on %d posts ...", self.training.n_posts)
                    self._topics = fit_topics(
                        self.training, max_iter=self.lda_iterations, seed=self.seed
                    )
                self._cache[key] = topic_subscriptions(self.training, self._topics, n, self.seed)
        return self._cache[key]

    def cost(self, kind: Workload, n: int) -> CostFit:
        key = (kind, n)
        if key not in self._costs:
            self._costs[key] = fit_cost_model(self.get(kind, n), self.held_out, seed=self.seed)
        return self._costs[key]


def run_configuration(
    training: Corpus,
    held_out: Corpus,
    subs: Corpus,
    cost: CostFit,
    n_matchers: int,
    variant: str,
    *,
    hash_replay: tuple[float, float] | None,
    seed: int = 0,
    repeats: int = 3,
) -> dict[str, Any]:
    """Learn ``variant`` on the subscriptions' words (``salb2`` also weighs them by their
    matches), place with LASP, evaluate both ways."""
    algorithm, split = VARIANTS[variant]
    started = time.perf_counter()
    learned = learn_mapping(
        training,
        n_matchers,
        algorithm,
        split=split,
        subscribed_words=subscribed_words(subs),
        seed=seed,
        subscriptions=subs,
    )
    placement = place_subscriptions(learned.table, subs, policy="lasp", cost=cost.model, seed=seed)
    model = evaluate_table(learned.table, held_out, seed=seed)
    measured = replay(
        learned.table, placement, subs, held_out, seed=seed, repeats=repeats, keep_pairs=False
    )
    m = model.candidate
    row = {
        "N": n_matchers,
        "algorithm": algorithm_label(algorithm, split),
        "subscriptions": subs.n_posts,
        "spread": m.spread_routed,
        "imbalance": m.imbalance,
        "model_throughput": m.throughput,
        "model_rel_throughput": model.relative_throughput,
        "replay_posts_per_s": measured.throughput,
        "replay_rel_throughput": (measured.throughput / hash_replay[0] if hash_replay else 1.0),
        # the same bound with counted work (lookups + matches) as the cost: free of timer noise
        "replay_ops_per_post_max": measured.work_throughput,
        "replay_work_rel_throughput": (
            measured.work_throughput / hash_replay[1] if hash_replay else 1.0
        ),
        "matches": measured.n_matches,
        "cost_slope": cost.model.slope,  # LASP's fitted f (paper Fig. 3)
        "cost_intercept": cost.model.intercept,
        "multicast_subs": placement.multicast_count(),
        "learn_s": learned.learn_seconds,
        "total_s": time.perf_counter() - started,
    }
    log.info(
        "N=%d %-10s model rel %.2f replay rel %.2f (%.1fs)",
        n_matchers,
        row["algorithm"],
        row["model_rel_throughput"],
        row["replay_rel_throughput"],
        row["total_s"],
    )
    return row
