"""Prometheus, for real: Debian's ``prometheus`` on loopback scrapes ``s3tm metrics serve``
over a lakehouse where the remap chain published and the stream ran, and

- its series hold what the tables hold (posts and batches of ``stream.batches``, the
  published version, matches, quarantined records);
- every query of the Grafana dashboard parses and returns series;
- a stream made to fall behind (posts landing faster than it processes them) takes the
  ``S3TMStreamFallingBehind`` and ``S3TMDeliveriesLate`` rules to firing in Prometheus' own
  rule evaluation. The rules
  are the shipped file with its durations read as seconds instead of minutes (10m -> 10s):
  the same expressions, a test that takes seconds.

.ci/run installs Prometheus; without it the test fails (it never skips)."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from core.corpus.synthetic import SyntheticCorpusSpec
from s3tm.monitoring.exporter import serve
from s3tm.orchestration.tasks.monitor import check_routing_health
from spark_jobs.lake.corpus_files import write_demo_corpus
from spark_jobs.lake.delta_io import Lakehouse
from spark_jobs.lake.routing_store import published_version
from spark_jobs.stream.config import StreamConfig
from spark_jobs.stream.matcher import start
from tests.s3tm import sql_lakehouse
from tests.spark_jobs.jobs.chain import run_chain
from tests.spark_jobs.stream import harness
from tests.support.prometheus import RULES, LocalPrometheus

pytestmark = pytest.mark.spark

DASHBOARD = Path(__file__).resolve().parents[2] / "infra" / "monitoring" / "s3tm-dashboard.json"
WAIT_S = 120.0


def rules_in_seconds(source: Path, target: Path) -> Path:
    """The rule file with every duration in minutes read as seconds (``for: 10m`` -> 10s,
    ``[5m]`` -> ``[5s]``): the same expressions on a test's time scale."""
    rules = yaml.safe_load(source.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule["expr"] = re.sub(r"\[(\d+)m\]", r"[\1s]", rule["expr"])
            if "for" in rule:
                rule["for"] = re.sub(r"^(\d+)m$", r"\1s", rule["for"])
    target.write_text(yaml.safe_dump(rules))
    return target


def _until(what: str, check, timeout: float = WAIT_S):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def scene(spark, tmp_path_factory) -> Iterator[tuple[Path, Lakehouse, LocalPrometheus]]:
    root = tmp_path_factory.mktemp("prometheus")
    # ingest, two remaps (v2 published), a stream
    lake = sql_lakehouse.shared_copy(spark, tmp_path_factory, "prometheus-lakehouse")
    # a third nightly remap at v2's N: its placement moves some of v2's subscriptions, and
    # a 50% margin keeps it out (the stream stays on v2)
    landing = root / "landing-3"
    write_demo_corpus(
        landing / "demo.jsonl.gz", SyntheticCorpusSpec(n_posts=1200, n_words=800, seed=4), days=3
    )
    assert run_chain(lake, landing, nodes=4, margin=0.5, batch=4) == 0
    check_routing_health(lake.location)  # the monitor's check of the live health
    exporter = serve(Lakehouse(None, lake.location, engine="rs"), "127.0.0.1", 0)
    prometheus = LocalPrometheus(
        root / "prometheus",
        [f"127.0.0.1:{exporter.port}"],
        rule_files=[rules_in_seconds(RULES, root / "s3tm-alerts-seconds.yml")],
        scrape_seconds=1,
        evaluation_seconds=1,
    )
    try:
        prometheus.start()
        yield root, lake, prometheus
    finally:
        prometheus.stop()
        exporter.stop()


def test_the_series_hold_what_the_tables_hold(scene) -> None:
    _, lake, prometheus = scene
    rs = Lakehouse(None, lake.location, engine="rs")
    batches = rs.read_arrow("stream.batches").to_pylist()
    committed = [r for r in batches if r["stage"] == "committed"]
    quarantined = rs.read_arrow("silver.posts_quarantine").to_pylist()
    assert committed and quarantined
    _until(
        "the exporter scraped",
        lambda: [t for t in prometheus.targets_up() if t["health"] == "up"],
    )
    # (_until waits for a series that is not zero)
    posts = _until("posts scraped", lambda: prometheus.value("sum(s3tm_stream_posts_total)"))
    assert posts == sum(r["posts"] for r in committed)
    assert prometheus.value("sum(s3tm_stream_batches_total)") == len(committed)
    # the batches' own count of their matches is the matches table's rows (exactly once)
    matches = rs.row_count("matches")
    assert prometheus.value("sum(s3tm_stream_matches_total)") == matches
    assert matches == sum(r["matches"] for r in committed)
    assert prometheus.value("sum(s3tm_stream_quarantined_records_total)") == sum(
        1 for r in quarantined if r["stage"] == "stream"
    )
    assert prometheus.value('s3tm_quarantined_records_total{stage="ingest"}') == sum(
        1 for r in quarantined if r["stage"] == "ingest"
    )
    assert prometheus.value("s3tm_routing_published_version") == published_version(rs) == 2
    assert prometheus.value("max(s3tm_stream_routing_version)") == 2
    # the third remap: kept out, some subscriptions moved
    versions = {r["routing_version"]: r for r in rs.read_arrow("routing.versions").to_pylist()}
    assert prometheus.value("s3tm_remap_last_version") == max(versions) == 3
    assert prometheus.value("s3tm_remap_last_published") == 0
    moved = json.loads(versions[3]["metrics"])["placement"]["moved_subscriptions"]
    assert prometheus.value("s3tm_remap_last_moved_subscriptions") == moved
    # the stream is stopped and its backlog flat: nothing fires yet
    behind = [
        a for a in prometheus.alerts() if a["labels"]["alertname"] == "S3TMStreamFallingBehind"
    ]
    assert behind == []


def test_a_stream_falling_behind_fires_the_alert_and_every_dashboard_query_answers(
    scene, spark
) -> None:
    root, lake, prometheus = scene
    landing = harness.Landing(root / "landing-behind", seed=11)
    landing.write(300)
    config = StreamConfig(
        source="files",
        landing=str(landing.root),
        checkpoint=str(root / "checkpoint-behind"),
        query_name="falling_behind",
        max_files_per_trigger=1,
        trigger_seconds=0.2,  # shorter than any batch takes here
        available_now=False,
        seed=0,
        shedding="off",  # load shedding would catch up; this test wants it to fall behind
    )
    query, _ = start(spark, lake, config)
    stop = threading.Event()

    def land() -> None:  # a file every 0.4 s: faster than one batch a file processes them
        while not stop.is_set():
            landing.write(300)
            stop.wait(0.4)

    lander = threading.Thread(target=land, daemon=True)
    lander.start()
    try:

        def firing() -> list[dict]:
            assert query.isActive, query.exception()
            return [
                a
                for a in prometheus.alerts()
                if a["labels"]["alertname"] == "S3TMStreamFallingBehind" and a["state"] == "firing"
            ]

        alerts = _until("S3TMStreamFallingBehind firing", firing)
        assert alerts[0]["labels"]["severity"] == "page"
        assert prometheus.value("max(s3tm_stream_trigger_seconds)") == 0.2

        # posts wait in the backlog: the slowest deliveries take far over twice the trigger
        def late() -> list[dict]:
            return [
                a
                for a in prometheus.alerts()
                if a["labels"]["alertname"] == "S3TMDeliveriesLate" and a["state"] == "firing"
            ]

        assert _until("S3TMDeliveriesLate firing", late)[0]["labels"]["severity"] == "ticket"
        p99 = prometheus.value(
            "max(histogram_quantile(0.99, rate(s3tm_stream_delivery_latency_seconds_bucket[30s])))"
        )
        assert p99 > 0.4
    finally:
        stop.set()
        lander.join(timeout=10)
        if query.isActive:
            query.processAllAvailable()  # the backlog, then stop between batches
        query.stop()
    dashboard = json.loads(DASHBOARD.read_text())

    def unanswered() -> list[tuple[str, str]]:
        return [
            (panel["title"], target["expr"])
            for panel in dashboard["panels"]
            for target in panel["targets"]
            if not prometheus.query(target["expr"])
        ]

    # a scrape that outlasts its 1 s interval (a loaded machine) marks every series stale
    # until the next one succeeds: wait for a scrape, then every query must answer
    empty: list[tuple[str, str]] = []

    def all_answer() -> bool:
        empty[:] = unanswered()
        return not empty

    try:
        _until("every dashboard query answers", all_answer)
    except AssertionError:
        assert empty == [], prometheus.log.read_text()[-2000:]
