"""Routing versions, mappings and placements on the driver (small tables, Arrow I/O).

A version is immutable once written; only its lifecycle fields change. Every change to
``routing.versions`` rewrites that small table in ONE Delta commit, so publishing (one
version published, the previous retired) is atomic.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal, TypedDict, cast

import numpy as np
import pyarrow as pa

from core.errors import InputDataError, InvalidArgumentError
from core.routing.table import LearnerManifest, RoutingTable
from schemas import table
from schemas.rows import CandidateRow, VersionChanges, VersionRow
from spark_jobs import failpoints

if TYPE_CHECKING:
    from spark_jobs.lake.delta_store import DeltaStore

STATUSES = ("candidate", "validated", "published", "retired", "rejected")


def now_utc() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def versions(lakehouse: DeltaStore) -> list[VersionRow]:
    """All versions, oldest first."""
    rows = cast(list[VersionRow], lakehouse.read_arrow("routing.versions").to_pylist())
    return sorted(rows, key=lambda r: r["routing_version"])


def get_version(lakehouse: DeltaStore, version: int) -> VersionRow:
    for row in versions(lakehouse):
        if row["routing_version"] == version:
            return row
    raise InputDataError(f"routing version {version} does not exist")


def next_version(lakehouse: DeltaStore) -> int:
    rows = versions(lakehouse)
    return max((r["routing_version"] for r in rows), default=0) + 1


def published_version(lakehouse: DeltaStore) -> int | None:
    live = [r["routing_version"] for r in versions(lakehouse) if r["status"] == "published"]
    return live[-1] if live else None


class PublishGate(TypedDict):
    """``routing.versions.metrics["publish_gate"]``: the publish gate's verdict on a version
    it kept out (the version it faced: ``published`` or ``hash`` routing)."""

    against: Literal["published", "hash"]
    basis: str
    gain: float
    required: float
    decided_at: str


def window_end(row: VersionRow) -> dt.date | None:
    """The last day of the window a version was learned on (None: not recorded)."""
    end = json.loads(row["inputs"] or "{}").get("end")
    return dt.date.fromisoformat(end) if end else None


def hash_routing_version(n_matchers: int) -> int:
    """The routing version the stream records while it routes by hash over ``n_matchers``
    (no version published): ``-N``, never a learned version's number (those count from 1)."""
    return -int(n_matchers)


def is_hash_routing(version: int) -> bool:
    return version < 0


def routing_label(version: int | None) -> str:
    """A routing version in words: ``version 3``, ``hash routing (N=16)`` or ``no version``."""
    if version is None:
        return "no version"
    return f"hash routing (N={-version})" if is_hash_routing(version) else f"version {version}"


def publish_gate(row: VersionRow) -> PublishGate | None:
    """The gate's verdict on a version it kept out, or None (never kept out)."""
    gate = json.loads(row["metrics"] or "{}").get("publish_gate")
    return cast(PublishGate, gate) if gate else None


def routing_in_force(lakehouse: DeltaStore) -> int | None:
    """What the stream routes by: the published version; with none published, hash routing
    (:func:`hash_routing_version` of the N the remap learns at) once the publish gate has
    kept a candidate out for not beating hash; else None (no remap has run yet)."""
    if not lakehouse.exists("routing.versions"):
        return None
    rows = versions(lakehouse)
    live = [r["routing_version"] for r in rows if r["status"] == "published"]
    if live:
        return live[-1]
    floor = [r for r in rows if (gate := publish_gate(r)) is not None and gate["against"] == "hash"]
    return hash_routing_version(floor[-1]["n_matchers"]) if floor else None


def latest_with_status(lakehouse: DeltaStore, status: str) -> int | None:
    rows = [r["routing_version"] for r in versions(lakehouse) if r["status"] == status]
    return rows[-1] if rows else None


def latest_pending(lakehouse: DeltaStore) -> int | None:
    """The newest version still on its way to publish (candidate or validated)."""
    rows = [
        r["routing_version"]
        for r in versions(lakehouse)
        if r["status"] in ("candidate", "validated")
    ]
    return rows[-1] if rows else None


def add_version(lakehouse: DeltaStore, row: VersionRow) -> None:
    lakehouse.write_arrow(
        pa.Table.from_pylist([row], schema=table("routing.versions").schema), "routing.versions"
    )


def update_versions(lakehouse: DeltaStore, changes: Mapping[int, VersionChanges]) -> None:
    """Apply field changes to several versions in one commit (rewrites the small table,
    under the table's lock: a concurrent change is never overwritten by a stale copy)."""
    with lakehouse.locked("routing.versions"):
        _update_versions(lakehouse, changes)


def _update_versions(lakehouse: DeltaStore, changes: Mapping[int, VersionChanges]) -> None:
    rows = versions(lakehouse)
    known = {r["routing_version"] for r in rows}
    missing = set(changes) - known
    if missing:
        raise InputDataError(f"routing versions {sorted(missing)} do not exist")
    for row in rows:
        row.update(cast(VersionRow, changes.get(row["routing_version"], VersionChanges())))
        if row["status"] not in STATUSES:
            raise InvalidArgumentError(f"unknown status {row['status']!r}")
    lakehouse.write_arrow(
        pa.Table.from_pylist(rows, schema=table("routing.versions").schema),
        "routing.versions",
        mode="overwrite",
    )


