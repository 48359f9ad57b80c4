"""``s3tm bench stream``: sustained posts/s of the streaming matcher, end to end.

Set-up (in a scratch lakehouse, not timed): the real tweets (or a synthetic corpus when
absent) are split 80/20 by post; on the 80% the bench draws 100k subscriptions (tweet-based:
random posts; topic-based: LDA topics, paper Sect. 6.1), learns SALB + hot-word splitting
for N matchers on their words, places them (LASP), and publishes the version. The held-out
20% are written to the landing directory as JSON lines, replayed with fresh ids until the
asked number of posts, in files of ``--file-posts`` posts (one file per micro-batch).

Measured: the real query (``spark_jobs.stream.job``) with ``availableNow``: every batch reads
JSON, normalises, routes, shuffles to N matcher tasks, matches on cached tries, dispatches
(dedupe, deliveries, Parquet) in P tasks and commits ``matches`` and ``deliveries`` to Delta.
Reported: sustained posts/s after 2 warm-up batches (each Python worker builds the tries of
the matchers it meets; their times are reported apart), the batch latency p50/p95, and where
the time goes: task seconds of route (normalise + route), match and dispatch, the Spark
job's wall time, and the driver's plan/sync and Delta commits. Then the machine's limit for
this pipeline on the same files: a no-op query (the stream's source into Python workers,
nothing written), and the matcher's rate as a share of it. And the ceiling of the query's
shape on the same files: a skeleton with the same source, the same three Python stages and
two shuffles carrying as many bytes per post as the real query's did (and once carrying
none), no work in any stage (``skeleton of noop``, ``skeleton 0 B of noop``).

``--compare REV`` (``benchmarks.compare``) runs this in a git worktree of REV and in this
tree, alternating, and prints both rates and their ratio.
"""

from __future__ import annotations

import functools
import gzip
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from benchmarks.experiments.report import write_csv
from benchmarks.machine import machine_summary
from benchmarks.options import StreamBench
from benchmarks.scale_out import batch_costs
from core.corpus.arrays import Corpus, corpus_from_word_lists, holdout_mask
from core.errors import InputDataError
from core.formatting import format_table
from core.learn import learn_mapping
from core.monitor.health import RoutingHealth
from core.remap_options import HOLDOUT_FRACTION, HOLDOUT_SEED
from core.stream.costs import MIN_BATCHES, BatchCounts, fit, relative_error
from core.subscriptions.workloads import Workload
from core.text import normalize

if TYPE_CHECKING:
    from spark_jobs.stream.config import StreamConfig

WARMUP_BATCHES = 2
PROJECTED_CORES = (16, 64)  # a core per matcher at N = 16, and four times as many


def _read_posts(path: Path | None, seed: int) -> tuple[list[str], list[str]]:
    """(ids, texts) of the real corpus, or of a synthetic one when ``path`` is None."""
    if path is None:
        from core.corpus.synthetic import SyntheticCorpusSpec, generate_corpus, render_post_text

        corpus = generate_corpus(SyntheticCorpusSpec(n_posts=150_000, seed=seed))
        rng = np.random.default_rng(seed)
        texts = [
            render_post_text(
                corpus.vocabulary[corpus.indices[corpus.indptr[p] : corpus.indptr[p + 1]]].tolist(),
                rng,
            )
            for p in range(corpus.n_posts)
        ]
        return [f"syn-{p}" for p in range(corpus.n_posts)], texts
    ids, texts = [], []
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            if isinstance(record.get("text"), str) and record["text"].strip():
                ids.append(str(record["id"]))
                texts.append(record["text"])
    return ids, texts


def _subscriptions(workload: Workload, training: Corpus, n: int, seed: int) -> list[list[str]]:
    from core.subscriptions.workloads import fit_topics, topic_subscriptions, tweet_subscriptions

    if workload == "tweet":
        subs = tweet_subscriptions(training, n, seed=seed)
    else:
        subs = topic_subscriptions(training, fit_topics(training, seed=seed), n, seed=seed)
    return [
        subs.vocabulary[subs.indices[subs.indptr[s] : subs.indptr[s + 1]]].tolist()
        for s in range(subs.n_posts)
    ]


