"""The Airflow half of ``s3tm demo``: the DAGs run end to end on the embedded default
(local Spark, local Delta lakehouse, SQLite Airflow via ``airflow dags test``).

Steps: land the demo corpus -> ``s3tm_ingest`` -> register topic-based subscriptions (Spark
ML LDA over silver.posts) -> ``s3tm_remap`` -> a summary (published version, its metrics
against hash, the report and the Data Docs).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from core.errors import S3TMError
from spark_jobs.settings import env_name

REPO = Path(__file__).resolve().parents[3]
SQLITE_BUSY_TIMEOUT_S = 30
EXECUTION_API_TIMEOUT_S = 2 * SQLITE_BUSY_TIMEOUT_S


class DemoStepFailed(S3TMError):
    """An Airflow or Spark step of the demo failed."""


def airflow_env(home: Path, lakehouse: Path | str, landing: Path | str) -> dict[str, str]:
    """Environment for the embedded default: SQLite Airflow home, spark_default=local[*]."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            # The demo's `dags test` runs create the DAG rows; created paused, they would stay
            # paused in `s3tm airflow` and a run triggered there would wait in `queued`.
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
            # an API server started in this environment listens on loopback (Airflow's
            # default is every interface); `s3tm airflow --host` chooses otherwise
            "AIRFLOW__API__HOST": "127.0.0.1",
            # the run reports' tab and pages (s3tm.orchestration.reports.views)
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "infra" / "airflow" / "plugins"),
            # SQLite with a 30 s busy timeout (pysqlite's default is 5 s): at start-up the
            # scheduler, the API server and the first scheduled runs all write at once, and
            # a REST trigger then failed with a 500 on "database is locked"
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": (
                f"sqlite:///{home.resolve()}/airflow.db?timeout={SQLITE_BUSY_TIMEOUT_S}"
            ),
            # A task's first call to the execution API (PATCH .../run) can wait that long on
            # the SQLite lock, and the API server may still be starting when the scheduler
            # queues the first scheduled runs: with the default 5 s timeout and 5 retries a
            # task gave up before it ran ("finished with state failed, but the task
            # instance's state attribute is queued") on a loaded 2-core machine.
            "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": str(EXECUTION_API_TIMEOUT_S),
            "AIRFLOW__WORKERS__EXECUTION_API_RETRIES": "10",
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(
                {
                    "conn_type": "spark",
                    "host": "local[*]",
                    "extra": {"deploy-mode": "client", "spark-binary": "spark-submit"},
                }
            ),
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
            env_name("lakehouse"): str(lakehouse),
            env_name("landing"): str(landing),
            # the demo's tasks fail at once unless retries were asked for
            env_name("task_retries"): os.environ.get(env_name("task_retries"), "0"),
        }
    )
    return env


