"""``s3tm metrics``: the exporter's figures equal the tables' rows, a new commit moves them,
and ``serve`` listens on loopback only and stops cleanly on SIGTERM.

The tables are written with delta-rs (no JVM): the rows a stream, a remap and the monitor
write, with the figures chosen so that every sum and every latest value is checkable."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyarrow as pa
import pytest
from prometheus_client.parser import text_string_to_metric_families

from core.stream.latency import PROMETHEUS_BOUNDS
from s3tm.monitoring.exporter import exposition, serve
from schemas import table
from spark_jobs.lake.delta_io import Lakehouse

T0 = dt.datetime(2026, 11, 28, 9, 0, tzinfo=dt.UTC)


def _write(lake: Lakehouse, name: str, rows: list[dict]) -> None:
    lake.write_arrow(pa.Table.from_pylist(rows, schema=table(name).schema), name)


def _batch(query: str, batch: int, stage: str, **figures) -> dict:
    return {
        "query_id": query,
        "batch_id": batch,
        "stage": stage,
        "routing_version": 1,
        "registry_version": 0,
        "epoch": 1,
        "recorded_at": T0 + dt.timedelta(seconds=10 * batch + (stage == "committed")),
        **figures,
    }


def _stream_rows(query: str, batches: int, first: int = 0) -> list[dict]:
    rows = []
    for b in range(first, first + batches):
        plan = {"shedding": "off", "shedding_level": b % 2, "backlog_posts": 100 * b}
        rows.append(_batch(query, b, "planned", trigger_seconds=5.0, **plan))
        rows.append(
            _batch(
                query,
                b,
                "committed",
                trigger_seconds=5.0,
                subscriptions=1000,
                posts=100 + b,
                quarantined=b,
                dropped_posts=2 * b,
                capped_posts=3,
                routed_pairs=250 + b,
                shed_pairs=4,
                matches=40 + b,
                deliveries=30 + b,
                seconds_total=1.5 + b,
                **plan,
                **_latency(b),
            )
        )
    return rows


def _latency(batch: int) -> dict:
    """Batch 0 delivered nothing with an arrival time; batch b > 0: b + 1 deliveries
    within 2 s (over 1 s), one past every bound."""
    if batch == 0:
        return {}
    buckets = [0] * (len(PROMETHEUS_BOUNDS) + 1)
    buckets[PROMETHEUS_BOUNDS.index(2.0)] = batch + 1
    buckets[-1] = 1
    return {"latency_buckets": buckets, "latency_sum": 1.5 * (batch + 1) + 700.0}


@pytest.fixture
def lake(tmp_path: Path) -> Lakehouse:
    lake = Lakehouse(None, str(tmp_path / "lakehouse"), engine="rs")
    _write(lake, "stream.batches", _stream_rows("q1", 3))
    evaluation = {
        "relative_model_throughput_vs_hash": 1.4,
        "relative_work_throughput_vs_hash": 1.6,
    }
    versions = []
    for v, status in ((1, "retired"), (2, "published"), (3, "validated")):
        evaluation_v = dict(evaluation, relative_work_throughput_vs_published=1.01)
        versions.append(
            {
                "routing_version": v,
                "algorithm": "salb2",
                "n_matchers": 4,
                "params": "{}",
                "inputs": "{}",
                "metrics": json.dumps(
                    {
                        "evaluation": evaluation_v if v == 3 else evaluation,
                        "placement": {"moved_subscriptions": 10 * v},
                    }
                ),
                "status": status,
                "created_at": T0 + dt.timedelta(hours=v),
                "published_at": T0 + dt.timedelta(hours=v, minutes=5) if v < 3 else None,
            }
        )
    _write(lake, "routing.versions", versions)
    _write(
        lake,
        "stream.health",
        [
            {
                "query_id": "q1",
                "batch_id": b,
                "routing_version": 2,
                "n_matchers": 4,
                "recorded_at": T0 + dt.timedelta(seconds=10 * b),
                "relative_throughput": 1.2 + b / 10,
                "spread": 1.5,
                "imbalance": 1.1,
                "hot_words": [{"word": "w", "share": 0.1, "versions": 1, "mapped": True}] * b,
            }
            for b in range(3)
        ],
    )
    _write(
        lake,
        "stream.monitor",
        [
            {
                "checked_at": T0 + dt.timedelta(minutes=m),
                "decision": decision,
                "live_relative_throughput": 1.0 + m / 100,
                "reference_relative_throughput": 1.4,
            }
            for m, decision in ((1, "healthy"), (2, "remap"), (3, "healthy"))
        ],
    )
    quarantine = [
        {
            "stage": stage,
            "reason": "blank line",
            "source_file": "f",
            "raw": "",
            "ingest_batch": "b",
            "quarantined_at": T0,
        }
        for stage in ("ingest", "ingest", "stream")
    ]
    _write(lake, "silver.posts_quarantine", quarantine)
    return lake


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_the_figures_equal_the_tables(lake: Lakehouse) -> None:
    got = _samples(exposition(lake))
    q = (("query_id", "q1"),)
    # counters: sums over the committed batches 0, 1, 2
    assert got["s3tm_stream_batches_total", q] == 3
    assert got["s3tm_stream_posts_total", q] == 100 + 101 + 102
    assert got["s3tm_stream_records_total", q] == 303 + 0 + 1 + 2
    assert got["s3tm_stream_quarantined_records_total", q] == 3
    assert got["s3tm_stream_posts_dropped_total", q] == 0 + 2 + 4
    assert got["s3tm_stream_matches_total", q] == 40 + 41 + 42
    assert got["s3tm_stream_deliveries_total", q] == 30 + 31 + 32
    assert got["s3tm_stream_batch_seconds_total", q] == pytest.approx(1.5 + 2.5 + 3.5)
    # the delivery latency histogram: batches 1 and 2 (2 + 3 within 2 s, one each past all)
    latency = "s3tm_stream_delivery_latency_seconds"
    assert got[f"{latency}_bucket", (("le", "1.0"), *q)] == 0
    assert got[f"{latency}_bucket", (("le", "2.0"), *q)] == 5
    assert got[f"{latency}_bucket", (("le", "600.0"), *q)] == 5
    assert got[f"{latency}_bucket", (("le", "+Inf"), *q)] == 7
    assert got[f"{latency}_count", q] == 7
    assert got[f"{latency}_sum", q] == pytest.approx(1.5 * 5 + 1400.0)
    # the latest batch (2) and its plan
    assert got["s3tm_stream_last_batch_id", q] == 2
    assert (
        got["s3tm_stream_last_batch_timestamp_seconds", q]
        == (T0 + dt.timedelta(seconds=21)).timestamp()
    )
    assert got["s3tm_stream_batch_duration_seconds", q] == 3.5
    assert got["s3tm_stream_trigger_seconds", q] == 5.0
    assert got["s3tm_stream_backlog_posts", q] == 200
    assert got["s3tm_stream_shedding_level", q] == 0
    assert got["s3tm_stream_relative_throughput", q] == pytest.approx(1.4)
    assert got["s3tm_stream_hot_words", q] == 2
    # routing: version 2 is published; the latest remap (3) was kept, not published
    assert got["s3tm_routing_published_version", ()] == 2
    assert (
        got["s3tm_routing_published_timestamp_seconds", ()]
        == (T0 + dt.timedelta(hours=2, minutes=5)).timestamp()
    )
    assert got["s3tm_routing_published_relative_throughput", (("basis", "work"),)] == 1.6
    assert got["s3tm_routing_versions", (("status", "published"),)] == 1
    assert got["s3tm_routing_versions", (("status", "rejected"),)] == 0
    assert got["s3tm_remap_last_version", ()] == 3
    assert got["s3tm_remap_last_published", ()] == 0
    assert got["s3tm_remap_last_relative_throughput", (("basis", "work_vs_published"),)] == 1.01
    assert got["s3tm_remap_last_moved_subscriptions", ()] == 30
    # the monitor and the quarantine
    assert got["s3tm_monitor_checks_total", (("decision", "remap"),)] == 1
    assert got["s3tm_monitor_checks_total", (("decision", "healthy"),)] == 2
    assert (
        got["s3tm_monitor_last_remap_request_timestamp_seconds", ()]
        == (T0 + dt.timedelta(minutes=2)).timestamp()
    )
    assert got["s3tm_monitor_live_relative_throughput", ()] == pytest.approx(1.03)
    assert got["s3tm_quarantined_records_total", (("stage", "ingest"),)] == 2
    assert got["s3tm_exporter_read_errors_total", ()] == 0


def test_an_empty_lakehouse_exports_zero_counters_and_no_latest_values(tmp_path: Path) -> None:
    got = _samples(exposition(Lakehouse(None, str(tmp_path / "none"), engine="rs")))
    assert got["s3tm_routing_versions", (("status", "published"),)] == 0
    assert got["s3tm_monitor_checks_total", (("decision", "remap"),)] == 0
    assert got["s3tm_exporter_table_version", (("table", "stream.batches"),)] == -1
    assert not [name for name, _ in got if name == "s3tm_routing_published_version"]


def _scrape(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        return _samples(response.read().decode())


def test_a_new_commit_moves_the_served_counters(lake: Lakehouse) -> None:
    serving = serve(lake, "127.0.0.1", 0)  # the port the server binds
    port = serving.port
    try:
        q = (("query_id", "q1"),)
        before = _scrape(port)
        assert before["s3tm_stream_batches_total", q] == 3
        assert _scrape(port)["s3tm_stream_posts_total", q] == before["s3tm_stream_posts_total", q]
        _write(lake, "stream.batches", _stream_rows("q1", 2, first=3))
        after = _scrape(port)
        assert after["s3tm_stream_batches_total", q] == 5
        assert after["s3tm_stream_posts_total", q] == before["s3tm_stream_posts_total", q] + 207
        assert after["s3tm_stream_last_batch_id", q] == 4
        assert (
            after["s3tm_exporter_table_version", (("table", "stream.batches"),)]
            == before["s3tm_exporter_table_version", (("table", "stream.batches"),)] + 1
        )
    finally:
        serving.stop()


def test_serve_listens_on_loopback_only_and_stops_on_sigterm(lake: Lakehouse) -> None:
    import psutil

    command = [sys.executable, "-m", "s3tm.cli.main", "metrics", "serve"]
    process = subprocess.Popen(
        [*command, "--lakehouse", lake.location, "--port", "0"],  # a port it binds
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        served = re.search(r"serving http://127\.0\.0\.1:(\d+)/metrics", line)
        assert served, line
        port = int(served.group(1))
        assert port != 0
        deadline = time.monotonic() + 60
        while True:
            try:
                assert _scrape(port)["s3tm_stream_batches_total", (("query_id", "q1"),)] == 3
                break
            except OSError:
                assert time.monotonic() < deadline, "the exporter never answered"
                time.sleep(0.2)
        listening = {
            c.laddr.ip
            for c in psutil.Process(process.pid).net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN
        }
        assert listening == {"127.0.0.1"}
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert "stopped" in process.stdout.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
