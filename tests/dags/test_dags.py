"""DAG integrity (every DAG imports, has tags, owner, retries, docs; parsing touches no
database) and an end-to-end `airflow dags test` of both DAGs on a small generated corpus."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.dags.conftest import embedded_env

REPO = Path(__file__).resolve().parents[2]
AIRFLOW = Path(sys.executable).with_name("airflow")


def test_dag_integrity_without_a_database(tmp_path):
    # A database URL that cannot be opened: parsing must not need it.
    env = embedded_env(
        tmp_path / "home",
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=(f"sqlite:///{tmp_path}/missing/dir/airflow.db"),
    )
    code = textwrap.dedent("""
        import json
        from airflow.models.dagbag import DagBag
        bag = DagBag(dag_folder=%r)
        print(json.dumps({"errors": {k: str(v)[:300] for k, v in bag.import_errors.items()},
                          "dags": {d.dag_id: {"tags": sorted(d.tags), "doc": bool(d.doc_md),
                                              "owners": sorted({t.owner for t in d.tasks}),
                                              "retries": sorted({t.retries for t in d.tasks}),
                                              "tasks": sorted(t.task_id for t in d.tasks),
                                              "cron": getattr(getattr(d.timetable, "timetable",
                                                  d.timetable), "_expression", None),
                                              "run_immediately": str(getattr(getattr(
                                                  d.timetable, "timetable", d.timetable),
                                                  "_run_immediately", None)),
                                              "start_date": str(d.start_date),
                                              "assets": sorted(a.name for _, a in
                                                  d.timetable.asset_condition.iter_assets())
                                                  if hasattr(d.timetable, "asset_condition")
                                                  else []}
                                   for d in bag.dags.values()}}))
    """) % str(REPO / "dags")
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["errors"] == {}
    assert set(result["dags"]) == {"s3tm_ingest", "s3tm_remap", "s3tm_maintenance", "s3tm_monitor"}
    for dag in result["dags"].values():
        assert dag["doc"] and "s3tm" in dag["tags"]
        assert dag["owners"] == ["s3tm-platform"]
    assert not (tmp_path / "missing").exists()
    tasks = {d: result["dags"][d]["tasks"] for d in result["dags"]}
    assert tasks["s3tm_ingest"] == ["ingest", "normalise"]
    assert tasks["s3tm_maintenance"] == ["maintain"]
    assert "request_remap" in tasks["s3tm_monitor"]
    assert {"learn", "place", "validate", "evaluate", "publish"} <= set(tasks["s3tm_remap"])
    # What each DAG's doc (and `s3tm airflow`'s start-up message) says of its schedule is
    # the schedule it has; starting Airflow never fires a missed slot.
    from s3tm.orchestration.standalone import dag_schedules

    for dag_id, said in dag_schedules().items():
        dag = result["dags"][dag_id]
        assert said.startswith(f"`{dag['cron']}` (UTC"), (dag_id, said, dag["cron"])
        # never the slot just missed: a zero catch-up window, and no start_date (Airflow
        # ignores run_immediately when one restricts the timetable)
        assert (dag["run_immediately"], dag["start_date"]) == ("0:00:00", "None"), dag_id
        for name in dag["assets"]:
            assert f"`{name}` asset" in said, (dag_id, said, dag["assets"])
        assert ("asset" in said) == bool(dag["assets"]), (dag_id, said)


@pytest.fixture(scope="module")
def airflow_runs(tmp_path_factory, airflow_process_env):
    """One Airflow home with: s3tm_ingest, s3tm_remap (publishes), and a second s3tm_remap
    whose worse candidate (hash, no split, 5% margin) must leave the published version."""
    from core.corpus.synthetic import SyntheticCorpusSpec, write_demo_corpus

    tmp_path = tmp_path_factory.mktemp("airflow")
    home, lakehouse, landing = tmp_path / "home", tmp_path / "lakehouse", tmp_path / "landing"
    write_demo_corpus(
        landing / "posts.jsonl.gz", SyntheticCorpusSpec(n_posts=1500, n_words=1500, seed=9), days=2
    )
    env = airflow_process_env(home, S3TM_LAKEHOUSE=str(lakehouse), S3TM_LANDING=str(landing))

    def airflow(*args: str) -> str:
        done = subprocess.run(
            [str(AIRFLOW), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            cwd=tmp_path,
        )
        return f"exit={done.returncode}\n{done.stdout}\n{done.stderr}"

    outputs = {"migrate": airflow("db", "migrate")}
    outputs["ingest"] = airflow("dags", "test", "s3tm_ingest", "2026-01-01T00:00:00+00:00")
    outputs["remap"] = airflow("dags", "test", "s3tm_remap", "2026-01-02T02:00:00+00:00")
    from spark_jobs.lake.delta_io import Lakehouse
    from spark_jobs.lake.routing_store import published_version

    store = Lakehouse(None, lakehouse, engine="rs")
    outputs["first_published"] = str(published_version(store))
    outputs["worse"] = airflow(
        "dags",
        "test",
        "s3tm_remap",
        "2026-01-03T02:00:00+00:00",
        "--conf",
        json.dumps({"algorithm": "hash", "split": False, "margin": 0.05}),
    )
    return {"env": env, "home": home, "lakehouse": lakehouse, "store": store, **outputs}


def test_remap_end_to_end_with_airflow_dags_test(airflow_runs):
    from spark_jobs.lake.routing_store import published_version, versions

    assert airflow_runs["migrate"].startswith("exit=0")
    for run in ("ingest", "remap", "worse"):
        assert "state=success" in airflow_runs[run], airflow_runs[run][-3000:]
    store, lakehouse = airflow_runs["store"], airflow_runs["lakehouse"]
    first = int(airflow_runs["first_published"])
    rows = versions(store)
    evaluation = json.loads(rows[first - 1]["metrics"])["evaluation"]
    assert evaluation["posts"] > 0 and evaluation["relative_model_throughput_vs_hash"] > 0
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
    assert "(model)" in report  # no subscriptions to replay: the gate went by the model
    assert f"Published: version {first}, x" in report and "posts-only model" in report
    page = sorted((lakehouse / "reports").glob("remap-*.html"))[-1].read_text()
    assert "below the required" in page  # the same report as a page (no pictures: no work)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _dom(url: str, profile: Path) -> str:
    done = subprocess.run(
        [
            CHROMIUM,
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


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def test_airflow_ui_lists_the_dags_and_the_finished_run(airflow_runs, chromium, tmp_path):
    import time
    import urllib.request

    port = _free_port()
    env = {**airflow_runs["env"], "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True"}
    server = subprocess.Popen(
        [str(AIRFLOW), "api-server", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{base}/api/v2/monitor/health", timeout=2):
                    break
            except OSError:
                time.sleep(1)
        else:
            pytest.fail("Airflow API server did not come up on localhost")
        # the demo's environment keeps it on loopback (Airflow's default: every interface)
        import psutil

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
