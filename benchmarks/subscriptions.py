"""``s3tm bench subscriptions``: the platform at 100k, 1M and 10M subscriptions.

For each size, in a fresh lakehouse, on the real timestamped tweets (``../shared/data``):

1. **register**: that many tweet-based subscriptions (random training posts' word sets; past
   the posts' count every post is taken equally often, ``tweet_subscriptions``) go into
   ``subscriptions.registry`` in commits of a million, as ``s3tm subscribe load`` commits
   a file;
2. **graph** (``gold.post_words`` of every day) and **learn** (the platform's learner,
   salb2 with hot-word splitting, N matchers, on the training posts and the registry's
   subscriptions) a candidate version;
3. **place** (LASP, ``routing.placements``), **validate** (the expectation suites),
   **evaluate** (counted work by replay on the held-out posts, the publish gate's measure,
   against hash routing) and **publish** (the gate: hash routing is a first version's
   floor): the remap DAG's steps, each in a process of its own as its task runs
   (``benchmarks.job_process``);
4. **stream**: held-out tweets land as files of ``--batch-posts`` and the stream matches
   them through the published version, one batch per file: a first batch of its own posts
   (the warm one), then the same ``--batch-posts`` held-out posts in every later file (each
   copy's post ids suffixed), so that every measured batch does the same work and only the
   changes differ. Three times, between two batches, ``--changes`` subscription changes are
   committed (half new, half cancelled), the stream's driver follows them while no batch
   runs (as between two triggers) and the next batch meets them.

Each step's wall time and peak memory (the Python driver, its JVM, the largest Python worker)
are measured (``/proc``: VmHWM): a remap step's are its own process' (what its driver pod
needs), register's and the stream's are the bench's process' (reset per step; they include
the tweets and subscriptions the bench holds). The stream's figures are the
steady batches' (not the first, not one after changes): posts/s and matches/s, the task
seconds per match and per routed post, the driver's plan + placement sync, what the
broadcast carried and what a match worker held; and the changes' cost: the driver's sync
between the batches; the work they made on the batches' path, measured where it is done
(the batch's own sync over a steady one's, and the match tasks' seconds taking the changes:
an index over the additions, the cancelled marked in the base's index, in every batch until
the next round), as a share of a steady batch; and, by wall time, the batches that met them
against the steady ones (a difference of the size of one batch's noise). Each as the median
of the three rounds and the worst round. Printed as one table, written to
``docs/bench/subscriptions.csv``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import gc
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import psutil
import pyarrow as pa

from benchmarks.experiments.report import write_csv
from benchmarks.machine import machine_summary
from core.corpus.arrays import Corpus, corpus_from_arrow_lists
from core.errors import InputDataError, InvalidArgumentError
from core.formatting import format_table
from core.sampling.hash_fraction import hash_fraction_mask
from core.subscriptions.workloads import TopicModel, Workload, fit_topics
from core.text import normalize_arrow
from spark_jobs.jobs.sampling import HOLDOUT_FRACTION, HOLDOUT_SEED
from spark_jobs.runtime.peak_rss import driver_jvm_pid, peak_mib, reset_peak

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spark_jobs.jobs.evaluate import EvaluateSummary
    from spark_jobs.jobs.publish import PublishDecision
    from spark_jobs.lake.delta_io import Lakehouse
    from spark_jobs.stream.batch_log import CommittedBatch

# batch 0 warms up; the changes are committed before batches 3, 5 and 7; the others are steady
STREAM_BATCHES = 9
CHANGED_BATCHES = (3, 5, 7)
SUBSCRIBERS_PER = 100  # one subscriber per this many subscriptions
REGISTER_CHUNK = 1_000_000
# topic-based subscriptions: LDA (100 topics, 5 words each, core.subscriptions.workloads)
# fitted on a seeded sample of this many training posts (the topics' top words settle
# long before the 1.3M posts; all of them took minutes per iteration)
LDA_POSTS = 200_000
LDA_ITERATIONS = 5
PROJECTED_CORES = (2, 8, 32, 128)


@dataclass(frozen=True)
class SubscriptionsBenchConfig:
    """sizes: subscription counts; nodes: N; batch_posts: posts a stream batch reads;
    changes: subscription changes between two batches; corpus: the real tweets."""

    sizes: tuple[int, ...]
    nodes: int
    batch_posts: int
    changes: int
    corpus: Path
    master: str | None
    out: Path
    seed: int = 0
    max_posts: int | None = None
    algorithm: str = "salb2"
    workload: Workload = "tweet"
    stream: bool = True


@dataclass(frozen=True)
class Tweets:
    ids: list[str]
    texts: list[str]
    created_at: list[dt.datetime]


def read_tweets(path: Path, limit: int | None) -> Tweets:
    """The corpus' posts with text (ids, texts, times), in file order."""
    ids: list[str] = []
    texts: list[str] = []
    times: list[dt.datetime] = []
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            text = record.get("text")
            if not isinstance(text, str) or not text.strip():
                continue
            ids.append(str(record["id"]))
            texts.append(text)
            stamp = record.get("created_at")
            times.append(
                dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
                if isinstance(stamp, str)
                else dt.datetime(2017, 1, 1, tzinfo=dt.UTC)
            )
            if limit is not None and len(ids) >= limit:
                break
    if not ids:
        raise InputDataError(f"{path} holds no posts with text")
    return Tweets(ids, texts, times)


