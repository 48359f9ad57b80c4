"""``s3tm cluster-demo`` (``make cluster-demo``, README command three): the production
topology of ``docker/compose.yaml`` on one machine, without Docker, from the pinned
artifacts: an S3 server holding the lakehouse, a Kafka broker (KRaft) with the posts topic,
a Spark standalone master with two workers, PostgreSQL for Airflow (LocalExecutor), the
platform's exporter and Prometheus (Debian's package) with the alert rules.

Then, as a deployment runs: the demo corpus is produced into Kafka; ``s3tm_ingest`` and
``s3tm_remap`` run through the Airflow scheduler (triggered by the demo, in order: the
scheduler makes no cron or asset-triggered runs here, so the run does not depend on the
hour it starts at) with ``spark_default`` = the standalone
master and the lakehouse on ``s3://`` (Spark writes it through S3A); the streaming matcher
reads Kafka on the cluster; a second remap publishes a new version while the stream runs,
and the stream switches over between two micro-batches. It prints ``make demo``'s summary,
the switch-over and what Prometheus scraped, stops everything it started and exits 0.

Settings are the deployment's variables (``TOPOLOGY_VARIABLES``: the names compose and
Kubernetes set), given to every process the demo starts.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.errors import S3TMError
from s3tm.local.kafka_broker import BrokerSettings, KafkaBroker
from s3tm.local.postgres import LocalPostgres
from s3tm.local.processes import stop_group
from s3tm.local.prometheus import LocalPrometheus
from s3tm.local.prometheus import binary as prometheus_binary
from s3tm.local.s3_server import LocalS3
from s3tm.local.spark_cluster import StandaloneCluster

if TYPE_CHECKING:
    from s3tm.orchestration.airflow_api import AirflowApi
    from spark_jobs.lake.delta_io import Lakehouse

BUCKET = "s3tm-lakehouse"
TOPIC = "posts"
# the variables a deployment sets (docker/compose.yaml, infra/k8s/base/config.yaml) and
# this demo gives every process it starts (docs/DEPLOY.md lists them once)
TOPOLOGY_VARIABLES = (
    "S3TM_LAKEHOUSE",
    "S3TM_MATCHERS",
    "S3TM_POSTS_SOURCE",
    "KAFKA_BOOTSTRAP",
    "POSTS_TOPIC",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ALLOW_HTTP",
    "AIRFLOW_CONN_SPARK_DEFAULT",
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN",
    "AIRFLOW__CORE__EXECUTOR",
)
SWITCH_TIMEOUT_S = 300.0
DEMO_MARK = "S3TM_CLUSTER_DEMO"


class ClusterDemoFailed(S3TMError):
    """A step of the cluster demo failed; the message says which and where its log is."""


@dataclass(frozen=True)
class ClusterDemoConfig:
    """out: the demo's folder (logs, Airflow home, corpus); posts: the corpus size, a third
    learned from before the stream starts, the rest streamed; matchers: N (the topic's
    partitions); subscriptions: registered before the first remap."""

    out: Path
    posts: int = 30_000
    matchers: int = 4
    subscriptions: int = 500


def _say(text: str) -> None:
    print(text, flush=True)


@contextlib.contextmanager
def _timed(title: str) -> Iterator[None]:
    _say(f"  {title} ...")
    started = time.perf_counter()
    yield
    _say(f"  {title}: done in {time.perf_counter() - started:.0f}s")


def write_corpus_parts(out: Path, posts: int) -> list[Path]:
    """The demo corpus in three JSON-lines parts: learned from first, then streamed in two
    parts (one before the new version, one after)."""
    from core.corpus.synthetic import SyntheticCorpusSpec, write_demo_corpus

    whole = out / "corpus.jsonl.gz"
    write_demo_corpus(whole, SyntheticCorpusSpec(n_posts=posts, seed=0))
    with gzip.open(whole, "rt") as lines:
        records = lines.readlines()
    third = len(records) // 3
    parts = [records[:third], records[third : 2 * third], records[2 * third :]]
    paths = []
    for name, part in zip(("learn", "live-1", "live-2"), parts, strict=True):
        path = out / f"posts-{name}.jsonl"
        path.write_text("".join(part))
        paths.append(path)
    return paths


def subscription_phrases(corpus: Path, count: int) -> list[str]:
    """``count`` distinct two-word phrases of the corpus' posts (every one matches a post)."""
    from core.text import normalize

    phrases: dict[str, None] = {}
    for line in corpus.read_text().splitlines():
        words = normalize(json.loads(line)["text"])
        if len(words) >= 2:
            phrases[" ".join(sorted(words[:2]))] = None
        if len(phrases) >= count:
            break
    return list(phrases)