def write_mapping(lakehouse: DeltaStore, version: int, routing: RoutingTable) -> int:
    rows = routing.to_arrow()
    data = pa.table(
        {
            "routing_version": pa.array(np.full(rows.num_rows, version, dtype=np.int64)),
            "word": rows.column("word"),
            "part": rows.column("part"),
            "matcher_id": rows.column("matcher_id"),
        }
    )
    lakehouse.write_arrow(
        data, "routing.mappings", mode="overwrite", replace_where={"routing_version": [version]}
    )
    return int(data.num_rows)


def load_routing_table(lakehouse: DeltaStore, version: int) -> RoutingTable:
    """The routing table of a version (mapping rows + its subscribed words); of hash
    routing over N matchers for :func:`hash_routing_version` ``-N``."""
    import pyarrow.compute as pc

    from core.routing.evaluate import hash_table

    if is_hash_routing(version):
        return hash_table(-version, None)
    meta = get_version(lakehouse, version)
    rows = lakehouse.read_arrow("routing.mappings")
    rows = rows.filter(pc.equal(rows["routing_version"], version))
    return RoutingTable.from_rows(
        rows["word"],
        rows["part"],
        rows["matcher_id"],
        int(meta["n_matchers"]),
        subscribed_words=meta["subscribed_words"],
        manifest=cast(
            LearnerManifest,
            {
                "algorithm": meta["algorithm"],
                "label": meta["algorithm"],
                **json.loads(meta["params"]),
            },
        ),
    )


def write_placements(
    lakehouse: DeltaStore,
    version: int,
    sub_ids: np.ndarray,
    indptr: np.ndarray,
    matchers: np.ndarray,
) -> int:
    counts = np.diff(indptr)
    data = pa.table(
        {
            "routing_version": pa.array(np.full(int(counts.sum()), version, dtype=np.int64)),
            "sub_id": pa.array(np.repeat(sub_ids, counts).astype(np.int64)),
            "matcher_id": pa.array(matchers.astype(np.int32)),
            "placed_at": pa.array([now_utc()] * int(counts.sum()), pa.timestamp("us", tz="UTC")),
        }
    )
    lakehouse.write_arrow(
        data, "routing.placements", mode="overwrite", replace_where={"routing_version": [version]}
    )
    return int(data.num_rows)


def load_placements(
    lakehouse: DeltaStore, version: int, sub_ids: np.ndarray | None = None
) -> pa.Table:
    """The placements of ``version`` (its partition's files only), of every subscription
    or of ``sub_ids`` (their id range read, the rest skipped by the files' statistics)."""
    import pyarrow.compute as pc

    where = None
    if sub_ids is not None:
        ids = np.asarray(sub_ids, dtype=np.int64)
        if ids.size == 0:
            return table("routing.placements").schema.empty_table()
        field = pc.field("sub_id")
        where = (field >= int(ids.min())) & (field <= int(ids.max())) & field.isin(pa.array(ids))
    rows = lakehouse.read_arrow(
        "routing.placements", partitions={"routing_version": version}, where=where
    )
    return rows.filter(pc.equal(rows["routing_version"], version))


def placement_arrays(
    lakehouse: DeltaStore, version: int, sub_ids: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The stored placements of ``version`` (of ``sub_ids`` only, when given) as columns:
    (the placed sub ids, ascending; their matchers as CSR ``indptr, matchers``, sorted and
    distinct per id)."""
    rows = load_placements(lakehouse, version, sub_ids)  # only ``sub_ids``' rows, when given
    subs = np.asarray(rows["sub_id"], dtype=np.int64)
    matchers = np.asarray(rows["matcher_id"], dtype=np.int32)
    order = np.lexsort((matchers, subs))
    subs, matchers = subs[order], matchers[order]
    distinct = np.ones(subs.shape[0], dtype=np.bool_)
    distinct[1:] = (subs[1:] != subs[:-1]) | (matchers[1:] != matchers[:-1])
    subs, matchers = subs[distinct], matchers[distinct]
    ids, counts = np.unique(subs, return_counts=True)
    indptr = np.zeros(ids.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    return ids, indptr, matchers


def register_table(
    lakehouse: DeltaStore,
    routing: RoutingTable,
    *,
    algorithm: str,
    params: Mapping[str, object] | None = None,
    inputs: Mapping[str, object] | None = None,
) -> int:
    """Store a routing table learned elsewhere as a new candidate version; returns it."""
    return add_candidate(
        lakehouse,
        routing,
        {
            "algorithm": algorithm,
            "n_matchers": routing.n_matchers,
            "params": json.dumps(params or {}),
            "inputs": json.dumps(inputs or {}),
            "subscribed_words": sorted(routing.subscribed_words)
            if routing.subscribed_words is not None
            else None,
            "metrics": json.dumps({}),
            "validation": None,
            "status": "candidate",
            "created_at": now_utc(),
            "published_at": None,
            "retired_at": None,
        },
    )


def add_candidate(lakehouse: DeltaStore, routing: RoutingTable, row: CandidateRow) -> int:
    """Allocate the next version number, write its mapping, then its ``routing.versions``
    row, under the table's lock: two remaps at once get two versions, and a version's row
    (what makes it visible) exists only once its mapping is complete."""
    with lakehouse.locked("routing.versions"):
        version = next_version(lakehouse)
        write_mapping(lakehouse, version, routing)
        failpoints.crash("learn:after-mapping")
        add_version(lakehouse, VersionRow(**row, routing_version=version))
    return version