# -- peak memory per step ---------------------------------------------------------------------
def _python_workers() -> list[int]:
    """PySpark's Python worker processes on this machine (daemon and forked workers)."""
    pids = []
    for process in psutil.process_iter(["cmdline"]):
        command = " ".join(process.info["cmdline"] or ())
        if "pyspark.daemon" in command or "pyspark.worker" in command:
            pids.append(process.pid)
    return pids


@dataclass
class StepFigures:
    step: str
    wall_s: float
    driver_peak_mib: float | None
    jvm_peak_mib: float | None
    worker_peak_mib: float | None
    own_process: bool = False  # a job process (the remap's steps), else the bench's


class Steps:
    """Times steps and reads their peak memory; prints each as it ends."""

    def __init__(self, spark: SparkSession, size: int) -> None:
        self.jvm = driver_jvm_pid(spark)
        self.size = size
        self.done: list[StepFigures] = []

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        for pid in ("self", self.jvm, *_python_workers()):
            reset_peak(pid)
        print(f"[{self.size:,}] {name} ...", flush=True)
        started = time.perf_counter()
        yield
        wall = time.perf_counter() - started
        workers = [peak_mib(p) for p in _python_workers()]
        figures = StepFigures(
            name,
            round(wall, 2),
            _round(peak_mib("self")),
            _round(peak_mib(self.jvm)),
            _round(max((w for w in workers if w is not None), default=None)),
        )
        self.done.append(figures)
        print(
            f"[{self.size:,}] {name}: {wall:.1f} s, peak driver {figures.driver_peak_mib} MiB, "
            f"JVM {figures.jvm_peak_mib} MiB, Python worker {figures.worker_peak_mib} MiB",
            flush=True,
        )

    def job(self, name: str, job: str, arguments: list[str]) -> dict[str, Any]:
        """Run ``spark_jobs.jobs.<job>`` in a process of its own, as the remap DAG's task
        runs it (``benchmarks.job_process``): the step's wall time, its driver's and its
        JVM's peak; the job's last JSON line. Its log goes to this process' stderr."""
        from benchmarks.job_process import JobFigures

        print(f"[{self.size:,}] {name} (its own process) ...", flush=True)
        with tempfile.TemporaryDirectory(prefix="s3tm-job-") as folder:
            figures_path = Path(folder) / "figures.json"
            started = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "benchmarks.job_process", str(figures_path), job,
                 *arguments],
                stdout=subprocess.PIPE, text=True, check=False, env=_job_environment(),
            )  # fmt: skip
            wall = time.perf_counter() - started
            if done.returncode != 0 or not figures_path.exists():
                raise InputDataError(
                    f"{name} ({job} {' '.join(arguments)}) exited {done.returncode}; its log "
                    f"is above. Its output: {done.stdout[-1000:]}"
                )
            figures = JobFigures.read(figures_path)
        step = StepFigures(
            name, round(wall, 2), _round(figures.driver_peak_mib), _round(figures.jvm_peak_mib),
            None, own_process=True,
        )  # fmt: skip
        self.done.append(step)
        print(
            f"[{self.size:,}] {name}: {wall:.1f} s, peak driver {step.driver_peak_mib} MiB, "
            f"JVM {step.jvm_peak_mib} MiB",
            flush=True,
        )
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if not lines:
            raise InputDataError(f"{name} printed no result: {done.stdout[-1000:]}")
        result: dict[str, Any] = json.loads(lines[-1])
        return result


