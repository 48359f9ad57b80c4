"""``s3tm sql`` on a small lakehouse built by the demo path's jobs: every documented example
returns the rows computed independently from delta-rs reads; time travel returns the
earlier version's rows; Polars over the same datasets agrees; bad input gets one line and
exit code 2; and ``s3tm sql-server`` answers a Spark Connect client in another process,
following a new table version."""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from s3tm.cli.main import main
from s3tm.sql.engine import LakehouseSQL, parse_as_of
from s3tm.sql.examples import EXAMPLES, example
from spark_jobs.lake.delta_io import Lakehouse
from tests.s3tm import sql_lakehouse

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def built(spark, tmp_path_factory) -> Lakehouse:
    return sql_lakehouse.shared_copy(spark, tmp_path_factory, "sql")


@pytest.fixture(scope="module")
def lake(built) -> Lakehouse:
    """The same lakehouse through delta-rs only (no Spark), as ``s3tm sql`` sees it."""
    return Lakehouse(None, built.root, engine="rs")


def _sql(lake: Lakehouse, query: str, **as_of) -> list[dict]:
    return LakehouseSQL(lake, as_of).query(query).to_pylist()


def _rows(lake: Lakehouse, name: str) -> list[dict]:
    return lake.read_arrow(name).to_pylist()


def _published_and_previous(lake: Lakehouse) -> tuple[int, int]:
    versions = _rows(lake, "routing.versions")
    published = max(v["routing_version"] for v in versions if v["status"] == "published")
    previous = max(
        v["routing_version"]
        for v in versions
        if v["published_at"] is not None and v["routing_version"] < published
    )
    return published, previous


def test_the_fixture_has_what_the_examples_need(lake):
    published, previous = _published_and_previous(lake)
    assert (published, previous) == (2, 1)
    assert lake.row_count("matches") > 100 and lake.row_count("deliveries") > 50
    reasons = {r["stage"] for r in _rows(lake, "silver.posts_quarantine")}
    assert reasons == {"ingest", "stream"}


def test_version_history(lake):
    got = _sql(lake, example("version-history").sql)
    versions = sorted(_rows(lake, "routing.versions"), key=lambda v: -v["routing_version"])[:4]
    assert [r["routing_version"] for r in got] == [v["routing_version"] for v in versions]
    for row, version in zip(got, versions, strict=True):
        model = json.loads(version["metrics"])["evaluation"]["candidate"]["model"]
        assert row["status"] == version["status"]
        assert row["spread"] == pytest.approx(model["spread"])
        assert row["imbalance"] == pytest.approx(model["imbalance"])
        assert row["validated"] == "true"


def _matchers_by(rows: list[dict], key: str, version: int) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for r in rows:
        if r["routing_version"] == version:
            out.setdefault(r[key], []).append(r["matcher_id"])
    return {k: sorted(v) for k, v in out.items()}


def test_words_moved(lake):
    published, previous = _published_and_previous(lake)
    mappings = _rows(lake, "routing.mappings")
    old = _matchers_by(mappings, "word", previous)
    new = _matchers_by(mappings, "word", published)
    expected = [
        (w, old.get(w), new.get(w)) for w in sorted(set(old) | set(new)) if old.get(w) != new.get(w)
    ]
    got = _sql(lake, example("words-moved").sql)
    assert expected, "the two versions differ (N = 8 and N = 4)"
    assert [(r["word"], r["matchers_before"], r["matchers_now"]) for r in got] == expected


def test_subscriptions_moved(lake):
    published, previous = _published_and_previous(lake)
    placements = _rows(lake, "routing.placements")
    old = _matchers_by(placements, "sub_id", previous)
    new = _matchers_by(placements, "sub_id", published)
    both = set(old) & set(new)
    got = _sql(lake, example("subscriptions-moved").sql)
    assert got == [{"subscriptions": len(both), "moved": sum(old[s] != new[s] for s in both)}]


def test_matcher_load(lake):
    published, _ = _published_and_previous(lake)
    matches = [r for r in _rows(lake, "matches") if r["routing_version"] == published]
    load = Counter((r["matched_at"].date(), r["matcher_id"]) for r in matches)
    posts = {
        key: len(
            {r["post_id"] for r in matches if (r["matched_at"].date(), r["matcher_id"]) == key}
        )
        for key in load
    }
    got = _sql(lake, example("matcher-load").sql)
    assert [(r["day"], r["matcher_id"], r["matches"], r["posts"]) for r in got] == [
        (day, m, load[(day, m)], posts[(day, m)]) for day, m in sorted(load)
    ]


