"""Validation of a candidate routing version with Great Expectations 1.x.

The suites live in ``schemas/expectations.py``; this module builds the pandas frames they
run on (straight from the Delta tables with delta-rs, no Spark needed), runs one
checkpoint per table, keeps the results in a file Data Context under
``<lakehouse>/_quality`` and renders Data Docs there. A failed suite marks the version
``rejected``; ``publish`` only takes validated versions.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from core.routing.hashing import hash_matchers
from schemas import expectations
from spark_jobs.lake.data_docs import localize
from spark_jobs.lake.routing_store import (
    get_version,
    load_placements,
    load_routing_table,
    now_utc,
    update_versions,
)
from spark_jobs.lake.subscription_store import active_subscription_columns

if TYPE_CHECKING:
    from core.routing.table import RoutingTable
    from spark_jobs.lake.delta_store import DeltaStore

log = logging.getLogger(__name__)

QUALITY_DIR = "_quality"


def data_docs_index(lakehouse: DeltaStore) -> Path:
    return (
        Path(lakehouse.root)
        / QUALITY_DIR
        / "gx"
        / "uncommitted"
        / "data_docs"
        / "local_site"
        / "index.html"
    )


class FailedExpectation(TypedDict):
    expectation: str
    kwargs: dict[str, object]
    unexpected_count: int | None


class SuiteResult(TypedDict):
    """One expectation suite's run (its failures only; passes are in the Data Docs)."""

    suite: str
    success: bool
    rows: int
    failed: list[FailedExpectation]


class ValidationResult(TypedDict):
    """What ``validate_with_expectations`` records in ``routing.versions.validation``."""

    success: bool
    suites: list[SuiteResult]
    engine: str
    data_docs: str
    checked_at: str


def _run_suite(
    context: Any, name: str, rules: list[Any], frame: pd.DataFrame, rendered: list[Any]
) -> SuiteResult:
    """Run suite ``name`` on ``frame``; its result's and suite's Data Docs identifiers are
    appended to ``rendered`` (the caller builds the pages once for all suites)."""
    import great_expectations as gx
    from great_expectations.data_context.types.resource_identifiers import (
        ExpectationSuiteIdentifier,
    )

    source = context.data_sources.add_or_update_pandas("s3tm")
    try:
        data_asset = source.get_asset(name)
    except (LookupError, ValueError):
        data_asset = source.add_dataframe_asset(name)
    try:
        batch = data_asset.get_batch_definition("whole")
    except (LookupError, ValueError, KeyError):
        batch = data_asset.add_batch_definition_whole_dataframe("whole")
    suite = context.suites.add_or_update(gx.ExpectationSuite(name=name, expectations=rules))
    definition = context.validation_definitions.add_or_update(
        gx.ValidationDefinition(name=name, data=batch, suite=suite)
    )
    # no UpdateDataDocsAction: it rebuilt the site's index once per suite (half of a
    # validation's time); the run stores its result all the same
    checkpoint = context.checkpoints.add_or_update(
        gx.Checkpoint(name=name, validation_definitions=[definition], actions=[])
    )
    result = checkpoint.run(batch_parameters={"dataframe": frame})
    rendered.extend(result.run_results)
    rendered.append(ExpectationSuiteIdentifier(name=name))
    failed: list[FailedExpectation] = [
        {
            "expectation": r.expectation_config.type,
            "kwargs": {k: v for k, v in r.expectation_config.kwargs.items() if k != "value_set"},
            "unexpected_count": r.result.get("unexpected_count"),
        }
        for run in result.run_results.values()
        for r in run.results
        if not r.success
    ]
    return {"suite": name, "success": bool(result.success), "rows": len(frame), "failed": failed}


def validation_frames(lakehouse: DeltaStore, version: int) -> dict[str, pd.DataFrame]:
    """The frames the suites check for one version (with the derived columns): columns
    throughout, no Python object per subscription (the registry holds millions)."""
    routing = load_routing_table(lakehouse, version)
    mappings = lakehouse.read_arrow("routing.mappings")
    mappings = mappings.filter(pc.equal(mappings["routing_version"], version)).to_pandas()
    mappings["n_parts"] = mappings.groupby("word")["part"].transform("count")
    placements = load_placements(lakehouse, version)  # the version's partition only
    active_ids, words = active_subscription_columns(lakehouse)
    placed_subs = np.asarray(placements["sub_id"], dtype=np.int64)
    n = routing.n_matchers
    # a placement is eligible when its matcher holds a version of one of the subscription's
    # words: (sub, matcher) keys of every active subscription's word versions
    eligible = _version_keys(routing, active_ids, words)
    frame = placements.to_pandas()
    frame["eligible"] = np.isin(
        placed_subs * n + np.asarray(placements["matcher_id"], dtype=np.int64), eligible
    )
    subscriptions = pd.DataFrame({"sub_id": active_ids, "placed": np.isin(active_ids, placed_subs)})
    return {
        "routing_mappings": mappings,
        "routing_placements": frame,
        "subscriptions_placed": subscriptions,
    }


