"""Run reports in the Airflow UI: a small FastAPI app the ``s3tm_reports`` Airflow plugin
(``infra/airflow/plugins``) mounts under ``/s3tm`` on the API server, and a "Run report"
tab on every DAG run that shows it (the UI fills in the DAG and run ids).

The reports live under the lakehouse (``$S3TM_LAKEHOUSE/reports``, local or object
storage): the remap run's page with its pictures, the maintenance run's text. The app
reads nothing else.

Airflow mounts a plugin's app with ``app.mount()``, and a mount inherits none of the core
API's authentication (Airflow's plugin docs say so): every page here asks Airflow's auth
manager itself, through the core API's own dependency. Its user is the caller's session
cookie (the UI's tab) or ``Authorization: Bearer`` token (``/auth/token``); anonymous
callers get 401, a user who may not read the DAG's runs 403.
"""

from __future__ import annotations

import html

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.core_api.security import requires_access_dag
from fastapi import Depends, FastAPI
from fastapi.responses import HTMLResponse

from s3tm.orchestration.dag_support import dag_defaults
from s3tm.orchestration.reports.charts import report_html
from s3tm.orchestration.reports.store import read_report

# which DAG writes which kind of report
REPORT_KINDS = {"s3tm_remap": "remap", "s3tm_maintenance": "maintenance"}

# may the caller read the runs of the DAG in the path? (its {dag_id})
READ_DAG_RUNS = requires_access_dag("GET", DagAccessEntity.RUN)

app = FastAPI(title="s3tm run reports")


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
        f"</title></head><body style='font-family: sans-serif'>{body}</body></html>",
        status_code=status,
    )


@app.get(
    "/reports/{dag_id}/{run_id}",
    response_class=HTMLResponse,
    dependencies=[Depends(READ_DAG_RUNS)],
)
def run_report(dag_id: str, run_id: str) -> HTMLResponse:
    """The run's report page (404 with a reason when there is none)."""
    kind = REPORT_KINDS.get(dag_id)
    if kind is None:
        return _page(
            "no run report",
            f"<p>{html.escape(dag_id)} writes no run report; s3tm_remap and "
            "s3tm_maintenance do.</p>",
            404,
        )
    root = dag_defaults().lakehouse
    page = read_report(root, kind, run_id, ".html")
    if page is not None:
        return HTMLResponse(page)
    text = read_report(root, kind, run_id)
    if text is not None:  # a report without pictures (maintenance): its Markdown, rendered
        return HTMLResponse(report_html(f"{dag_id} {run_id}", text.splitlines(), []))
    return _page(
        "no run report",
        f"<p>No report for {html.escape(dag_id)} run {html.escape(run_id)} under "
        f"{html.escape(root)}/reports yet: it is written by the run's last task.</p>",
        404,
    )