def test_subscriber_deliveries(lake):
    deliveries = _rows(lake, "deliveries")
    latest = max(r["delivered_at"] for r in deliveries)
    expected = sorted(
        (
            r
            for r in deliveries
            if r["subscriber"] == "alice" and r["delivered_at"] >= latest - dt.timedelta(hours=1)
        ),
        key=lambda r: (-r["delivered_at"].timestamp(), r["post_id"]),
    )
    got = _sql(lake, example("subscriber-deliveries").sql)
    assert expected
    assert [(r["post_id"], r["sub_ids"]) for r in got] == [
        (r["post_id"], r["sub_ids"]) for r in expected
    ]


def test_quarantine_by_day(lake):
    counts = Counter(
        (r["quarantined_at"].date(), r["stage"], r["reason"])
        for r in _rows(lake, "silver.posts_quarantine")
    )
    got = _sql(lake, example("quarantine-by-day").sql)
    assert {(r["day"], r["stage"], r["reason"]): r["records"] for r in got} == dict(counts)
    # stream: 2 files x 3 bad lines; ingest: 3 bad lines
    assert sum(r["records"] for r in got if r["stage"] == "stream") == 6


def test_stream_batches(lake):
    committed = [r for r in _rows(lake, "stream.batches") if r["stage"] == "committed"]
    got = _sql(lake, example("stream-batches").sql)
    assert sorted(r["batch_id"] for r in got) == sorted(r["batch_id"] for r in committed)
    by_batch = {r["batch_id"]: r for r in committed}
    for row in got:
        assert row["matches"] == by_batch[row["batch_id"]]["matches"]
        assert row["spread"] == pytest.approx(
            by_batch[row["batch_id"]]["routed_pairs"] / by_batch[row["batch_id"]]["posts"], abs=0.01
        )


def test_every_example_is_documented():
    queries = (ROOT / "docs" / "QUERIES.md").read_text()
    for item in EXAMPLES:
        assert item.sql.strip() in queries, f"{item.name} is not in docs/QUERIES.md as it runs"


def test_time_travel_by_version_and_timestamp(lake):
    history = lake.history("routing.versions")
    first_version = min(h["version"] for h in history)
    earlier = lake.delta_table("routing.versions", version=first_version + 1)
    expected = sorted(
        (r["routing_version"], r["status"])
        for r in lake.read_arrow("routing.versions", version=first_version + 1).to_pylist()
    )
    query = "SELECT routing_version, status FROM routing.versions ORDER BY 1"
    by_version = _sql(lake, query, **{"routing.versions": first_version + 1})
    assert [(r["routing_version"], r["status"]) for r in by_version] == expected
    assert expected != sorted(
        (r["routing_version"], r["status"]) for r in _rows(lake, "routing.versions")
    )
    # the timestamp of that commit reads the same version
    stamp = dt.datetime.fromtimestamp(
        next(h["timestamp"] for h in history if h["version"] == earlier.version()) / 1000, dt.UTC
    )
    pinned = parse_as_of([f"routing.versions={stamp.isoformat()}"])
    engine = LakehouseSQL(lake, pinned)
    assert engine.tables["routing.versions"].version == earlier.version()
    assert [
        (r["routing_version"], r["status"]) for r in engine.query(query).to_pylist()
    ] == expected


def test_polars_and_delta_rs_read_the_same_rows(lake):
    import polars as pl

    engine = LakehouseSQL(lake)
    for name in ("matches", "routing.mappings", "subscriptions.registry"):
        by_sql = engine.query(f"SELECT * FROM {name}")
        by_polars = pl.scan_pyarrow_dataset(lake.snapshot(name).dataset).collect().to_arrow()
        by_delta_rs = lake.read_arrow(name)
        key = [(c, "ascending") for c in by_delta_rs.column_names if c != "words"]
        reference = by_delta_rs.sort_by(key).to_pylist()
        assert by_sql.sort_by(key).to_pylist() == reference, name
        assert pa.Table.from_batches(by_polars.to_batches()).sort_by(key).to_pylist() == reference


def _cli(lake: Lakehouse, *argv: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "s3tm.cli.main", "sql", "--lakehouse", str(lake.root), *argv],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )


