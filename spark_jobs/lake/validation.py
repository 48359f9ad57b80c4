"""Validation of a candidate routing version with Great Expectations 1.x.

The suites live in ``schemas/expectations.py``; this module builds the pandas frames they
run on (straight from the Delta tables with delta-rs, no Spark needed), runs one
checkpoint per table, keeps the results in a file Data Context under
``<lakehouse>/_quality`` and renders Data Docs there. On an object store the Data Context
is a file folder on the local disk (``$S3TM_STATE_DIR``, a pod's disk on Kubernetes) kept
in step with ``<lakehouse>/_quality`` on the store: pulled before a run, pushed after it,
so the Data Docs of every run outlive the pod that validated. A failed suite marks the
version ``rejected``; ``publish`` only takes validated versions.
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
from spark_jobs.lake import storage
from spark_jobs.lake.data_docs import localize
from spark_jobs.lake.routing_store import (
    get_version,
    load_placements,
    load_routing_table,
    now_utc,
    update_versions,
)
from spark_jobs.lake.subscription_store import REGISTRY_BATCH, active_subscription_batches

if TYPE_CHECKING:
    from core.routing.table import RoutingTable
    from spark_jobs.lake.delta_store import DeltaStore

log = logging.getLogger(__name__)

QUALITY_DIR = "_quality"


# the Data Docs site's index inside the Data Context's folder
DATA_DOCS_INDEX = "gx/uncommitted/data_docs/local_site/index.html"


def data_docs_index(lakehouse: DeltaStore) -> Path:
    """The Data Docs' index on this machine's disk (where Great Expectations renders it)."""
    return Path(lakehouse.root) / QUALITY_DIR / DATA_DOCS_INDEX


def data_docs_location(lakehouse: DeltaStore) -> str:
    """Where the Data Docs are kept: the index on the local disk, or on the object store
    for an ``s3://`` lakehouse (what reports and the validation's record name)."""
    if not lakehouse.remote:
        return str(data_docs_index(lakehouse))
    return storage.join(lakehouse.location, QUALITY_DIR, DATA_DOCS_INDEX)


def sync_quality(lakehouse: DeltaStore, *, push: bool) -> None:
    """Copy the Data Context's folder between the object store and the local disk: pull
    (``push=False``) before a run, so earlier runs' results and pages are in the new index;
    push after it. A local lakehouse has one folder: nothing to copy."""
    import pyarrow.fs as pafs

    if not lakehouse.remote:
        return
    local = Path(lakehouse.root) / QUALITY_DIR
    remote = storage.fs_path(storage.join(lakehouse.location, QUALITY_DIR))
    disk = pafs.LocalFileSystem()
    if push:
        pafs.copy_files(str(local), remote, source_filesystem=disk,
                        destination_filesystem=lakehouse.fs)  # fmt: skip
    elif lakehouse.fs.get_file_info(remote).type == pafs.FileType.Directory:
        local.mkdir(parents=True, exist_ok=True)
        pafs.copy_files(remote, str(local), source_filesystem=lakehouse.fs,
                        destination_filesystem=disk)  # fmt: skip


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


# placements checked for eligibility at a time: their subscriptions' words expanded, about
# 8 per placement, stay within ~150 MB whatever the registry's size
ELIGIBLE_CHUNK = 1_000_000