def _register(lakehouse: Any, word_sets: list[list[str]], subscribers: int) -> None:
    from spark_jobs.lake.subscription_store import register_word_sets

    register_word_sets(
        lakehouse,
        [" ".join(words) for words in word_sets],
        word_sets,
        [f"subscriber-{i % subscribers:05d}" for i in range(len(word_sets))],
    )


def _word_stats(lakehouse: Any, training: Corpus) -> None:
    """``gold.word_stats`` of the training posts, as the graph job would write it (one day):
    the streaming job orders each trie's words by these frequencies."""
    import datetime as dt

    lengths = np.diff(training.indptr)
    cofrequency = np.bincount(
        training.indices, weights=np.repeat(lengths - 1, lengths), minlength=training.n_words
    )
    lakehouse.write_arrow(
        pa.table(
            {
                "day": pa.array([dt.date.today()] * training.n_words, pa.date32()),
                "word": pa.array(training.vocabulary.tolist(), pa.string()),
                "post_frequency": pa.array(training.word_frequencies.astype(np.int64)),
                "cofrequency_sum": pa.array(cofrequency.astype(np.int64)),
            }
        ),
        "gold.word_stats",
    )


def _bronze(lakehouse: Any, ids: list[str], texts: list[str]) -> None:
    """``bronze.posts`` of the training posts, as the ingest would land them: the recent
    posts the stream fills a new version's token table from (its warm-up)."""
    import datetime as dt

    now = dt.datetime.now(dt.UTC)
    n = len(texts)
    lakehouse.write_arrow(
        pa.table(
            {
                "post_id": pa.array(ids, pa.string()),
                "text": pa.array(texts, pa.string()),
                "source": pa.array(["bench"] * n, pa.string()),
                "created_at": pa.array([now] * n, pa.timestamp("us", tz="UTC")),
                "event_day": pa.array([now.date()] * n, pa.date32()),
                "ingest_batch": pa.array(["bench"] * n, pa.string()),
                "source_file": pa.array(["bench"] * n, pa.string()),
                "line_number": pa.array(np.arange(n, dtype=np.int64)),
                "ingested_at": pa.array([now] * n, pa.timestamp("us", tz="UTC")),
            }
        ),
        "bronze.posts",
    )


def _land(landing: Path, ids: list[str], texts: list[str], total: int, per_file: int) -> int:
    landing.mkdir(parents=True)
    written, files = 0, 0
    while written < total:
        n = min(per_file, total - written)
        rows = [
            json.dumps({"id": f"{ids[k % len(ids)]}#{k // len(ids)}", "text": texts[k % len(ids)]})
            for k in range(written, written + n)
        ]
        (landing / f"posts-{files:05d}.jsonl").write_text("\n".join(rows) + "\n")
        written += n
        files += 1
    return files


def _count_rows(batches: Any) -> Any:
    """mapInArrow body of the no-op query: touch every batch, keep nothing."""
    rows = 0
    for batch in batches:
        rows += batch.num_rows
    yield pa.RecordBatch.from_pydict({"rows": [rows]})