def _job_environment() -> dict[str, str]:
    """The job processes import this checkout's packages, wherever they run from."""
    root = str(Path(__file__).resolve().parents[1])
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": root if not path else f"{root}{os.pathsep}{path}"}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value)


# -- the lakehouse before the steps -----------------------------------------------------------
def _posts_tables(lakehouse: Lakehouse, tweets: Tweets, rows: np.ndarray) -> None:
    """``bronze.posts`` and ``silver.posts`` of the given posts, as ingest and normalise
    write them (the evaluation reads silver's held-out posts; the stream's warm-up reads
    bronze's recent texts)."""
    now = dt.datetime.now(dt.UTC)
    n = rows.shape[0]
    created = pa.array([tweets.created_at[r] for r in rows], pa.timestamp("us", tz="UTC"))
    texts = pa.array([tweets.texts[r] for r in rows], pa.string())
    post_ids = pa.array([tweets.ids[r] for r in rows], pa.string())
    days = created.cast(pa.date32())
    lakehouse.write_arrow(
        pa.table(
            {
                "post_id": post_ids,
                "text": texts,
                "source": pa.array(["bench"] * n, pa.string()),
                "created_at": created,
                "event_day": days,
                "ingest_batch": pa.array(["bench"] * n, pa.string()),
                "source_file": pa.array(["bench"] * n, pa.string()),
                "line_number": pa.array(np.arange(n, dtype=np.int64)),
                "ingested_at": pa.array([now] * n, pa.timestamp("us", tz="UTC")),
            }
        ),
        "bronze.posts",
    )
    words = normalize_arrow(texts)
    lengths = pa.compute.list_value_length(words).cast(pa.int32())
    keep = pa.compute.greater(lengths, 0)
    silver = pa.table(
        {
            "post_id": post_ids,
            "words": words,
            "n_words": lengths,
            "event_day": days,
            "created_at": created,
            "sample_rate": pa.array(np.ones(n)),
        }
    ).filter(keep)
    lakehouse.write_arrow(silver, "silver.posts")


def _land(landing: Path, tweets: Tweets, rows: np.ndarray, per_file: int) -> list[Path]:
    """JSON-lines files of ``per_file`` posts, staged beside the landing folder and moved in
    one at a time by the caller (a batch per file): the first ``per_file`` held-out posts
    (the warm batch), then the next ``per_file`` in every later file, the ids of copy ``k``
    suffixed ``~k`` (a batch compared with another does the same work)."""
    if rows.shape[0] < 2 * per_file:
        raise InputDataError(
            f"batches of {per_file:,} posts need {2 * per_file:,} held-out posts; the corpus "
            f"gives {rows.shape[0]:,} (lower --batch-posts)"
        )
    staged = landing.with_name(landing.name + "-staged")
    staged.mkdir(parents=True)
    landing.mkdir(parents=True)
    warm, measured = rows[:per_file], rows[per_file : 2 * per_file]
    files = []
    for k in range(STREAM_BATCHES):
        part, suffix = (warm, "") if k == 0 else (measured, f"~{k}")
        path = staged / f"posts-{k:05d}.jsonl"
        path.write_text(
            "".join(
                json.dumps({"id": tweets.ids[r] + suffix, "text": tweets.texts[r]}) + "\n"
                for r in part
            )
        )
        files.append(path)
    return files