class _Processes:
    """The commands the demo runs, with the topology's environment, logged to one file."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env, self.log = env, log

    def run(self, title: str, argv: list[str]) -> None:
        with _timed(title), self.log.open("a") as out:
            out.write(f"\n$ {' '.join(argv)}\n")
            out.flush()
            done = subprocess.run(argv, env=self.env, stdout=out, stderr=subprocess.STDOUT)
        if done.returncode != 0:
            raise ClusterDemoFailed(f"{title} failed (exit {done.returncode}); see {self.log}")

    def start(self, argv: list[str]) -> subprocess.Popen[bytes]:
        with self.log.open("a") as out:
            out.write(f"\n$ {' '.join(argv)} &\n")
            out.flush()
            return subprocess.Popen(
                argv, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )


def _s3tm(*argv: str) -> list[str]:
    return [sys.executable, "-m", "s3tm.cli.main", *argv]


def _wait(
    title: str, ready: Callable[[], bool], timeout_s: float, alive: Callable[[], bool]
) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if not alive():
            raise ClusterDemoFailed(f"{title}: the stream exited")
        if time.monotonic() > deadline:
            raise ClusterDemoFailed(f"{title}: not within {timeout_s:.0f}s")
        time.sleep(3)


def _stop_on_term(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run(config: ClusterDemoConfig) -> int:
    """The demo; Ctrl-C or ``kill`` (SIGTERM) stops it and everything it started (130)."""
    previous = signal.signal(signal.SIGTERM, _stop_on_term)
    try:
        return _run(config)
    except KeyboardInterrupt:
        _say("\ncluster demo: interrupted; everything it started is stopped")
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run(config: ClusterDemoConfig) -> int:
    started = time.perf_counter()
    logging.getLogger("kafka").setLevel(logging.WARNING)  # kafka-python's connection chatter
    out = config.out.resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    log = out / "cluster-demo.log"
    lakehouse = f"s3://{BUCKET}/main"
    # every process the demo starts inherits this: what is left of a demo can be found
    os.environ[DEMO_MARK] = str(out)
    _say(f"S3-TM cluster demo: the compose topology as local processes; log: {log}")
    prometheus_binary()  # says what to install before anything starts
    with contextlib.ExitStack() as running:
        with _timed("S3 server (moto), bucket " + BUCKET):
            s3 = LocalS3(log=out / "s3-server.log")
            s3.start()
            running.callback(s3.stop)
            s3.create_bucket(BUCKET)
        with _timed(f"Kafka broker (KRaft), topic {TOPIC!r} of {config.matchers} partitions"):
            broker = KafkaBroker(BrokerSettings(folder=out / "kafka", port=0))
            broker.start()
            running.callback(broker.stop)
            broker.create_topic(TOPIC, config.matchers)
        with _timed("Spark standalone master and 2 workers (1 core, 2 GB each)"):
            cluster = StandaloneCluster(out / "spark", env=s3.environment())
            master = cluster.start()
            running.callback(cluster.stop)
        with _timed("PostgreSQL (Airflow's metadata database)"):
            postgres = LocalPostgres()
            database_url = postgres.start()
            running.callback(postgres.stop)

        env = topology_env(out, s3=s3, bootstrap=broker.bootstrap, master=master, config=config)
        processes = _Processes({**env, **_airflow_env(out, database_url, env)}, log)
        learn, live_1, live_2 = write_corpus_parts(out, config.posts)
        produce = ["produce", "--bootstrap", broker.bootstrap, "--topic", TOPIC, "--corpus"]
        processes.run(f"produce {learn.name} into Kafka", _s3tm(*produce, str(learn)))

        api = _start_airflow(processes, out, running)
        prometheus = _start_monitoring(processes, out, lakehouse, running)
        _run_dag(api, "s3tm_ingest", {}, "s3tm_ingest: the topic into bronze.posts (Kafka)")
        phrases = out / "subscriptions.txt"
        phrases.write_text("\n".join(subscription_phrases(learn, config.subscriptions)) + "\n")
        processes.run(
            f"register {config.subscriptions} subscriptions",
            _s3tm(
                "subscribe",
                "--lakehouse",
                lakehouse,
                "load",
                "--subscriber",
                "demo",
                str(phrases),
            ),
        )
        # a cold start on hash routing (what a new deployment serves before it has learned),
        # replaced below by the learned version while the stream runs
        _run_dag(
            api,
            "s3tm_remap",
            {"nodes": config.matchers, "algorithm": "hash", "split": False},
            "s3tm_remap: version 1 (hash routing, the cold start)",
        )

        stream = processes.start(
            _s3tm(
                "stream", "--master", master, "--lakehouse", lakehouse, "run",
                "--source", "kafka", "--kafka-bootstrap", broker.bootstrap,
                "--kafka-topic", TOPIC, "--trigger-seconds", "5",
                "--checkpoint", f"s3a://{BUCKET}/checkpoints/matcher",
            )
        )  # fmt: skip
        running.callback(_stop_stream, stream)
        store = _store(lakehouse, env)
        with _timed("the stream on the cluster reads the topic (version 1)"):
            _wait(
                "the stream's first batch",
                lambda: any(b["posts"] > 0 for b in committed_batches(store)),
                SWITCH_TIMEOUT_S,
                lambda: stream.poll() is None,
            )
        processes.run(f"produce {live_1.name} into Kafka", _s3tm(*produce, str(live_1)))
        _run_dag(
            api,
            "s3tm_remap",
            {"nodes": config.matchers, "algorithm": "salb2", "incremental": False},
            "s3tm_remap: version 2 (salb2), published while the stream runs",
        )
        processes.run(f"produce {live_2.name} into Kafka", _s3tm(*produce, str(live_2)))
        total = sum(1 for p in (learn, live_1, live_2) for _ in p.open())
        with _timed("the stream switches to version 2 and reads the topic to its end"):
            _wait(
                "the stream's batches on version 2",
                lambda: (
                    _streamed(store) >= total
                    and committed_batches(store)[-1]["routing_version"] == 2
                ),
                SWITCH_TIMEOUT_S,
                lambda: stream.poll() is None,
            )
        _stop_stream(stream)
        print_summary(lakehouse, env)
        print_switch_over(store)
        print_scraped(prometheus, store)
        print_applications(cluster)
        keep_reports(lakehouse, out / "reports")
    seconds = time.perf_counter() - started
    _say(f"\ncluster demo: done in {seconds:.0f}s; everything it started is stopped")
    return 0


def topology_env(
    out: Path, *, s3: LocalS3, bootstrap: str, master: str, config: ClusterDemoConfig
) -> dict[str, str]:
    """The environment of every process: the deployment's variables for this topology."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(s3.environment())
    env.update(
        {
            "S3TM_LAKEHOUSE": f"s3://{BUCKET}/main",
            "S3TM_LANDING": str(out / "landing"),
            "S3TM_MATCHERS": str(config.matchers),
            "S3TM_POSTS_SOURCE": "kafka",
            "KAFKA_BOOTSTRAP": bootstrap,
            "POSTS_TOPIC": TOPIC,
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(
                {"conn_type": "spark", "host": master, "extra": {"deploy-mode": "client"}}
            ),
            "SPARK_LOCAL_IP": "127.0.0.1",
            # two 1-core, 2 GB workers: the drivers stay small beside them
            "S3TM_DRIVER_MEMORY": "1g",
            "S3TM_SPARK_LOG_LEVEL": "ERROR",
            "S3TM_TASK_RETRIES": "0",
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        }
    )
    return env


