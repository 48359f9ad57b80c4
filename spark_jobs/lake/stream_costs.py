"""The stream cost model (``core.stream.costs``) fitted to this lakehouse's own batches:
``stream.batches`` (posts, copies, matches, each stage's task seconds) joined with
``stream.health`` (each matcher's counted work) on (query, batch).

A fit needs batches of at least two routing versions: within one version the copies and
the work grow together, so a fit could not tell what each costs. Until the stream has run
that long here, the model's defaults (measured by ``s3tm bench stream``) stand.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from core.errors import InputDataError
from core.stream.costs import DEFAULT_COSTS, BatchCounts, CostFit, StreamCosts, fit

if TYPE_CHECKING:
    import pyarrow as pa

    from spark_jobs.lake.delta_store import DeltaStore

log = logging.getLogger(__name__)

WARM_UP_BATCHES = 2  # a query's first batches build indexes and token tables: left out


def steady_batches(batches: pa.Table, health: pa.Table) -> list[tuple[int, BatchCounts]]:
    """(routing version, counts) of each committed batch past its query's warm-up that has
    its task seconds and its matchers' counted work."""
    work = {
        (r["query_id"], r["batch_id"]): sum(r["work"])
        for r in health.select(["query_id", "batch_id", "work"]).to_pylist()
        if r["work"]
    }
    columns = [
        "query_id", "batch_id", "stage", "routing_version", "posts", "routed_pairs",
        "matches", "seconds_route", "seconds_match", "seconds_dispatch",
    ]  # fmt: skip
    committed = [r for r in batches.select(columns).to_pylist() if r["stage"] == "committed"]
    first: dict[str, int] = {}
    for r in committed:
        first[r["query_id"]] = min(first.get(r["query_id"], r["batch_id"]), r["batch_id"])
    out = []
    for r in committed:
        key = (r["query_id"], r["batch_id"])
        if r["batch_id"] < first[r["query_id"]] + WARM_UP_BATCHES or key not in work:
            continue
        if not r["posts"] or r["seconds_route"] is None or r["seconds_match"] is None:
            continue
        counts = BatchCounts(
            posts=r["posts"],
            copies=r["routed_pairs"] or 0,
            work=work[key],
            matches=r["matches"] or 0,
            route_seconds=r["seconds_route"],
            match_seconds=r["seconds_match"],
            dispatch_seconds=r["seconds_dispatch"] or 0.0,
        )
        out.append((int(r["routing_version"]), counts))
    return out


def lakehouse_fit(store: DeltaStore) -> CostFit | None:
    """The fit over the lakehouse's steady batches, or None when they are too few or span
    one routing version."""
    if not (store.exists("stream.batches") and store.exists("stream.health")):
        return None
    return tables_fit(store.read_arrow("stream.batches"), store.read_arrow("stream.health"))


def tables_fit(batches: pa.Table, health: pa.Table) -> CostFit | None:
    """The fit over the steady batches of ``stream.batches`` and ``stream.health`` as read
    (a caller that holds them already), or None as :func:`lakehouse_fit`."""
    rows = steady_batches(batches, health)
    if len({version for version, _ in rows}) < 2:
        return None
    try:
        return fit([counts for _, counts in rows])
    except InputDataError:
        return None


def stream_costs(store: DeltaStore) -> StreamCosts:
    """The costs the gate predicts the stream with: the lakehouse's own fit, else the
    defaults."""
    return costs_of(lakehouse_fit(store))


def costs_of(fitted: CostFit | None) -> StreamCosts:
    """A fit's costs, else the defaults (each said in the log)."""
    if fitted is None:
        log.info("stream costs: the model's defaults (too few batches here to fit)")
        return DEFAULT_COSTS
    log.info(
        "stream costs %s: median error %.1f%%, largest %.1f%% on the batches fitted",
        fitted.costs.source,
        100 * fitted.median_error,
        100 * fitted.max_error,
    )
    return fitted.costs
