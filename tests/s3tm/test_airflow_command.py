"""The README's path tried as a user would: ``s3tm demo`` (its Airflow half runs the DAGs
with ``airflow dags test``), then ``s3tm airflow`` on the folder it left: trigger the DAGs
through the REST API the UI uses and by clicking Trigger in headless Chromium, and wait for
green runs.

One demo serves every test here (it is the slowest set-up of the suite): the `dags test`
runs it made are checked as they are, a worse candidate is run beside them with `dags test`,
the API server alone shows them, and then ``s3tm airflow`` starts on the same folder.
The same command on PostgreSQL with the LocalExecutor is ``test_airflow_postgres.py``'s.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from airflow_client.client import AssetApi, DAGApi, DagRunApi, PluginApi
from airflow_client.client.models import CreateAssetEventsBody

from tests.dags.conftest import embedded_env
from tests.s3tm.airflow_support import (
    PROJECT_DAGS,
    AirflowApi,
    run_demo,
    start_airflow,
)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
AIRFLOW = Path(sys.executable).with_name("airflow")
DEMO_NODES = 4  # the demo's --airflow-nodes


@pytest.fixture(scope="module")
def demo(
    tmp_path_factory: pytest.TempPathFactory, spark_process_env: dict[str, str]
) -> dict[str, Any]:
    """`s3tm demo`'s folder (small), when it started, and the environment of `airflow`
    commands on its Airflow home (the demo's own, with local[2] and no retries)."""
    out = tmp_path_factory.mktemp("s3tm-airflow")
    started = time.time()
    printed = run_demo(out, spark_process_env)
    env = embedded_env(
        out / "airflow",
        spark_process_env,
        S3TM_LAKEHOUSE=str(out / "lakehouse"),
        S3TM_LANDING=str(out / "landing"),
    )
    return {
        "out": out,
        "started": started,
        "env": env,
        "spark_env": spark_process_env,
        "printed": printed,
    }


@pytest.fixture(scope="module")
def airflow_ui(demo: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """`s3tm airflow` on the demo's folder (after this file's `dags test` run, which comes
    before the tests that use it: one SQLite writer at a time)."""
    for started in start_airflow(demo["out"], base_env=demo["spark_env"], after_demo=True):
        yield {**started, "demo_started": demo["started"]}


@contextlib.contextmanager
def _logged_in(base_url: str, password: str, path: str, height: int) -> Iterator[Any]:
    """A headless Chromium page on ``path``, after the login form, as a user would."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": height})
            page.goto(f"{base_url}{path}")
            page.get_by_label("Username").fill("admin")
            page.get_by_label("Password").fill(password)
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url(f"**{path}**")
            yield page
        finally:
            browser.close()


def _click_trigger(
    base_url: str, password: str, screenshot_dir: Path, run_created: Callable[[], bool]
) -> None:
    """Opens s3tm_remap, clicks Trigger and confirms the dialog, once.

    The dialog's Trigger is disabled while the form validates the DAG's params and while its
    POST is in flight; on a loaded machine either takes long. So it is clicked only when
    enabled, and clicked again only if no run exists yet (a second click on a slow POST would
    make two runs)."""
    from playwright.sync_api import Error as PlaywrightError

    with _logged_in(base_url, password, "/dags/s3tm_remap", 900) as page:
        page.get_by_role("button", name="Trigger").first.click()
        submit = page.get_by_role("dialog").get_by_role("button", name="Trigger")
        page.wait_for_load_state("networkidle")  # the form loads the DAG's params first
        deadline = time.monotonic() + 300
        while not run_created():
            assert time.monotonic() < deadline, "the Trigger dialog made no run in 300 s"
            with contextlib.suppress(PlaywrightError):  # closed or re-rendered meanwhile
                if submit.is_visible() and submit.is_enabled(timeout=1_000):
                    submit.click(timeout=5_000)
            page.wait_for_timeout(5_000)
        page.screenshot(path=str(screenshot_dir / "trigger.png"))


def _dags_page(base_url: str, password: str, screenshot: Path, report_href: str) -> tuple[str, str]:
    """The DAG list page's text, and a screenshot of it; then the text of a run-report page
    in the same logged-in browser (the session cookie the UI's tab sends)."""
    with _logged_in(base_url, password, "/dags", 800) as page:
        page.get_by_text("s3tm_remap").first.wait_for()
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(screenshot))
        dags = str(page.inner_text("body"))
        page.goto(f"{base_url}/{report_href}")
        return dags, str(page.inner_text("body"))


def test_the_demo_prints_the_next_steps_and_metrics_show_reads_what_it_wrote(demo):
    """First in the file, so that the demo (this file's set-up) is timed as its own test."""
    printed = demo["printed"]
    assert f"s3tm airflow --out {demo['out']}" in printed  # the hint the user follows next
    # ... and the exporter's: its one-shot form prints what the stream and the remap wrote
    hint = next(line for line in printed.splitlines() if "s3tm metrics serve" in line)
    lakehouse = hint.split("--lakehouse", 1)[1].strip()
    shown = subprocess.run(
        [sys.executable, "-m", "s3tm.cli.main", "metrics", "show", "--lakehouse", lakehouse],
        capture_output=True,
        text=True,
        env=demo["spark_env"],
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    from prometheus_client.parser import text_string_to_metric_families

    samples = [s for f in text_string_to_metric_families(shown.stdout) for s in f.samples]
    published = [s.value for s in samples if s.name == "s3tm_routing_published_version"]
    assert published and published[0] >= 1
    # the posts the exporter counts are the stream's committed batches', as delta-rs reads
    # them (and the demo streamed some)
    from deltalake import DeltaTable

    from schemas import table

    batches = DeltaTable(str(table("stream.batches").location(lakehouse))).to_pyarrow_table()
    streamed = sum(p for p in batches["posts"].to_pylist() if p is not None)
    assert streamed >= 1
    assert sum(s.value for s in samples if s.name == "s3tm_stream_posts_total") == streamed


def _dags_test_remap(demo: dict[str, Any], env: dict[str, str], *args: str) -> None:
    """`airflow dags test s3tm_remap` on the demo's home; fails the test unless the run
    succeeded."""
    done = subprocess.run(
        [str(AIRFLOW), "dags", "test", "s3tm_remap", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=demo["out"],
    )
    ran = f"exit={done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == 0 and "state=success" in ran, ran


def test_remap_end_to_end_with_airflow_dags_test(demo):
    """The demo's `dags test` runs of s3tm_ingest and s3tm_remap published a version; a
    second s3tm_remap by `airflow dags test` on the demo's home, whose worse candidate (hash,
    no split, 5% margin, the demo's N) is evaluated and validated, leaves it published."""
    from spark_jobs.lake.delta_io import Lakehouse
    from spark_jobs.lake.routing_store import published_version, versions
    from tests.support.holdout import held_out_words

    worse = {"algorithm": "hash", "split": False, "margin": 0.05, "nodes": DEMO_NODES}
    _dags_test_remap(demo, demo["env"], "--conf", json.dumps(worse))
    lakehouse = demo["out"] / "lakehouse"
    store = Lakehouse(None, lakehouse, engine="rs")
    rows = versions(store)
    first = rows[0]["routing_version"]
    assert rows[0]["status"] == "published"
    evaluation = json.loads(rows[first - 1]["metrics"])["evaluation"]
    # the held-out posts of the window it learned on
    window = json.loads(rows[first - 1]["inputs"])
    silver = store.read_arrow("silver.posts", columns=["post_id", "words", "event_day"])
    days = [d.isoformat() for d in silver["event_day"].to_pylist()]
    in_window = [(window.get("start") or d) <= d <= (window.get("end") or d) for d in days]
    assert evaluation["posts"] == len(held_out_words(silver.filter(in_window)))
    candidate, hashed = evaluation["candidate"]["model"], evaluation["hash"]["model"]
    assert evaluation["relative_model_throughput_vs_hash"] == pytest.approx(
        candidate["throughput"] / hashed["throughput"]
    )
    assert (
        lakehouse / "_quality" / "gx" / "uncommitted" / "data_docs" / "local_site" / "index.html"
    ).is_file()
    # The worse candidate was evaluated and validated, but the published version stayed.
    assert published_version(store) == first and len(rows) == 2
    reports = sorted((lakehouse / "reports").glob("remap-*.md"))
    # the default remap is incremental salb2: with nothing published yet it learned in full
    assert "full remap (no published version)" in reports[0].read_text()
    report = reports[-1].read_text()
    assert "below the required" in report
    assert "full remap (--no-incremental)" in report  # hash cannot refine incrementally
    # the demo registered subscriptions: the gate judged by the stream's cost model over
    # the matchers' counted work on them (the other bases' gates are
    # tests/spark_jobs/jobs/test_publish_gate.py's), matcher work beside it
    assert "(stream model)" in report
    assert f"Published: version {first}, the stream x" in report and "by matcher work" in report
    page = sorted((lakehouse / "reports").glob("remap-*.html"))[-1].read_text()
    assert "below the required" in page  # the same report as a page


@contextlib.contextmanager
def _lineage_receiver() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """An OpenLineage HTTP endpoint on loopback (the API Marquez serves): its URL, and the
    events posted to it so far."""
    import http.server

    events: list[dict[str, Any]] = []

    class Receiver(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            events.append(json.loads(body))
            self.send_response(201)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", events
    finally:
        server.shutdown()


def test_every_remap_task_sends_its_lineage_with_the_tables_it_read_and_wrote(demo):
    """With an OpenLineage transport set (one Airflow setting), every task of an s3tm_remap
    run sends START and COMPLETE naming the tables it reads and writes by their location,
    and each Spark job's own listener sends the Delta tables it wrote under the same names,
    its Airflow task as its parent."""
    from schemas.tables import TABLES

    lakehouse = (demo["out"] / "lakehouse").resolve()

    def table_name(name: str) -> str:
        return str(lakehouse / TABLES[name].relative_path)

    with _lineage_receiver() as (url, events):
        env = {
            **demo["env"],
            "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "http", "url": url}),
            "AIRFLOW__OPENLINEAGE__NAMESPACE": "s3tm-test",
        }
        _dags_test_remap(demo, env)
        time.sleep(2)  # the last events are posted as the run ends
        received = list(events)

    def datasets(event: dict[str, Any], side: str) -> set[str]:
        return {d["name"] for d in event.get(side) or [] if d["namespace"] == "file"}

    def parent_names(event: dict[str, Any]) -> list[str]:
        parent = event["run"].get("facets", {}).get("parent", {})
        return [p.get("job", {}).get("name", "") for p in (parent, parent.get("root", {}))]

    airflow_events: dict[str, dict[str, dict[str, Any]]] = {}
    # a Spark application's events name its Airflow task as their parent; the events of the
    # application's queries name the application (and, as root, the task)
    application_task = {
        event["job"]["name"]: parent.split(".", 1)[1]
        for event in received
        for parent in parent_names(event)[:1]
        if parent.startswith("s3tm_remap.")
    }
    spark_outputs: dict[str, set[str]] = {}
    for event in received:
        job = event["job"]["name"]
        if event["job"]["namespace"] == "s3tm-test" and job.startswith("s3tm_remap."):
            airflow_events.setdefault(job.split(".", 1)[1], {})[event["eventType"]] = event
            continue
        tasks = [application_task.get(name) for name in parent_names(event)]
        tasks += [n.split(".", 1)[1] for n in parent_names(event) if n.startswith("s3tm_remap.")]
        task = next((t for t in tasks if t), None)
        if task is not None:  # a Spark job's, under its Airflow task
            spark_outputs.setdefault(task, set()).update(datasets(event, "outputs"))
    expected = {
        "graph": (["silver.posts"], ["gold.post_words", "gold.word_stats"]),
        "learn": (["gold.post_words"], ["routing.mappings", "routing.versions"]),
        "place": (["routing.mappings"], ["routing.placements", "routing.versions"]),
        "validate": (["routing.placements"], ["routing.versions"]),
        "evaluate": (["silver.posts"], ["routing.versions"]),
        "publish": (["routing.versions"], ["routing.versions"]),
    }
    for task, (reads, writes) in expected.items():
        assert {"START", "COMPLETE"} <= set(airflow_events.get(task, {})), (task, airflow_events)
        complete = airflow_events[task]["COMPLETE"]
        assert {table_name(t) for t in reads} <= datasets(complete, "inputs"), (task, complete)
        assert {table_name(t) for t in writes} <= datasets(complete, "outputs"), (task, complete)
    for task in ("learning_window", "has_posts", "report"):
        assert {"START", "COMPLETE"} <= set(airflow_events.get(task, {})), task
    # the Spark jobs' listener sees the writes Spark plans (the graph job's edges; the
    # routing tables are written from the driver's Arrow, which no listener sees: the
    # tasks' declared tables carry those) and names them as the tasks do
    assert table_name("gold.post_words") in spark_outputs.get("graph", set()), spark_outputs
    for task, seen in spark_outputs.items():
        declared = {table_name(t) for t in expected.get(task, ((), ()))[1]}
        assert seen <= declared, (task, seen, declared)


def _dom(url: str, profile: Path) -> str:
    done = subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--virtual-time-budget=20000",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout


def test_the_api_server_lists_the_dags_and_the_finished_runs_on_loopback(demo, chromium, tmp_path):
    """Airflow's API server alone on the demo's home (as `airflow api-server` runs in
    production): it binds loopback only, and its pages show the DAGs and the green runs."""
    import psutil

    from devtools.local.airflow.standalone import served_port

    env = {**demo["env"], "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True"}
    server = subprocess.Popen(
        [str(AIRFLOW), "api-server", "--port", "0"],  # it picks the port, and prints it
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        assert server.stdout is not None
        port = next((p for line in server.stdout if (p := served_port(line)) is not None), None)
        assert port, f"airflow api-server exited ({server.wait()}) before it listened"
        # the rest of its output is not read: send it nowhere so that it never blocks
        threading.Thread(target=server.stdout.read, daemon=True).start()
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, f"airflow api-server exited {server.returncode}"
            assert time.monotonic() < deadline, "the API server did not answer in 120 s"
            try:
                with urllib.request.urlopen(f"{base}/api/v2/monitor/health", timeout=2):
                    break
            except OSError:
                time.sleep(1)
        # the demo's environment keeps it on loopback (Airflow's default: every interface)
        tree = [psutil.Process(server.pid), *psutil.Process(server.pid).children(recursive=True)]
        bound = {
            c.laddr.ip
            for p in tree
            for c in p.net_connections("inet")
            if c.status == psutil.CONN_LISTEN and c.laddr.port == port
        }
        assert bound == {"127.0.0.1"}, bound
        dags_page = _dom(f"{base}/dags", tmp_path / "chrome-dags")
        assert "s3tm_ingest" in dags_page and "s3tm_remap" in dags_page
        runs_page = _dom(f"{base}/dags/s3tm_remap/runs", tmp_path / "chrome-runs")
        assert ">Success<" in runs_page and "manual__" in runs_page
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_command_prints_where_and_how_to_log_in(airflow_ui):
    printed = airflow_ui["printed"]
    assert "log in as 'admin' with password" in printed
    assert str(airflow_ui["out"] / "lakehouse") in printed
    assert airflow_ui["api"].dag_ids() == PROJECT_DAGS  # and no example DAGs


def test_after_the_demo_trigger_in_the_browser_runs_with_no_other_click(
    airflow_ui, chromium, tmp_path
):
    """The README's path: `make demo`, `s3tm airflow --out demo-output`, Trigger on
    s3tm_remap. The demo's `dags test` runs created the DAGs; they must not be paused, and
    starting Airflow must not queue a catch-up run of a missed nightly slot ahead of it."""
    api: AirflowApi = airflow_ui["api"]
    dags = DAGApi(api.client).get_dags().dags
    assert {d.dag_id: d.is_paused for d in dags} == dict.fromkeys(PROJECT_DAGS, False)
    # no slot from before the demo created the DAGs (an hourly slot passing while the demo
    # ran is a due run, not a catch-up)
    created = datetime.datetime.fromtimestamp(airflow_ui["demo_started"], datetime.UTC)
    caught_up = [
        (d, r.run_after)
        for d in PROJECT_DAGS
        for r in api.runs(d)
        if r.run_type == "scheduled" and r.run_after < created
    ]
    assert caught_up == [], "starting Airflow ran a slot from before the DAGs existed"

    before = {r.dag_run_id for r in api.runs("s3tm_remap")}

    def clicked_runs() -> list[Any]:
        return [
            r
            for r in api.runs("s3tm_remap")
            if r.dag_run_id not in before and r.run_type == "manual"
        ]

    _click_trigger(
        airflow_ui["base_url"], airflow_ui["password"], tmp_path, lambda: bool(clicked_runs())
    )
    clicked = clicked_runs()
    assert len(clicked) == 1, "one click on Trigger, one run"
    clicked_id = clicked[0].dag_run_id
    assert api.wait_for("s3tm_remap", clicked_id) == "success", api.failed_tasks(
        "s3tm_remap", clicked_id
    )
    # (a run triggered through the REST API the UI uses: the monitor's, below; s3tm_ingest's
    # through the scheduler: test_airflow_postgres.py's and the cluster demo's)
    # Every run of both DAGs is green (scheduled, asset-triggered and manual alike).
    states = {(d, r.dag_run_id): r.state.value for d in PROJECT_DAGS for r in api.runs(d)}
    not_green = {
        run: (state, api.failed_tasks(*run))
        for run, state in states.items()
        if state not in {"success", "running", "queued"}
    }
    assert not not_green, f"runs that are not green (state, failed tasks): {not_green}"

    # the clicked run worked on the demo's lakehouse: its run report is there
    reports = (airflow_ui["out"] / "lakehouse" / "reports").glob("remap-*.md")
    safe_id = "".join(c if c.isalnum() or c in "-_." else "_" for c in clicked_id)
    assert any(safe_id in r.name for r in reports), clicked_id
    # ... with its pictures beside it (the demo registered subscriptions: counted work)
    pictures = [
        p
        for p in (airflow_ui["out"] / "lakehouse" / "reports").glob("remap-*.html")
        if safe_id in p.name
    ]
    assert pictures and "Throughput by matcher work" in pictures[0].read_text()
    # ... and reachable from the run in the UI: the plugin's "Run report" tab on every DAG
    # run opens s3tm/reports/{DAG_ID}/{RUN_ID}, served by the API server
    plugins = PluginApi(api.client).get_plugins().plugins
    views = [v for p in plugins if p.name == "s3tm_reports" for v in p.external_views]
    assert [(v.name, v.destination) for v in views] == [("Run report", "dag_run")]
    href = views[0].href.replace("{DAG_ID}", "s3tm_remap").replace("{RUN_ID}", quote(clicked_id))
    report_url = f"{airflow_ui['base_url']}/{href}"
    # ... for a logged-in user only: Airflow's auth manager decides, an anonymous caller
    # gets 401 and no page
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(report_url, timeout=60)
    assert refused.value.code == 401
    logged_in = urllib.request.Request(report_url, headers={"Authorization": f"Bearer {api.token}"})
    with urllib.request.urlopen(logged_in, timeout=60) as response:
        assert "Throughput by matcher work" in response.read().decode()

    screenshot_dir = Path(os.environ.get("S3TM_SCREENSHOT_DIR", tmp_path))
    text, report_text = _dags_page(
        airflow_ui["base_url"],
        airflow_ui["password"],
        screenshot_dir / "airflow-ui-dags.png",
        href,
    )
    assert "Throughput by matcher work" in report_text
    # a page a person reads: the decision as a sentence, tables, no Markdown or JSON
    assert re.search(r"Decision: (Published|Kept) version \d", report_text), report_text[:2000]
    assert "held-out posts:" in report_text and "hash routing" in report_text
    assert "```" not in report_text and '{"' not in report_text and "|---" not in report_text
    assert f"{len(PROJECT_DAGS)} Dags" in text and all(d in text for d in PROJECT_DAGS)
    assert "example_" not in text


def test_a_monitor_request_triggers_a_remap_through_the_scheduler(airflow_ui):
    """The scheduler turns s3tm_monitor's remap_request event into an s3tm_remap run; the
    run reads the request (learning window, hot words) and its report says why it ran."""
    import pyarrow as pa

    from schemas import table
    from spark_jobs.lake.delta_io import Lakehouse
    from spark_jobs.lake.routing_store import load_routing_table, now_utc, published_version

    api: AirflowApi = airflow_ui["api"]
    lakehouse = Lakehouse(None, airflow_ui["out"] / "lakehouse", engine="rs")
    version = published_version(lakehouse)  # the demo published one
    assert version is not None
    mapping = load_routing_table(lakehouse, version)
    n = mapping.n_matchers
    single = [w for w in mapping.words.tolist() if mapping.version_matchers(w).shape[0] == 1]
    word = single[0]
    # the stream's health as a burst of `word` would record it (injected: no stream here)
    row = {
        "query_id": "injected",
        "batch_id": 0,
        "routing_version": version,
        "n_matchers": n,
        "recorded_at": now_utc(),
        "posts": 1000,
        "routed_posts": 1000,
        "pairs": 100 * n,
        "loads": [100] * n,
        "hash_routed_posts": 1000,
        "hash_pairs": 100 * n,
        "hash_loads": [100] * n,
        "relative_throughput": 1.0,
        "split_threshold": 1 / (2 * n),
        "hot_words": [{"word": word, "share": 0.3, "versions": 1, "mapped": True}],
    }
    lakehouse.write_arrow(
        pa.Table.from_pylist([row], schema=table("stream.health").schema), "stream.health"
    )
    before = {r.dag_run_id for r in api.runs("s3tm_remap")}
    monitor = api.trigger("s3tm_monitor")
    assert api.wait_for("s3tm_monitor", monitor) == "success", api.failed_tasks(
        "s3tm_monitor", monitor
    )
    # (the run its event made: an hourly check passing meanwhile may ask too)
    run_id = _requested_remap(api, before, lambda event: event.source_run_id == monitor)
    assert api.wait_for("s3tm_remap", run_id) == "success", api.failed_tasks("s3tm_remap", run_id)
    reports = sorted((airflow_ui["out"] / "lakehouse" / "reports").glob("remap-*.md"))
    safe_id = "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)
    why = next(r.read_text() for r in reports if safe_id in r.name)
    assert f"requested by s3tm_monitor: hot_word: '{word}'" in why
    # the candidate learned on the requested window and split the word as its share needs
    from spark_jobs.lake.routing_store import versions

    # (for the N the remap learned: the DAG's default, whatever N the published one has)
    latest = versions(lakehouse)[-1]
    learned_n = latest["n_matchers"]
    assert json.loads(latest["params"])["live_hot_words"] == {word: math.ceil(0.3 * 2 * learned_n)}

    # A request made before the live version was published (an hourly check while the first
    # remap ran, queued behind it) is stale: its run learns nothing and its report says why
    live = published_version(lakehouse)
    known = len(versions(lakehouse))
    assets = AssetApi(api.client)
    asset_id = next(
        a.id for a in assets.get_assets(name_pattern="remap_request").assets
        if a.name == "remap_request"
    )  # fmt: skip
    before = {r.dag_run_id for r in api.runs("s3tm_remap")}
    stale_extra = {
        "conditions": ["no_version: posts are ingested but none is published"],
        "routing_version": None,
    }
    assets.create_asset_event(CreateAssetEventsBody(asset_id=asset_id, extra=stale_extra))
    stale_id = _requested_remap(api, before, lambda event: (event.extra or {}).get("from_rest_api"))
    assert api.wait_for("s3tm_remap", stale_id) == "success", api.failed_tasks(
        "s3tm_remap", stale_id
    )
    states = api.task_states("s3tm_remap", stale_id)
    assert states["graph"] == states["publish"] == "skipped", states
    assert states["report"] == "success", states
    assert len(versions(lakehouse)) == known and published_version(lakehouse) == live
    from s3tm.orchestration.reports.store import read_report

    report = read_report(airflow_ui["out"] / "lakehouse", "remap", stale_id)
    assert report is not None and "requested by s3tm_monitor: no_version" in report
    assert (
        f"Decision: Kept version {live}: the monitor's request is stale: it checked no "
        f"version, and version {live} is in force now" in report
    ), report


def test_a_backfill_records_a_version_per_day_and_keeps_the_current_one(airflow_ui):
    """`airflow backfill create` (here through the REST API the UI's Backfill form uses) over
    three past days of the demo's posts: the scheduler runs s3tm_remap once per day, each
    learns on the days before its interval ends, and none replaces the version the demo
    published, which learned on the newest day."""
    import datetime as dt

    from airflow_client.client import BackfillApi
    from airflow_client.client.models import BackfillPostBody

    from spark_jobs.lake.delta_io import Lakehouse
    from spark_jobs.lake.routing_store import published_version, versions

    api: AirflowApi = airflow_ui["api"]
    lakehouse = Lakehouse(None, airflow_ui["out"] / "lakehouse", engine="rs")
    live = published_version(lakehouse)
    assert live is not None
    known = len(versions(lakehouse))
    # the demo's posts: seven days from 2026-01-01; the nightly 02:00 runs of the 4th to
    # the 6th learn on the days up to the 3rd, 4th and 5th
    BackfillApi(api.client).create_backfill(
        BackfillPostBody(
            dag_id="s3tm_remap",
            from_date=dt.datetime(2026, 1, 4, tzinfo=dt.UTC),
            to_date=dt.datetime(2026, 1, 6, 12, tzinfo=dt.UTC),
            max_active_runs=1,
        )
    )
    deadline = time.monotonic() + 900
    while True:
        backfilled = [r for r in api.runs("s3tm_remap") if r.run_type == "backfill"]
        if len(backfilled) == 3 and all(r.state in ("success", "failed") for r in backfilled):
            break
        assert time.monotonic() < deadline, [(r.dag_run_id, r.state) for r in backfilled]
        time.sleep(5)
    for run in backfilled:
        assert run.state == "success", api.failed_tasks("s3tm_remap", run.dag_run_id)
    added = versions(lakehouse)[known:]
    ends = sorted(json.loads(row["inputs"])["end"] for row in added)
    assert ends == ["2026-01-03", "2026-01-04", "2026-01-05"]
    assert published_version(lakehouse) == live
    from s3tm.orchestration.reports.store import read_report

    for run in backfilled:
        report = read_report(airflow_ui["out"] / "lakehouse", "remap", run.dag_run_id)
        assert report is not None and "a past interval's version never replaces" in report


def _requested_remap(api: AirflowApi, before: set[str], is_request: Callable[[Any], Any]) -> str:
    """The id of the asset-triggered s3tm_remap run (not in ``before``) that consumed an
    event ``is_request`` picks, once the scheduler's next loops have made it."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for run in api.runs("s3tm_remap"):
            if run.dag_run_id in before or run.run_type != "asset_triggered":
                continue
            upstream = DagRunApi(api.client).get_upstream_asset_events("s3tm_remap", run.dag_run_id)
            if any(is_request(e) for e in upstream.asset_events):
                return str(run.dag_run_id)
        time.sleep(2)
    raise AssertionError("the remap_request event created no s3tm_remap run in 120 s")


def test_a_task_waits_on_the_execution_api_longer_than_sqlite_waits_on_its_lock(tmp_path):
    """A task's calls to the execution API may wait on SQLite's busy timeout; a shorter client
    timeout failed a scheduled run that started while the API server was still starting."""
    from urllib.parse import parse_qs, urlparse

    from devtools.local.airflow.standalone import standalone_env

    env = standalone_env(tmp_path, port=0)
    busy_timeout_s = float(
        parse_qs(urlparse(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]).query)["timeout"][0]
    )
    assert float(env["AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT"]) > busy_timeout_s
    assert int(env["AIRFLOW__WORKERS__EXECUTION_API_RETRIES"]) >= 5