def _step(title: str, command: list[str], env: dict[str, str], log: Path) -> float:
    print(f"  {title} ...", flush=True)
    started = time.perf_counter()
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(command)}\n")
        out.flush()
        done = subprocess.run(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - started
    text = log.read_text()
    if done.returncode != 0 or (
        "dags" in command and "state=success" not in text.rsplit("$ ", 1)[-1]
    ):
        raise DemoStepFailed(f"{title} failed (exit {done.returncode}); see {log}")
    print(f"  {title}: done in {seconds:.0f}s", flush=True)
    return seconds


def run(out: Path, corpus: Path, *, nodes: int, subscriptions: int) -> None:
    out = out.resolve()
    home, lakehouse, landing = out / "airflow", out / "lakehouse", out / "landing"
    checkpoint = out / "stream-checkpoint"
    # the stream's checkpoint too: it remembers the landed file by name, so a second demo
    # into the same folder would stream nothing into the fresh lakehouse
    for folder in (home, lakehouse, landing, checkpoint):
        shutil.rmtree(folder, ignore_errors=True)
    landing.mkdir(parents=True)
    shutil.copy(corpus, landing / corpus.name)
    env = airflow_env(home, lakehouse, landing)
    log = out / "airflow-demo.log"
    log.write_text("")
    airflow = str(Path(sys.executable).with_name("airflow"))
    s3tm = str(Path(sys.executable).with_name("s3tm"))
    print(f"\nAirflow (SQLite at {home}), lakehouse {lakehouse}; log: {log}")
    _step("airflow db migrate", [airflow, "db", "migrate"], env, log)
    _step("airflow dags test s3tm_ingest", [airflow, "dags", "test", "s3tm_ingest"], env, log)
    _step(
        f"register {subscriptions} topic-based subscriptions (Spark ML LDA)",
        [
            s3tm,
            "subscribe",
            "--lakehouse",
            str(lakehouse),
            "generate-topics",
            "--count",
            str(subscriptions),
            "--topics",
            "50",
            "--max-iter",
            "10",
        ],
        env,
        log,
    )
    _step(
        "airflow dags test s3tm_remap",
        [airflow, "dags", "test", "s3tm_remap", "--conf", json.dumps({"nodes": nodes})],
        env,
        log,
    )
    _step(
        "s3tm stream: the landed posts through the published version (availableNow)",
        [
            s3tm,
            "stream",
            "--lakehouse",
            str(lakehouse),
            "run",
            "--landing",
            str(landing),
            "--checkpoint",
            str(checkpoint),
            "--available-now",
        ],
        env,
        log,
    )
    _step(
        "airflow dags test s3tm_monitor: is the published version still paying?",
        [airflow, "dags", "test", "s3tm_monitor"],
        env,
        log,
    )
    summarize(lakehouse)
    summarize_stream(lakehouse)
    summarize_monitor(lakehouse)
    print(
        "\nSee the DAGs and runs in the Airflow UI, and trigger them there:\n"
        f"  {s3tm} airflow --out {out}\n"
        "The same figures for Prometheus (http://127.0.0.1:9108/metrics; rules and a "
        "dashboard in infra/monitoring):\n"
        f"  {s3tm} metrics serve --lakehouse {lakehouse}"
    )


def summarize(lakehouse_root: Path | str) -> None:
    from s3tm.orchestration.reports.store import list_reports
    from spark_jobs.jobs.publish import render_versions
    from spark_jobs.lake.delta_io import Lakehouse
    from spark_jobs.lake.routing_store import published_version, versions
    from spark_jobs.lake.validation import data_docs_location

    store = Lakehouse(None, lakehouse_root, engine="rs")
    live = published_version(store)
    print("\nrouting versions:")
    print(render_versions(store))
    if live is not None:
        meta = next(v for v in versions(store) if v["routing_version"] == live)
        evaluation = json.loads(meta["metrics"] or "{}").get("evaluation", {})
        stream = evaluation.get("relative_stream_throughput_vs_hash")
        work = evaluation.get("relative_work_throughput_vs_hash")
        model = evaluation.get("relative_model_throughput_vs_hash")
        # the gate's measure first: the stream's predicted speed-up, matcher work beside it
        figure = (
            f"the stream x{stream:.2f} of hash routing (predicted by its cost model), "
            f"x{work:.2f} by matcher work,"
            if stream is not None and work is not None
            else f"x{work:.2f} of hash routing, by matcher work,"
            if work is not None
            else f"no subscriptions to count matcher work with: the posts-only model's "
            f"x{model or 0:.2f} of hash routing"
        )
        print(
            f"\npublished version {live}: {figure} on {evaluation.get('posts', 0):,} held-out "
            "posts (`s3tm routing list --details`: the model and timed replay beside it)"
        )
    reports = list_reports(lakehouse_root, "remap")
    if reports:
        print(f"run report: {reports[-1]}")
    print(f"Data Docs: {data_docs_location(store)}")


def summarize_stream(lakehouse_root: Path | str) -> None:
    from spark_jobs.lake.delta_io import Lakehouse

    store = Lakehouse(None, lakehouse_root, engine="rs")
    batches = sorted(
        (r for r in store.read_arrow("stream.batches").to_pylist() if r["stage"] == "committed"),
        key=lambda r: r["batch_id"],
    )
    if not batches:
        print("\nstreaming matcher: no batch committed")
        return
    posts = sum(r["posts"] for r in batches)
    seconds = sum(r["seconds_total"] for r in batches)
    print(
        f"\nstreaming matcher: {len(batches)} micro-batch(es), {posts:,} posts -> "
        f"{sum(r['matches'] for r in batches):,} matches, "
        f"{sum(r['deliveries'] for r in batches):,} deliveries in {seconds:.1f}s "
        f"(routing version {batches[-1]['routing_version']})"
    )
    delivery = store.read_arrow("deliveries").slice(0, 1).to_pylist()
    if delivery:
        d = delivery[0]
        print(
            f"  e.g. post {d['post_id']} delivered to {d['subscriber']}: "
            f"subscriptions {d['sub_ids']}"
        )


def summarize_monitor(lakehouse_root: Path | str) -> None:
    from core.monitor.health import RoutingHealth
    from spark_jobs.lake.delta_io import Lakehouse

    store = Lakehouse(None, lakehouse_root, engine="rs")
    if store.exists("stream.health"):
        rows = sorted(store.read_arrow("stream.health").to_pylist(), key=lambda r: r["batch_id"])
        if rows:
            live = RoutingHealth.from_rows(
                [r for r in rows if r["routing_version"] == rows[-1]["routing_version"]]
            )
            work = [w for r in rows[-1:] for w in (r.get("work") or []) if w is not None]
            balance = (
                f"the busiest matcher did x{max(work) / (sum(work) / len(work)):.2f} of the "
                "mean matcher's work (lookups + matches); "
                if work and sum(work)
                else ""
            )
            # a second measure beside the published figure's: say how it differs
            print(
                f"routing health on the live posts (stream.health, {len(rows)} batch(es)): "
                f"{balance}by the posts-only model (posts per matcher, not the lookups and "
                f"matches the published figure above counts) x{live.relative_throughput:.2f} "
                f"of hash routing, spread {live.spread:.2f} (hash {live.hash_spread:.2f}), "
                f"imbalance {live.imbalance:.2f}; hot words now: "
                + (", ".join(h["word"] for h in rows[-1]["hot_words"]) or "none")
            )
    if store.exists("stream.monitor"):
        check = store.read_arrow("stream.monitor").to_pylist()[-1]
        print(
            f"s3tm_monitor: {check['decision']}"
            + "".join(f"\n  - {c}" for c in check["conditions"] or [])
        )


def write_corpus_parts(out: Path, posts: int, subscriptions: int) -> list[Path]:
    """The corpus in three JSON-lines parts (learned from, then streamed in two), and
    ``subscriptions`` two-word phrases of the first part's posts in ``subscriptions.txt``
    (the container and Kubernetes demos)."""
    from core.corpus.synthetic import SyntheticCorpusSpec
    from core.text import normalize
    from spark_jobs.lake.corpus_files import write_demo_corpus

    whole = out / "corpus.jsonl.gz"
    write_demo_corpus(whole, SyntheticCorpusSpec(n_posts=posts, seed=0))
    with gzip.open(whole, "rt") as lines:
        records = lines.readlines()
    third = len(records) // 3
    paths = []
    for name, part in zip(("learn", "live-1", "live-2"),
                          (records[:third], records[third : 2 * third], records[2 * third :]),
                          strict=True):  # fmt: skip
        path = out / f"posts-{name}.jsonl"
        path.write_text("".join(part))
        path.chmod(0o644)
        paths.append(path)
    phrases: dict[str, None] = {}
    for line in records[:third]:
        words = normalize(json.loads(line)["text"])
        if len(words) >= 2:
            phrases[" ".join(sorted(words[:2]))] = None
        if len(phrases) >= subscriptions:
            break
    (out / "subscriptions.txt").write_text("\n".join(phrases) + "\n")
    (out / "subscriptions.txt").chmod(0o644)
    return paths


def run_until_done(
    name: str,
    body: Callable[[], int],
    failures: tuple[type[Exception], ...],
    *,
    cleaned_up: str,
) -> int:
    """A demo's ``main``: ``body``'s exit code; 1 with the message of one of ``failures``;
    130 on Ctrl-C or SIGTERM (both stop it the same way, after ``body``'s clean-up, which
    ``cleaned_up`` names)."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    try:
        return body()
    except failures as failure:
        print(f"\n{name} failed: {failure}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\n{name}: interrupted; {cleaned_up}", file=sys.stderr)
        return 130


@contextlib.contextmanager
def timed(title: str) -> Iterator[None]:
    """A demo's step, said when it starts and when it is done, with its wall time."""
    print(f"  {title} ...", flush=True)
    started = time.perf_counter()
    yield
    print(f"  {title}: done in {time.perf_counter() - started:.0f}s", flush=True)
