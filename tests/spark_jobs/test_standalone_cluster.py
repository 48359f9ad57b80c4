"""A real Spark standalone cluster on loopback: a master and two 1-core workers started from
pyspark's own distribution (``bin/spark-class ...Master`` / ``...Worker``). The whole remap
chain runs on it with ``--master spark://127.0.0.1:PORT`` and its tables equal a
``local[2]`` run on the same input; then a streaming micro-batch runs on it and its
matches equal brute force. A running stream spreads one match task per matcher over the
executors and uses a worker that joins between batches (a third, from Spark's event log);
spark-submit's settings stand and the task slots follow a fourth.

Airflow's tasks on a standalone master (``spark_default`` naming it, no DAG edited) are
``make cluster-demo``'s (docker/compose.yaml in containers): it reads every job of both
DAGs among the master's applications."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from core.text import normalize
from spark_jobs.lake.delta_io import Lakehouse
from spark_jobs.lake.subscription_store import active_subscriptions
from tests.spark_jobs.conftest import (
    REFERENCE_NODES,
    posts_of,
    register_reference_subscriptions,
)
from tests.support.spark_cluster import StandaloneCluster

ROOT = Path(__file__).resolve().parents[2]


_CLUSTERS: dict[str, StandaloneCluster] = {}  # master URL -> its cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """spark://127.0.0.1:PORT of a master with two registered 1-core workers."""
    started = StandaloneCluster(tmp_path_factory.mktemp("cluster"))
    url = started.start()
    _CLUSTERS[url] = started
    try:
        yield url
    finally:
        started.stop()


