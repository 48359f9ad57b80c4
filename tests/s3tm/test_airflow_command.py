"""``s3tm airflow`` tried as a user would: start it, trigger the DAGs through the REST API the
UI uses and by clicking Trigger in headless Chromium, and wait for green runs.

The same command on PostgreSQL with the LocalExecutor (the production setting) runs
``s3tm_remap`` end to end when Debian's PostgreSQL server is installed (.ci/run installs it).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
RUN_TIMEOUT_S = 900
PROJECT_DAGS = sorted(p.stem for p in (Path(__file__).parents[2] / "dags").glob("s3tm_*.py"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class AirflowApi:
    """The REST API the UI uses (``/auth/token``, ``/api/v2``), as the admin user."""

    def __init__(self, base_url: str, password: str) -> None:
        self.base_url = base_url
        token = self._call("POST", "/auth/token", {"username": "admin", "password": password})
        self.token = token["access_token"]

    def _call(
        self, method: str, path: str, body: dict[str, Any] | None = None, *, conflict_ok=False
    ) -> Any:
        """One REST call, retried as a user retries a click: the embedded SQLite serialises
        every writer, so on a loaded 2-core machine a call can time out or get a 500 while
        the scheduler and the first runs write. Retried calls are idempotent (a trigger names
        its run id; a 409 for it means the earlier try created the run)."""
        attempts = 4
        for attempt in range(attempts):
            request = urllib.request.Request(
                self.base_url + path,
                data=None if body is None else json.dumps(body).encode(),
                method=method,
                headers={"Content-Type": "application/json"},
            )
            if getattr(self, "token", None):
                request.add_header("Authorization", f"Bearer {self.token}")
            try:
                with urllib.request.urlopen(request, timeout=90) as response:
                    return json.loads(response.read() or b"{}")
            except urllib.error.HTTPError as error:
                if error.code == 409 and conflict_ok and attempt > 0:
                    return body
                if error.code < 500 or attempt == attempts - 1:
                    raise
            except (TimeoutError, urllib.error.URLError):
                if attempt == attempts - 1:
                    raise
            time.sleep(5)
        raise AssertionError("unreachable")

    def dag_ids(self) -> list[str]:
        return sorted(d["dag_id"] for d in self._call("GET", "/api/v2/dags")["dags"])

    def trigger(self, dag_id: str, conf: dict[str, Any] | None = None) -> str:
        run_id = f"manual__rest_{time.time_ns()}"
        run = self._call(
            "POST",
            f"/api/v2/dags/{dag_id}/dagRuns",
            {"dag_run_id": run_id, "logical_date": None, "conf": conf or {}},
            conflict_ok=True,
        )
        assert run["dag_run_id"] == run_id
        return run_id

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        return list(self._call("GET", f"/api/v2/dags/{dag_id}/dagRuns")["dag_runs"])

    def wait_for(self, dag_id: str, run_id: str) -> str:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while time.monotonic() < deadline:
            state = self._call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")["state"]
            if state in ("success", "failed"):
                return str(state)
            time.sleep(3)
        return "timeout"

    def failed_tasks(self, dag_id: str, run_id: str) -> list[str]:
        tasks = self._call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances")
        return [t["task_id"] for t in tasks["task_instances"] if t["state"] == "failed"]


def _run_demo(out: Path) -> None:
    """The README's first command (`s3tm demo`), small: its Airflow half runs the DAGs with
    `airflow dags test`, which creates their rows in the metadata database."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "s3tm.cli.main",
            "demo",
            "--out",
            str(out),
            "--posts",
            "3000",
            "--nodes",
            "4",
            "--airflow-nodes",
            "4",
            "--subscriptions",
            "200",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "S3TM_DRIVER_MEMORY": "1g"},
        timeout=RUN_TIMEOUT_S,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert f"s3tm airflow --out {out}" in done.stdout  # the hint the user follows next


