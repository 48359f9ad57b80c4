"""Routing tables, the router and routing metrics."""

from core.routing.hashing import hash_matcher, hash_matchers, stable_hash, version_key
from core.routing.metrics import (
    RoutingMetrics,
    metrics_from_loads,
    relative_throughput,
    routing_metrics,
)
from core.routing.router import RoutedPosts, route_corpus, route_post
from core.routing.table import RoutingTable

__all__ = [
    "RoutedPosts",
    "RoutingMetrics",
    "RoutingTable",
    "hash_matcher",
    "hash_matchers",
    "metrics_from_loads",
    "relative_throughput",
    "route_corpus",
    "route_post",
    "routing_metrics",
    "stable_hash",
    "version_key",
]