def test_formats_round_trip(lake, capsys):
    query = "SELECT routing_version, status, n_matchers FROM routing.versions ORDER BY 1"
    expected = _sql(lake, query)
    assert main(["sql", "--lakehouse", str(lake.root), "--format", "json", query]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line) for line in lines] == expected
    assert main(["sql", "--lakehouse", str(lake.root), "--format", "csv", query]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(int(r["routing_version"]), r["status"]) for r in rows] == [
        (r["routing_version"], r["status"]) for r in expected
    ]
    assert main(["sql", "--lakehouse", str(lake.root), query]) == 0
    table = capsys.readouterr().out
    assert "published" in table and f"({len(expected)} rows)" in table


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["SELECT * FROM routing.nope"], "nope does not exist"),
        (["SELEC 1"], "syntax error"),
        (["--as-of", "routing.versions=999", "SELECT 1"], "has no version 999"),
        (["--as-of", "routing.versions=yesterday", "SELECT 1"], "neither a version"),
        (["--as-of", "matches=2020-01-01", "SELECT 1"], "did not exist yet"),
        (["--as-of", "nope.table=1", "SELECT 1"], "unknown table"),
        (["--example", "nope"], "no example 'nope'"),
        (["--engine", "catalog", "SELECT 1"], "no catalog is configured"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(lake, argv, message):
    run = _cli(lake, *argv)
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], run.stderr


def test_the_prompt_reads_statements_until_the_end(lake):
    run = _cli(
        lake,
        "--format",
        "csv",
        stdin="SELECT count(*) AS n\n  FROM routing.versions;\nSELECT 41 + 1 AS answer;\n\\q\n",
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["n", str(len(_rows(lake, "routing.versions"))), "answer", "42"]
    failing = _cli(lake, stdin="SELECT * FROM nope;\nSELECT 1 AS one;\n")
    assert failing.returncode == 2 and "nope" in failing.stderr and "one" in failing.stdout


def test_examples_are_listed():
    out = io.StringIO()
    from contextlib import redirect_stdout

    with redirect_stdout(out):
        assert main(["sql", "--examples"]) == 0
    for item in EXAMPLES:
        assert f"-- {item.name}: " in out.getvalue()


CLIENT = """
import json, sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
rows = spark.sql(sys.argv[2]).collect()
print(json.dumps([r.asDict(recursive=True) for r in rows], default=str))
"""


def _client(url: str, query: str, *, refused: bool = False) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k != "SPARK_CONNECT_AUTHENTICATE_TOKEN"}
    run = subprocess.run(
        [sys.executable, "-c", CLIENT, url, query],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    if refused:
        assert run.returncode != 0 and "UNAUTHENTICATED" in run.stderr, run.stderr[-3000:]
        return []
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_sql_server_beyond_loopback_needs_a_token(monkeypatch):
    from spark_jobs.sql.server import ServerConfig, run_server

    monkeypatch.delenv("SPARK_CONNECT_AUTHENTICATE_TOKEN", raising=False)
    # refused before any JVM starts
    assert run_server(ServerConfig(host="0.0.0.0", port=0)) == 2


def test_sql_server_answers_a_spark_connect_client_with_its_token(built, lake, tmp_path):
    token = "s3tm-test-token-7c1e"
    env = {
        **os.environ,
        "S3TM_SPARK_LOG_LEVEL": "ERROR",
        "SPARK_CONNECT_AUTHENTICATE_TOKEN": token,
    }
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "s3tm.cli.main",
            "sql-server",
            "--lakehouse",
            str(lake.root),
            "--port",
            "0",  # the server binds a free one and prints it
            "--refresh-seconds",
            "1",
            "--master",
            "local[1]",
        ],
        stdout=subprocess.PIPE,
        stderr=open(tmp_path / "server.log", "w"),  # noqa: SIM115
        text=True,
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )
    try:
        line = server.stdout.readline()
        assert "listening on sc://" in line, (tmp_path / "server.log").read_text()[-3000:]
        assert "must carry the token" in line and token not in line
        port = int(re.search(r"sc://127\.0\.0\.1:(\d+);", line).group(1))
        assert port != 0
        # without the token: refused
        _client(f"sc://localhost:{port}", "SELECT 1 AS one", refused=True)
        url = f"sc://localhost:{port}/;token={token}"
        for query in (
            "SELECT routing_version, status, n_matchers FROM routing.versions ORDER BY 1",
            example("matcher-load").sql,
            example("quarantine-by-day").sql,
        ):
            remote = _client(url, query)
            local = json.loads(json.dumps(_sql(lake, query), default=str))
            assert remote == local, query
        # a new table version (a subscription added) is served after the next refresh
        from spark_jobs.lake.subscription_store import add_subscriptions

        before = lake.row_count("subscriptions.registry")
        add_subscriptions(built, ["fresh words"], "carol")
        deadline = time.monotonic() + 60
        count_query = "SELECT count(*) AS n FROM subscriptions.registry"
        while _client(url, count_query)[0]["n"] != before + 1:
            assert time.monotonic() < deadline, "the server never served the new version"
            time.sleep(1)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        code = server.wait(timeout=60)
    assert code == 0, (tmp_path / "server.log").read_text()[-3000:]