def _start(out: Path, port: int, *extra: str, after_demo: bool = False) -> Iterator[dict[str, Any]]:
    """Runs ``s3tm airflow`` until its ready line; yields the API client and the paths.
    ``after_demo``: on the folder `s3tm demo` left (the README's path), else on a fresh one."""
    if after_demo:
        _run_demo(out)
    else:
        from core.corpus.synthetic import SyntheticCorpusSpec, write_demo_corpus

        write_demo_corpus(
            out / "landing" / "posts.jsonl.gz",
            SyntheticCorpusSpec(n_posts=1500, n_words=1500, seed=9),
            days=2,
        )
    env = {**os.environ, "S3TM_DRIVER_MEMORY": "1g"}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "s3tm.cli.main",
            "airflow",
            "--out",
            str(out),
            "--port",
            str(port),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    printed: list[str] = []
    try:
        assert process.stdout is not None
        for line in process.stdout:
            printed.append(line)
            if line.startswith("Press Ctrl-C"):
                break
        output = "".join(printed)
        assert "Airflow is up: http://127.0.0.1:" in output, output[-3000:]
        password = output.split("with password '", 1)[1].split("'", 1)[0]
        base_url = f"http://127.0.0.1:{port}"
        yield {
            "api": AirflowApi(base_url, password),
            "base_url": base_url,
            "password": password,
            "printed": output,
            "out": out,
        }
    finally:
        process.terminate()  # SIGTERM: the command stops Airflow's whole process group
        try:
            process.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
    assert process.returncode == 0, f"s3tm airflow exited {process.returncode}"


@pytest.fixture(scope="module")
def airflow_ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    yield from _start(tmp_path_factory.mktemp("s3tm-airflow"), _free_port(), after_demo=True)


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