def _airflow_env(out: Path, database_url: str, base: dict[str, str]) -> dict[str, str]:
    from s3tm.orchestration.standalone import standalone_env

    env = standalone_env(out, port=0, database_url=database_url)
    # the topology's settings win over the embedded default's (lakehouse, Spark, landing)
    for name in ("S3TM_LAKEHOUSE", "S3TM_LANDING", "AIRFLOW_CONN_SPARK_DEFAULT"):
        env[name] = base[name]
    # The demo triggers each run itself, in order. Left on, the schedules make runs of their
    # own at the wall clock's say: an hourly s3tm_monitor passing while the first remap runs
    # asks for a third one (a deployment wants that; a demo that counts its versions not).
    env["AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE"] = "False"
    return {k: v for k, v in env.items() if k.startswith("AIRFLOW") or k.startswith("S3TM_")}


def _start_airflow(processes: _Processes, out: Path, running: contextlib.ExitStack) -> AirflowApi:
    from s3tm.orchestration import standalone
    from s3tm.orchestration.airflow_api import AirflowApi

    env = processes.env
    home = Path(env["AIRFLOW_HOME"])
    password = standalone.admin_password(home)
    with _timed("Airflow (scheduler, LocalExecutor on PostgreSQL)"):
        airflow = standalone.start(env, home / standalone.LOG_NAME)
        running.callback(standalone.stop, airflow)
        standalone.wait_until_ready(airflow, password)
    _say(
        f"    at {airflow.base_url}: log in as 'admin' with password {password!r} "
        "while the demo runs\n"
        "    (the demo triggers every run: the schedules and asset events make none here)"
    )
    return AirflowApi(airflow.base_url, password)


