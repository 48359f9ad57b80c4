"""``s3tm airflow --database-url`` on PostgreSQL with the LocalExecutor (the production
setting): on a throw-away PostgreSQL cluster (Debian's server binaries; .ci/run installs
them) the command starts, says which database it uses, and a DAG it triggers runs to
success with its task rows in PostgreSQL. The DAG is s3tm_monitor (its tasks read the
lakehouse through delta-rs): the Spark tasks of s3tm_ingest and s3tm_remap through the
scheduler and the LocalExecutor on PostgreSQL, to a published version and its report, are
``make cluster-demo``'s (docker/compose.yaml's Airflow in containers, run by
``make test-containers``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.s3tm.airflow_support import AirflowApi, start_airflow
from tests.support.postgres import LocalPostgres, server_binaries


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """A throw-away PostgreSQL cluster on a Unix socket (Debian's server binaries)."""
    if server_binaries() is None:
        pytest.skip(
            "PostgreSQL server is absent (Debian package 'postgresql'; .ci/run installs it)"
        )
    server = LocalPostgres()
    try:
        yield server.start()
    finally:
        server.stop()


def test_the_command_on_postgresql_runs_a_dag_with_the_local_executor(
    postgres_url, spark_process_env, tmp_path
):
    for airflow in start_airflow(
        tmp_path, "--database-url", postgres_url, base_env=spark_process_env
    ):
        api: AirflowApi = airflow["api"]
        assert "metadata database: postgresql" in airflow["printed"]
        assert "SQLite" not in airflow["printed"]
        monitor = api.trigger("s3tm_monitor")
        assert api.wait_for("s3tm_monitor", monitor) == "success", api.failed_tasks(
            "s3tm_monitor", monitor
        )
        # the tasks' rows are in PostgreSQL: no SQLite file was made under the home
        assert not (tmp_path / "airflow" / "airflow.db").exists()
        # the UI reads a task's log from the Airflow home (no log server runs)
        log = api.task_log("s3tm_monitor", monitor, "check")
        lines = [line.get("event", "") for line in log]
        assert str(tmp_path / "airflow" / "logs") in lines[1], lines[:3]
        assert any("DAG bundles loaded" in line for line in lines), lines[:10]
        # the one port Airflow listens on is the one its API server picked and the command
        # printed: no log server (8793, 8794), nothing picked beforehand
        assert _listening_ports(airflow["pid"]) == {int(airflow["base_url"].rsplit(":", 1)[1])}
        from spark_jobs.lake.delta_io import Lakehouse

        # the run's check is in the lakehouse: nothing ingested, nothing published yet
        store = Lakehouse(None, tmp_path / "lakehouse", engine="rs")
        # (this run's: an hourly check passing meanwhile writes its own)
        checks = [
            c for c in store.read_arrow("stream.monitor").to_pylist() if c["run_id"] == monitor
        ]
        assert [c["decision"] for c in checks] == ["no data"], checks


def _listening_ports(pid: int) -> set[int]:
    """TCP ports that process ``pid`` and everything it started listen on."""
    import psutil

    tree = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    ports = set()
    for process in tree:
        try:
            connections = process.net_connections("inet")
        except psutil.NoSuchProcess:
            continue  # a task's process that ended meanwhile
        ports |= {c.laddr.port for c in connections if c.status == psutil.CONN_LISTEN}
    return ports