def _has_batches(handler: Any, count: int) -> bool:
    return len(handler.figures) >= count


def _followed(handler: Any, registry_version: int | None) -> bool:
    return bool(handler.state.registry_version == registry_version)


def _wait(what: str, done: Callable[[], bool], query: Any, seconds: float = 1800) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        if query.exception() is not None:
            raise InputDataError(f"the stream failed while waiting for {what}: {query.exception()}")
        if time.monotonic() > deadline:
            raise InputDataError(f"gave up after {seconds:.0f} s waiting for {what}")
        time.sleep(0.2)


# -- one size ---------------------------------------------------------------------------------
def run_size(
    spark: SparkSession,
    root: Path,
    tweets: Tweets,
    training: Corpus,
    held_rows: np.ndarray,
    size: int,
    config: SubscriptionsBenchConfig,
    topics: TopicModel | None = None,
) -> dict[str, Any]:
    from core.remap_options import DEFAULT_MARGIN
    from core.subscriptions.workloads import topic_subscriptions, tweet_subscriptions
    from spark_jobs.lake.delta_io import Lakehouse
    from spark_jobs.lake.subscription_store import cancel_subscriptions, register_word_sets
    from spark_jobs.stream.config import StreamConfig
    from spark_jobs.stream.matcher import start

    folder = root / f"subs-{size}"
    lakehouse = Lakehouse(spark, folder / "lakehouse")
    _posts_tables(lakehouse, tweets, np.arange(len(tweets.ids)))
    if topics is not None:
        subs = topic_subscriptions(training, topics, size, seed=config.seed)
    else:
        subs = tweet_subscriptions(training, size, seed=config.seed)
    if subs.n_posts != size:
        raise InputDataError(f"{subs.n_posts:,} subscriptions drawn of the {size:,} asked")
    subscribers = max(1, size // SUBSCRIBERS_PER)
    steps = Steps(spark, size)
    with steps.step("register"):
        # in commits of a million, as a load of a big file would go: a Python row per
        # subscription for ten million at once is 13 GiB
        for first in range(0, size, REGISTER_CHUNK):
            rows = range(first, min(size, first + REGISTER_CHUNK))
            word_sets = [
                subs.vocabulary[subs.indices[subs.indptr[s] : subs.indptr[s + 1]]].tolist()
                for s in rows
            ]
            register_word_sets(
                lakehouse,
                [" ".join(w) for w in word_sets],
                word_sets,
                [f"subscriber-{i % subscribers:06d}" for i in rows],
            )
            del word_sets
            gc.collect()
    del subs
    # the remap DAG's steps, each in a process of its own as its task runs it
    common = ["--lakehouse", str(folder / "lakehouse")]
    common += ["--master", config.master] if config.master else []
    # every day of the tweets (the DAG's default window is the last 7)
    steps.job("graph", "graph", [*common, "--window-days", "0", "--no-cooccurrence"])
    learned = steps.job(
        "learn",
        "learn",
        [*common, "--nodes", str(config.nodes), "--algorithm", config.algorithm,
         "--no-incremental", "--window-days", "0"],
    )  # fmt: skip
    version = str(learned["routing_version"])
    steps.job("place", "place", [*common, "--version", version, "--unit-cost"])
    validation = steps.job("validate", "publish", ["validate", *common, "--version", version])
    if not validation["success"]:
        raise InputDataError(f"version {version} failed validation: {validation}")
    evaluation = cast(
        "EvaluateSummary",
        steps.job(
            "evaluate", "evaluate", [*common, "--version", version, "--seed", str(config.seed)]
        ),
    )
    # the remap DAG's gate: hash routing is the floor of a first version
    decision = cast(
        "PublishDecision",
        steps.job(
            "publish",
            "publish",
            ["publish", *common, "--version", version, "--margin", str(DEFAULT_MARGIN),
             "--skip-validation"],
        ),
    )  # fmt: skip
    if decision.get("published") != int(version):
        print(f"{size:,}: version {version} kept out: {decision.get('reason')}", flush=True)
    if not config.stream:
        return _row(size, config, steps, [], [], evaluation, decision)

    landing = folder / "landing"
    files = _land(landing, tweets, held_rows, config.batch_posts)
    stream_config = StreamConfig(
        source="files",
        landing=str(landing),
        checkpoint=str(folder / "checkpoint"),
        query_name=f"bench_subscriptions_{size}",
        max_files_per_trigger=1,
        trigger_seconds=0.5,
        seed=config.seed,
        shedding="off",  # the matcher's own rate
        matches_table=False,  # deliveries hold every match
    )
    rounds: list[dict[str, float]] = []
    # each round cancels its own registered subscriptions (seeded, none twice)
    cancelled = np.random.default_rng(config.seed + 2).choice(
        np.arange(1, size + 1), len(CHANGED_BATCHES) * (config.changes - config.changes // 2),
        replace=False,
    )  # fmt: skip
    with steps.step("stream"):
        query, handler = start(spark, lakehouse, stream_config)
        try:
            for k, path in enumerate(files):
                if k in CHANGED_BATCHES:
                    assert handler.follower is not None
                    followed = handler.follower.seconds
                    r = CHANGED_BATCHES.index(k)
                    changes = _commit_changes(
                        lakehouse,
                        training,
                        config,
                        np.array_split(cancelled, len(CHANGED_BATCHES))[r],
                        seed=config.seed + 1 + r,
                        register=register_word_sets,
                        cancel=cancel_subscriptions,
                    )
                    # as between two triggers: the stream's driver follows the registry
                    # while no batch runs (spark_jobs/stream/registry_follower.py)
                    latest = lakehouse.version("subscriptions.registry")
                    _wait(
                        f"the stream to follow the registry to version {latest}",
                        functools.partial(_followed, handler, latest),
                        query,
                    )
                    changes["follower_s"] = handler.follower.seconds - followed
                    rounds.append(changes)
                path.replace(landing / path.name)
                _wait(f"batch {k + 1}", functools.partial(_has_batches, handler, k + 1), query)
        finally:
            query.stop()
    batches = list(handler.figures)
    return _row(size, config, steps, batches, rounds, evaluation, decision)


def _commit_changes(
    lakehouse: Lakehouse,
    training: Corpus,
    config: SubscriptionsBenchConfig,
    gone: np.ndarray,
    *,
    seed: int,
    register: Callable[..., list[int]],
    cancel: Callable[..., int],
) -> dict[str, float]:
    """``config.changes`` changes between two batches: half new subscriptions (seeded), and
    ``gone`` (the other half, registered ids) cancelled, each in one commit as the commands
    make them."""
    from core.subscriptions.workloads import tweet_subscriptions

    added = config.changes // 2
    new = tweet_subscriptions(training, added, seed=seed)
    word_sets = [
        new.vocabulary[new.indices[new.indptr[s] : new.indptr[s + 1]]].tolist()
        for s in range(new.n_posts)
    ]
    started = time.perf_counter()
    register(lakehouse, [" ".join(w) for w in word_sets], word_sets, "subscriber-changes")
    registered = time.perf_counter()
    cancel(lakehouse, sorted(gone.tolist()))
    cancelled = time.perf_counter()
    return {"register_s": registered - started, "cancel_s": cancelled - registered}


def _row(
    size: int,
    config: SubscriptionsBenchConfig,
    steps: Steps,
    batches: list[CommittedBatch],
    rounds: list[dict[str, float]],
    evaluation: EvaluateSummary,
    decision: PublishDecision,
) -> dict[str, Any]:
    remap = [s for s in steps.done if s.own_process]
    head: dict[str, Any] = {
        "subscriptions": size,
        "workload": config.workload,
        "N": config.nodes,
        "learner": config.algorithm,
        **{f"{s.step} s": s.wall_s for s in steps.done},
        # each remap step's driver, a process of its own: what its driver pod needs beside
        # its JVM (DEPLOY.md); register and the stream run in the bench's process
        "remap driver peak MiB": max((s.driver_peak_mib or 0) for s in remap),
        "remap peak step": max(remap, key=lambda s: s.driver_peak_mib or 0).step,
        "remap JVM peak MiB": max((s.jvm_peak_mib or 0) for s in remap),
        **{f"{s.step} driver MiB": s.driver_peak_mib for s in steps.done if s.step != "stream"},
        "worker peak MiB": max((s.worker_peak_mib or 0) for s in steps.done) or None,
        "x hash (counted work)": _ratio(evaluation.get("relative_work_throughput_vs_hash")),
        # the busiest matcher's counted work over the mean: what decides the ratio above
        "work imbalance": _imbalance(evaluation.get("candidate", {}).get("matcher_work")),
        "hash work imbalance": _imbalance(evaluation.get("hash", {}).get("matcher_work")),
        # what the gate did: the version, or hash routing when it lost (the stream's routing)
        "published": decision.get("published") or "none: hash routing",
    }
    if not config.stream:
        return head
    if len(batches) < STREAM_BATCHES:
        raise InputDataError(f"{len(batches)} stream batches ran of {STREAM_BATCHES}")
    changed = [batches[i] for i in CHANGED_BATCHES]
    steady = [b for i, b in enumerate(batches) if i != 0 and i not in CHANGED_BATCHES]

    def median_of(key: str, of: list[dict[str, float]] = rounds) -> float:
        return float(statistics.median(r.get(key, 0.0) for r in of))

    def total(key: str, of: list[CommittedBatch] = steady) -> float:
        return float(sum(getattr(b.figures, key) for b in of))

    seconds = total("seconds_total")
    matches = total("matches")
    steady_batch = statistics.median(b.figures.seconds_total for b in steady)
    steady_sync = statistics.median(b.figures.seconds_sync for b in steady)
    memory = changed[0].memory
    last = batches[-1].memory
    # each changed batch over the steady batches' median (the same posts, the same version)
    over = [100 * (b.figures.seconds_total - steady_batch) / steady_batch for b in changed]
    sync_over = [100 * (b.figures.seconds_sync - steady_sync) / steady_batch for b in changed]
    # the work the changes made on the batches' path, measured where it is done: the batch's
    # own sync over a steady one's, and the match tasks' seconds taking the changes (an
    # index over the additions, the cancelled marked) in every batch until the next round
    # (a Python worker takes them when it first meets a matcher at the new epoch), summed
    # as if on one core
    ends = [*CHANGED_BATCHES[1:], len(batches)]
    task_change = [
        sum((b.memory.change_seconds if b.memory else 0.0) for b in batches[start:end])
        for start, end in zip(CHANGED_BATCHES, ends, strict=True)
    ]
    work_over = [
        100 * (max(0.0, b.figures.seconds_sync - steady_sync) + tasks) / steady_batch
        for b, tasks in zip(changed, task_change, strict=True)
    ]
    row: dict[str, Any] = {
        **head,
        "posts/batch": config.batch_posts,
        "posts/s": round(total("posts") / seconds),
        "matches/post": round(matches / max(total("posts"), 1), 1),
        "matches/s": round(matches / seconds),
        "match task us/match": round(1e6 * total("seconds_match") / max(matches, 1), 3),
        "route task us/post": round(1e6 * total("seconds_route") / max(total("posts"), 1), 2),
        "plan+sync s/batch": round(steady_sync, 3),
        "batch s": round(steady_batch, 2),
        # the driver's serial part (plan, placement sync, commits) and the tasks' part: what a
        # bigger cluster divides (projection below)
        "serial s/batch": round(
            statistics.median(b.figures.seconds_sync + b.figures.seconds_commit for b in steady), 3
        ),
        "task us/post": round(
            1e6
            * (total("seconds_route") + total("seconds_match") + total("seconds_dispatch"))
            / max(total("posts"), 1),
            2,
        ),
        "base MB": round((last.base_bytes if last else 0) / 1e6, 1),
        "broadcast MB": round((last.broadcast_bytes if last else 0) / 1e6, 2),
        "worker held MB": round((last.worker_bytes_max if last else 0) / 1e6, 1),
        "changes": config.changes,
        "change rounds": len(rounds),
        # medians of the rounds
        "changes register s": round(median_of("register_s"), 2),
        "changes cancel s": round(median_of("cancel_s"), 2),
        "changes broadcast MB": round((memory.changes_bytes if memory else 0) / 1e6, 2),
        # the driver's sync of the changes between the batches (the registry follower's),
        # then what the batch that met them still spent on its own sync
        "changes follower s": round(median_of("follower_s"), 3),
        "changes sync s": round(statistics.median(b.figures.seconds_sync for b in changed), 3),
        "changes task s": round(statistics.median(task_change), 3),
        # the changes' work as a share of a steady batch: the rounds' median and the worst
        "changes work % of batch": round(statistics.median(work_over), 1),
        "changes work % of batch, worst round": round(max(work_over), 1),
        # the batches that met them against the steady ones, by wall time (one batch's noise
        # is of the same size): the rounds' median, and the worst round
        "changes % of batch (wall)": round(statistics.median(over), 1),
        "changes % of batch (wall), worst round": round(max(over), 1),
        "sync % of batch": round(statistics.median(sync_over), 1),
    }
    return row


@dataclass(frozen=True)
class Projection:
    """A stream batch on ``cores`` cores: T(B) = serial + task_s_per_post * B / cores.

    Attributes:
        min_posts: the smallest batch at the asked parallel efficiency (T(B) on one core
            over cores x T(B) on ``cores``); None when the serial part alone rules it out.
        max_posts: the largest batch that fits the trigger.
        posts_per_s: the rate at ``max_posts`` (if it is at least ``min_posts``).
        efficiency: at ``max_posts``.
    """

    cores: int
    min_posts: int | None
    max_posts: int
    posts_per_s: int | None
    efficiency: float


def project(
    serial_s: float,
    task_s_per_post: float,
    cores: int,
    *,
    trigger_s: float = 5.0,
    efficiency: float = 0.8,
) -> Projection:
    """Amdahl's law over a batch: the driver's serial part stays, the tasks' part divides by
    the cores. E(B) = (s + tB) / (c s + tB) >= e  <=>  B >= s (e c - 1) / (t (1 - e));
    T(B) <= trigger  <=>  B <= c (trigger - s) / t."""
    if cores < 1 or task_s_per_post <= 0 or not 0 < efficiency < 1:
        raise InvalidArgumentError("cores >= 1, a positive task time and 0 < efficiency < 1")
    s, t, c = serial_s, task_s_per_post, cores
    most = max(0, int(c * (trigger_s - s) / t))
    # (less a hair: a bound that is a whole number must not round up past itself)
    bound = s * (efficiency * c - 1) / (t * (1 - efficiency))
    least = int(np.ceil(bound - 1e-6)) if c > 1 else 0
    fits = most > 0 and least <= most
    at = (s + t * most) / (c * s + t * most) if most else 0.0
    return Projection(
        cores,
        least if fits else None,
        most,
        int(most / (s + t * most / c)) if fits else None,
        round(at, 3),
    )


def _imbalance(work: list[int] | None) -> float | None:
    """Max over mean of the matchers' counted work (None: not counted)."""
    if not work or not sum(work):
        return None
    return round(max(work) * len(work) / sum(work), 3)


def _ratio(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def run(config: SubscriptionsBenchConfig) -> list[dict[str, Any]]:
    from spark_jobs.lake.session import build_session

    cancels = len(CHANGED_BATCHES) * (config.changes - config.changes // 2)
    if not config.sizes or min(config.sizes) < cancels:
        raise InvalidArgumentError(
            f"every size must be at least {cancels:,}: each of the {len(CHANGED_BATCHES)} rounds "
            f"of --changes ({config.changes:,}) cancels half as many registered subscriptions"
        )
    print(f"machine: {machine_summary()}")
    print(f"corpus: {config.corpus}")
    tweets = read_tweets(config.corpus, config.max_posts)
    # the platform's hold-out (learn leaves these posts out, evaluate judges on them)
    held = hash_fraction_mask(pa.array(tweets.ids), HOLDOUT_FRACTION, HOLDOUT_SEED)
    words = normalize_arrow(pa.array([t for t, h in zip(tweets.texts, held, strict=True) if not h]))
    training = corpus_from_arrow_lists(words)
    training = training.select(np.diff(training.indptr) > 0)
    held_rows = np.flatnonzero(held)
    print(
        f"{len(tweets.ids):,} posts: {training.n_posts:,} training posts with words, "
        f"{held_rows.shape[0]:,} held out (the stream reads {STREAM_BATCHES} batches of "
        f"{config.batch_posts:,}: a warm one, then the same posts in each)",
        flush=True,
    )
    topics = None
    if config.workload == "topic":
        sample = np.random.default_rng(config.seed).permutation(training.n_posts)[:LDA_POSTS]
        topics = fit_topics(
            training.select(np.sort(sample)), max_iter=LDA_ITERATIONS, seed=config.seed
        )
        print(
            f"topic-based subscriptions: LDA, 100 topics x 5 words, fitted on {sample.size:,} "
            f"training posts ({LDA_ITERATIONS} iterations) in {topics.seconds:.0f} s",
            flush=True,
        )
    out = config.out / (
        "subscriptions.csv"
        if config.workload == "tweet"
        else f"subscriptions-{config.workload}.csv"
    )
    spark = build_session("s3tm-bench-subscriptions", master=config.master)
    root = Path(tempfile.mkdtemp(prefix="s3tm-bench-subscriptions-"))
    rows = []
    try:
        for size in config.sizes:
            rows.append(run_size(spark, root, tweets, training, held_rows, size, config, topics))
            print(json.dumps(rows[-1]), flush=True)
            # after each size: a long run stopped later keeps what it measured
            config.out.mkdir(parents=True, exist_ok=True)
            write_csv(rows, out)
            shutil.rmtree(root / f"subs-{size}", ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    header = list(rows[0])
    print(f"\nthe platform by subscriptions ({spark.sparkContext.master}, {machine_summary()}):")
    print(format_table(["figure", *[f"{r['subscriptions']:,}" for r in rows]],
                       [[h, *[r[h] for r in rows]] for h in header[1:]]))  # fmt: skip
    if not config.stream:
        print(f"wrote {out} (no stream: --no-stream)")
        return rows
    print(
        "\nprojected by Amdahl's law from the steady batches (serial: plan, sync, commits; "
        "the tasks' seconds divided by the cores), a 5 s trigger at 0.8 parallel efficiency:"
    )
    table_rows = []
    for row in rows:
        for cores in PROJECTED_CORES:
            p = project(row["serial s/batch"], row["task us/post"] / 1e6, cores)
            table_rows.append(
                [f"{row['subscriptions']:,}", cores, p.min_posts, p.max_posts, p.posts_per_s,
                 p.efficiency]
            )  # fmt: skip
    print(
        format_table(
            ["subscriptions", "cores", "batch from", "batch to (5 s)", "posts/s", "efficiency"],
            table_rows,
        )
    )
    config.out.mkdir(parents=True, exist_ok=True)
    write_csv(rows, out)
    print(f"wrote {out}")
    return rows