def _version_keys(routing: RoutingTable, sub_ids: np.ndarray, words: pa.ChunkedArray) -> np.ndarray:
    """``sub_id * N + matcher`` for every matcher holding a version of one of each
    subscription's words (an unmapped word: its hash matcher)."""
    lists = words.combine_chunks() if isinstance(words, pa.ChunkedArray) else words
    flat = pc.list_flatten(lists)
    owner = sub_ids[np.asarray(pc.list_parent_indices(lists), dtype=np.int64)]
    at = pc.index_in(flat, value_set=pa.array(routing.words.tolist(), pa.string()))
    mapped = np.asarray(pc.is_valid(at), dtype=bool)
    index = np.asarray(pc.fill_null(at, 0), dtype=np.int64)[mapped]
    starts, ends = routing.part_indptr[index], routing.part_indptr[index + 1]
    counts = ends - starts
    slots = np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(counts.sum())
    n = routing.n_matchers
    keys = [
        np.repeat(owner[mapped], counts) * n + routing.part_matchers[slots].astype(np.int64),
        owner[~mapped] * n + hash_matchers(np.asarray(flat)[~mapped].tolist(), n).astype(np.int64),
    ]
    return np.unique(np.concatenate(keys))


def silver_frame(lakehouse: DeltaStore) -> pd.DataFrame:
    """silver.posts as the silver suite checks it, with ``words`` as each list's length
    (null where the list is null): the rules on ``words`` are "exists" and "not null",
    which the length keeps, and a column of Python lists made Great Expectations fingerprint
    the batch by pickling the whole frame (minutes and gigabytes at 10M posts)."""
    posts = lakehouse.read_arrow("silver.posts").select(
        ["post_id", "words", "n_words", "event_day", "created_at", "sample_rate"]
    )
    posts = posts.set_column(
        posts.schema.get_field_index("words"), "words", pc.list_value_length(posts["words"])
    )
    return posts.to_pandas()


def validate_with_expectations(lakehouse: DeltaStore, version: int) -> ValidationResult:
    """Run the suites for ``version``; record the result and the new status."""
    import great_expectations as gx

    meta = get_version(lakehouse, version)
    frames = validation_frames(lakehouse, version)
    context = gx.get_context(mode="file", project_root_dir=str(Path(lakehouse.root) / QUALITY_DIR))
    # no usage analytics from inside a customer's cluster: written into the project's
    # great_expectations.yml (GX 1.24 ships no analytics client; this keeps it so if a
    # later release brings one back)
    if context.variables.analytics_enabled is not False:
        context.enable_analytics(False)
    # no tqdm bar per suite ("Calculating Metrics: ...") in the task's log: a job logs lines
    bars = context.variables.progress_bars  # a dict once read back from the project's file
    if bars is None or bars["globally"] is not False:
        from great_expectations.data_context.types.base import ProgressBarsConfig

        context.variables.progress_bars = ProgressBarsConfig(globally=False)
        context.variables.save()
    rendered: list[Any] = []
    results = [
        _run_suite(
            context,
            "routing_mappings",
            expectations.mappings_suite(int(meta["n_matchers"]), meta["subscribed_words"]),
            frames["routing_mappings"],
            rendered,
        ),
        _run_suite(
            context,
            "routing_placements",
            expectations.placements_suite(),
            frames["routing_placements"],
            rendered,
        ),
        _run_suite(
            context,
            "subscriptions_placed",
            expectations.subscriptions_placed_suite(),
            frames["subscriptions_placed"],
            rendered,
        ),
    ]
    if lakehouse.exists("silver.posts"):
        silver = silver_frame(lakehouse)
        results.append(
            _run_suite(context, "silver_posts", expectations.silver_posts_suite(), silver, rendered)
        )
    # this run's pages (its results and suites) and the index, in one build
    context.build_data_docs(resource_identifiers=rendered)
    # the pages load their styles and scripts from beside them, not from CDNs
    localize(data_docs_index(lakehouse).parent)
    success = all(r["success"] for r in results)
    summary: ValidationResult = {
        "success": success,
        "suites": results,
        "engine": "great_expectations",
        "data_docs": str(data_docs_index(lakehouse)),
        "checked_at": now_utc().isoformat(),
    }
    status = meta["status"]
    if status in ("candidate", "validated", "rejected"):
        status = "validated" if success else "rejected"
    update_versions(lakehouse, {version: {"validation": json.dumps(summary), "status": status}})
    log.info(
        "version %d: validation %s (%s)",
        version,
        "passed" if success else "FAILED",
        ", ".join(f"{r['suite']}={'ok' if r['success'] else 'failed'}" for r in results),
    )
    return summary