def test_matches_is_a_view_of_deliveries_when_the_stream_wrote_deliveries_only(tmp_path):
    from core.stream.dispatch import MATCHES_ARROW, Subscribers, dispatch_tables
    from schemas import table

    lake = Lakehouse(None, tmp_path / "lake", engine="rs")
    rows = [("p1", 1, 0), ("p1", 4, 2), ("p1", 4, 1), ("p2", 2, 1), ("p2", 3, 3)]
    matched = pa.Table.from_pylist(
        [{"post_id": p, "sub_id": s, "matcher_id": m} for p, s, m in rows], schema=MATCHES_ARROW
    )
    owners = Subscribers.of({s: f"user{s % 3}" for s in range(1, 9)})
    now = dt.datetime(2026, 11, 23, tzinfo=dt.UTC)
    matches, deliveries = dispatch_tables(matched, owners, 5, 0, now)
    lake.write_arrow(deliveries.cast(table("deliveries").schema), "deliveries")
    assert not lake.exists("matches")
    got = _sql(lake, "SELECT * FROM matches ORDER BY post_id, sub_id")
    columns = table("matches").schema.names
    assert [list(r) for r in got] == [columns] * len(got)
    want = sorted(matches.select(columns).to_pylist(), key=lambda r: (r["post_id"], r["sub_id"]))
    assert got == want  # each (post, sub) once, on its lowest matcher


def test_the_sql_server_catalog_serves_matches_derived_from_deliveries(spark, tmp_path):
    from core.stream.dispatch import MATCHES_ARROW, Subscribers, dispatch_tables
    from schemas import table
    from spark_jobs.sql.catalog import LakehouseCatalog

    lake = Lakehouse(None, tmp_path / "lake", engine="rs")
    rows = [("p1", 1, 0), ("p1", 4, 2), ("p1", 4, 1), ("p2", 2, 1), ("p2", 3, 3)]
    matched = pa.Table.from_pylist(
        [{"post_id": p, "sub_id": s, "matcher_id": m} for p, s, m in rows], schema=MATCHES_ARROW
    )
    owners = Subscribers.of({s: f"user{s % 3}" for s in range(1, 9)})
    matches, deliveries = dispatch_tables(
        matched, owners, 5, 0, dt.datetime(2026, 11, 23, tzinfo=dt.UTC)
    )
    lake.write_arrow(deliveries.cast(table("deliveries").schema), "deliveries")
    catalog = LakehouseCatalog(spark, lake)
    catalog.refresh()
    got = spark.sql("SELECT post_id, sub_id, matcher_id FROM matches ORDER BY 1, 2").collect()
    assert [tuple(r) for r in got] == [("p1", 1, 0), ("p1", 4, 1), ("p2", 2, 1), ("p2", 3, 3)]
    # a stream that writes the table again: the table replaces the view
    lake.write_arrow(matches.slice(0, 1).cast(table("matches").schema), "matches")
    catalog.refresh()
    got = spark.sql("SELECT post_id, sub_id, matcher_id FROM matches").collect()
    assert [tuple(r) for r in got] == [("p1", 1, 0)]


def test_queries_during_the_sql_server_catalogs_refreshes_always_find_the_table(spark, tmp_path):
    """A client's query planned while the server moves a table to its next versions finds
    the table and reads it whole, at one version or another: the view moves in one catalog
    update (a CI run's query once found no table: Spark's CREATE OR REPLACE VIEW drops the
    view, then creates it), and a replaced version's files stay while queries may read them
    (versions here come faster than a query ends)."""
    import threading

    from spark_jobs.lake.subscription_store import add_subscriptions
    from spark_jobs.sql.catalog import LakehouseCatalog

    lake = Lakehouse(None, tmp_path / "lake", engine="rs")
    add_subscriptions(lake, ["first words"], "alice")
    catalog = LakehouseCatalog(spark, lake)
    catalog.refresh()
    client = spark.newSession()  # as a Spark Connect client's: the catalog is shared
    versions = 25
    moved = threading.Event()

    def move() -> None:
        try:
            for i in range(versions):
                add_subscriptions(lake, [f"words number {i}"], "bob")
                catalog.refresh()
        finally:
            moved.set()

    mover = threading.Thread(target=move)
    mover.start()
    counts, failures = [], []
    while not moved.is_set():
        try:
            counts.append(client.sql("SELECT count(*) FROM subscriptions.registry").first()[0])
        except Exception as error:
            failures.append(
                next(
                    (
                        line
                        for line in str(error).splitlines()
                        if "Exception" in line or "ERROR" in line
                    ),
                    str(error)[:300],
                )
            )
    mover.join()
    assert failures == [], sorted({f[:400] for f in failures})
    assert counts == sorted(counts) and len(set(counts)) > 1, counts
    assert client.sql("SELECT count(*) FROM subscriptions.registry").first()[0] == versions + 1


