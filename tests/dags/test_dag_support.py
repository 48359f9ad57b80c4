"""Where spark-submit finds a job: the environment decides (the Helm values set
``local://`` for Kubernetes cluster mode), never an edit of a DAG file."""

from __future__ import annotations

from s3tm.orchestration.dag_support import JOBS, application_path


def test_application_path_is_a_file_by_default_and_local_uri_on_kubernetes(monkeypatch):
    monkeypatch.delenv("S3TM_SPARK_APPLICATION_SCHEME", raising=False)
    assert application_path("learn") == str(JOBS / "learn.py")
    assert (JOBS / "learn.py").is_file()
    monkeypatch.setenv("S3TM_SPARK_APPLICATION_SCHEME", "local")
    assert application_path("learn") == f"local://{JOBS / 'learn.py'}"