def _start_monitoring(
    processes: _Processes, out: Path, lakehouse: str, running: contextlib.ExitStack
) -> LocalPrometheus:
    """``s3tm metrics serve`` over the lakehouse, and Prometheus scraping it every 15 s (as
    deployed) with the alert rules, both on 127.0.0.1. (Each scrape re-reads the tables'
    logs through the S3 server: every 5 s, that was 20-odd requests a second to it for
    the whole demo, beside the jobs.)"""
    with _timed("the exporter (s3tm metrics serve) on 127.0.0.1, and Prometheus"):
        exporter = processes.start(
            _s3tm("metrics", "serve", "--lakehouse", lakehouse, "--port", "0")
        )
        running.callback(stop_group, exporter, timeout_s=30)
        port = _served_port(processes.log, exporter)
        prometheus = LocalPrometheus(out / "prometheus", [f"127.0.0.1:{port}"])
        url = prometheus.start()
        running.callback(prometheus.stop)
    _say(f"    Prometheus at {url} (alerts: {url}/alerts) while the demo runs")
    return prometheus


def _served_port(log: Path, exporter: subprocess.Popen[bytes], timeout_s: float = 120) -> int:
    """The port the exporter bound (it chose it: ``--port 0``), from the line it prints."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = re.search(r"s3tm metrics: serving http://127\.0\.0\.1:(\d+)/", log.read_text())
        if found:
            return int(found.group(1))
        if exporter.poll() is not None:
            raise ClusterDemoFailed(f"the exporter exited ({exporter.returncode}); see {log}")
        time.sleep(0.5)
    raise ClusterDemoFailed(f"the exporter did not say its port within {timeout_s:.0f}s: {log}")


def keep_reports(lakehouse: str, folder: Path) -> None:
    """Copies of the runs' reports (on the S3 server, which stops with the demo) in the
    demo's folder, to read afterwards."""
    from s3tm.orchestration.reports import list_reports
    from spark_jobs.lake import storage

    folder.mkdir(parents=True, exist_ok=True)
    copied = 0
    for kind in ("remap", "maintenance"):
        for suffix in (".md", ".html"):
            for location in list_reports(lakehouse, kind, suffix):
                store, key = storage.filesystem(location)
                with store.open_input_stream(key) as stream:
                    (folder / location.rsplit("/", 1)[1]).write_bytes(bytes(stream.read()))
                copied += 1
    _say(f"the runs' reports: {copied} files copied to {folder}")


