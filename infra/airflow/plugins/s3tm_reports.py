"""Airflow plugin: the s3tm run reports under ``/s3tm`` and a "Run report" tab on every
DAG run (``s3tm.orchestration.reports.views``). ``s3tm airflow`` and the image point
``AIRFLOW__CORE__PLUGINS_FOLDER`` here."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from s3tm.orchestration.reports.views import app


class S3tmReportsPlugin(AirflowPlugin):
    name = "s3tm_reports"
    # plain class lists, as Airflow's plugin manager reads (and prunes) them
    fastapi_apps = [{"app": app, "url_prefix": "/s3tm", "name": "s3tm run reports"}]  # noqa: RUF012
    external_views = [  # noqa: RUF012
        {
            "name": "Run report",
            "href": "s3tm/reports/{DAG_ID}/{RUN_ID}",
            "destination": "dag_run",
            "url_route": "s3tm_run_report",
        }
    ]