def _click_trigger(base_url: str, password: str, screenshot_dir: Path) -> None:
    """Opens s3tm_remap, clicks Trigger and confirms the dialog."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    with _logged_in(base_url, password, "/dags/s3tm_remap", 900) as page:
        page.get_by_role("button", name="Trigger").first.click()
        dialog = page.get_by_role("dialog")
        page.wait_for_load_state("networkidle")  # the form loads the DAG's params first
        for _ in range(3):  # on a loaded machine the form may still be validating
            dialog.get_by_role("button", name="Trigger").click()
            try:
                dialog.wait_for(state="hidden", timeout=20_000)  # closes once the run exists
                break
            except PlaywrightTimeout:  # still open: click again
                continue
        page.screenshot(path=str(screenshot_dir / "trigger.png"))


def _dags_page(base_url: str, password: str, screenshot: Path) -> str:
    """The DAG list page's text, and a screenshot of it."""
    with _logged_in(base_url, password, "/dags", 800) as page:
        page.get_by_text("s3tm_remap").first.wait_for()
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(screenshot))
        return str(page.inner_text("body"))


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
    dags = api._call("GET", "/api/v2/dags")["dags"]
    assert {d["dag_id"]: d["is_paused"] for d in dags} == dict.fromkeys(PROJECT_DAGS, False)
    scheduled = [r for d in PROJECT_DAGS for r in api.runs(d) if r["run_type"] == "scheduled"]
    assert scheduled == [], "starting Airflow ran a missed scheduled slot"

    before = {r["dag_run_id"] for r in api.runs("s3tm_remap")}
    _click_trigger(airflow_ui["base_url"], airflow_ui["password"], tmp_path)
    clicked: list[dict[str, Any]] = []
    for _ in range(30):  # the UI's POST may land a moment after the dialog closed
        clicked = [
            r
            for r in api.runs("s3tm_remap")
            if r["dag_run_id"] not in before and r["run_type"] == "manual"
        ]
        if clicked:
            break
        time.sleep(1)
    assert len(clicked) == 1, "the Trigger button created no run"
    clicked_id = clicked[0]["dag_run_id"]
    assert api.wait_for("s3tm_remap", clicked_id) == "success", api.failed_tasks(
        "s3tm_remap", clicked_id
    )
    # ... and runs triggered through the REST API the UI uses
    ingest = api.trigger("s3tm_ingest")
    assert api.wait_for("s3tm_ingest", ingest) == "success", api.failed_tasks("s3tm_ingest", ingest)
    # Every run of both DAGs is green (scheduled, asset-triggered and manual alike).
    states = {(d, r["dag_run_id"]): r["state"] for d in PROJECT_DAGS for r in api.runs(d)}
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

    screenshot_dir = Path(os.environ.get("S3TM_SCREENSHOT_DIR", tmp_path))
    text = _dags_page(
        airflow_ui["base_url"], airflow_ui["password"], screenshot_dir / "airflow-ui-dags.png"
    )
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
    before = {r["dag_run_id"] for r in api.runs("s3tm_remap")}
    monitor = api.trigger("s3tm_monitor")
    assert api.wait_for("s3tm_monitor", monitor) == "success", api.failed_tasks(
        "s3tm_monitor", monitor
    )
    triggered: list[dict[str, Any]] = []
    for _ in range(60):  # the scheduler's next loop creates the run
        triggered = [
            r
            for r in api.runs("s3tm_remap")
            if r["dag_run_id"] not in before and r["run_type"] == "asset_triggered"
        ]
        if triggered:
            break
        time.sleep(2)
    assert len(triggered) == 1, "the remap_request event created no s3tm_remap run"
    run_id = triggered[0]["dag_run_id"]
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


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """A throw-away PostgreSQL cluster on loopback (Debian's server binaries)."""
    bins = sorted(Path("/usr/lib/postgresql").glob("*/bin"))
    if not bins:
        pytest.skip(
            "PostgreSQL server is absent (Debian package 'postgresql'; .ci/run installs it)"
        )
    bin_dir = bins[-1]
    # Not under pytest's tmp dir: its parents are private to root, and the server runs as
    # the postgres user.
    base = Path(tempfile.mkdtemp(prefix="s3tm-pg-"))
    data = base / "data"
    port = _free_port()
    as_postgres: list[str] = []
    if os.geteuid() == 0:  # the server refuses to run as root
        shutil.chown(base, "postgres")
        as_postgres = ["runuser", "-u", "postgres", "--"]
    subprocess.run(
        [*as_postgres, str(bin_dir / "initdb"), "-D", str(data), "-U", "airflow", "-A", "trust"],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            *as_postgres,
            str(bin_dir / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(data.parent / "log"),
            "-o",
            f"-p {port} -k {data.parent} -c listen_addresses=127.0.0.1",
            "-w",
            "start",
        ],
        check=True,
        capture_output=True,
    )
    try:
        subprocess.run(
            [
                str(bin_dir / "createdb"),
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-U",
                "airflow",
                "airflow",
            ],
            check=True,
            capture_output=True,
        )
        yield f"postgresql+psycopg2://airflow@127.0.0.1:{port}/airflow"
    finally:
        subprocess.run(
            [*as_postgres, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "stop"],
            check=False,
            capture_output=True,
        )
        shutil.rmtree(base, ignore_errors=True)


def test_remap_on_postgresql_with_the_local_executor(postgres_url, tmp_path):
    for airflow in _start(tmp_path, _free_port(), "--database-url", postgres_url):
        api: AirflowApi = airflow["api"]
        assert "metadata database: postgresql" in airflow["printed"]
        ingest = api.trigger("s3tm_ingest")
        assert api.wait_for("s3tm_ingest", ingest) == "success"
        remap = api.trigger("s3tm_remap", {"nodes": 4})
        assert api.wait_for("s3tm_remap", remap) == "success", api.failed_tasks("s3tm_remap", remap)
        report = (tmp_path / "lakehouse" / "reports").glob("remap-*.md")
        assert any('"published": ' in p.read_text() for p in report)


def test_a_task_waits_on_the_execution_api_longer_than_sqlite_waits_on_its_lock(tmp_path):
    """A task's calls to the execution API may wait on SQLite's busy timeout; a shorter client
    timeout failed a scheduled run that started while the API server was still starting."""
    from urllib.parse import parse_qs, urlparse

    from s3tm.orchestration.standalone import standalone_env

    env = standalone_env(tmp_path, port=_free_port())
    busy_timeout_s = float(
        parse_qs(urlparse(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]).query)["timeout"][0]
    )
    assert float(env["AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT"]) > busy_timeout_s
    assert int(env["AIRFLOW__WORKERS__EXECUTION_API_RETRIES"]) >= 5
