"""The run-report pages the Airflow plugin serves (FastAPI test client, no Airflow): a
remap run's page with its pictures, a report in text only, and a clear 404 otherwise; and
nothing for an anonymous caller. (The login itself, through Airflow's auth manager:
``tests/s3tm/test_airflow_command.py``.)"""

from __future__ import annotations

from fastapi.testclient import TestClient

from s3tm.orchestration.reports.store import write_report
from s3tm.orchestration.reports.views import READ_DAG_RUNS, app


def test_run_report_pages(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("S3TM_LAKEHOUSE", str(tmp_path))
    run_id = "manual__2026-11-26T10:00:00+00:00"
    write_report(tmp_path, "remap", run_id, ["<html><svg>chart</svg></html>"], suffix=".html")
    write_report(tmp_path, "maintenance", run_id, ["# s3tm_maintenance", "kept 30 days"])
    client = TestClient(app)
    # no session cookie, no bearer token: refused before any report is read
    anonymous = client.get(f"/reports/s3tm_remap/{run_id}")
    assert anonymous.status_code == 401 and "chart" not in anonymous.text
    # a caller the auth manager allowed to read the DAG's runs
    app.dependency_overrides[READ_DAG_RUNS] = lambda: None
    try:
        _pages(client, run_id)
    finally:
        app.dependency_overrides.clear()


def _pages(client: TestClient, run_id: str) -> None:
    page = client.get(f"/reports/s3tm_remap/{run_id}")
    assert page.status_code == 200 and "<svg>chart</svg>" in page.text
    text = client.get(f"/reports/s3tm_maintenance/{run_id}")
    assert text.status_code == 200 and "<p>kept 30 days</p>" in text.text
    assert "<h1>s3tm_maintenance</h1>" in text.text  # rendered, not the Markdown as text
    missing = client.get("/reports/s3tm_remap/another-run")
    assert missing.status_code == 404 and "written by the run's last task" in missing.text
    other = client.get(f"/reports/s3tm_ingest/{run_id}")
    assert other.status_code == 404 and "writes no run report" in other.text
