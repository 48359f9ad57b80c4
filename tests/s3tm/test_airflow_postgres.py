"""``s3tm airflow`` on PostgreSQL with the LocalExecutor (the production setting): runs
``s3tm_remap`` end to end on a throw-away PostgreSQL cluster (Debian's server binaries;
.ci/run installs them). Its own file, so a worker runs it beside the UI tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from s3tm.local.postgres import LocalPostgres, server_binaries
from tests.s3tm.airflow_support import AirflowApi, free_port, start_airflow


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """A throw-away PostgreSQL cluster on loopback (Debian's server binaries)."""
    if server_binaries() is None:
        pytest.skip(
            "PostgreSQL server is absent (Debian package 'postgresql'; .ci/run installs it)"
        )
    server = LocalPostgres()
    try:
        yield server.start()
    finally:
        server.stop()


def test_remap_on_postgresql_with_the_local_executor(postgres_url, spark_process_env, tmp_path):
    for airflow in start_airflow(
        tmp_path, free_port(), "--database-url", postgres_url, base_env=spark_process_env
    ):
        api: AirflowApi = airflow["api"]
        assert "metadata database: postgresql" in airflow["printed"]
        ingest = api.trigger("s3tm_ingest")
        assert api.wait_for("s3tm_ingest", ingest) == "success"
        remap = api.trigger("s3tm_remap", {"nodes": 4})
        assert api.wait_for("s3tm_remap", remap) == "success", api.failed_tasks("s3tm_remap", remap)
        report = (tmp_path / "lakehouse" / "reports").glob("remap-*.md")
        # the first remap's report says, in a sentence, that it published version 1
        assert any(
            "Decision: Published version 1: the first published version." in p.read_text()
            for p in report
        )
