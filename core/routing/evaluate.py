"""Evaluate a routing table on posts against hash routing of the same posts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from core.corpus.arrays import Corpus
from core.routing.metrics import RoutingMetrics, relative_throughput, routing_metrics
from core.routing.router import route_corpus
from core.routing.table import RoutingTable


def hash_table(n_matchers: int, subscribed_words: frozenset[str] | None) -> RoutingTable:
    """Plain hash routing: an empty table, so every word takes the hash fall-back."""
    return RoutingTable(
        n_matchers=n_matchers,
        words=np.array([], dtype=object),
        part_indptr=np.zeros(1, dtype=np.int64),
        part_matchers=np.array([], dtype=np.int32),
        subscribed_words=subscribed_words,
        manifest={"algorithm": "hash", "label": "hash"},
    )


@dataclass(frozen=True)
class Evaluation:
    """A table's metrics beside hash routing's, on the same posts and subscribed words."""

    candidate: RoutingMetrics
    hash_baseline: RoutingMetrics
    relative_throughput: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "candidate": self.candidate.as_dict(),
            "hash": self.hash_baseline.as_dict(),
            "relative_throughput": self.relative_throughput,
        }


def evaluate_table(table: RoutingTable, corpus: Corpus, *, seed: int = 0) -> Evaluation:
    """Route ``corpus`` with ``table`` and with hash; return both metrics and T / T(hash)."""
    candidate = routing_metrics(route_corpus(table, corpus, seed=seed))
    baseline = routing_metrics(
        route_corpus(hash_table(table.n_matchers, table.subscribed_words), corpus, seed=seed)
    )
    return Evaluation(candidate, baseline, relative_throughput(candidate, baseline))