def validation_frames(lakehouse: DeltaStore, version: int) -> dict[str, pd.DataFrame]:
    """The frames the suites check for one version (with the derived columns): columns
    throughout, no Python object per subscription or word, and the registry read in
    batches (it holds millions)."""
    routing = load_routing_table(lakehouse, version)
    mappings = lakehouse.read_arrow("routing.mappings")
    mappings = mappings.filter(pc.equal(mappings["routing_version"], version)).to_pandas()
    mappings["n_parts"] = mappings.groupby("word")["part"].transform("count")
    placements = load_placements(lakehouse, version)  # the version's partition only
    placed_subs = np.asarray(placements["sub_id"], dtype=np.int64)
    placed_matchers = np.asarray(placements["matcher_id"], dtype=np.int64)
    by_sub = np.argsort(placed_subs, kind="stable")
    sorted_subs = placed_subs[by_sub]
    eligible = np.zeros(placed_subs.shape[0], dtype=np.bool_)
    active: list[np.ndarray] = []
    placed: list[np.ndarray] = []
    for ids, words in active_subscription_batches(lakehouse, REGISTRY_BATCH):
        order = np.argsort(ids, kind="stable")
        ids, words = ids[order], words.take(pa.array(order))
        # the placement rows of these subscriptions (a multicast one has several)
        first = np.searchsorted(sorted_subs, ids, side="left")
        last = np.searchsorted(sorted_subs, ids, side="right")
        count = last - first
        rows = by_sub[np.repeat(first - np.cumsum(count) + count, count) + np.arange(count.sum())]
        eligible[rows] = eligible_placements(
            routing, ids, words, placed_subs[rows], placed_matchers[rows]
        )
        active.append(ids)
        placed.append(count > 0)
    frame = placements.to_pandas()
    del placements
    frame["eligible"] = eligible
    subscriptions = pd.DataFrame(
        {
            "sub_id": np.concatenate(active) if active else np.zeros(0, dtype=np.int64),
            "placed": np.concatenate(placed) if placed else np.zeros(0, dtype=np.bool_),
        }
    )
    return {
        "routing_mappings": mappings,
        "routing_placements": frame,
        "subscriptions_placed": subscriptions,
    }


def eligible_placements(
    routing: RoutingTable,
    sub_ids: np.ndarray,
    words: pa.ChunkedArray | pa.Array,
    placed_subs: np.ndarray,
    placed_matchers: np.ndarray,
) -> np.ndarray:
    """Per placement (``placed_subs[k]`` on ``placed_matchers[k]``): does that matcher hold
    a version of one of the subscription's words (an unmapped word: its hash matcher)? False
    for a subscription that is not active (``sub_ids``, ascending, with their ``words``).

    The words are dictionary-encoded: each distinct word's matchers are worked out once
    (a word x matcher table), then the placements are checked ``ELIGIBLE_CHUNK`` at a time."""
    lists = words.combine_chunks() if isinstance(words, pa.ChunkedArray) else words
    offsets = np.asarray(lists.offsets, dtype=np.int64)
    encoded = pc.dictionary_encode(pc.list_flatten(lists))
    word_ids = np.asarray(encoded.indices, dtype=np.int32)
    distinct = encoded.dictionary
    n = routing.n_matchers
    holds = np.zeros((len(distinct), n), dtype=np.bool_)  # distinct word x matcher
    at = pc.index_in(distinct, value_set=pa.array(routing.words.tolist(), pa.string()))
    mapped = np.asarray(pc.is_valid(at), dtype=np.bool_)
    index = np.asarray(pc.fill_null(at, 0), dtype=np.int64)
    for word in np.flatnonzero(mapped).tolist():
        first, last = routing.part_indptr[index[word]], routing.part_indptr[index[word] + 1]
        holds[word, routing.part_matchers[first:last]] = True
    unmapped = np.flatnonzero(~mapped)
    holds[unmapped, hash_matchers(distinct.take(pa.array(unmapped)).to_pylist(), n)] = True
    eligible = np.zeros(placed_subs.shape[0], dtype=np.bool_)
    if sub_ids.size == 0:
        return eligible
    # each placement's subscription row; a placement of no active subscription is not
    # eligible (checked on row 0's words, then cleared)
    row = np.searchsorted(sub_ids, placed_subs)
    active = row < sub_ids.shape[0]
    active[active] = sub_ids[row[active]] == placed_subs[active]
    row[~active] = 0
    for start in range(0, placed_subs.shape[0], ELIGIBLE_CHUNK):
        stop = min(start + ELIGIBLE_CHUNK, placed_subs.shape[0])
        rows = row[start:stop]
        firsts, lengths = offsets[rows], offsets[rows + 1] - offsets[rows]
        owner = np.repeat(np.arange(stop - start), lengths)
        # the positions of each placement's words in the flat word list
        position = np.repeat(firsts - np.cumsum(lengths) + lengths, lengths) + np.arange(
            int(lengths.sum())
        )
        hit = holds[word_ids[position], np.repeat(placed_matchers[start:stop], lengths)]
        eligible[start:stop] = np.bincount(owner[hit], minlength=stop - start) > 0
    eligible &= active
    return eligible


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
    sync_quality(lakehouse, push=False)
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
    sync_quality(lakehouse, push=True)
    success = all(r["success"] for r in results)
    summary: ValidationResult = {
        "success": success,
        "suites": results,
        "engine": "great_expectations",
        "data_docs": data_docs_location(lakehouse),
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
