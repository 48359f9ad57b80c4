"""``s3tm bench stream --overload F[,F...]``: the real streaming job fed above its capacity,
as a curve over overload factors.

Set-up as ``s3tm bench stream`` (real tweets, 100k subscriptions, SALB+split, N matchers).
1. Capacity: the job works through a landed backlog with shedding off (``availableNow``,
   one file per batch); its steady posts/s after the warm-up batches is R.
2. For each factor F and each drop rule (``value``: the posts of least estimated matches go;
   ``random``: the baseline, at whatever rate its own controller settles on), on a fresh
   copy of the lakehouse: a producer thread lands a file every ``--file-seconds`` so that
   posts arrive at F x R for ``--duration`` seconds, while the query runs with a
   processing-time trigger (every batch takes the files landed since the last one, at
   most two intervals' worth) and a latency budget of one trigger interval. ``off``
   (``--overload-modes off,...``) runs without shedding: its backlog grows without bound.
3. At the ``value`` run's own drop rate, batch by batch: random drop (expected: each batch's
   share of posts processed of its true matches, without the cap's loss, so an upper
   bound) and the oracle (the matches kept had it processed as many posts, those with the
   most true matches, in full).
Per batch: the backlog the plan saw (posts landed, not yet processed), the shedding level,
the batch's processing time, and its accuracy: matches written / exact matches of the
posts it took (each replayed tweet's exact match count is computed once, with one trie
over all subscriptions: brute force by construction). Per factor and rule: accuracy, batch
p95, post delay p95, and posts processed / (R x duration).

``--source kafka``: the posts arrive on a one-partition topic of a broker started from the
resolved jars instead (a feeder thread sends each interval's records, encoded beforehand);
the stream reads it with its Kafka source (at most two intervals' records a batch), the
backlog the controller sees is the consumer lag, and a batch's posts are its offset range.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from benchmarks.experiments.report import plot_panels, write_csv
from benchmarks.options import StreamBench
from core.errors import InputDataError
from core.formatting import format_table
from core.matching.dictionary import WordDictionary
from core.matching.trie import TrieMatcher
from core.shedding.plan import DROP_RULES, DropRule, ShedMode
from core.stream.latency import pooled_quantiles
from core.text import normalize

if TYPE_CHECKING:
    from benchmarks.stream import StreamInputs


def exact_match_counts(texts: list[str], word_sets: list[list[str]]) -> np.ndarray:
    """Per text: how many subscriptions its words contain (one trie of all of them)."""
    words = sorted({w for s in word_sets for w in s})
    dictionary = WordDictionary.by_rarity(words, [0] * len(words))
    encoded = [dictionary.encode(s) for s in word_sets]
    indptr = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([e.shape[0] for e in encoded], out=indptr[1:])
    trie = TrieMatcher(capacity=int(indptr[-1]) + 1)
    trie.insert_many(
        np.arange(len(encoded), dtype=np.int64), indptr, np.concatenate(encoded).astype(np.int32)
    )
    post_sets = [dictionary.encode(normalize(t)) for t in texts]
    post_ptr = np.zeros(len(post_sets) + 1, dtype=np.int64)
    np.cumsum([p.shape[0] for p in post_sets], out=post_ptr[1:])
    flat = np.concatenate(post_sets).astype(np.int32) if post_sets else np.zeros(0, np.int32)
    return np.diff(trie.match(post_ptr, flat).indptr)


class Producer(threading.Thread):
    """Lands JSON-lines files of replayed tweets at a fixed rate.

    Every file is written beforehand into a staging folder on the same file system and
    moved into the landing directory at its time (a rename: atomic, and free of the CPU
    that encoding JSON at twice the matcher's rate would take from the stream itself).
    """

    def __init__(
        self, landing: Path, staging: Path, ids: list[str], texts: list[str], rate: float,
        every: float, duration: float,
    ) -> None:  # fmt: skip
        super().__init__(daemon=True)
        self.landing, self.every = landing, every
        self.landed: dict[str, tuple[int, int]] = {}  # file name -> (first post, posts)
        self.files: list[str] = []
        self.late = 0.0
        staging.mkdir(parents=True)
        encoded = [json.dumps(t) for t in texts]
        n = round(rate * every)
        size = len(texts)
        for k in range(int(duration / every)):
            first = k * n
            body = "\n".join(
                f'{{"id": {json.dumps(f"{ids[(first + j) % size]}#{first + j}")}, '
                f'"text": {encoded[(first + j) % size]}}}'
                for j in range(n)
            )
            name = f"posts-{k:06d}.jsonl"
            (staging / name).write_text(body + "\n", encoding="utf-8")
            self.files.append(name)
            self.landed[name] = (first, n)
        self.staging = staging
        self.posts = n * len(self.files)

    def run(self) -> None:
        started = time.monotonic()
        for k, name in enumerate(self.files):
            due = started + k * self.every
            time.sleep(max(0.0, due - time.monotonic()))
            self.late = max(self.late, time.monotonic() - due)
            # written now, as a producer writes then renames: the file's time is when its
            # posts arrived (the stream's delivery latency counts from it)
            os.utime(self.staging / name)
            (self.staging / name).rename(self.landing / name)


class KafkaFeeder(threading.Thread):
    """Sends replayed tweets to a one-partition topic at a fixed rate: every ``every``
    seconds the next ``rate x every`` records, encoded beforehand (kafka-python's send is
    the only work left at run time). One partition and one request in flight keep offset k
    = the k-th post sent, so a batch's offset range names its posts."""

    def __init__(
        self, bootstrap: str, topic: str, ids: list[str], texts: list[str], rate: float,
        every: float, duration: float,
    ) -> None:  # fmt: skip
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.every = bootstrap, topic, every
        self.late = 0.0
        self.error: BaseException | None = None
        n = round(rate * every)
        size = len(texts)
        encoded = [json.dumps(t) for t in texts]
        self.ticks = [
            [
                f'{{"id": {json.dumps(f"{ids[(k * n + j) % size]}#{k * n + j}")}, '
                f'"text": {encoded[(k * n + j) % size]}}}'.encode()
                for j in range(n)
            ]
            for k in range(int(duration / every))
        ]
        self.posts = n * len(self.ticks)

    def run(self) -> None:
        import logging

        from kafka import KafkaProducer

        # kafka-python warns of every slow poll under this load: the lateness is reported
        logging.getLogger("kafka").setLevel(logging.ERROR)
        try:
            producer = KafkaProducer(
                bootstrap_servers=[self.bootstrap],
                acks=1,
                linger_ms=20,
                batch_size=1 << 20,
                max_in_flight_requests_per_connection=1,
            )
            started = time.monotonic()
            for k, values in enumerate(self.ticks):
                due = started + k * self.every
                time.sleep(max(0.0, due - time.monotonic()))
                self.late = max(self.late, time.monotonic() - due)
                for value in values:
                    producer.send(self.topic, value=value, partition=0)
            producer.flush()
            producer.close()
        except BaseException as err:  # reported by run_mode, not lost in the thread
            self.error = err


def batch_offset_ranges(checkpoint: Path) -> dict[int, tuple[int, int]]:
    """Each micro-batch's ``[start, end)`` offsets of partition 0 from the Kafka source's
    offset log (``<checkpoint>/offsets/<batch>``: ``v1``, the batch metadata, then
    ``{topic: {partition: end offset}}``); the first batch starts at 0."""
    ends: dict[int, int] = {}
    folder = checkpoint / "offsets"
    for path in folder.iterdir() if folder.is_dir() else []:
        if not path.name.isdigit():
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        offsets = json.loads(lines[2])
        ends[int(path.name)] = sum(int(v) for topic in offsets.values() for v in topic.values())
    ranges = {}
    previous = 0
    for batch in sorted(ends):
        ranges[batch] = (previous, ends[batch])
        previous = ends[batch]
    return ranges


def _batch_files(checkpoint: Path) -> dict[int, list[str]]:
    from spark_jobs.stream.backlog import source_log_entries

    out: dict[int, list[str]] = {}
    for entry in source_log_entries(str(checkpoint)):
        out.setdefault(int(entry["batchId"]), []).append(Path(entry["path"]).name)
    return out


def run_mode(
    spark: Any,
    source: Path,
    work: Path,
    mode: ShedMode,
    held_ids: list[str],
    held_texts: list[str],
    exact: np.ndarray,
    *,
    rate: float,
    trigger: float,
    file_seconds: float,
    duration: float,
    seed: int,
    drop_rule: DropRule = "value",
    broker: Any = None,
) -> list[dict[str, Any]]:
    """One run fed at ``rate``: landed files, or with ``broker`` (a ``KafkaBroker``) records
    on a fresh topic that the stream reads with its Kafka source (backlog: consumer lag)."""
    from spark_jobs.lake.delta_io import Lakehouse
    from spark_jobs.stream.config import StreamConfig
    from spark_jobs.stream.matcher import start

    shutil.copytree(source, work / "lakehouse")
    lakehouse = Lakehouse(spark, work / "lakehouse")
    landing = work / "landing"
    landing.mkdir()
    config = StreamConfig(
        source="files",
        landing=str(landing),
        checkpoint=str(work / "checkpoint"),
        query_name=f"overload_{mode}",
        # a batch takes at most two trigger intervals' input (a source rate limit, as a
        # deployment sets one): the rest waits in the landing directory (or on the topic),
        # the backlog, and a backlog can drain at up to twice the input rate
        max_files_per_trigger=max(1, round(2 * trigger / file_seconds)),
        trigger_seconds=trigger,
        available_now=False,
        seed=seed,
        shedding=mode,
        latency_budget=trigger,
        drop_rule=drop_rule,
    )
    feeder: Producer | KafkaFeeder
    if broker is None:
        feeder = Producer(
            landing, work / "staged", held_ids, held_texts, rate, file_seconds, duration
        )
    else:
        topic = f"overload-{work.name}"
        broker.create_topic(topic, 1)
        config = dataclasses.replace(
            config,
            source="kafka",
            kafka_bootstrap=broker.bootstrap,
            kafka_topic=topic,
            max_files_per_trigger=0,
            max_offsets_per_trigger=max(1, round(2 * trigger * rate)),
        )
        feeder = KafkaFeeder(
            broker.bootstrap, topic, held_ids, held_texts, rate, file_seconds, duration
        )
    query, handler = start(spark, lakehouse, config)
    started = time.monotonic()
    feeder.start()
    feeder.join()
    # stop between batches: interrupting one mid-flight only fills the log with its abort
    deadline = time.monotonic() + 300
    while query.status["isTriggerActive"] and time.monotonic() < deadline:
        time.sleep(0.1)
    query.stop()
    if isinstance(feeder, KafkaFeeder) and feeder.error is not None:
        raise InputDataError(f"the Kafka feeder failed: {feeder.error}")
    unit = "files" if broker is None else "sends"
    print(
        f"  [{mode}] fed {feeder.posts:,} posts in {time.monotonic() - started:.0f}s "
        f"({unit} at most {feeder.late:.2f}s late)",
        flush=True,
    )

    def batch_posts(batch: int) -> list[tuple[int, int]]:
        """(first post, posts) of what the batch took."""
        if isinstance(feeder, Producer):
            return [feeder.landed[name] for name in files.get(batch, [])]
        start_offset, end_offset = offsets.get(batch, (0, 0))
        return [(start_offset, end_offset - start_offset)]

    files = _batch_files(work / "checkpoint") if broker is None else {}
    offsets = batch_offset_ranges(work / "checkpoint") if broker is not None else {}
    planned = {
        r["batch_id"]: r
        for r in lakehouse.read_arrow("stream.batches").to_pylist()
        if r["stage"] == "planned"
    }
    rows = []
    clock = 0.0
    for committed in handler.figures:
        batch, figure = committed.batch_id, committed.figures
        per_post = [
            exact[(first + np.arange(n)) % exact.shape[0]] for first, n in batch_posts(batch)
        ]
        post_matches = np.concatenate(per_post) if per_post else np.zeros(0, np.int64)
        expected = int(post_matches.sum())
        clock += figure.seconds_total
        plan = planned.get(batch, {})
        taken = figure.posts + figure.dropped_posts
        backlog = plan.get("backlog_posts") or 0
        rows.append(
            {
                "shedding": mode,
                "batch": batch,
                "time_s": round(clock, 2),
                "backlog_posts": backlog,
                # how long the newest post waits before its batch is done, at this rate
                "delay_s": round(backlog / taken * figure.seconds_total, 2) if taken else 0.0,
                "level": plan.get("shedding_level") or 0,
                "posts": figure.posts,
                "dropped_posts": figure.dropped_posts,
                "batch_s": figure.seconds_total,
                "matches": figure.matches,
                "exact_matches": expected,
                "accuracy": figure.matches / expected if expected else 1.0,
                # where the batch's time went (task seconds summed over the workers)
                "routed_pairs": figure.routed_pairs,
                "route_task_s": round(figure.seconds_route, 3),
                "match_task_s": round(figure.seconds_match, 3),
                "dispatch_task_s": round(figure.seconds_dispatch, 3),
                "spark_s": round(figure.seconds_spark, 3),
                "commit_s": round(figure.seconds_commit, 3),
                "latency_p99_s": figure.latency_p99,
                "_post_matches": post_matches,  # for the oracle; not written
                "_latency": (committed.latency_ages or {}, committed.latency_after_stamp),
            }
        )
    shutil.rmtree(landing, ignore_errors=True)
    return rows


def random_at_same_rate(rows: list[dict[str, Any]], warmup: int) -> float:
    """Matches a random drop keeps in expectation at each batch's own drop rate: its share
    of posts processed of each batch's true matches (no cap loss counted: an upper bound
    for random drop, which also caps spreads at its levels)."""
    steady = rows[warmup:] or rows
    kept = total = 0.0
    for row in steady:
        taken = row["posts"] + row["dropped_posts"]
        if taken:
            kept += row["exact_matches"] * row["posts"] / taken
        total += row["exact_matches"]
    return round(kept / total, 4) if total else 1.0


def oracle_accuracy(rows: list[dict[str, Any]], warmup: int) -> float:
    """Matches kept had each batch processed as many posts as it did, those with the most
    true matches, in full (``rows`` carry each batch's true counts per post)."""
    steady = rows[warmup:] or rows
    kept = total = 0.0
    for row in steady:
        counts = np.sort(row.pop("_post_matches"))[::-1]
        kept += float(counts[: row["posts"]].sum())
        total += float(counts.sum())
    for row in rows:
        row.pop("_post_matches", None)
    return round(kept / total, 4) if total else 1.0


def summarise(
    rows: list[dict[str, Any]], trigger: float, warmup: int, capacity: float, duration: float
) -> dict[str, Any]:
    steady = rows[warmup:] or rows
    seconds = [r["batch_s"] for r in steady]
    delays = [r["delay_s"] for r in steady]
    backlog = [r["backlog_posts"] for r in steady]
    half = len(backlog) // 2
    processed = sum(r["posts"] for r in rows)
    taken = processed + sum(r["dropped_posts"] for r in rows)
    # post-to-delivery latency over every steady delivery (core.stream.latency)
    latency = pooled_quantiles([r.pop("_latency", ({}, 0.0)) for r in steady], (0.5, 0.95, 0.99))
    for row in rows:
        row.pop("_latency", None)
    p50, p95, p99 = latency if latency is not None else (None, None, None)
    return {
        "factor": rows[0]["factor"],
        "shedding": rows[0]["shedding"],
        "batches": len(rows),
        "batch p50 s": round(float(np.percentile(seconds, 50)), 2),
        "batch p95 s": round(float(np.percentile(seconds, 95)), 2),
        "p95 / trigger": round(float(np.percentile(seconds, 95)) / trigger, 2),
        "post delay p95 s": round(float(np.percentile(delays, 95)), 1),
        "backlog 2nd half max": max(backlog[half:], default=0),
        "backlog last": backlog[-1] if backlog else 0,
        "max level": max(r["level"] for r in rows),
        "accuracy": round(
            sum(r["matches"] for r in steady) / max(1, sum(r["exact_matches"] for r in steady)), 4
        ),
        "posts processed": processed,
        "posts dropped": taken - processed,
        "dropped share": round((taken - processed) / taken, 3) if taken else 0.0,
        "processed / capacity": round(processed / (capacity * duration), 3),
        "latency p50 s": p50,
        "latency p95 s": p95,
        "latency p99 s": p99,
        "p99 latency / trigger": round(p99 / trigger, 2) if p99 is not None else None,
    }


def _modes(spec: str, utility: ShedMode) -> list[tuple[str, ShedMode, DropRule]]:
    """``off,value,random`` -> (label, shedding utility, drop rule) per run."""
    out: list[tuple[str, ShedMode, DropRule]] = []
    for mode in (m.strip() for m in spec.split(",") if m.strip()):
        if mode == "off":
            out.append(("off", "off", "value"))
        elif mode in DROP_RULES:
            out.append((f"{utility} {mode} drop", utility, cast(DropRule, mode)))
        else:
            raise InputDataError(f"--overload-modes takes off, value and random, got {mode!r}")
    if not out:
        raise InputDataError("--overload-modes names no mode")
    return out


def run(options: StreamBench, inputs: StreamInputs, factors: list[float]) -> list[dict[str, Any]]:
    """``s3tm bench stream --overload``: the first of ``inputs.workloads`` fed at each of
    ``factors`` x the stream's measured capacity. ``--source``: how posts arrive, landed
    files or records on a Kafka topic (a broker from the resolved jars is started for the
    runs; the backlog is then the consumer lag)."""
    import tempfile

    from benchmarks.machine import machine_summary
    from benchmarks.stream import (
        WARMUP_BATCHES,
        WorkloadScene,
        _land,
        _read_posts,
        prepare_workload,
    )
    from spark_jobs.lake.delta_io import Lakehouse
    from spark_jobs.lake.session import build_session
    from spark_jobs.stream.config import StreamConfig
    from spark_jobs.stream.matcher import start

    corpus, workload, source = inputs.corpus, inputs.workloads[0], options.source
    nodes, subscriptions, seed = options.nodes, options.subscriptions, options.seed
    trigger, file_seconds, duration = (
        options.trigger_seconds,
        options.file_seconds,
        options.duration,
    )
    master, out = options.master, Path(options.out)
    runs = _modes(options.overload_modes, options.shedding)
    if not factors or any(f <= 0 for f in factors):
        raise InputDataError(f"--overload takes factors > 0, got {factors}")
    print(f"machine: {machine_summary()}")
    ids, texts = _read_posts(corpus, seed)
    spark = build_session("s3tm-bench-overload", master=master)
    root = Path(tempfile.mkdtemp(prefix="s3tm-bench-overload-"))
    rows: list[dict[str, Any]] = []
    summary: list[dict[str, Any]] = []
    broker = None
    if source == "kafka":
        from devtools.local.kafka_broker import BrokerSettings, KafkaBroker

        broker = KafkaBroker(BrokerSettings(folder=root / "kafka", port=0))
        broker.start()
    elif source != "files":
        raise InputDataError(f"--source takes files or kafka, got {source!r}")
    try:
        scene = WorkloadScene(workload, ids, texts, nodes, subscriptions, seed)
        lakehouse, held_ids, held_texts, word_sets, _ = prepare_workload(spark, root, scene)
        exact = exact_match_counts(held_texts, word_sets)
        # 1. capacity, on a copy: a landed backlog, one file per batch, shedding off
        calibrate = root / "calibrate"
        shutil.copytree(lakehouse.root, calibrate / "lakehouse")
        # batches as large as the overload run's (a batch's fixed costs weigh less in
        # big ones): the stream bench's default sizes
        per_file = 200_000 if workload == "tweet" else 20_000
        _land(calibrate / "landing", held_ids, held_texts, 5 * per_file, per_file)
        query, handler = start(
            spark,
            Lakehouse(spark, calibrate / "lakehouse"),
            StreamConfig(
                source="files", landing=str(calibrate / "landing"),
                checkpoint=str(calibrate / "checkpoint"), query_name="calibrate",
                max_files_per_trigger=1, trigger_seconds=0.0, available_now=True, seed=seed,
                shedding="off",
            ),
        )  # fmt: skip
        query.awaitTermination()
        steady = [batch.figures for batch in list(handler.figures)[WARMUP_BATCHES:]]
        capacity = sum(f.posts for f in steady) / sum(f.seconds_total for f in steady)
        print(
            f"capacity (shedding off, steady batches of {per_file:,}): {capacity:,.0f} posts/s; "
            f"factors {', '.join(f'{f:g}x' for f in factors)}, {duration:g}s each, "
            f"trigger {trigger:g}s, runs: {', '.join(label for label, _, _ in runs)}",
            flush=True,
        )
        total = len(factors) * len(runs)
        for f_i, factor in enumerate(factors):
            for r_i, (label, mode, rule) in enumerate(runs):
                print(f"[{f_i * len(runs) + r_i + 1}/{total}] {factor:g}x, {label}", flush=True)
                mode_rows = run_mode(
                    spark, lakehouse.root, root / f"{factor:g}-{r_i}", mode, held_ids,
                    held_texts, exact, rate=factor * capacity, trigger=trigger,
                    file_seconds=file_seconds, duration=duration, seed=seed, drop_rule=rule,
                    broker=broker,
                )  # fmt: skip
                for row in mode_rows:
                    row.update({"factor": factor, "shedding": label})
                oracle = oracle_accuracy(mode_rows, WARMUP_BATCHES)
                same_rate = random_at_same_rate(mode_rows, WARMUP_BATCHES)
                row_summary = summarise(mode_rows, trigger, WARMUP_BATCHES, capacity, duration)
                summary.append(row_summary)
                if rule == "value" and mode != "off":
                    summary.append(
                        {**row_summary, "shedding": "random drop at the same rate (expected)",
                         "accuracy": same_rate}
                    )  # fmt: skip
                    summary.append(
                        {**row_summary, "shedding": "oracle (same posts processed)",
                         "accuracy": oracle}
                    )  # fmt: skip
                rows += mode_rows
                print(
                    f"  accuracy {row_summary['accuracy']:.3f}, batch p95 "
                    f"{row_summary['p95 / trigger']:.2f}x the trigger, processed "
                    f"{row_summary['processed / capacity']:.0%} of capacity x duration, "
                    f"dropped {row_summary['dropped share']:.0%}",
                    flush=True,
                )
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    for row in summary:
        row.update(
            {
                "workload": workload,
                "source": source,
                "N": nodes,
                "capacity posts/s": round(capacity),
            }
        )
    # under capacity (every factor below 1) the figure is the delivery latency at each load
    under = all(f < 1 for f in factors)
    header = list(summary[0])
    where = "under" if under else "above"
    print(f"\nstreaming matcher {where} its capacity ({workload}-based, N={nodes})")
    print(format_table(header, [[r[h] for h in header] for r in summary]))
    out.mkdir(parents=True, exist_ok=True)
    suffix = "" if source == "files" else f"_{source}"
    name = f"stream_latency{suffix}" if under else f"stream_overload{suffix}"
    # per batch, and the summary per factor and rule
    write_csv(rows, out / (f"stream_latency_batches{suffix}.csv" if under else f"{name}.csv"))
    summary_csv = out / (f"{name}.csv" if under else f"stream_overload_summary{suffix}.csv")
    write_csv(summary, summary_csv)
    panels = (
        ["latency p50 s", "latency p95 s", "latency p99 s", "p99 latency / trigger"]
        if under
        else ["accuracy", "processed / capacity", "p95 / trigger", "post delay p95 s"]
    )
    plot_panels(
        summary, x="factor", panels=panels, group_by="shedding", split_by="workload",
        path=out / f"{name}.png",
        title=f"Streaming matcher fed at factors of its capacity ({workload}-based, N={nodes})",
        log_x=False,
    )  # fmt: skip
    print(f"wrote {summary_csv} and {out / f'{name}.png'}")
    return summary
