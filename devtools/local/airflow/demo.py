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
from s3tm.monitoring.summary import summarize, summarize_monitor, summarize_stream
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