def test_the_sql_server_catalog_retires_replaced_versions_after_their_grace(spark, tmp_path):
    from spark_jobs.lake.subscription_store import add_subscriptions
    from spark_jobs.sql.catalog import SNAPSHOTS_DIR, LakehouseCatalog

    now = [0.0]
    lake = Lakehouse(None, tmp_path / "lake", engine="rs")
    catalog = LakehouseCatalog(spark, lake, grace_seconds=60, clock=lambda: now[0])

    def served() -> tuple[list[str], list[str]]:
        folders = sorted(
            p.name for p in (lake.root / SNAPSHOTS_DIR / "subscriptions.registry").iterdir()
        )
        # (this lakehouse's: the session's catalog holds other tests' tables too)
        tables = sorted(
            r.tableName
            for r in spark.sql("SHOW TABLES IN subscriptions").collect()
            if r.tableName.startswith("registry__v")
            and str(lake.root) in _location(spark, f"subscriptions.{r.tableName}")
        )
        return folders, tables

    for i in range(4):  # versions 0-3, a second apart: all in their grace
        add_subscriptions(lake, [f"words number {i}"], "bob")
        catalog.refresh()
        now[0] += 1
    folders, tables = served()
    assert folders == [f"v{v:08d}" for v in range(4)]
    assert tables == [f"registry__v{v:08d}" for v in range(4)]
    now[0] += 60  # past the grace of versions 0-2: the last two stay, however old
    catalog.refresh()
    assert served() == (["v00000002", "v00000003"], ["registry__v00000002", "registry__v00000003"])
    assert spark.sql("SELECT count(*) FROM subscriptions.registry").first()[0] == 4


def _location(spark, table: str) -> str:
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect()
    return next((r.data_type for r in rows if r.col_name == "Location"), "")


CATALOG_EXAMPLES = """
import datetime as dt, json, sys
from s3tm.sql.catalog_engine import CatalogSQL
from s3tm.sql.examples import EXAMPLES
from spark_jobs.lake.catalog import register_tables
from spark_jobs.lake.delta_io import Lakehouse
engine = CatalogSQL(sys.argv[2])
register_tables(engine.spark, Lakehouse(engine.spark, sys.argv[1]))
def utc(v):
    return v.astimezone(dt.UTC).isoformat() if isinstance(v, dt.datetime) else str(v)
print(json.dumps({item.name: engine.query(item.sql).to_pylist() for item in EXAMPLES},
                 default=utc))
"""


def _comparable(rows: list[dict]) -> list[str]:
    """Rows as text that both engines spell alike: numbers as numbers (floats to 9 digits),
    times as UTC."""

    def value(v: object) -> object:
        if isinstance(v, decimal.Decimal):  # DuckDB sums integers as HUGEINT
            v = int(v) if v == v.to_integral_value() else float(v)
        if isinstance(v, float):
            return round(v, 9)
        if isinstance(v, dt.datetime):  # the catalog's side came as JSON: UTC ISO text
            return (v if v.tzinfo else v.replace(tzinfo=dt.UTC)).astimezone(dt.UTC).isoformat()
        return v

    return sorted(json.dumps({k: value(v) for k, v in r.items()}, default=str) for r in rows)


def test_every_example_reads_the_same_through_the_catalog(lake, metastore, spark_process_env):
    """Spark SQL on the catalog (``s3tm sql`` with ``S3TM_CATALOG_URI``) and DuckDB over the
    files return the same rows for every documented query."""
    run = subprocess.run(
        [sys.executable, "-c", CATALOG_EXAMPLES, str(lake.root), metastore],
        env={**spark_process_env, "S3TM_CATALOG_URI": metastore},
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    on_catalog = json.loads(run.stdout.strip().splitlines()[-1])
    for item in EXAMPLES:
        expected = _sql(lake, item.sql)
        assert expected, item.name  # the fixture has rows for every example
        assert _comparable(on_catalog[item.name]) == _comparable(expected), item.name