def steady_rate(spark: Any, config: StreamConfig, posts_of_batch: Callable[[Any], int]) -> float:
    """posts/s of an ``availableNow`` query over the stream's own source whose every batch
    is ``posts_of_batch(posts)`` (it returns the posts it counted); steady batches only
    (the first is warm-up)."""
    from spark_jobs.stream.pipeline import source

    seconds: list[float] = []
    rows: list[int] = []

    def each(posts: Any, batch_id: int) -> None:
        started = time.perf_counter()
        rows.append(posts_of_batch(posts))
        seconds.append(time.perf_counter() - started)

    query = (
        source(spark, config)
        .writeStream.foreachBatch(each)
        .option("checkpointLocation", config.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    steady = slice(1, None) if len(seconds) > 1 else slice(None)
    return sum(rows[steady]) / max(sum(seconds[steady]), 1e-9)


def noop_rate(spark: Any, config: StreamConfig) -> float:
    """The machine's limit for this pipeline: posts/s of a query that reads the same landed
    posts through the stream's own source into Python workers (``mapInArrow``) and writes
    nothing."""

    def count(posts: Any) -> int:
        return sum(r["rows"] for r in posts.mapInArrow(_count_rows, "rows long").collect())

    return steady_rate(spark, config, count)


# -- the pipeline's data movement alone ------------------------------------------------------
# Filler bytes of the skeleton's payloads: int32 values below 2**17, as compressible as the
# word ids and subscription ids the real payloads carry. Made once per Python worker, so
# the skeleton's Python tasks do no work but slicing.
_FILLER: dict[str, bytes] = {}


def _filler(size: int) -> bytes:
    held = _FILLER.get("bytes", b"")
    if len(held) < size:
        rng = np.random.default_rng(0)
        held = rng.integers(0, 1 << 17, size=max(size, 1 << 20) // 4 + 1, dtype=np.int32).tobytes()
        _FILLER["bytes"] = held
    return held[:size]


def _skeleton_rows(keys: list[int], size: int, posts: int) -> pa.RecordBatch:
    """One payload row per key; the first row carries the count of posts behind them."""
    return pa.RecordBatch.from_arrays(
        [
            pa.array(keys, pa.int32()),
            pa.array([_filler(size)] * len(keys), pa.binary()),
            pa.array([posts] + [0] * (len(keys) - 1), pa.int64()),
        ],
        names=["key", "payload", "posts"],
    )


def _skeleton_route(
    keys: list[int], bytes_per_post: float, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Route stage of the skeleton: per input batch, one payload per matcher partition,
    together as many bytes as the real route tasks shuffled for that many posts."""
    for batch in batches:
        size = int(batch.num_rows * bytes_per_post / len(keys))
        yield _skeleton_rows(keys, size, batch.num_rows)


def _skeleton_match(
    keys: list[int], bytes_ratio: float, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Match stage of the skeleton: reads its payloads and, at the end, sends each dispatch
    partition its share of ``bytes_ratio`` times the bytes it received."""
    received, posts = 0, 0
    for batch in batches:
        received += pc.sum(pc.binary_length(batch.column("payload"))).as_py() or 0
        posts += pc.sum(batch.column("posts")).as_py() or 0
    yield _skeleton_rows(keys, int(received * bytes_ratio / len(keys)), posts)


def _skeleton_dispatch(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    posts = 0
    for batch in batches:
        posts += pc.sum(batch.column("posts")).as_py() or 0
    yield pa.RecordBatch.from_pydict({"posts": [posts]})


def skeleton_rate(
    spark: Any,
    config: StreamConfig,
    n_matchers: int,
    routed_bytes_per_post: float,
    matched_bytes_per_post: float,
) -> float:
    """posts/s of the stream's query shape with no work in it: the same source, the same
    three Python stages and two shuffles (route -> N matcher partitions -> P dispatch
    partitions) carrying as many bytes per post as the real query's did, nothing parsed,
    matched or written. What the data movement alone leaves of the no-op rate."""
    from spark_jobs.stream.pipeline import partition_keys, task_slots

    slots = task_slots(spark)
    n_match = min(n_matchers, slots)
    match_keys = partition_keys(spark, n_match).tolist()
    dispatch_keys = partition_keys(spark, slots).tolist()
    # as many payload rows per input batch as the real route emits (one per matcher)
    route_keys = [match_keys[m % n_match] for m in range(n_matchers)]
    ratio = matched_bytes_per_post / max(routed_bytes_per_post, 1e-9)
    payloads = "key int, payload binary, posts long"

    def count(posts: Any) -> int:
        routed = posts.select("line").mapInArrow(
            functools.partial(_skeleton_route, route_keys, routed_bytes_per_post), payloads
        )
        matched = routed.repartition(n_match, "key").mapInArrow(
            functools.partial(_skeleton_match, dispatch_keys, ratio), payloads
        )
        counted = matched.repartition(slots, "key").mapInArrow(_skeleton_dispatch, "posts long")
        return sum(r["posts"] for r in counted.collect())

    return steady_rate(spark, config, count)


@dataclass(frozen=True)
class WorkloadScene:
    """What a streamed workload is set up from: the posts (ids and texts, split into
    training and held-out), the subscriptions' kind and count, N and the seed."""

    workload: Workload
    ids: list[str]
    texts: list[str]
    nodes: int
    subscriptions: int
    seed: int
    routing: str = "salb"  # the learner of the published version (hash: hash routing)


def prepare_workload(
    spark: Any, root: Path, scene: WorkloadScene
) -> tuple[Any, list[str], list[str], list[list[str]], int]:
    """A scratch lakehouse with subscriptions registered and a SALB+split version published:
    ``(lakehouse, held-out ids, held-out texts, subscription word sets, version)``."""
    workload, ids, texts, seed = scene.workload, scene.ids, scene.texts, scene.seed
    from spark_jobs.jobs.place import place_version
    from spark_jobs.jobs.publish import publish
    from spark_jobs.lake.delta_io import Lakehouse
    from spark_jobs.lake.routing_store import register_table

    mask = holdout_mask(len(texts), HOLDOUT_FRACTION, HOLDOUT_SEED)
    training_sets = [normalize(t) for t, m in zip(texts, mask, strict=True) if not m]
    training = corpus_from_word_lists([w for w in training_sets if w])
    held_ids = [i for i, m in zip(ids, mask, strict=True) if m]
    held_texts = [t for t, m in zip(texts, mask, strict=True) if m]
    word_sets = _subscriptions(workload, training, scene.subscriptions, seed)
    lakehouse = Lakehouse(spark, root / workload / scene.routing / "lakehouse")
    _register(lakehouse, word_sets, subscribers=max(1, len(word_sets) // 100))
    _word_stats(lakehouse, training)
    _bronze(
        lakehouse,
        [i for i, m in zip(ids, mask, strict=True) if not m],
        [t for t, m in zip(texts, mask, strict=True) if not m],
    )
    learned = learn_mapping(
        training,
        scene.nodes,
        scene.routing,
        split=scene.routing != "hash",
        subscribed_words={w for s in word_sets for w in s},
        seed=seed,
    )
    version = register_table(lakehouse, learned.table, algorithm=scene.routing)
    place_version(lakehouse, version, unit_cost=True)
    publish(lakehouse, version, skip_validation=True)
    return lakehouse, held_ids, held_texts, word_sets, version


def run_workload(
    spark: Any,
    root: Path,
    scene: WorkloadScene,
    *,
    posts: int,
    file_posts: int,
    matches_table: bool = True,
) -> dict[str, Any]:
    from spark_jobs.stream.config import StreamConfig
    from spark_jobs.stream.matcher import start

    workload, nodes, seed = scene.workload, scene.nodes, scene.seed
    started = time.perf_counter()
    lakehouse, held_ids, held_texts, word_sets, version = prepare_workload(spark, root, scene)
    here = root / workload / scene.routing
    landing = here / "landing"
    files = _land(landing, held_ids, held_texts, posts, file_posts)
    print(
        f"[{workload}] set-up {time.perf_counter() - started:.1f}s: {len(word_sets):,} "
        f"subscriptions, {scene.routing} N={nodes} (version {version}), {posts:,} posts in "
        f"{files} files of {file_posts:,} (held-out {len(held_texts):,} tweets replayed)",
        flush=True,
    )
    config = StreamConfig(
        source="files",
        landing=str(landing),
        checkpoint=str(here / "checkpoint"),
        query_name=f"bench_{workload}_{scene.routing}",
        max_files_per_trigger=1,
        trigger_seconds=0.0,
        available_now=True,
        seed=seed,
        shedding="off",  # the matcher's own rate: a landed backlog is not overload
        matches_table=matches_table,
    )
    query_started = time.perf_counter()
    query, handler = start(spark, lakehouse, config)
    query.awaitTermination()
    wall = time.perf_counter() - query_started
    if query.exception() is not None:
        raise InputDataError(f"stream query failed: {query.exception()}")
    figures = [batch.figures for batch in handler.figures]
    noop = noop_rate(
        spark,
        config.with_checkpoint(str(here / "noop-checkpoint")),
    )
    # Warm-up: each Python worker builds the tries of the matchers it meets (2 batches
    # here) and fills its token cache; reported apart from the steady state.
    warmup = WARMUP_BATCHES
    if len(figures) <= warmup:
        raise InputDataError(f"need more than {warmup} batches (warm-up); raise --posts")
    steady = figures[warmup:]
    total = [f.seconds_total for f in steady]
    steady_posts = sum(f.posts for f in steady)

    def share(key: str) -> float:
        return float(sum(getattr(f, key) for f in steady))

    routed_per_post = share("routed_bytes") / max(steady_posts, 1)
    matched_per_post = share("matched_bytes") / max(steady_posts, 1)
    skeleton = skeleton_rate(
        spark,
        config.with_checkpoint(str(here / "skeleton-checkpoint")),
        nodes,
        routed_per_post,
        matched_per_post,
    )
    # the shape alone: the same stages and shuffles carrying no bytes
    shape_only = skeleton_rate(
        spark,
        config.with_checkpoint(str(here / "shape-checkpoint")),
        nodes,
        0.0,
        0.0,
    )
    steady_ids = {batch.batch_id for batch in list(handler.figures)[warmup:]}
    health = [
        r for r in lakehouse.read_arrow("stream.health").to_pylist() if r["batch_id"] in steady_ids
    ]
    route_task_s = sum(r["route_seconds"] for r in health)
    # counted work: the busiest matcher's index lookups + matches per post (the gate's)
    work = np.sum([r["work"] for r in health if r["work"]], axis=0) if health else None
    slowest = [f.seconds_match_slowest for f in steady if f.seconds_match_slowest is not None]
    costs = batch_costs(
        posts=steady_posts / len(steady),
        serial=(share("seconds_sync") + share("seconds_commit")) / len(steady),
        spark_job=share("seconds_spark") / len(steady),
        local_cores=int(spark.sparkContext.defaultParallelism),
        route=share("seconds_route") / len(steady),
        match=share("seconds_match") / len(steady),
        dispatch=share("seconds_dispatch") / len(steady),
        slowest_matcher=float(np.mean(slowest)) if slowest else 0.0,
    )

    return {
        "workload": f"{workload}-based",
        "routing": scene.routing,
        "outputs": "matches+deliveries" if matches_table else "deliveries",
        "N": nodes,
        "subscriptions": len(word_sets),
        "batches": len(figures),
        "posts/batch": file_posts,
        "posts": sum(f.posts for f in figures),
        "wall s": round(wall, 1),
        "posts/s (all)": round(sum(f.posts for f in figures) / wall),
        "posts/s (steady)": round(steady_posts / sum(total)),
        "batch p50 s": round(float(np.percentile(total, 50)), 2),
        "batch p95 s": round(float(np.percentile(total, 95)), 2),
        "warm-up batches s": "+".join(f"{f.seconds_total:.1f}" for f in figures[:warmup]),
        # the first batch against a steady one (the bar: within 2x), and the
        # warm-up job that ran before it (Python workers started, indexes, token table)
        "first batch / p50": round(figures[0].seconds_total / float(np.percentile(total, 50)), 2),
        "warm-up job s": "+".join(f"{w.seconds:.1f}" for w in handler.warmups) or None,
        "route task s/batch": round(share("seconds_route") / len(steady), 2),
        "match task s/batch": round(share("seconds_match") / len(steady), 2),
        "spark job s/batch": round(share("seconds_spark") / len(steady), 2),
        "dispatch task s/batch": round(share("seconds_dispatch") / len(steady), 2),
        "commit s/batch": round(share("seconds_commit") / len(steady), 2),
        "plan+sync s/batch": round(share("seconds_sync") / len(steady), 2),
        "spread": round(share("routed_pairs") / max(steady_posts, 1), 2),
        "matches/post": round(share("matches") / max(steady_posts, 1), 2),
        "deliveries/post": round(share("deliveries") / max(steady_posts, 1), 2),
        "bytes written/post": round(share("written_bytes") / max(steady_posts, 1), 1),
        # routing health (stream.health): the word sketch's cost within the route tasks
        "sketch % of route": round(100 * sum(r["sketch_seconds"] for r in health) / route_task_s, 2)
        if route_task_s
        else None,
        "sketch KiB/task": round(max((r["sketch_bytes"] for r in health), default=0) / 1024),
        "live rel. throughput": round(RoutingHealth.from_rows(health).relative_throughput, 2)
        if health
        else None,
        # the critical path of a cluster with a core per matcher, and the projection
        # that has it (benchmarks.scale_out)
        "slowest matcher s/batch": round(costs.slowest_matcher, 3),
        "busiest matcher work/post": round(float(work.max()) / max(steady_posts, 1), 2)
        if work is not None and np.ndim(work)
        else None,
        "work/post": round(float(work.sum()) / max(steady_posts, 1), 2)
        if work is not None and np.ndim(work)
        else None,
        **{
            f"projected posts/s at {cores} cores": round(costs.posts_per_second(cores))
            for cores in PROJECTED_CORES
        },
        "routed bytes/post": round(routed_per_post, 1),
        "matched bytes/post": round(matched_per_post, 1),
        "noop posts/s": round(noop),
        "of noop": round(steady_posts / sum(total) / noop, 2),
        # the query's shape with no work: its source, three Python stages, two shuffles of
        # the bytes above; the ceiling any matcher code in this shape can reach
        "skeleton posts/s": round(skeleton),
        "skeleton of noop": round(skeleton / noop, 2),
        "skeleton 0 B of noop": round(shape_only / noop, 2),
    }


@dataclass(frozen=True)
class StreamInputs:
    """What ``s3tm bench stream``'s options resolve to: the corpus (None: synthetic), the
    workloads, and each one's posts streamed and posts per landed file."""

    corpus: Path | None
    workloads: list[Workload]
    posts: dict[Workload, int]
    file_posts: dict[Workload, int]


def run(options: StreamBench, inputs: StreamInputs) -> list[dict[str, Any]]:
    from spark_jobs.lake.session import build_session

    corpus, seed, out = inputs.corpus, options.seed, Path(options.out)

    print(f"machine: {machine_summary()}")
    print(f"corpus: {corpus if corpus else 'synthetic (real tweets absent)'}")
    ids, texts = _read_posts(corpus, seed)
    spark = build_session("s3tm-bench-stream", master=options.master)
    print(
        f"spark master: {spark.sparkContext.master}, cores {spark.sparkContext.defaultParallelism}"
    )
    root = Path(tempfile.mkdtemp(prefix="s3tm-bench-stream-"))
    routings = [r.strip() for r in options.routing.split(",") if r.strip()]
    # one routing: one run; several: --runs alternating runs of each, same posts and subs
    runs = options.runs if len(routings) > 1 else 1
    rows = []
    try:
        for workload in inputs.workloads:
            for run_index in range(runs):
                for routing in routings:
                    scene = WorkloadScene(
                        workload, ids, texts, options.nodes, options.subscriptions, seed, routing
                    )
                    rows.append(
                        run_workload(
                            spark,
                            root / f"run-{run_index}",
                            scene,
                            posts=inputs.posts[workload],
                            file_posts=inputs.file_posts[workload],
                            matches_table=options.matches_table,
                        )
                    )
                    print(json.dumps(rows[-1]), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if len(routings) > 1:
        versus_routings(rows, routings, out)
    if len(rows) >= MIN_BATCHES:
        fit_costs(rows, out)
    header = list(rows[0])
    print("\nstreaming matcher, end to end (read JSON -> normalise -> route -> match -> Delta)")
    print(format_table(header, [[r[h] for h in header] for r in rows]))
    out.mkdir(parents=True, exist_ok=True)
    write_csv(rows, out / "stream.csv")
    print(f"wrote {out / 'stream.csv'}")
    return rows


VERSUS_FIGURES = (
    "posts/s (steady)",
    "slowest matcher s/batch",
    "busiest matcher work/post",
    *(f"projected posts/s at {cores} cores" for cores in PROJECTED_CORES),
)


def versus_routings(rows: list[dict[str, Any]], routings: list[str], out: Path) -> None:
    """The routings side by side per workload: the median of each figure over the runs,
    and each against the first routing's (``stream_routing.csv``)."""
    table = []
    for workload in dict.fromkeys(r["workload"] for r in rows):
        base: dict[str, float] = {}
        for routing in routings:
            mine = [r for r in rows if r["workload"] == workload and r["routing"] == routing]
            row: dict[str, Any] = {"workload": workload, "routing": routing, "runs": len(mine)}
            for figure in VERSUS_FIGURES:
                values = [float(r[figure]) for r in mine if r.get(figure) is not None]
                value = float(np.median(values)) if values else float("nan")
                base.setdefault(figure, value)
                row[figure] = round(value, 3)
                row[f"{figure} range"] = f"{min(values):g}-{max(values):g}" if values else ""
                # work and seconds: lower is better, so the ratio is base / mine
                faster = "posts/s" in figure
                row[f"x {routings[0]}: {figure}"] = round(
                    value / base[figure] if faster else base[figure] / value, 3
                )
            table.append(row)
    print(f"\nthe stream by routing (medians of alternating runs; x: against {routings[0]})")
    header = list(table[0])
    print(format_table(header, [[r[h] for h in header] for r in table]))
    out.mkdir(parents=True, exist_ok=True)
    write_csv(table, out / "stream_routing.csv")
    print(f"wrote {out / 'stream_routing.csv'}")


def _counts(row: dict[str, Any]) -> BatchCounts:
    """A run's mean steady batch as the cost model counts it."""
    posts = float(row["posts/batch"])
    return BatchCounts(
        posts=int(posts),
        copies=int(posts * float(row["spread"])),
        work=int(posts * float(row["work/post"] or 0)),
        matches=int(posts * float(row["matches/post"])),
        route_seconds=float(row["route task s/batch"]),
        match_seconds=float(row["match task s/batch"]),
        dispatch_seconds=float(row["dispatch task s/batch"]),
    )


def fit_costs(rows: list[dict[str, Any]], out: Path) -> None:
    """The stream's cost model (``core.stream.costs``) fitted to these runs' mean steady
    batches, each run's error, and the costs (``stream_costs.csv``)."""
    fitted = fit([_counts(r) for r in rows])
    print(
        f"\ncost model fitted on {fitted.batches} runs' mean batches: median error "
        f"{100 * fitted.median_error:.1f}%, largest {100 * fitted.max_error:.1f}% "
        "(predicted against measured task seconds)"
    )
    for row in rows:
        error = relative_error(fitted.costs, _counts(row))
        print(f"  {row['workload']} {row['routing']}: {100 * error:.1f}%")
    costs = fitted.costs.as_dict()
    print(
        "  seconds per unit: "
        + ", ".join(f"{k} {v:.3g}" for k, v in costs.items() if k != "source")
    )
    out.mkdir(parents=True, exist_ok=True)
    write_csv(
        [
            {
                **costs,
                "median_error": round(fitted.median_error, 4),
                "max_error": round(fitted.max_error, 4),
            }
        ],
        out / "stream_costs.csv",
    )
    print(f"wrote {out / 'stream_costs.csv'}")