def _s3tm(*argv: str, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    run = subprocess.run(
        [sys.executable, "-m", "s3tm.cli.main", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, "S3TM_SPARK_LOG_LEVEL": "ERROR"},
        check=False,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    return run


def _stable(table: pa.Table, key: list[str]) -> list[dict]:
    """Rows without what differs between two runs by design (ingest times and batch
    labels), in key order."""
    drop = {"ingested_at", "ingest_batch", "source_file"}
    kept = table.select([c for c in table.column_names if c not in drop])
    return kept.sort_by([(k, "ascending") for k in key]).to_pylist()


def _chain(master: str, lakehouse: Path, landing: Path) -> None:
    report = lakehouse.parent / f"{lakehouse.name}-report.json"
    started = time.perf_counter()
    _s3tm(
        "pipeline", "--master", master, "--lakehouse", str(lakehouse), "--landing", str(landing),
        "--batch-id", "1", "--nodes", str(REFERENCE_NODES), "--no-cooccurrence",
        "--report", str(report),
    )  # fmt: skip
    # every step's wall time and the peak memory of the driver's two processes, measured
    wall_s = time.perf_counter() - started
    steps = json.loads(report.read_text())["steps"]
    assert [s["step"] for s in steps][:4] == ["ingest", "normalise", "graph", "learn"]
    # the steps one after the other, within the command's own wall time
    assert 0.0 < min(s["wall_s"] for s in steps) <= sum(s["wall_s"] for s in steps) <= wall_s
    for step in steps:
        assert 30 < step["driver_peak_mib"] < 8192 and 30 < step["jvm_peak_mib"] < 8192


def test_remap_chain_and_a_stream_batch_on_a_standalone_cluster(cluster, reference_chain, tmp_path):
    landing = reference_chain.corpus.parent
    on_cluster = tmp_path / "cluster-lake"
    # the same subscriptions before the chain as the reference (the local[2] run) had
    register_reference_subscriptions(on_cluster, reference_chain.phrases)
    phrases = reference_chain.phrases
    _chain(cluster, on_cluster, landing)

    a = Lakehouse(None, on_cluster, engine="rs")
    b = Lakehouse(None, reference_chain.lakehouse, engine="rs")
    for name, key in (
        ("bronze.posts", ["post_id"]),
        ("silver.posts", ["post_id"]),
        ("gold.post_words", ["post_id", "word"]),
        ("gold.word_stats", ["day", "word"]),
    ):
        assert _stable(a.read_arrow(name), key) == _stable(b.read_arrow(name), key), name
    versions = [lake.read_arrow("routing.versions").to_pylist() for lake in (a, b)]
    for rows in versions:
        assert [r["status"] for r in rows] == ["published"]
    assert versions[0][0]["n_matchers"] == versions[1][0]["n_matchers"] == REFERENCE_NODES
    # the learned mapping and the placements: row for row the same
    mappings = [_stable(lake.read_arrow("routing.mappings"), ["word", "part"]) for lake in (a, b)]
    assert mappings[0] == mappings[1] and mappings[0]
    placed = [
        lake.read_arrow("routing.placements").select(["routing_version", "sub_id", "matcher_id"])
        for lake in (a, b)
    ]
    assert _stable(placed[0], ["sub_id"]) == _stable(placed[1], ["sub_id"])
    assert placed[0].num_rows >= len(phrases)

    # one streaming micro-batch on the cluster: matches = brute force
    stream_landing = tmp_path / "stream-landing"
    stream_landing.mkdir()
    source = reference_chain.corpus
    shutil.copy(source, stream_landing / "posts.jsonl.gz")
    _s3tm(
        "stream", "--master", cluster, "--lakehouse", str(on_cluster), "run",
        "--landing", str(stream_landing), "--available-now",
        "--checkpoint", str(tmp_path / "checkpoint"),
    )  # fmt: skip
    posts = posts_of(source)
    subs = {r["sub_id"]: set(r["words"]) for r in active_subscriptions(a)}
    expected = {
        (p["id"], sub) for p in posts for sub, ws in subs.items() if ws <= set(normalize(p["text"]))
    }
    matches = a.read_arrow("matches")
    got = list(zip(matches["post_id"].to_pylist(), matches["sub_id"].to_pylist(), strict=True))
    assert len(got) == len(set(got)) and set(got) == expected
    assert expected, "the subscriptions match some posts"
    batches = [r for r in a.read_arrow("stream.batches").to_pylist() if r["stage"] == "committed"]
    assert sum(r["posts"] for r in batches) == len(posts)


def _events(event_logs: Path) -> list[dict]:
    """The events Spark's event log holds so far (it flushes as it goes): Spark 4 rolls it,
    a folder per application of ``events_<k>_<app>`` files."""
    events: list[dict] = []
    for app in event_logs.iterdir():
        parts = sorted(app.glob("events_*"), key=lambda p: int(p.name.split("_")[1]))
        for line in (line for p in parts for line in p.read_text().splitlines()):
            try:
                events.append(json.loads(line))
            except ValueError:  # the line being written
                break
    return events


def _match_stage_executors(event_logs: Path) -> dict[int, list[str]]:
    """Per stream batch, the executor of each successful task of its match stage, as Spark's
    event log (its listener's record of every job, stage and task) has them.

    A batch's route -> match -> dispatch job carries the stream's description; its match
    stage is the one whose parent is a stage of the job and which is a parent itself."""
    from spark_jobs.stream.pipeline import DISPATCH_JOB

    events = _events(event_logs)
    parents: dict[int, list[int]] = {}
    batch_of: dict[int, int] = {}
    for event in events:
        description = (event.get("Properties") or {}).get("spark.job.description") or ""
        if event["Event"] == "SparkListenerJobStart" and description.startswith(DISPATCH_JOB):
            batch = int(description.split("batch ")[1].split(",")[0])
            for info in event["Stage Infos"]:
                parents[info["Stage ID"]] = info["Parent IDs"]
                batch_of[info["Stage ID"]] = batch
    match_stages = {
        stage: batch_of[stage]
        for stage, up in parents.items()
        if up and any(stage in other for other in parents.values())
    }
    executors: dict[int, list[str]] = {}
    for event in events:
        if (
            event["Event"] == "SparkListenerTaskEnd"
            and event["Stage ID"] in match_stages
            and event["Task End Reason"]["Reason"] == "Success"
        ):
            batch = match_stages[event["Stage ID"]]
            executors.setdefault(batch, []).append(event["Task Info"]["Executor ID"])
    return executors


def _wait(what: str, ready, process: subprocess.Popen, log: Path, timeout_s: float = 300):
    deadline = time.monotonic() + timeout_s
    while not ready():
        assert process.poll() is None, f"the stream exited: {log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"waited {timeout_s} s for {what}"
        time.sleep(0.5)


def test_a_stream_on_the_cluster_runs_a_match_task_per_matcher_and_a_joining_worker_takes_some(
    cluster, reference_chain, spark_process_env, tmp_path
):
    """A running stream on the standalone cluster: each batch's match stage runs N tasks
    (one per matcher, spread by Spark over the executors there are), and a worker added
    between two batches runs match tasks in the next one (read from Spark's event log)."""
    from spark_jobs.lake.routing_store import published_version

    lake = tmp_path / "lake"
    shutil.copytree(reference_chain.lakehouse, lake)  # published version: N = 8, with subs
    store = Lakehouse(None, lake, engine="rs")
    assert published_version(store) is not None
    # spark-defaults.conf, as an operator would give it: every core, and the event log
    conf, event_logs = tmp_path / "conf", tmp_path / "events"
    conf.mkdir()
    event_logs.mkdir()
    (conf / "spark-defaults.conf").write_text(
        "spark.cores.max 8\nspark.eventLog.enabled true\nspark.eventLog.compress false\n"
        f"spark.eventLog.dir {event_logs.as_uri()}\n"
    )
    with gzip.open(reference_chain.corpus, "rt") as source:
        lines = source.read().splitlines(keepends=True)
    landing, staged = tmp_path / "landing", tmp_path / "staged"
    landing.mkdir()
    staged.mkdir()
    halves = [lines[: len(lines) // 2], lines[len(lines) // 2 :]]

    def land(k: int) -> None:  # plain JSON lines: the route stage splits them over the slots
        (staged / f"posts-{k}.jsonl").write_text("".join(halves[k]))
        (staged / f"posts-{k}.jsonl").replace(landing / f"posts-{k}.jsonl")

    def committed() -> list[dict]:
        if not store.exists("stream.batches"):
            return []
        rows = store.read_arrow("stream.batches").to_pylist()
        return sorted((r for r in rows if r["stage"] == "committed"), key=lambda r: r["batch_id"])

    def registered() -> set[str]:  # executors the driver has, as its listener saw
        kinds = ("SparkListenerExecutorAdded", "SparkListenerExecutorRemoved")
        ids: set[str] = set()
        for event in _events(event_logs):
            if event["Event"] in kinds:
                change = {event["Executor ID"]}
                ids = ids | change if event["Event"] == kinds[0] else ids - change
        return ids

    env = {
        **spark_process_env,
        "SPARK_CONF_DIR": str(conf),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "S3TM_SPARK_LOG_LEVEL": "ERROR",
    }
    argv = [
        sys.executable, "-m", "s3tm.cli.main", "stream", "--master", cluster,
        "--lakehouse", str(lake), "run", "--landing", str(landing),
        "--checkpoint", str(tmp_path / "checkpoint"), "--trigger-seconds", "1", "--no-warm-up",
    ]  # fmt: skip
    log = tmp_path / "stream.log"
    workers = _CLUSTERS[cluster].alive_workers()
    with log.open("w") as output:
        stream = subprocess.Popen(argv, stdout=output, stderr=output, env=env, cwd=ROOT)
        try:
            _wait(f"{workers} executors", lambda: len(registered()) == workers, stream, log)
            land(0)
            _wait("the first batch", lambda: len(committed()) == 1, stream, log)
            assert _CLUSTERS[cluster].add_worker() == workers + 1

            _wait("the joining worker's executor", lambda: len(registered()) > workers, stream, log)
            land(1)
            _wait("the second batch", lambda: len(committed()) == 2, stream, log)
            stream.send_signal(signal.SIGINT)  # Ctrl-C: the query stops, the session ends
            assert stream.wait(timeout=120) == 0, log.read_text()[-3000:]
        finally:
            if stream.poll() is None:
                stream.kill()
    first, second = (_match_stage_executors(event_logs)[r["batch_id"]] for r in committed())
    assert len(first) == len(second) == REFERENCE_NODES  # one match task per matcher
    assert len(set(first)) == workers  # over every executor there was
    # the executor of the worker that joined (ids count up) ran some of the next batch's
    assert len(set(second)) == workers + 1
    assert str(workers) in set(second) - set(first)
    assert sum(r["posts"] for r in committed()) == len(lines)
    # each Python worker held its own matchers' subscriptions, not every matcher's: at most
    # its share of N (N over the slots), read from the bases under the checkpoint
    held = [
        (int(m), int(n), int(b), int(total))
        for m, n, b, total in re.findall(
            r"a match worker holds at most (\d+) of (\d+) matchers \((\d+) of the base's "
            r"(\d+) subscription bytes\)",
            log.read_text(),
        )
    ]
    assert len(held) == 2, log.read_text()[-3000:]
    for (most, n, held_bytes, total), slots in zip(held, (workers, workers + 1), strict=True):
        assert n == REFERENCE_NODES and 1 <= most <= -(-n // slots) < n
        assert 0 < held_bytes < total


def test_spark_submit_settings_stand_and_the_task_slots_follow_the_executors(
    cluster, spark_process_env, tmp_path
):
    """On a cluster the session builder sizes nothing: spark-submit's ``--conf`` is what the
    job uses (not the builder's local sizing), the platform's own defaults still fill what
    nobody set, and the stream's task slots are the executors' cores now: a worker added
    while the job runs is counted at the next reading. Last in the file: it leaves the
    module's cluster a worker larger."""
    probe_script = Path(__file__).with_name("cluster_probe.py")
    workers = _CLUSTERS[cluster].alive_workers()  # one task slot each
    properties = ROOT / ".jars" / "spark-defaults.conf"  # the jars, as Airflow's tasks pass
    argv = [
        str(Path(sys.executable).with_name("spark-submit")),
        "--master", cluster,
        "--conf", "spark.sql.shuffle.partitions=12",
        "--conf", "spark.default.parallelism=12",
        "--conf", "spark.cores.max=8",  # the master gives an application 1 core unless asked
        *(["--properties-file", str(properties)] if properties.is_file() else []),
        str(probe_script), str(tmp_path), str(workers),
    ]  # fmt: skip
    # spark_process_env: this interpreter (spark-submit finds pyspark's SPARK_HOME with it)
    env = {**spark_process_env, "SPARK_LOCAL_IP": "127.0.0.1", "S3TM_SPARK_LOG_LEVEL": "ERROR"}
    with (tmp_path / "probe.log").open("w") as log:
        probe = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
        try:
            deadline = time.monotonic() + 300
            while not (tmp_path / "first").exists():
                assert probe.poll() is None, (tmp_path / "probe.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "the probe's first reading took over 300 s"
                time.sleep(0.5)
            assert _CLUSTERS[cluster].add_worker() == workers + 1
            (tmp_path / "added").write_text("")
            printed, _ = probe.communicate(timeout=300)
        finally:
            if probe.poll() is None:
                probe.kill()
    assert probe.returncode == 0, (printed, (tmp_path / "probe.log").read_text()[-3000:])
    first, second = [json.loads(line) for line in printed.splitlines() if line.startswith("{")]
    assert first["master"] == cluster
    assert (first["shuffle_partitions"], first["default_parallelism"]) == ("12", "12")
    assert first["time_zone"] == "UTC"  # a platform default nobody set: still filled in
    assert (first["task_slots"], second["task_slots"]) == (workers, workers + 1)
