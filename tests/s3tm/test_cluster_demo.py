"""``make cluster-demo`` (README command three) as a user runs it: the compose topology as
local processes (S3 server, Kafka, a Spark standalone cluster, Airflow's scheduler on
PostgreSQL, the exporter and Prometheus), a version published through the scheduler, the
stream reading Kafka on the cluster and switching to a version published while it runs,
Prometheus answering what the stream wrote; then nothing left running."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from s3tm.local.cluster_demo import DEMO_MARK
from s3tm.local.postgres import server_binaries

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.kafka, pytest.mark.postgres, pytest.mark.airflow, pytest.mark.s3]
# the whole topology and two remaps: 13-21 minutes on a loaded 2-core VM
DEMO_TIMEOUT_S = 2400


def _left_running(out: Path) -> list[str]:
    """Command lines of live processes the demo started (they inherit its mark)."""
    mark = f"{DEMO_MARK}={out}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if mark in (proc / "environ").read_bytes().split(b"\0"):
                found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:200])
        except OSError:
            continue
    return found


def test_the_cluster_demo_publishes_through_the_scheduler_and_the_stream_switches(
    spark_process_env, tmp_path
):
    if server_binaries() is None:
        pytest.skip(
            "PostgreSQL server is absent (Debian package 'postgresql'; .ci/run installs it)"
        )
    out = tmp_path / "cluster-demo"
    started = time.monotonic()
    demo = subprocess.Popen(
        [sys.executable, "-m", "s3tm.cli.main", "cluster-demo", "--out", str(out),
         "--posts", "12000", "--subscriptions", "300"],
        cwd=ROOT, env=spark_process_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    log = out / "cluster-demo.log"
    try:
        printed, errors = demo.communicate(timeout=DEMO_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        # SIGTERM, as a user's Ctrl-C: the demo stops every server it started (the test
        # below); a SIGKILL would leave them running beside the rest of the suite
        demo.terminate()
        try:
            printed, errors = demo.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            demo.kill()
            printed, errors = demo.communicate()
        pytest.fail(
            f"the cluster demo did not finish in {DEMO_TIMEOUT_S} s: "
            f"{printed[-2000:]}\n{log.read_text()[-3000:] if log.is_file() else ''}"
        )
    seconds = time.monotonic() - started
    assert demo.returncode == 0, (printed[-3000:], errors[-3000:], log.read_text()[-5000:])
    # both remaps ran through the scheduler; the second published version 2 over hash
    assert "s3tm_remap: version 1 (hash routing, the cold start): done" in printed
    assert "published version 2:" in printed
    # the stream read Kafka on version 1, then switched to 2 between two micro-batches
    switch = dict(re.findall(r"version (\d): batches (\d+-\d+)", printed))
    assert set(switch) == {"1", "2"}, printed
    last_on_1 = int(switch["1"].split("-")[1])
    first_on_2 = int(switch["2"].split("-")[0])
    assert first_on_2 > last_on_1
    # every post produced was streamed: the corpus' three parts
    streamed = sum(
        int(n.replace(",", ""))
        for n in re.findall(r"version \d: batches \S+, ([\d,]+) posts", printed)
    )
    produced = sum(1 for p in out.glob("posts-*.jsonl") for _ in p.open())
    assert streamed == produced == 12000
    assert "streaming matcher:" in printed and "routing versions:" in printed
    # Airflow ran on PostgreSQL with the LocalExecutor, and spark_default named the
    # standalone master (no DAG edited): every Spark job of both DAGs ran as one of its
    # applications, and so did the stream
    assert "Airflow (scheduler, LocalExecutor on PostgreSQL)" in printed
    ran = printed.split("Spark applications the standalone master ran:", 1)[1].split("\n")[0]
    for job in ("ingest", "normalise", "graph", "learn", "place", "evaluate", "stream"):
        assert f"s3tm-{job} x" in ran, (job, ran)
    assert "s3tm-learn x2" in ran  # both remaps
    # Prometheus scraped the exporter: the posts it answers are the posts streamed
    scraped = re.search(r"Prometheus: sum\(s3tm_stream_posts_total\) = ([\d,]+)", printed)
    assert scraped and int(scraped.group(1).replace(",", "")) == produced, printed[-2000:]
    assert "s3tm_routing_published_version = 2" in printed
    # secrets stay out of every log and report: the S3 secret key and the Airflow password
    # are in the passwords file and the processes' environment only
    from s3tm.local.s3_server import SECRET_KEY
    from s3tm.orchestration.standalone import admin_password, passwords_file

    password = admin_password(out / "airflow")
    written = [p for p in out.rglob("*") if p.is_file()]
    # the demo copies the runs' reports out of the S3 server before it stops
    reports = [p for p in written if p.parent.name == "reports" and p.name.startswith("remap-")]
    # the first remap's report says, in a sentence, that it published version 1
    assert any(
        "Decision: Published version 1: the first published version." in p.read_text()
        for p in reports
        if p.suffix == ".md"
    ), [p.name for p in reports]
    leaks = [
        str(path)
        for path in written
        if path != passwords_file(out / "airflow")
        and "postgres" not in path.parts  # the database's own files
        and (SECRET_KEY.encode() in (data := path.read_bytes()) or password.encode() in data)
    ]
    assert len(written) > 50 and leaks == []
    # nothing it started is left running
    assert _left_running(out.resolve()) == []
    print(f"cluster demo: exit 0 in {seconds:.0f}s")


def test_kill_stops_the_cluster_demo_and_everything_it_started(spark_process_env, tmp_path):
    """`kill` (SIGTERM), as a supervisor or a user's shell sends it, stops the demo as Ctrl-C
    does: the servers it started (S3, Kafka, the Spark cluster, PostgreSQL) stop with it."""
    if server_binaries() is None:
        pytest.skip(
            "PostgreSQL server is absent (Debian package 'postgresql'; .ci/run installs it)"
        )
    out = tmp_path / "cluster-demo"
    demo = subprocess.Popen(
        [sys.executable, "-m", "s3tm.cli.main", "cluster-demo", "--out", str(out)],
        cwd=ROOT, env=spark_process_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    printed: list[str] = []
    try:
        assert demo.stdout is not None
        for line in demo.stdout:  # ends when the demo exits
            printed.append(line)
            if "PostgreSQL (Airflow's metadata database): done" in line:
                break
        assert demo.poll() is None, "".join(printed)[-3000:]
        assert _left_running(out.resolve()), "the demo's servers are not running"
        demo.terminate()
        rest, _ = demo.communicate(timeout=180)
    finally:
        if demo.poll() is None:
            demo.kill()
    assert demo.returncode == 130, ("".join(printed) + rest)[-3000:]
    assert "interrupted; everything it started is stopped" in rest
    assert _left_running(out.resolve()) == []
