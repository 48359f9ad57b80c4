"""learn: ``gold.post_words`` of a window -> a candidate routing version.

Reads the bipartite edges of the learning window (held-out posts excluded: the same
deterministic hold-out ``evaluate`` uses), builds the CSR arrays on the driver, runs the
chosen learner (hash | SALB | salb2 | gC | gFC | gFCL | gNFCL, with hot-word splitting or not),
and writes ``routing.mappings`` rows and a ``routing.versions`` row with status
``candidate``. Learning is on the subscribed words of the active subscriptions when there
are any (``--subscribed registry``), else on all words.

``--incremental`` (the remap DAG's default) refines the published version instead of
learning from scratch (paper 004: moving subscriptions costs): salb2's restreaming from the
published mapping, moves re-placing at most ``--max-moved`` of the active subscriptions.
A full salb2 remap is learned beside it, and wins when its throughput on the window's
held-out posts beats the incremental one's by more than ``--full-remap-gain`` (on the
training posts a full remap always looks better: it was fitted to them; ``s3tm experiment
remap-cost`` measured 1.5x there against the same on the next week); the version's params
say which remap was chosen, why, on which posts, and how much moved. A full remap, when a
version with the same N is published, has its matcher ids renamed to keep the most
subscriptions where the published version has them (``core.learn.align``: the same routing,
fewer subscriptions re-placed; params ``aligned_kept_subscription_words``).

A run bound to its data interval (``--end``: the remap DAG's nightly and backfill runs)
learns on the ``--window-days`` ending there and refines (and takes matcher ids from) the
newest once-published version learned on days before it, not today's: re-running it
learns the same mapping. Every version records its window's last day (``inputs.end``).

Driver memory and time: the edges are read from the version's Parquet files straight into
dictionary-encoded Arrow columns on the driver (:func:`window_edges_arrow`: the learner
runs there anyway, and Spark's ``toArrow`` of the strings was most of the job), with no
Python object per edge; ``s3tm bench learn-job`` measures the job, ``s3tm bench learn``
the learner's own working set (~133 MiB per million posts for SALB).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

import numpy as np
import pyarrow as pa

from core.corpus.arrays import Corpus
from core.corpus.edges import training_corpus
from core.errors import InputDataError
from core.learn import (
    algorithm_label,
    align_to_published,
    learn_mapping,
)
from core.learn.remap_params import RemapChoice
from core.learn.remap_rule import incremental_or_full
from core.monitor.health import versions_needed
from core.routing.metrics import routing_metrics
from core.routing.router import route_corpus
from core.routing.table import RoutingTable
from core.sampling.hash_fraction import hash_fraction_mask
from schemas.rows import VersionParams
from spark_jobs.common import days_ending, exit_process, job_entry, window_start
from spark_jobs.jobs.configs import LearnConfig as LearnConfig
from spark_jobs.jobs.sampling import HOLDOUT_SEED
from spark_jobs.lake.delta_io import TableSnapshot
from spark_jobs.lake.routing_store import (
    add_candidate,
    load_routing_table,
    now_utc,
    published_version,
    versions,
    window_end,
)
from spark_jobs.lake.subscription_store import active_corpus

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from spark_jobs.lake.delta_io import Lakehouse


READ_BATCH_ROWS = 1 << 20


def window_edges_arrow(
    snapshot: TableSnapshot,
    start: dt.date | None,
    end: dt.date | None,
    holdout_fraction: float,
) -> tuple[pa.Table, pa.Table]:
    """The edges (post_id, word) of a day window, read on the driver from the version's
    files, as ``(training, held_out)``: the held-out posts are those ``holdout_filter``
    selects in Spark, for ``evaluate``.

    The learner runs on the driver anyway, so the edges go from Parquet straight into Arrow
    (dictionary-encoded as they are read: no string per edge), and the hold-out is the same
    hash Spark's ``holdout_filter`` computes (:mod:`core.sampling.hash_fraction`, bit-exact),
    taken once per distinct post. Spark's path moved every (post id, word) string through
    the JVM and ``toArrow`` (8 of the job's 10 s at 1M posts).
    """
    import pyarrow.dataset as pads

    def in_window(day: str | None) -> bool:
        if day is None:
            return start is None and end is None
        return (start is None or day >= start.isoformat()) and (
            end is None or day <= end.isoformat()
        )

    files = [
        path
        for path, values in zip(snapshot.files, snapshot.partitions, strict=True)
        if in_window(values.get("day"))
    ]
    dictionary = pa.dictionary(pa.int32(), pa.string())
    if not files:
        empty = pa.table({"post_id": pa.array([], dictionary), "word": pa.array([], dictionary)})
        return empty, empty
    read_as_dictionary = pads.ParquetFileFormat(
        read_options=pads.ParquetReadOptions(dictionary_columns={"post_id", "word"})
    )
    edges = (
        pads.dataset(files, format=read_as_dictionary, filesystem=snapshot.filesystem)
        # a dictionary per batch read: with the default 131k rows, 10M posts' edges came in
        # 624 batches whose dictionaries (the same words again and again) took 10 s to unify;
        # batches of a row group's size carry a few dozen (2 s)
        .to_table(columns=["post_id", "word"], batch_size=READ_BATCH_ROWS)
        .unify_dictionaries()
    )
    edges = pa.table(
        {name: edges[name].combine_chunks().cast(dictionary) for name in ("post_id", "word")}
    )
    posts = edges["post_id"].chunk(0)
    held = hash_fraction_mask(posts.dictionary, holdout_fraction, HOLDOUT_SEED)
    edge_held = held[np.asarray(posts.indices)]
    return edges.filter(pa.array(~edge_held)), edges.filter(pa.array(edge_held))


def live_hot_words(
    lakehouse: Lakehouse, hours: float, as_of: dt.datetime | None = None
) -> dict[str, float]:
    """The hot words of the latest ``stream.health`` row recorded in the ``hours`` before
    ``as_of`` (default: now), with their live share of word occurrences: a burst the learning
    window dilutes. A past interval's run reads what was live then, so it learns the same."""
    if hours <= 0 or not lakehouse.exists("stream.health"):
        return {}
    until = as_of or now_utc()
    since = until - dt.timedelta(hours=hours)
    rows = [
        r
        for r in lakehouse.read_arrow("stream.health").to_pylist()
        if since <= r["recorded_at"] <= until
    ]
    if not rows:
        return {}
    latest = max(rows, key=lambda r: r["recorded_at"])
    return {h["word"]: float(h["share"]) for h in latest["hot_words"] or []}


# what a candidate was learned from: its ``routing.versions`` inputs (the Delta version of the
# edges it read, its window, its corpus and the registry's size)
LearnInputs = TypedDict(
    "LearnInputs",
    {
        "gold.post_words": int,
        "start": str | None,
        "end": str | None,
        "training_posts": int,
        "training_edges": int,
        "subscriptions": int,
    },
)


class LearnSummary(LearnInputs, RemapChoice):
    """What the learn job prints: the candidate, its inputs, its seconds and the remap's
    choice (full or incremental, and why)."""

    routing_version: int
    label: str
    n_matchers: int
    mapping_rows: int
    learn_seconds: float
    read_seconds: float


@dataclass(frozen=True)
class LearningWindow:
    """The window's posts as the learners take them, and what they were read from."""

    edges_version: int  # of gold.post_words
    last_day: dt.date | None  # the newest day of the window's edges (None: no dated edge)
    corpus: Corpus  # training posts
    judge: Corpus | None  # held-out posts the incremental-or-full choice is judged on
    read_seconds: float


@dataclass(frozen=True)
class RegistryWords:
    """What the active subscriptions tell the learner (nothing with ``--subscribed all``
    or an empty registry under ``auto``)."""

    words: list[str] | None = None  # learn on these words only
    corpus: Corpus | None = None  # salb2 weighs each word by its subscriptions' matches
    word_subscriptions: Counter[str] = field(default_factory=Counter)
    count: int = 0


def read_window(lakehouse: Lakehouse, config: LearnConfig) -> LearningWindow:
    started = time.perf_counter()
    edges_version = lakehouse.version("gold.post_words")
    if edges_version is None:
        raise InputDataError("gold.post_words does not exist: run the graph job first")
    snapshot = lakehouse.snapshot("gold.post_words", edges_version)
    training_edges, held_out = window_edges_arrow(
        snapshot, config.start, config.end, config.holdout_fraction
    )
    days = [
        day
        for values in snapshot.partitions
        if (day := values.get("day")) is not None
        and (config.start is None or day >= config.start.isoformat())
        and (config.end is None or day <= config.end.isoformat())
    ]
    last_day = dt.date.fromisoformat(max(days)) if days else None
    if not config.incremental:
        held_out = held_out.slice(0, 0)  # only the incremental choice reads it: free it now
    corpus = training_corpus(training_edges)
    # the incremental-or-full choice is judged on posts neither learner saw: on its own
    # posts a full remap always looks better (it was fitted to them)
    judge = training_corpus(held_out) if config.incremental and held_out.num_rows else None
    del training_edges, held_out  # the corpora hold what learning needs (GBs at 10M posts)
    return LearningWindow(edges_version, last_day, corpus, judge, time.perf_counter() - started)


def registry_words(lakehouse: Lakehouse, subscribed: str) -> RegistryWords:
    active = active_corpus(lakehouse) if subscribed != "all" else None
    n_subs = active.n_posts if active is not None else 0
    if subscribed == "registry" and not n_subs:
        raise InputDataError("--subscribed registry, but the registry has no active subscription")
    if active is None or not n_subs:
        return RegistryWords()
    return RegistryWords(
        words=sorted(active.vocabulary.tolist()),
        corpus=active,
        word_subscriptions=Counter(
            dict(zip(active.vocabulary.tolist(), active.word_frequencies.tolist(), strict=True))
        ),
        count=n_subs,
    )


def learn_version(lakehouse: Lakehouse, config: LearnConfig) -> LearnSummary:
    """Learn and write one candidate version on the window ``config.start`` to
    ``config.end`` (its ``window_days`` resolved by the caller); returns its summary."""
    nodes, algorithm, split, seed = config.nodes, config.algorithm, config.split, config.seed
    window = read_window(lakehouse, config)
    corpus = window.corpus
    registry = registry_words(lakehouse, config.subscribed)
    live = live_hot_words(lakehouse, config.live_hot_words, config.as_of) if split else {}
    min_parts = {w: versions_needed(share, nodes) for w, share in live.items()}
    if min_parts:
        log.info("live hot words (stream.health) get at least these versions: %s", min_parts)
    learned = learn_mapping(
        corpus,
        nodes,
        algorithm,
        split=split,
        subscribed_words=registry.words,
        seed=seed,
        min_parts=min_parts,
        subscriptions=registry.corpus,
    )
    base = _base_table(lakehouse, config.end)
    if base is not None and base[1].n_matchers == nodes:
        # the full remap takes the published matcher ids where it can: the same routing,
        # fewer subscriptions re-placed when it replaces the published version
        learned = align_to_published(learned, base[1], registry.word_subscriptions)
    aligned = learned.table.manifest.get("aligned_to_published")
    training = routing_metrics(route_corpus(learned.table, corpus, seed=seed))
    remap: RemapChoice = {"remap": "full", "remap_reason": "--no-incremental"}
    if config.incremental and base is None and config.end is not None:
        reason = f"no published version learned on days before {config.end}"
        remap = {"remap": "full", "remap_reason": reason}
    elif config.incremental:
        learned, training, remap = incremental_or_full(
            base,
            registry.word_subscriptions,
            corpus,
            window.judge,
            learned,
            training,
            registry.count,
            registry.corpus,
            registry.words,
            max_moved=config.max_moved,
            full_remap_gain=config.full_remap_gain,
            seed=seed,
            min_parts=min_parts,
        )
    if aligned is not None and remap["remap"] == "full":
        # what the renaming of the full remap's matchers kept in place (subscription words)
        assert base is not None
        remap["aligned_to_version"] = base[0]
        remap["aligned_kept_subscription_words"] = int(aligned["kept_subscription_words"])
        remap["unaligned_kept_subscription_words"] = int(aligned["kept_subscription_words_before"])
    params: VersionParams = {
        **remap,
        "split": split,
        "seed": seed,
        "holdout_fraction": config.holdout_fraction,
        "label": algorithm_label(algorithm, split),
        "hot_words": learned.table.n_split_words,
        "live_hot_words": min_parts,
    }
    # the window's end is always recorded (publish never puts a version learned on older
    # days over a newer one): the run's, else the newest day it read
    end = config.end or window.last_day
    inputs: LearnInputs = {
        "gold.post_words": window.edges_version,
        "start": config.start.isoformat() if config.start else None,
        "end": end.isoformat() if end else None,
        "training_posts": corpus.n_posts,
        "training_edges": corpus.n_edges,
        "subscriptions": registry.count,
    }
    version = add_candidate(
        lakehouse,
        learned.table,
        {
            "algorithm": algorithm,
            "n_matchers": nodes,
            "params": json.dumps(params),
            "inputs": json.dumps(inputs),
            "subscribed_words": registry.words,
            "metrics": json.dumps(
                {
                    "training": training.as_dict(with_loads=False),
                    "learn_seconds": learned.learn_seconds,
                    "read_seconds": window.read_seconds,
                }
            ),
            "validation": None,
            "status": "candidate",
            "created_at": now_utc(),
            "published_at": None,
            "retired_at": None,
        },
    )
    log.info(
        "learned candidate version %d (%s, N=%d) on %d posts",
        version,
        params["label"],
        nodes,
        corpus.n_posts,
    )
    return {
        "routing_version": version,
        "label": params["label"],
        "n_matchers": nodes,
        "mapping_rows": learned.table.part_matchers.shape[0],
        **inputs,
        "learn_seconds": round(learned.learn_seconds, 3),
        "read_seconds": round(window.read_seconds, 3),
        **remap,
    }


def _published_table(lakehouse: Lakehouse) -> tuple[int, RoutingTable] | None:
    """The published version and its table (None: nothing published yet)."""
    version = published_version(lakehouse)
    return None if version is None else (version, load_routing_table(lakehouse, version))


def _base_table(lakehouse: Lakehouse, end: dt.date | None) -> tuple[int, RoutingTable] | None:
    """The version a remap refines and takes matcher ids from: the published one, or for a
    run bound to its data interval (``end``) the newest once-published version learned on
    days before it, so a backfill or a re-run of a past interval learns the same mapping
    whatever was published since."""
    if end is None:
        return _published_table(lakehouse)
    earlier = [
        (learned_end, row["routing_version"])
        for row in versions(lakehouse)
        if row["status"] in ("published", "retired")
        and (learned_end := window_end(row)) is not None
        and learned_end < end
    ]
    if not earlier:
        return None
    version = max(earlier)[1]
    return version, load_routing_table(lakehouse, version)


def run(config: LearnConfig, lakehouse: Lakehouse) -> int:
    start = config.start
    if start is None and config.window_days > 0 and config.end is not None:
        start = days_ending(config.end, config.window_days)
    elif start is None and config.window_days > 0 and lakehouse.exists("gold.post_words"):
        start = window_start(lakehouse.read("gold.post_words"), "day", config.window_days)
    summary = learn_version(lakehouse, dataclasses.replace(config, start=start))
    print(json.dumps(summary))
    return 0


main = job_entry("learn", __doc__, LearnConfig, run)


if __name__ == "__main__":
    exit_process(main())