def print_applications(cluster: StandaloneCluster) -> None:
    """What ran on the standalone master (its JSON status page): every Spark job of the
    DAGs' tasks and the stream, as applications of the cluster, none on a local master."""
    counts: dict[str, int] = {}
    for name in cluster.applications():
        counts[name] = counts.get(name, 0) + 1
    ran = ", ".join(f"{name} x{n}" for name, n in sorted(counts.items()))
    _say(f"\nSpark applications the standalone master ran: {ran}")


def print_scraped(prometheus: LocalPrometheus, store: Lakehouse) -> None:
    """One query through Prometheus' API, once it scraped the last batch: the posts the
    stream processed, beside what stream.batches holds."""
    expected = _streamed(store)
    query = "sum(s3tm_stream_posts_total)"
    deadline = time.monotonic() + 120
    value = prometheus.value(query)
    while value != expected and time.monotonic() < deadline:
        time.sleep(2)
        value = prometheus.value(query)
    if value != expected:
        raise ClusterDemoFailed(
            f"Prometheus answers {query} = {value}, stream.batches holds {expected}; "
            f"see {prometheus.log}"
        )
    version = prometheus.value("s3tm_routing_published_version")
    _say(
        f"\nPrometheus: {query} = {value:,.0f} (stream.batches: {expected:,}); "
        f"s3tm_routing_published_version = {version:.0f}"
    )


def _run_dag(api: AirflowApi, dag_id: str, conf: dict[str, object], title: str) -> None:
    with _timed(title):
        run_id = api.trigger(dag_id, conf)
        state = api.wait_for(dag_id, run_id)
        if state != "success":
            raise ClusterDemoFailed(
                f"{dag_id} run {run_id} ended {state}; failed tasks: "
                f"{api.failed_tasks(dag_id, run_id)} (their logs: the Airflow home's logs/)"
            )


def _store(lakehouse: str, env: dict[str, str]) -> Lakehouse:
    from spark_jobs.lake.delta_io import Lakehouse

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_ENDPOINT_URL",
                 "AWS_ALLOW_HTTP"):  # fmt: skip
        os.environ[name] = env[name]  # delta-rs in this process reads the S3 server too
    return Lakehouse(None, lakehouse, engine="rs")


def committed_batches(store: Lakehouse) -> list[dict[str, Any]]:
    if not store.exists("stream.batches"):
        return []
    rows = store.read_arrow("stream.batches").to_pylist()
    return sorted((r for r in rows if r["stage"] == "committed"), key=lambda r: r["batch_id"])


def _streamed(store: Lakehouse) -> int:
    return sum(int(b["posts"]) for b in committed_batches(store))


def _stop_stream(stream: subprocess.Popen[bytes]) -> None:
    """Ctrl-C, as a user stops it: the query stops between micro-batches."""
    stop_group(stream, first=signal.SIGINT, leader_only=True, timeout_s=120)


def print_summary(lakehouse: str, env: dict[str, str]) -> None:
    from s3tm.orchestration.airflow_demo import summarize, summarize_monitor, summarize_stream

    summarize(lakehouse)
    summarize_stream(lakehouse)
    summarize_monitor(lakehouse)


def print_switch_over(store: Lakehouse) -> None:
    """The stream's micro-batches by routing version: where it switched."""
    batches = committed_batches(store)
    _say("\nswitch-over (stream.batches):")
    for version in sorted({b["routing_version"] for b in batches}):
        mine = [b for b in batches if b["routing_version"] == version]
        _say(
            f"  version {version}: batches {mine[0]['batch_id']}-{mine[-1]['batch_id']}, "
            f"{sum(int(b['posts']) for b in mine):,} posts, "
            f"{sum(int(b['matches']) for b in mine):,} matches"
        )
